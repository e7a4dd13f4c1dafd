from collections import Counter

from labs.i18n import _
from labs.kube import (
    ECHO_ANSWER,
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

REQUESTS = 12  # per client: with 4 backends, the chance that all land on one is 4 * (1/4)^12


def answers(text: str) -> Counter:
    return Counter(f"{pod}@{node}" for pod, node in ECHO_ANSWER.findall(text))


@check(
    "C24", _("A Service is one stable address, reachable from every node and pod, spread over its endpoints"),
    claim=_("Services make pods reachable at one stable address, from any node and any pod, spread over the "
            "endpoints."),
    texts=["001", "004"],
    see=["kubectl create deployment web --image=@image@ --replicas=4 --port=8080; kubectl rollout status deployment "
         "web --timeout=90s",
         "kubectl expose deployment web --port=80 --target-port=8080; kubectl get endpointslices -l "
         "kubernetes.io/service-name=web",
         "ip=$(kubectl get service web -o jsonpath='{.spec.clusterIP}'); sleep 3; lab ssh cp1 -- \"for i in \\$(seq "
         "10); do curl -sS http://$ip/; done\"",
         "kubectl run client --image=@image@; kubectl wait --for=condition=Ready pod/client --timeout=90s",
         "kubectl exec client -- echo-server get http://$ip/",
         "kubectl delete pod client; kubectl delete service web; kubectl delete deployment web"],
    does=_("Runs a Deployment of the echo server spread over the workers and a Service in front of it; sends "
           "{requests} requests to the ClusterIP from every node (curl) and from a pod on a worker (exec of the "
           "image's HTTP client, `echo-server get`): every client gets its answers, and they come from more than one "
           "backend pod, including pods on other nodes.").format(requests=REQUESTS),
    hints=[
        _("*timed out … 12 answers from … on cp1*: that machine lacks the Service's rules (C23: kube-proxy) or cannot "
          "reach the backends' node (C26: pod network)."),
        _("*pod client@w1: … 0 of them on other nodes* or fewer than 12 answers: traffic between pods on different "
          "workers is broken (routes to the other pod ranges, `pod-network.service`)."),
        _("*only [...] answered*: the Service has a single ready endpoint (`kubectl get endpointslices`)."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C24") as ns:
        backends = run_deployment(lab, ns, "web", 2 * len(lab.workload_nodes), spread=True)
        ev.add(_("backends: {pods}").format(
            pods=", ".join(f"{p.metadata.name}@{p.spec.node_name} ({p.status.pod_ip})" for p in backends)))
        ip = lab.core.create_namespaced_service(ns, {"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}).spec.cluster_ip
        sync = proxy_sync_period(proxy_config(lab, lab.nodes[0]))
        loop = f"for i in $(seq {REQUESTS}); do curl -s --max-time 2 http://{ip}/; done"

        def from_node(node: str) -> Counter | None:
            got = answers(lab.sh(node, loop, check=False))
            return got if sum(got.values()) == REQUESTS else None

        seen: Counter = Counter()
        for node in lab.nodes:
            got = wait_for(lambda n=node: from_node(n), sync,
                           _("{count} answers from {ip} on {node}").format(count=REQUESTS, ip=ip, node=node))
            seen += got
            ev.expect(True, _("{node}: curl http://{ip}/ x{requests}: answered by {count} pods: {answers}").format(
                node=node, ip=ip, requests=REQUESTS, count=len(got),
                answers=", ".join(f"{k} x{v}" for k, v in got.most_common())))
        client = run_pod(lab, ns, pod_manifest("client", test_image(), nodeName=lab.workload_nodes[0]))
        out = pod_exec(lab, ns, "client", ["sh", "-c", f"i=0; while [ $i -lt {REQUESTS} ]; do i=$((i+1)); "
                                                        f"echo-server get http://{ip}/ 2; done"])
        got = answers(out)
        seen += got
        others = [k for k in got if not k.endswith(f"@{client.spec.node_name}")]
        # One node that takes workloads (the single profile): every backend is the client's neighbour.
        alone = len(lab.workload_nodes) == 1
        ev.expect(sum(got.values()) == REQUESTS and (bool(others) or alone),
                  (_("pod client@{node}: get x{requests}: answered by {count} pods, all on its own node (the only one "
                     "that takes workloads): {answers}") if alone else
                   _("pod client@{node}: get x{requests}: answered by {count} pods, {others} of them on other nodes: "
                     "{answers}")).format(node=client.spec.node_name, requests=REQUESTS, count=len(got),
                                          others=len(others),
                                          answers=", ".join(f"{k} x{v}" for k, v in got.most_common())),
                  _("pod client@{node}: {count} answers, from {answers}").format(
                      node=client.spec.node_name, count=sum(got.values()), answers=dict(got)))
        ev.expect(len(seen) > 1,
                  _("over all clients: {count} different backend pods answered").format(count=len(seen)),
                  _("only {pods} answered").format(pods=list(seen)))
