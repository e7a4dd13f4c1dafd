import ipaddress
import itertools

from labs.i18n import _
from labs.kube import echo_env, node_ips, pod_exec, pod_manifest, run_pod, test_image
from labs.lab import Lab
from labs.registry import CheckSkipped, Evidence, check


@check(
    "C26", _("Each node owns a pod range; pods reach each other across nodes directly"),
    claim=_("Pods reach each other across nodes directly, each node owning a pod address range."),
    texts=["001", "004"],
    see=["kubectl get nodes -o custom-columns=NAME:.metadata.name,PODCIDR:.spec.podCIDR",
         "kubectl get pods -A -o wide   # each pod IP inside its node's range",
         "kubectl run on-w1 --image=@image@ --overrides='{\"spec\":{\"nodeName\":\"w1\"}}'; kubectl run on-w2 "
         "--image=@image@ --overrides='{\"spec\":{\"nodeName\":\"w2\"}}'",
         "kubectl wait --for=condition=Ready pod/on-w1 pod/on-w2 --timeout=90s; ip=$(kubectl get pod on-w2 -o "
         "jsonpath='{.status.podIP}')",
         "lab ssh w1 -- ip route get $ip   # via w2's address",
         "kubectl exec on-w1 -- echo-server get http://$ip:8080/; kubectl logs on-w2   # the caller's own pod IP",
         "kubectl delete pod on-w1 on-w2"],
    does=_("Checks that every Node has its own spec.podCIDR, none overlapping, and that every pod-network pod's IP "
           "lies in its node's range. Runs one pod per worker; each one fetches the other's page by pod IP: the "
           "answer names the other pod and node, the server logs the caller's own pod IP (no address translation), "
           "and the node routes the other range via the other node."),
    hints=[
        _("*nodes without a pod range* / *overlapping ranges*: the kubelet role did not set `podCIDR`, or two nodes "
          "were given the same range."),
        _("*pods outside their node's range*: the CNI configuration on that node uses another subnet than its Node "
          "says (`@paths.cni_conf_dir@/`)."),
        _("*exec echo-server get … : …* (no answer): the route to the other range is missing (`ip route` on the "
          "worker, `systemctl status pod-network`) or forwarding is off (`sysctl net.ipv4.ip_forward`)."),
        _("*logged …, not the caller's pod IP*: traffic between pods is masqueraded (a too wide MASQUERADE rule)."),
        _("*does not route … via …*: the route goes elsewhere (a default route, an overlay): the check's picture of "
          "direct routing does not hold."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    if len(lab.workers) < 2:
        raise CheckSkipped(_("needs two workers to cross nodes (settings.yml: the profile's number of workers)"))
    cidrs = {n.metadata.name: ipaddress.ip_network(n.spec.pod_cidr) for n in lab.core.list_node().items
             if n.spec.pod_cidr}
    ev.expect(set(cidrs) == set(lab.nodes),
              _("pod ranges: {ranges}").format(ranges=", ".join(f"{n} {c}" for n, c in sorted(cidrs.items()))),
              _("nodes without a pod range: {nodes}").format(nodes=sorted(set(lab.nodes) - set(cidrs))))
    overlaps = [(a, b) for a, b in itertools.combinations(cidrs, 2) if cidrs[a].overlaps(cidrs[b])]
    ev.expect(not overlaps, _("no two ranges overlap"), _("overlapping ranges: {overlaps}").format(overlaps=overlaps))

    first, second = lab.workers[:2]
    ips = node_ips(lab)
    with lab.namespace("C26") as ns:
        pods = {w: run_pod(lab, ns, pod_manifest(f"on-{w}", test_image(), nodeName=w, container={"env": echo_env()}))
                for w in (first, second)}
        everywhere = [p for p in lab.core.list_pod_for_all_namespaces().items
                      if p.status.pod_ip and not p.spec.host_network and p.spec.node_name in cidrs]
        outside = [f"{p.metadata.name}@{p.spec.node_name} {p.status.pod_ip}" for p in everywhere
                   if ipaddress.ip_address(p.status.pod_ip) not in cidrs[p.spec.node_name]]
        ev.expect(not outside,
                  _("all {count} pod-network pods have an IP in their node's range (here: {here})").format(
                      count=len(everywhere), here=", ".join(f"{w} {p.status.pod_ip}" for w, p in pods.items())),
                  _("pods outside their node's range: {outside}").format(outside=outside))
        for src, dst in ((first, second), (second, first)):
            target = pods[dst].status.pod_ip
            answer = pod_exec(lab, ns, f"on-{src}", ["echo-server", "get", f"http://{target}:8080/", "5"]).strip()
            ev.expect(f"pod=on-{dst} node={dst}" in answer,
                      _("on-{src} ({src}) -> http://{target}:8080/: {answer}").format(
                          src=src, target=target, answer=answer),
                      _("on-{src} -> {target}: {answer!r}").format(src=src, target=target, answer=answer))
            logged = lab.core.read_namespaced_pod_log(f"on-{dst}", ns).strip().splitlines()[-1]
            caller = pods[src].status.pod_ip
            ev.expect(f"from {caller}:" in logged,
                      _("on-{dst} logged the caller's pod IP: {logged}").format(dst=dst, logged=logged),
                      _("on-{dst} logged {logged!r}, not the caller's pod IP {caller}").format(
                          dst=dst, logged=logged, caller=caller))
            route = lab.sh(src, f"ip route get {target}").splitlines()[0].strip()
            ev.expect(f"via {ips[dst]} " in route,
                      _("{src}: ip route get {target} -> {route}").format(src=src, target=target, route=route),
                      _("{src} does not route {target} via {dst} ({ip}): {route}").format(
                          src=src, target=target, dst=dst, ip=ips[dst], route=route))
