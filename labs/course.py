"""The course's own words: for each check, the sentences of the course texts that make its claim, quoted in their
original language (as they stand in the text; "[…]" marks words left out) with an English gloss. `lab show`, the
Markdown and HTML reports and the lab pages (docs/labs/CNN.md, written by labs.docs) show them from here."""

from __future__ import annotations

from dataclasses import dataclass

from labs.i18n import Text, _

# The course texts and the language each is written in.
TEXTS = {"000": "ru", "001": "nb", "004": "es"}
LANGUAGE_NAMES = {"ru": _("Russian"), "nb": _("Norwegian"), "es": _("Spanish")}


@dataclass(frozen=True)
class Quote:
    text: str  # the course text: 000, 001 or 004
    original: str  # its words, in its language, never translated
    gloss: Text  # what they say, in English (translated where shown)

    @property
    def language(self) -> str:
        return TEXTS[self.text]


def passages(ident: str) -> list[tuple[str, list[Quote]]]:
    """A check's quotes grouped by course text, in order: (text, its quotes)."""
    grouped: list[tuple[str, list[Quote]]] = []
    for quote in QUOTES.get(ident, []):
        if grouped and grouped[-1][0] == quote.text:
            grouped[-1][1].append(quote)
        else:
            grouped.append((quote.text, [quote]))
    return grouped


