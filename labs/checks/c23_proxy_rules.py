from labs.i18n import _
from labs.kube import pod_manifest, proxy_config, proxy_rules, proxy_sync_period, test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for


@check(
    "C23", _("kube-proxy turns Services into network rules on every node"),
    claim=_("kube-proxy on every node turns Services into network rules of the node."),
    texts=["000", "001", "004"],
    see=["kubectl create service clusterip web --tcp=80:8080; ip=$(kubectl get service web -o "
         "jsonpath='{.spec.clusterIP}')",
         "sleep 3; lab ssh w1 -- \"iptables-save | grep $ip\"   # nftables mode: nft list table ip kube-proxy",
         "kubectl delete service web; sleep 3; lab ssh w1 -- \"iptables-save | grep $ip\"   # gone"],
    does=_("Reads kube-proxy's mode on every node, creates a Service (with a backend pod) and waits, at most "
           "kube-proxy's sync period, until rules naming its ClusterIP are in every node's iptables (or nftables); "
           "deletes the Service and waits, as long, until they are gone everywhere."),
    hints=[
        _("*timed out … rules for … on w1*: kube-proxy on that machine is stopped or cannot reach the API server "
          "(claim C25), or it runs in another mode than its configuration file says (`journalctl -u kube-proxy | grep "
          "-i proxier`)."),
        _("*timed out … the rules for … to leave w1*: kube-proxy stopped after writing them: stale rules stay until "
          "it runs again."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    configs = {node: proxy_config(lab, node) for node in lab.nodes}
    modes = {node: c.get("mode") or "iptables" for node, c in configs.items()}
    bound = max(proxy_sync_period(c) for c in configs.values())
    ev.add(_("kube-proxy mode: {modes}; sync period {bound:.0f}s").format(
        modes=", ".join(f"{n} {m}" for n, m in modes.items()), bound=bound))
    with lab.namespace("C23") as ns:
        lab.core.create_namespaced_pod(ns, pod_manifest("web", test_image()))
        svc = lab.core.create_namespaced_service(ns, {"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
        ip = svc.spec.cluster_ip
        ev.step(_("Service {ns}/web has ClusterIP {ip}").format(ns=ns, ip=ip))
        for node in lab.nodes:
            rules = wait_for(lambda n=node: proxy_rules(lab, n, ip, modes[n]), bound,
                             _("rules for {ip} on {node}").format(ip=ip, node=node))
            ev.expect(bool(rules),
                      _("{node}: {count} rules with {ip}, e.g. {rule}").format(
                          node=node, count=len(rules), ip=ip, rule=rules[0].strip()[:110]))
        lab.core.delete_namespaced_service("web", ns)
        ev.step(_("deleted Service {ns}/web").format(ns=ns))
        for node in lab.nodes:
            wait_for(lambda n=node: not proxy_rules(lab, n, ip, modes[n]), bound,
                     _("the rules for {ip} to leave {node}").format(ip=ip, node=node))
            ev.expect(True, _("{node}: no rule mentions {ip} any more").format(node=node, ip=ip))
