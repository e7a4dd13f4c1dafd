from collections import Counter

from labs.i18n import _
from labs.kube import (
    ECHO_ANSWER,
    crictl_container,
    echo_pod,
    pod_exec,
    proxy_config,
    proxy_sync_period,
    wait_ready_pods,
)
from labs.lab import Lab
from labs.registry import CheckSkipped, Evidence, check
from labs.timing import wait_for

REQUESTS = 6  # to the Service, from each pod


def answering(text: str) -> Counter:
    """How often each pod answered, in the output of the image's HTTP client."""
    return Counter(pod for pod, _node in ECHO_ANSWER.findall(text))


@check(
    "C32", _("The kubelet runs pods through any CRI runtime: containerd, CRI-O and Docker Engine side by side"),
    claim=_("The kubelet runs containers through any runtime that implements CRI (containerd, CRI-O, Docker Engine "
            "through cri-dockerd, …)."),
    texts=["000", "001", "004"],
    see=["kubectl get nodes -o custom-columns=NODE:.metadata.name,RUNTIME:.status.nodeInfo.containerRuntimeVersion",
         "lab ssh w1 -- crictl --runtime-endpoint unix://@runtimes.containerd.socket@ version",
         "lab ssh w2 -- crictl --runtime-endpoint unix://@runtimes.crio.socket@ version",
         "lab ssh w3 -- crictl --runtime-endpoint unix://@runtimes.docker.socket@ version",
         "lab ssh w2 -- 'grep containerRuntimeEndpoint /var/lib/kubelet/config.yaml'",
         "lab ssh w3 -- docker ps --filter label=io.kubernetes.pod.namespace=default"],
    does=_("Where the nodes run different runtimes (settings.yml profiles.<p>.runtimes: the runtimes profile): every "
           "Node reports the runtime its settings give it (containerRuntimeVersion); on every node, crictl through "
           "that node's own CRI socket answers as that runtime; an echo server pod runs on each node that takes "
           "workloads, and crictl on its node lists its container with the id the pod status gives; each of those "
           "pods reaches every other pod at its address and a Service in front of them all, with answers from pods "
           "on every runtime. Skipped where every node runs the same runtime."),
    hints=[
        _("*w3 reports containerd://…, its settings say docker*: the node's kubelet talks to another runtime than the "
          "one it should (`containerRuntimeEndpoint` in /var/lib/kubelet/config.yaml), or the node was provisioned "
          "with other settings."),
        _("*w2: crictl on unix://…/crio.sock: …*: the node's runtime does not answer on its socket "
          "(`systemctl status crio`, `journalctl -u crio`; on a Docker Engine node: docker, cri-docker)."),
        _("*timed out … waiting for … pods*: a node's runtime cannot start the pod (`kubectl describe pod`: events "
          "from the kubelet; on the node: `crictl pods`)."),
        _("*… from pod … on …: … answers*: the pod network or the Service does not work from one runtime's pods "
          "(the CNI configuration that runtime reads, `cni_conf_dir` of the settings' paths)."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    runtimes = {node: lab.runtime(node) for node in lab.nodes}
    if len(set(runtimes.values())) < 2:
        raise CheckSkipped(_("every node runs {runtime}: needs nodes on different container runtimes (settings.yml: "
                             "profiles.<p>.runtimes; the runtimes profile has containerd, CRI-O and Docker Engine "
                             "workers)").format(runtime=", ".join(sorted(set(runtimes.values())))))
    for runtime in sorted(set(runtimes.values())):
        component = ((lab.setting("runtimes") or {}).get(runtime) or {}).get("component")
        origin = lab.artifact_origin(component) if component else None
        if origin:
            ev.add(_("{runtime}: {component} {origin}").format(runtime=runtime, component=component, origin=origin))
    for node, runtime in runtimes.items():
        reported = lab.core.read_node(node).status.node_info.container_runtime_version
        wanted = lab.cri_name(node)
        ev.expect(reported.startswith(f"{wanted}://"),
                  _("{node} ({runtime} in its settings) reports {reported}").format(
                      node=node, runtime=runtime, reported=reported),
                  _("{node} reports {reported}, its settings say {runtime} ({wanted}://…)").format(
                      node=node, reported=reported, runtime=runtime, wanted=wanted))
    def last_line(text: str) -> str:
        return (text.strip().splitlines() or [""])[-1][-240:]

    for node in lab.nodes:
        socket = f"unix://{lab.cri_socket(node)}"
        result = lab.host(node).run(f"crictl --runtime-endpoint {socket} --image-endpoint {socket} version")
        answer = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
        name = answer.get("RuntimeName", "").strip()
        ev.expect(result.rc == 0 and name == lab.cri_name(node),
                  _("{node}: crictl on {socket}: {name} {version}").format(
                      node=node, socket=socket, name=name, version=answer.get("RuntimeVersion", "").strip()),
                  _("{node}: crictl on {socket}: {error}").format(
                      node=node, socket=socket, error=last_line(result.stderr or result.stdout)
                      if result.rc else _("{name} answers, not {wanted}").format(name=name,
                                                                                 wanted=lab.cri_name(node))))
    with lab.namespace("C32") as ns:
        hosts = lab.workload_nodes
        for node in hosts:
            manifest = echo_pod(f"on-{node}", nodeName=node)
            manifest["metadata"]["labels"] = {"app": "runtimes", "node": node}
            lab.core.create_namespaced_pod(ns, manifest)
        pods = {p.spec.node_name: p for p in wait_ready_pods(lab, ns, "runtimes", len(hosts))}
        for node, pod in pods.items():
            cid = crictl_container(lab, node, ns, pod.metadata.name)
            status_id = pod.status.container_statuses[0].container_id or ""
            ev.expect(bool(cid) and status_id.split("://")[-1].startswith(cid),
                      _("{node} ({runtime}): crictl lists {pod}'s container {cid}, its status says {status_id}").format(
                          node=node, runtime=runtimes[node], pod=pod.metadata.name, cid=cid[:13],
                          status_id=status_id[:30]),
                      _("{node} ({runtime}): crictl shows {cid!r}, {pod}'s status says {status_id}").format(
                          node=node, runtime=runtimes[node], cid=cid, pod=pod.metadata.name, status_id=status_id))
        ip = lab.core.create_namespaced_service(ns, {"metadata": {"name": "runtimes"}, "spec": {
            "selector": {"app": "runtimes"}, "ports": [{"port": 80, "targetPort": 8080}]}}).spec.cluster_ip
        sync = proxy_sync_period(proxy_config(lab, lab.nodes[0]))  # how soon kube-proxy writes the new Service
        seen: Counter = Counter()
        for node, pod in pods.items():
            direct = "for u in " + " ".join(f"http://{other.status.pod_ip}:8080/" for other in pods.values()) + \
                "; do echo-server get $u 2; done"
            out = pod_exec(lab, ns, pod.metadata.name, ["sh", "-c", direct], check=False)
            got = answering(out)
            ev.expect(all(got[p.metadata.name] for p in pods.values()),
                      _("from {pod} ({runtime}): every pod answers at its address ({answers})").format(
                          pod=pod.metadata.name, runtime=runtimes[node],
                          answers=", ".join(f"{p.metadata.name}@{p.status.pod_ip}" for p in pods.values())),
                      _("from {pod} on {node} ({runtime}): {count} answers, from {answers}").format(
                          pod=pod.metadata.name, node=node, runtime=runtimes[node], count=sum(got.values()),
                          answers=dict(got) or _("none")))
            script = f"i=0; while [ $i -lt {REQUESTS} ]; do i=$((i+1)); echo-server get http://{ip}/ 2; done"

            def through_service(name=pod.metadata.name, script=script) -> Counter | None:
                answers = answering(pod_exec(lab, ns, name, ["sh", "-c", script], check=False))
                return answers if sum(answers.values()) == REQUESTS else None

            got = wait_for(through_service, sync, _("{count} answers from {ip} in {pod} ({runtime})").format(
                count=REQUESTS, ip=ip, pod=pod.metadata.name, runtime=runtimes[node]))
            ev.expect(True, _("from {pod} ({runtime}): {ip} answers {count} times ({answers})").format(
                pod=pod.metadata.name, runtime=runtimes[node], ip=ip, count=sum(got.values()),
                answers=", ".join(f"{k} x{v}" for k, v in got.most_common())))
            seen += got
        answered = sorted({runtimes[p.spec.node_name] for p in pods.values() if seen[p.metadata.name]})
        ev.expect(len(answered) > 1,
                  _("pods on {runtimes} answered through the Service").format(
                      runtimes=", ".join(answered)),
                  _("only pods on {runtimes} answered").format(runtimes=", ".join(answered)))