QUOTES: dict[str, list[Quote]] = {
    "C01": [
        Quote("000", "В кластере есть 2 типа нод: управляющие ноды и рабочие ноды.",
              _("A cluster has two kinds of nodes: control nodes and worker nodes.")),
        Quote("000", "На управляющих запускаются управляющие компоненты Kubernetes, на рабочих — бизнес-приложения "
                      "и сервисы, т.е. полезная нагрузка.",
              _("The control nodes run the Kubernetes control components, the workers run business applications and "
                "services, i.e. the payload.")),
        Quote("001", "Worker Nodes (også kalt Minions i eldre dokumentasjon) er maskinene der de faktiske "
                      "containeriserte applikasjonene (pakket inn i Pods) kjører.",
              _("Worker nodes (called minions in older documentation) are the machines where the actual "
                "containerised applications (wrapped in Pods) run.")),
        Quote("004", "Dentro del clúster, hay uno o más nodos disponibles para ejecutar sus contenedores.",
              _("Within the cluster there are one or more nodes available to run your containers.")),
    ],
    "C02": [
        Quote("000", "В тестовых или небольших инсталляциях Kubernetes возможна ситуация, когда управляющие ноды "
                      "являются также рабочими нодами, т.е. на одних и тех же нодах запущена и управляющая, и "
                      "рабочая нагрузка.",
              _("In test or small installations the control nodes can also be worker nodes, i.e. the same nodes run "
                "both the control load and the workload.")),
    ],
    "C03": [
        Quote("000", "Минимальный набор таких компонентов: etcd, api-server, kube-scheduler, controller manager. "
                      "Помимо управляющих компонент, в Kubernetes входят агенты kubelet и kubeproxy, которые "
                      "запущены на всех нодах кластера.",
              _("The minimal set of these components: etcd, api-server, kube-scheduler, controller manager. Besides "
                "the control components, Kubernetes includes the agents kubelet and kube-proxy, which run on all the "
                "nodes of the cluster.")),
        Quote("001", "Kontrollplanet (API Server, etcd, Scheduler, Controller Manager) administrerer klyngen.",
              _("The control plane (API Server, etcd, Scheduler, Controller Manager) manages the cluster.")),
        Quote("001", "Arbeidsnoder (Kubelet, Container Runtime, Kube-proxy) kjører applikasjonene Deres.",
              _("Worker nodes (Kubelet, Container Runtime, Kube-proxy) run your applications.")),
        Quote("004", "Además de kubelet y kube-proxy, los nodos también necesitan tener un tiempo de ejecución de "
                      "contenedor disponible.",
              _("Besides kubelet and kube-proxy, the nodes also need a container runtime.")),
    ],
    "C04": [
        Quote("000", "Любые изменения в конфигурации кластера проходят через API Server и сохраняются в etcd. И "
                      "только API Server напрямую ходит в etcd. Если кто-то хочет получить данные о состоянии "
                      "кластера или его конфигурации, то он делает запросы в API Server.",
              _("Every change to the cluster's configuration goes through the API Server and is stored in etcd. And "
                "only the API Server goes to etcd directly. Whoever wants data about the cluster's state or "
                "configuration asks the API Server.")),
        Quote("001", "API Server er frontenden til Kubernetes Control Plane. […] Den eksponerer Kubernetes API-et "
                      "og håndterer all kommunikasjon i klyngen",
              _("The API Server is the front end of the Kubernetes control plane. […] It exposes the Kubernetes API "
                "and handles all communication in the cluster")),
        Quote("004", "El núcleo del plano de control es kube-apiserver. […] También lo utilizan otros componentes "
                      "del clúster, como los procesos de trabajo del nodo, para transmitir información al plano de "
                      "control.",
              _("The core of the control plane is kube-apiserver. […] Other components of the cluster, such as the "
                "node's worker processes, also use it to pass information to the control plane.")),
    ],
    "C05": [
        Quote("000", "API Server валидирует наш запрос и производит изменения в конфигурации кластера. […] В самом "
                      "API Server-е нет бизнес-логики. API Server не принимает решения, например, за то, на какой "
                      "ноде запустить тот или иной сервис. В нем есть логика проверки формата запросов, "
                      "аутентификации, проверки прав и т.д.",
              _("The API Server validates our request and changes the cluster's configuration. […] There is no "
                "business logic in the API Server itself. It does not decide, for instance, on which node a service "
                "runs. It has the logic to check the format of requests, authentication, permissions and so on.")),
        Quote("001", "Den eksponerer Kubernetes API-et og håndterer all kommunikasjon i klyngen, samtidig som den "
                      "validerer og konfigurerer data for API-objekter som Pods og Services.",
              _("It exposes the Kubernetes API and handles all communication in the cluster, while it validates and "
                "configures data for API objects such as Pods and Services.")),
    ],
    "C06": [
        Quote("000", "Конфигурация и состояние кластера хранится в хранилище etcd. […] Любые изменения в "
                      "конфигурации кластера проходят через API Server и сохраняются в etcd.",
              _("The cluster's configuration and state are kept in the etcd store. […] Every change to the cluster's "
                "configuration goes through the API Server and is stored in etcd.")),
        Quote("001", "etcd er et konsistent og svært tilgjengelig nøkkel-verdi-lager. Tenk på det som klyngens "
                      "permanente minne. Det lagrer alle klyngedata, inkludert konfigurasjon, tilstand og metadata.",
              _("etcd is a consistent and highly available key-value store. Think of it as the cluster's permanent "
                "memory. It stores all cluster data, including configuration, state and metadata.")),
    ],
    "C07": [
        Quote("000", "Еще одной функцией API Server-а является рассылка изменений конфигураций и состояния "
                      "кластера. Другие компоненты подписываются на события, слушают их и обрабатывают, либо с "
                      "какой-то периодичностью перечитывают конфигурацию через API Server.",
              _("Another function of the API Server is to broadcast the changes of the cluster's configuration and "
                "state. Other components subscribe to the events, listen to them and handle them, or re-read the "
                "configuration through the API Server periodically.")),
        Quote("004", "Los controladores controlan sus recursos para garantizar la salud y la preparación. También "
                      "identifican los cambios que se han solicitado y luego toman medidas para migrar el estado "
                      "actual al nuevo estado deseado.",
              _("Controllers watch your resources to keep them healthy and ready. They also spot the changes that "
                "were requested and act to move the current state to the new desired state.")),
    ],
    "C08": [
        Quote("001", "Tenk på det som klyngens permanente minne.",
              _("Think of it as the cluster's permanent memory.")),
        Quote("001", "Hvis etcd stopper, mister klyngen minnet sitt og kan ikke fungere som den skal!",
              _("If etcd stops, the cluster loses its memory and cannot work as it should!")),
    ],
    "C09": [
        Quote("000", "Это отказоустойчивое, децентрализованное и консистентное хранилище.",
              _("It is a fault-tolerant, decentralised and consistent store.")),
        Quote("000", "Для поддержания отказоустойчивости и консистентности ему требуется как минимум 3 экземпляра.",
              _("To stay fault tolerant and consistent it needs at least 3 instances.")),
    ],
    "C10": [
        Quote("000", "И через API server обновляет состояние кластера. Но сам kube-scheduler ничего не запускает.",
              _("And it updates the cluster's state through the API server. But kube-scheduler itself starts "
                "nothing.")),
        Quote("001", "Scheduler overvåker nyopprettede Pods (applikasjonsinstansene Deres) som ikke har fått "
                      "tildelt en worker-node.",
              _("The Scheduler watches newly created Pods (your application instances) that have not been assigned a "
                "worker node.")),
        Quote("004", "El programador es responsable de asignar pods a nodos.",
              _("The scheduler is responsible for assigning pods to nodes.")),
    ],
    "C11": [
        Quote("001", "Scheduler overvåker nyopprettede Pods (applikasjonsinstansene Deres) som ikke har fått "
                      "tildelt en worker-node. Deretter velger den den beste noden for hver Pod, basert på faktorer "
                      "som ressurskrav, maskinvarebegrensninger og policyer.",
              _("The Scheduler watches newly created Pods (your application instances) that have not been assigned a "
                "worker node. Then it picks the best node for each Pod, based on factors such as resource "
                "requirements, hardware constraints and policies.")),
        Quote("004", "La programación generalmente requiere la consideración de varios parámetros diferentes, como "
                      "el uso actual de recursos de cada nodo y cualquier restricción que haya aplicado en su "
                      "manifiesto. […] Si la disponibilidad del nodo cambia o se solicitan más réplicas de un pod, "
                      "el programador tomará medidas para reprogramar la carga de trabajo en consecuencia.",
              _("Scheduling usually weighs several parameters, such as each node's current resource use and any "
                "constraint you set in your manifest. […] If a node's availability changes or more replicas of a pod "
                "are requested, the scheduler acts to reschedule the workload accordingly.")),
    ],
    "C12": [
        Quote("000", "Контроллер (controller) - это процесс, который пытается поддерживать в согласованном "
                      "состоянии конфигурацию кластера и реальный мир.",
              _("A controller is a process that tries to keep the cluster's configuration and the real world "
                "consistent.")),
        Quote("001", "Controller Manager kjører ulike controllers, som er bakgrunnsløkker som regulerer klyngens "
                      "tilstand. En Node Controller overvåker for eksempel nodehelsen, mens en Replication "
                      "Controller sørger for at riktig antall Pods kjører.",
              _("The Controller Manager runs various controllers, background loops that regulate the cluster's "
                "state. A Node Controller, for example, watches node health, while a Replication Controller makes "
                "sure the right number of Pods runs.")),
        Quote("004", "También identifican los cambios que se han solicitado y luego toman medidas para migrar el "
                      "estado actual al nuevo estado deseado.",
              _("They also spot the changes that were requested and then act to move the current state to the new "
                "desired state.")),
    ],
    "C13": [
        Quote("000", "Все встроенные в Kubernetes контроллеры для простоты упакованы в один бинарный файл. Это и "
                      "есть компонент управляющего слоя kube-controller-manager.",
              _("For simplicity, all the controllers built into Kubernetes are packed into one binary. That is the "
                "control-plane component kube-controller-manager.")),
        Quote("004", "Si alguna vez se detuviera, los cambios realizados a través del servidor de API no se "
                      "identificarían y nunca se producirían cambios de estado.",
              _("If it ever stopped, the changes made through the API server would not be noticed and no state "
                "change would ever happen.")),
    ],
    "C14": [
        Quote("001", "En Node Controller overvåker for eksempel nodehelsen, mens en Replication Controller sørger "
                      "for at riktig antall Pods kjører.",
              _("A Node Controller, for example, monitors node health, while a Replication Controller makes sure the "
                "right number of Pods run.")),
        Quote("004", "Los controladores controlan sus recursos para garantizar la salud y la preparación.",
              _("The controllers watch your resources to ensure health and readiness.")),
    ],
    "C15": [
        Quote("000", "Также можно реализовать самому контроллеры, архитектура Kubernetes позволяет это делать. "
                      "Иногда такие пользовательские контроллеры еще называют операторами (operator).",
              _("You can also implement controllers yourself; Kubernetes' architecture allows it. Such user "
                "controllers are sometimes called operators.")),
    ],
    "C16": [
        Quote("000", "В отличие от компонентов управляющего слоя, он запущен на каждой ноде: и управляющей, и "
                      "рабочей.",
              _("Unlike the control-plane components, it runs on every node: control and worker alike.")),
    ],
    "C17": [
        Quote("000", "kubelet читает событие с помощью API Server-a, что экземпляр сервиса распределен "
                      "kube-scheduler-ом на ноду, на которой он работает, и запускает экземпляр сервиса.",
              _("kubelet reads, through the API Server, the event that kube-scheduler has assigned a service "
                "instance to the node kubelet runs on, and starts the instance.")),
        Quote("004", "Las cargas de trabajo solo se programan en los nodos cuando el plano de control envía un "
                      "manifiesto de contenedor a una de las instancias de kubelet disponibles. Cuando un nodo "
                      "recibe un nuevo manifiesto, utilizará el tiempo de ejecución de su contenedor para extraer la "
                      "imagen adecuada e iniciar una nueva instancia de contenedor.",
              _("Workloads are placed on nodes only when the control plane sends a container manifest to one of the "
                "available kubelets. When a node receives a new manifest, it uses its container runtime to pull the "
                "right image and start a new container instance.")),
    ],
    "C18": [
        Quote("000", "Также в задачи kubelet-а входит следить за работоспособностью контейнеров, которые он "
                      "запустил […] если kubelet увидит, что экземпляр сервиса перестал работать, он через API "
                      "Server обновит его состояние, чтобы другие компоненты могли отреагировать, и попытается его "
                      "перезапустить, чтобы вернуть к жизни.",
              _("kubelet's tasks also include watching the health of the containers it started […] if kubelet sees "
                "that a service instance stopped working, it updates its state through the API Server so that other "
                "components can react, and tries to restart it to bring it back to life.")),
        Quote("004", "Kubelet también supervisa continuamente los contenedores que ejecuta Node. Notificará al "
                      "plano de control si un contenedor cae en un estado insalubre.",
              _("Kubelet also continuously watches the containers the node runs. It tells the control plane if a "
                "container becomes unhealthy.")),
    ],
    "C19": [
        Quote("001", "En Node Controller overvåker for eksempel nodehelsen",
              _("A Node Controller, for example, watches node health")),
        Quote("004", "En la dirección opuesta, los nodos deben enviar datos sobre su disponibilidad (como "
                      "estadísticas de uso de recursos) al plano de control. […] Kubelet transmite datos sobre el "
                      "estado del nodo a Kubernetes, lo que le permite tomar medidas para reprogramar los pods si "
                      "los recursos del nodo se ven limitados.",
              _("In the opposite direction, the nodes must send data about their availability (such as resource "
                "usage statistics) to the control plane. […] Kubelet sends data about the node's state to "
                "Kubernetes, which lets it reschedule pods if the node's resources become constrained.")),
    ],
    "C20": [
        Quote("004", "Cuando un nodo necesita enviar datos al plano de control, Kubelet se conecta al servidor API "
                      "del plano de control. Utiliza la misma interfaz HTTPS a la que te conectas a través de "
                      "herramientas como kubectl. Kubelet está preconfigurado con credenciales que le permiten "
                      "autenticarse en Kubernetes.",
              _("When a node needs to send data to the control plane, Kubelet connects to the control plane's API "
                "server. It uses the same HTTPS interface you connect to with tools like kubectl. Kubelet is "
                "preconfigured with credentials that let it authenticate to Kubernetes.")),
    ],
    "C21": [
        Quote("004", "El tráfico desde el plano de control a los nodos se maneja nuevamente usando kubelet. Kubelet "
                      "expone su propio punto final HTTPS al que puede acceder el plano de control. Este punto final "
                      "acepta nuevos manifiestos de contenedores, que luego usa Kubelet para ajustar los "
                      "contenedores en ejecución.",
              _("Traffic from the control plane to the nodes is again handled by kubelet. Kubelet exposes its own "
                "HTTPS endpoint that the control plane can reach. This endpoint accepts new container manifests, "
                "which Kubelet then uses to adjust the running containers.")),
    ],
    "C22": [
        Quote("000", "Для изоляции сервисов друг от друга они запускаются kubelet-ом в контейнерном окружении. Это "
                      "может быть docker, cri-o или другое контейнерное окружение, которое поддерживает спецификацию "
                      "Container Runtime Interface.",
              _("To isolate services from each other, kubelet runs them in a container environment: docker, cri-o or "
                "another environment that supports the Container Runtime Interface specification.")),
        Quote("001", "Container Runtime: Programvaren som har ansvaret for å kjøre containere (for eksempel Docker, "
                      "containerd, CRI-O). Kubelet bruker den til å hente images og kjøre applikasjonene Deres.",
              _("Container Runtime: the software responsible for running containers (for example Docker, containerd, "
                "CRI-O). Kubelet uses it to fetch images and run your applications.")),
        Quote("004", "El tiempo de ejecución del contenedor es responsable de extraer imágenes y ejecutar realmente "
                      "sus contenedores. Kubernetes admite cualquier tiempo de ejecución que implemente su Interfaz "
                      "de tiempo de ejecución del contenedor especificación. Los ejemplos incluyen containerd y "
                      "CRI-O.",
              _("The container runtime is responsible for pulling images and actually running your containers. "
                "Kubernetes supports any runtime that implements its Container Runtime Interface specification, for "
                "example containerd and CRI-O.")),
    ],
    "C23": [
        Quote("000", "Помимо kubelet-а и контейнерного окружения на каждой рабочей ноде должен еще присутствовать "
                      "агент kube-proxy. Это агент, который обеспечивает внутреннюю адресацию сервисов, и способы "
                      "доступа к ним.",
              _("Besides kubelet and the container environment, every worker node must also run the kube-proxy "
                "agent. It provides the internal addressing of services and the ways to reach them.")),
        Quote("001", "Den vedlikeholder nettverksregler på noden, slik at Pods kan kommunisere over nettverket både "
                      "fra innsiden og utsiden av klyngen.",
              _("It maintains network rules on the node, so that Pods can communicate over the network from both "
                "inside and outside the cluster.")),
        Quote("004", "Es kube-proxy que convierte las definiciones de servicio en las reglas de red que brindan el "
                      "acceso que solicitó.",
              _("It is kube-proxy that turns the Service definitions into the network rules that give the access you "
                "asked for.")),
    ],
    "C24": [
        Quote("001", "Kube-proxy kjører på hver Worker Node og håndterer nettverksproxy for Kubernetes Services. "
                      "[…] Den sørger for at applikasjonene Deres kan nås.",
              _("Kube-proxy runs on every worker node and handles network proxying for Kubernetes Services. […] It "
                "makes sure your applications can be reached.")),
        Quote("004", "Kubernetes tiene el concepto de «servicios,» que exponen varios pods como una sola identidad "
                      "de red.",
              _("Kubernetes has the concept of Services, which expose several pods as a single network identity.")),
    ],
    "C25": [
        Quote("000", "Это агент, который обеспечивает внутреннюю адресацию сервисов, и способы доступа к ним.",
              _("It is the agent that provides the internal addressing of services and the ways to reach them.")),
        Quote("004", "Es kube-proxy que convierte las definiciones de servicio en las reglas de red que brindan el "
                      "acceso que solicitó.",
              _("It is kube-proxy that turns Service definitions into the network rules that give the access you "
                "asked for.")),
    ],
    "C26": [
        Quote("001", "Den vedlikeholder nettverksregler på noden, slik at Pods kan kommunisere over nettverket både "
                      "fra innsiden og utsiden av klyngen.",
              _("It maintains network rules on the node, so that Pods can communicate over the network from both "
                "inside and outside the cluster.")),
        Quote("004", "Este es responsable de configurar el sistema de red del nodo para cumplir con los requisitos "
                      "de las cargas de trabajo de su contenedor.",
              _("It is responsible for configuring the node's network to meet the needs of your container workloads.")),
    ],
    "C27": [
        Quote("004", "Por lo general, la pérdida del plano de control lo deja incapaz de administrar su clúster, ya "
                      "que la API y las funciones de programación se desconectan. Sin embargo, los pods en los nodos "
                      "de trabajo seguirán funcionando; periódicamente intentarán reconectarse al plano de control.",
              _("Generally, losing the control plane leaves you unable to manage your cluster, since the API and the "
                "scheduling functions go offline. However, the pods on the worker nodes will keep running; they will "
                "periodically try to reconnect to the control plane.")),
    ],
    "C28": [
        Quote("004", "Es técnicamente posible para abarcar el plano de control a través de múltiples nodos. Esto "
                      "ayuda a maximizar su disponibilidad.",
              _("It is technically possible to span the control plane across multiple nodes. This helps maximise its "
                "availability.")),
    ],
    "C29": [
        Quote("004", "Si la disponibilidad del nodo cambia o se solicitan más réplicas de un pod, el programador "
                      "tomará medidas para reprogramar la carga de trabajo en consecuencia.",
              _("If a node's availability changes or more replicas of a pod are requested, the scheduler takes steps "
                "to reschedule the workload accordingly.")),
        Quote("004", "Kubelet transmite datos sobre el estado del nodo a Kubernetes, lo que le permite tomar "
                      "medidas para reprogramar los pods si los recursos del nodo se ven limitados.",
              _("The kubelet sends data about the node's state to Kubernetes, which lets it take steps to reschedule "
                "the pods if the node's resources become limited.")),
    ],
    "C30": [
        Quote("001", "Den vedlikeholder nettverksregler på noden, slik at Pods kan kommunisere over nettverket både "
                      "fra innsiden og utsiden av klyngen.",
              _("It maintains network rules on the node, so that Pods can communicate over the network both from "
                "inside and from outside the cluster.")),
        Quote("004", "kube-proxy luego modificará la configuración de la red para configurar los servicios y hacer "
                      "que su carga de trabajo sea accesible.",
              _("kube-proxy then changes the network configuration to set up the services and make your workload "
                "reachable.")),
    ],
    "C31": [
        Quote("000", "Возможны несколько вариантов инсталляций кластера etcd - разворачивание прямо в кластере "
                      "Kubernetes, либо в отдельном кластере, на отдельных серверах, вне кластера Kubernetes.",
              _("Several ways of installing the etcd cluster are possible: deploying it right inside the Kubernetes "
                "cluster, or as a separate cluster, on separate servers, outside the Kubernetes cluster.")),
    ],
}
# C32 proves for several runtimes side by side what C22 shows for one: the same sentences.
QUOTES["C32"] = QUOTES["C22"]
# C34 follows from C06 and C08: all of the cluster's state is in etcd, and without etcd the cluster has no memory; a
# snapshot of etcd is therefore a snapshot of the cluster.
QUOTES["C34"] = [*QUOTES["C06"], QUOTES["C08"][1]]
