"""Kubernetes helpers the checks share: every API request bounded in time, the test pods and Deployments, exec and
events, a node's connections and containers, kube-proxy's configuration and rules."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shlex
import uuid
from typing import TYPE_CHECKING

from labs.i18n import _
from labs.nodefacts import Conn, parse_ss, rules_mentioning
from labs.paths import ROOT
from labs.registry import CheckFailed
from labs.timing import parse_duration, wait_for

if TYPE_CHECKING:
    from labs.lab import Lab

REQUEST_TIMEOUT = (10, 90)  # seconds: connect; read (the API server's own request timeout is 60 s)


def bound_requests() -> None:
    """Give every API request of this process (every client, watches included) a timeout unless it has its own.
    The official client blocks forever by default: a connection cut silently (the API address moved to another
    node) would hang the check."""
    from kubernetes.client import rest

    if getattr(rest.RESTClientObject.request, "lab_bounded", False):
        return
    unbounded = rest.RESTClientObject.request

    def request(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        return unbounded(self, method, url, headers=headers, body=body, post_params=post_params,
                         _request_timeout=_request_timeout or REQUEST_TIMEOUT)

    request.lab_bounded = True
    rest.RESTClientObject.request = request


def pod_manifest(name: str, image: str, **spec) -> dict:
    """A small pod of the lab's test image."""
    container = {"name": "main", "image": image, "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}
    container.update(spec.pop("container", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 0, **spec}}


@functools.cache
def test_image() -> str:
    """The lab's test image (name:version, from versions.yml)."""
    import yaml

    images = yaml.safe_load((ROOT / "versions.yml").read_text())["images"]
    return f"{images['echo']['name']}:{images['echo']['version']}"


# --------------------------------------------------------------------------
# Helpers for the observing checks: pods, exec, sockets

# seconds (times timeout_scale): the image is already on every node, so this is scheduling + sandbox + start, which
# takes 2-5 s on the docker provider; a pod that has not started in a minute will not.
POD_START_TIMEOUT = 60
# A Deployment's pods are made by two controllers first (deployment, then ReplicaSet): seen to take 40 s and more on
# a loaded 2-core host shortly after the controller manager had restarted (a new leader, its informers starting).
DEPLOYMENT_START_TIMEOUT = 90


# What the test image answers over HTTP (echo_env gives it the names): "pod=<POD_NAME> node=<NODE_NAME>".
ECHO_ANSWER = re.compile(r"pod=(\S+) node=(\S+)")


def echo_env() -> list[dict]:
    """The test image's environment: it answers "pod=<POD_NAME> node=<NODE_NAME>"."""
    return [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]


def node_ips(lab: Lab) -> dict[str, str]:
    """Node name -> InternalIP, as the Node objects report them."""
    return {n.metadata.name: next(a.address for a in n.status.addresses if a.type == "InternalIP")
            for n in lab.core.list_node().items}


def node_ready(lab: Lab, name: str) -> str:
    """The status of a node's Ready condition: True, False or Unknown."""
    return {c.type: c.status for c in lab.core.read_node(name).status.conditions}["Ready"]


def cordon(lab: Lab, node: str, on: bool) -> None:
    """Mark a node unschedulable (on) or schedulable again, as `kubectl cordon`/`uncordon` do."""
    lab.core.patch_node(node, {"spec": {"unschedulable": on}})


def scheduler_refuses(lab: Lab, ns: str, node: str, tries: int = 3) -> str | None:
    """Wait until the scheduler knows that ``node`` is closed (cordoned or tainted NoSchedule); its message refusing a
    probe pod that only ``node`` may take (PodScheduled False), or None when it bound the probe there ``tries`` times.
    A cordon or a taint is a write to the Node that the scheduler learns from its watch a moment later — seconds on a
    busy machine — and a pod created in that moment may still land on the node."""
    only_there = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    for attempt in range(1, tries + 1):
        name = f"probe-{node}-{attempt}-{uuid.uuid4().hex[:5]}"
        lab.core.create_namespaced_pod(ns, pod_manifest(name, test_image(), affinity=only_there))

        def decided(name=name):
            """(node, None) once the probe is bound, (None, message) once it is refused; None while undecided."""
            pod = lab.core.read_namespaced_pod(name, ns)
            if pod.spec.node_name:
                return pod.spec.node_name, None
            refused = [c.message for c in pod.status.conditions or []
                       if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"]
            return (None, refused[0]) if refused else None

        bound, refusal = wait_for(decided, 30, _("the scheduler to place or refuse {name}").format(name=name), 0.5)
        lab.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        if not bound:
            return refusal
    return None


def refusal_evidence(node: str, what: str, refusal: str | None) -> str:
    """The evidence line for what ``scheduler_refuses`` (three tries) found on a node just closed (``what``:
    cordoned, tainted)."""
    if refusal:
        return _("{node} {what}: a probe pod that only {node} may take is refused: {refusal}").format(
            node=node, what=what, refusal=refusal)
    return _("{node} {what}: a probe pod that only {node} may take was bound there, three times").format(
        node=node, what=what)


def wait_running(lab: Lab, ns: str, name: str, timeout: float = POD_START_TIMEOUT):
    """The pod once it is Running with all containers ready."""
    def ready():
        pod = lab.core.read_namespaced_pod(name, ns)
        statuses = pod.status.container_statuses or []
        return pod if pod.status.phase == "Running" and statuses and all(s.ready for s in statuses) else None

    return wait_for(ready, timeout, _("pod {ns}/{name} to run").format(ns=ns, name=name))


def run_pod(lab: Lab, ns: str, manifest: dict, timeout: float = POD_START_TIMEOUT):
    """Create a pod and return it once it runs."""
    lab.core.create_namespaced_pod(ns, manifest)
    return wait_running(lab, ns, manifest["metadata"]["name"], timeout)


def echo_pod(name: str, **spec) -> dict:
    """A pod of the test image answering "pod=<name> node=<node>" on 8080, ready once it does (readiness probe)."""
    return pod_manifest(name, test_image(), container={"env": echo_env(), "ports": [{"containerPort": 8080}],
                                                       "readinessProbe": {"httpGet": {"path": "/healthz",
                                                                                      "port": 8080},
                                                                          "periodSeconds": 2}}, **spec)


def ask_pod(lab: Lab, node: str, ip: str, expect: str, timeout: float = 15) -> str:
    """What the test pod at ``ip`` answers on 8080 when asked from ``node`` (curl), asked again every 2 s for up to
    ``timeout`` seconds until the answer starts with ``expect``: one connection lost on a busy machine is no answer.
    The last answer, or curl's error."""
    answers: list[str] = []

    def answered() -> bool:
        answers.append(lab.sh(node, f"curl -sS -m 5 http://{ip}:8080/ 2>&1", check=False))
        return answers[-1].startswith(expect)

    with contextlib.suppress(CheckFailed):
        wait_for(answered, timeout, _("an answer from {ip}").format(ip=ip), 2)
    return answers[-1] if answers else ""


def run_deployment(lab: Lab, ns: str, name: str, replicas: int, spread: bool = False,
                   timeout: float = DEPLOYMENT_START_TIMEOUT, **pod_spec) -> list:
    """A Deployment of the test image (answering on 8080); its pods once all are ready.
    ``spread``: at most one replica more on one schedulable node than on another; ``pod_spec``: further fields of
    the pods' spec (tolerations, a grace period, ...)."""
    spec = echo_pod(name, **pod_spec)["spec"]
    if spread:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                              "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
                                              "labelSelector": {"matchLabels": {"app": name}}}]
    lab.apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
    return wait_ready_pods(lab, ns, name, replicas, timeout)


