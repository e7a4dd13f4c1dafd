import urllib.request
from collections import Counter

from labs.i18n import _
from labs.kube import (
    ECHO_ANSWER,
    node_ips,
    pod_exec,
    pod_manifest,
    proxy_config,
    proxy_sync_period,
    run_deployment,
    run_pod,
    test_image,
)
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

REQUESTS = 8  # per node address


# Straight to the node, never through a proxy the environment may name (http_proxy): the node network is local.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def ask(url: str) -> str:
    """One HTTP GET from this host (the control host, outside the cluster); the answer, or '' when none came."""
    try:
        with DIRECT.open(url, timeout=2) as resp:
            return resp.read(200).decode(errors="replace")
    except OSError:
        return ""


@check(
    "C30", _("kube-proxy makes pods reachable from inside and from outside the cluster"),
    claim=_("kube-proxy makes pods reachable over the network from inside and from outside the cluster."),
    texts=["001", "004"],
    see=["kubectl create deployment web --image=@image@ --replicas=2 --port=8080; kubectl rollout status deployment "
         "web --timeout=90s",
         "kubectl expose deployment web --type=NodePort --port=80 --target-port=8080; port=$(kubectl get service web "
         "-o jsonpath='{.spec.ports[0].nodePort}'); echo $port",
         "sleep 3; curl -sS http://@ip.cp1@:$port/; curl -sS http://@ip.w1@:$port/   # from this machine: any node",
         "lab ssh w1 -- \"iptables-save | grep $port\"   # kube-proxy's rules for the node port",
         "kubectl run client --image=@image@; kubectl wait --for=condition=Ready pod/client --timeout=90s",
         "kubectl exec client -- echo-server get http://web/",
         "kubectl delete pod client; kubectl delete service web; kubectl delete deployment web"],
    does=_("Runs a Deployment of the echo server and a NodePort Service in front of it. From the control host — "
           "outside the cluster, on the lab's node network — sends {requests} requests to the node port on every "
           "node's address (control-plane nodes included: kube-proxy runs on each), waiting at most kube-proxy's sync "
           "period for the rules: every address answers, and every answer comes from one of the Service's backend "
           "pods. From a pod, the same Service answers at its ClusterIP.").format(requests=REQUESTS),
    hints=[
        _("*timed out … waiting for 8 answers from http://ADDRESS:PORT/ (NODE) on this host*: that node has no rules "
          "for the node port (kube-proxy stopped: `lab ssh NODE -- systemctl status kube-proxy`), or its routes to the "
          "other nodes' pod ranges are missing (`lab ssh NODE -- ip route`), or this host does not reach the node "
          "network."),
        _("*answers from pods that are not the Service's backends*: something else answers on that port on the node."),
        _("*pod client -> ClusterIP*: see C24."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C30") as ns:
        backends = run_deployment(lab, ns, "web", len(lab.workload_nodes), spread=True)
        names = {p.metadata.name for p in backends}
        ev.add(_("backends: {pods}").format(pods=", ".join(f"{p.metadata.name}@{p.spec.node_name}" for p in backends)))
        svc = lab.core.create_namespaced_service(ns, {"metadata": {"name": "web"}, "spec": {
            "type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        port, cluster_ip = svc.spec.ports[0].node_port, svc.spec.cluster_ip
        ev.add(_("Service web: NodePort {port}, ClusterIP {cluster_ip}").format(port=port, cluster_ip=cluster_ip))
        sync = proxy_sync_period(proxy_config(lab, lab.nodes[0]))
        ips = node_ips(lab)

        def from_outside(node: str) -> Counter | None:
            got = Counter(ECHO_ANSWER.findall(" ".join(ask(f"http://{ips[node]}:{port}/") for _i in range(REQUESTS))))
            return got if sum(got.values()) == REQUESTS else None

        for node in lab.nodes:
            got = wait_for(lambda n=node: from_outside(n), sync,
                           _("{count} answers from http://{ip}:{port}/ ({node}) on this host").format(
                               count=REQUESTS, ip=ips[node], port=port, node=node))
            strangers = sorted({pod for pod, _where in got} - names)
            ev.expect(not strangers,
                      _("this host -> {node} http://{ip}:{port}/ x{requests}: answered by {answers}").format(
                          node=node, ip=ips[node], port=port, requests=REQUESTS,
                          answers=", ".join(f"{pod}@{where} x{n}" for (pod, where), n in got.most_common())),
                      _("this host -> {node}:{port}: answers from pods that are not the Service's backends: "
                        "{strangers}").format(node=node, port=port, strangers=strangers))
        run_pod(lab, ns, pod_manifest("client", test_image()))
        out = pod_exec(lab, ns, "client", ["echo-server", "get", f"http://{cluster_ip}/", "2"])
        inside = ECHO_ANSWER.findall(out)
        ev.expect(bool(inside) and inside[0][0] in names,
                  _("pod client -> ClusterIP {cluster_ip}: answered by {pod}").format(
                      cluster_ip=cluster_ip, pod=inside[0][0] if inside else ""),
                  _("pod client -> ClusterIP {cluster_ip}: {answer!r}").format(
                      cluster_ip=cluster_ip, answer=out.strip()[:200]))