def pod_state(pod) -> str:
    """A pod as a failure message shows it: name@node, phase, why a container waits or is not ready, Terminating."""
    words = [f"{pod.metadata.name}@{pod.spec.node_name or _('(not scheduled)')}", pod.status.phase or "?"]
    for status in pod.status.container_statuses or []:
        waiting = status.state and status.state.waiting
        if waiting:
            words.append(waiting.reason or "waiting")
        elif not status.ready:
            words.append(_("not ready"))
    if pod.metadata.deletion_timestamp:
        words.append("Terminating")
    return " ".join(words)


def wait_ready_pods(lab: Lab, ns: str, app: str, count: int, timeout: float = POD_START_TIMEOUT) -> list:
    """The pods labelled app=<app>, once exactly ``count`` of them exist and all are ready. On a timeout the message
    ends with the pods as last seen (none made: the controllers did not act; not scheduled; a container waiting)."""
    seen: list[str] = []

    def ready():
        listed = lab.core.list_namespaced_pod(ns, label_selector=f"app={app}").items
        seen[:] = [pod_state(p) for p in listed]
        pods = [p for p in listed if not p.metadata.deletion_timestamp]
        ok = [p for p in pods if p.status.phase == "Running"
              and all(s.ready for s in p.status.container_statuses or [])]
        return ok if len(pods) == len(ok) == count else None

    try:
        return wait_for(ready, timeout, _("{count} ready pods app={app} in {ns}").format(count=count, app=app, ns=ns))
    except CheckFailed as exc:
        raise CheckFailed(_("{failure}; the pods then: {pods}").format(
            failure=exc, pods=", ".join(seen) or _("none"))) from None


def pod_exec(lab: Lab, ns: str, pod: str, command: list[str], timeout: float = 60, check: bool = True) -> str:
    """Run a command in a pod through the API server (exec); its stdout. A command that cannot start or exits
    non-zero fails the check (unless ``check=False``). A separate API client: the websocket call must not divert
    the lab's other requests."""
    from kubernetes import client
    from kubernetes.stream import stream
    from kubernetes.stream.ws_client import ERROR_CHANNEL, STDERR_CHANNEL, STDOUT_CHANNEL

    api = client.CoreV1Api(client.ApiClient(lab.api_client.configuration))
    ws = stream(api.connect_get_namespaced_pod_exec, pod, ns, command=command, stderr=True, stdin=False,
                stdout=True, tty=False, _preload_content=False)
    try:
        ws.run_forever(timeout=timeout)
        out, err, status = (ws.read_channel(c) for c in (STDOUT_CHANNEL, STDERR_CHANNEL, ERROR_CHANNEL))
    finally:
        ws.close()
    result = json.loads(status) if status else {}
    if check and result.get("status") != "Success":
        raise CheckFailed(_("exec {command} in {ns}/{pod}: {message}{stderr}").format(
            command=" ".join(command), ns=ns, pod=pod, message=result.get("message") or _("no exit status"),
            stderr=": " + err.strip()[-200:] if err.strip() else ""))
    return out


def pod_events(lab: Lab, ns: str, name: str) -> list:
    """The events about one object of the namespace, oldest first."""
    items = lab.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return sorted(items, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)


def established(lab: Lab, node: str, selector: str = "") -> list[Conn]:
    """The node's established TCP connections (``ss -tnp state established <selector>``), with their processes."""
    return parse_ss(lab.sh(node, f"ss -Htnp state established {selector}"))


def crictl_container(lab: Lab, node: str, ns: str, pod: str, name: str = "main") -> str:
    """The id of a pod's running container in the node's runtime, asked through its own CRI socket ("" when there
    is none)."""
    return lab.crictl(node, f"ps -q --name '^{name}$' --label io.kubernetes.pod.namespace={ns} "
                        f"--label io.kubernetes.pod.name={pod}")


# Where each runtime keeps its images, asked with the runtime's own tool (not over CRI): a command that exits 0
# when the image is there, and how the evidence names the store.
IMAGE_STORES = {
    "containerd": ("ctr -n k8s.io images ls -q | grep -qxF {image}", _("containerd's k8s.io namespace (ctr)")),
    "crio": ("skopeo inspect --raw containers-storage:[overlay@/var/lib/containers/storage+/run/containers/storage]"
             "{image} >/dev/null", _("CRI-O's containers-storage (skopeo)")),
    "docker": ("docker image inspect {image} >/dev/null", _("Docker's image store (docker image inspect)")),
}


def image_in_store(lab: Lab, node: str, image: str) -> tuple[bool, str]:
    """Whether the node's own runtime holds ``image`` in its store, and that store's name."""
    command, store = IMAGE_STORES[lab.runtime(node)]
    result = lab.host(node).run(command.format(image=shlex.quote(image) if lab.runtime(node) != "crio" else image))
    return result.rc == 0, store


def container_pid(lab: Lab, node: str, cid: str) -> int:
    """The host PID of a container's main process, as the node's runtime reports it (crictl inspect; Docker
    Engine: docker inspect, as cri-dockerd's verbose status has none)."""
    info = json.loads(lab.crictl(node, f"inspect {cid}")).get("info") or {}
    if info.get("pid"):
        return int(info["pid"])
    return int(lab.sh(node, f"docker inspect --format '{{{{.State.Pid}}}}' {shlex.quote(cid)}"))


def event_source(event) -> tuple[str, str]:
    """(component, host) that reported a core/v1 Event, whichever of its fields carry them."""
    source = event.source
    return (event.reporting_component or (source.component if source else "") or "",
            event.reporting_instance or (source.host if source else "") or "")


def proxy_config(lab: Lab, node: str) -> dict:
    """kube-proxy's configuration file on a node (the unit's --config), as a dict."""
    import yaml

    return yaml.safe_load(lab.sh(node, f"cat {lab.unit_arg(node, 'kube-proxy', 'config')}")) or {}


def proxy_rules(lab: Lab, node: str, address: str, mode: str | None = None) -> list[str]:
    """The lines of a node's kube-proxy rules that mention ``address``: iptables-save in iptables mode,
    the kube-proxy nftables tables in nftables mode."""
    mode = mode or proxy_config(lab, node).get("mode") or "iptables"
    dump = "iptables-save" if mode == "iptables" else "nft list table ip kube-proxy"
    return rules_mentioning(lab.sh(node, f"{dump} 2>/dev/null || true"), address)


def proxy_sync_period(config: dict) -> float:
    """kube-proxy's full resync period in seconds (its config's <mode>.syncPeriod; 30s by default)."""
    mode = config.get("mode") or "iptables"
    return parse_duration(str((config.get(mode) or {}).get("syncPeriod") or "30s"))
