import time

from kubernetes import client

from labs.i18n import _
from labs.kube import proxy_config, proxy_sync_period
from labs.lab import Lab
from labs.nodefacts import rules_mentioning
from labs.registry import Evidence, check
from labs.timing import scaled, wait_for


def rules(lab: Lab, node: str, ip: str) -> list[str]:
    # A Service without endpoints is a REJECT rule in the filter table, not a DNAT in nat: read every table.
    return rules_mentioning(lab.sh(node, "iptables-save 2>/dev/null; nft list ruleset 2>/dev/null; true",
                                   check=False), ip)


@check(
    "C25", _("Without kube-proxy a node does not learn new Services"),
    claim=_("Without kube-proxy a node does not learn new Services."),
    texts=["000", "004"],
    see=["lab ssh w2 -- systemctl stop kube-proxy",
         "kubectl create service clusterip late --tcp=80:8080; ip=$(kubectl get service late -o "
         "jsonpath='{.spec.clusterIP}')",
         "sleep 5; lab ssh w2 -- \"iptables-save | grep $ip\"   # nothing: no one writes w2's rules",
         "lab ssh w2 -- systemctl start kube-proxy; sleep 10; lab ssh w2 -- \"iptables-save | grep $ip\"",
         "kubectl delete service late"],
    does=_("Stops kube-proxy on a worker, creates a Service, sees its ClusterIP in the rules of another node, then "
           "watches the stopped worker's rules for a whole kube-proxy sync period (its config's syncPeriod): no rule "
           "for the Service appears; starts kube-proxy and sees the rules appear."),
    hints=[
        _("*w2 has rules for … without kube-proxy: […]*: kube-proxy did not stop (the unit's stop left the process "
          "running: `lab ssh w2 -- pgrep -a kube-proxy`), or another proxy writes Service rules on w2. The first two "
          "matching rules are shown."),
        _("*timed out after 30s waiting for rules for … on w1*: kube-proxy on w1 is down or cannot reach the API "
          "server, or the rules are somewhere the check does not read (`nft` missing on the node, iptables in legacy "
          "mode with no endpoints: the REJECT rule lives in the legacy filter table)."),
        _("*timed out after 60s waiting for rules for … on w2*: kube-proxy did not come back on w2 (`lab ssh w2 -- "
          "systemctl status kube-proxy`, `journalctl -u kube-proxy`)."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    worker = lab.workload_nodes[-1]
    # Another node's kube-proxy shows the Service is programmed where kube-proxy runs; a one-machine cluster has none
    # (its own rules appearing once kube-proxy starts again show it instead).
    other = next((n for n in lab.workload_nodes + lab.control_plane if n != worker), None)
    period = proxy_sync_period(proxy_config(lab, worker))
    with lab.namespace("C25", pods=False) as ns:
        lab.stop_units([worker], ["kube-proxy"], ev)
        svc = lab.core.create_namespaced_service(ns, client.V1Service(
            metadata=client.V1ObjectMeta(name="late"),
            spec=client.V1ServiceSpec(selector={"app": "none"}, ports=[client.V1ServicePort(port=80)])))
        ip = svc.spec.cluster_ip
        if other:
            wait_for(lambda: rules(lab, other, ip), 30, _("rules for {ip} on {other}").format(ip=ip, other=other))
            ev.expect(True,
                      _("{other} (kube-proxy running) has rules for the new Service {ip}").format(other=other, ip=ip))
        else:
            ev.add(_("no other node to compare with: {worker} is the whole cluster").format(worker=worker))
        deadline, looks = time.monotonic() + scaled(period), 0
        while True:
            found = rules(lab, worker, ip)
            looks += 1
            if found:
                ev.expect(False, "", _("{worker} has rules for {ip} without kube-proxy: {found}").format(
                    worker=worker, ip=ip, found=found[:2]))
            if time.monotonic() >= deadline:
                break
            time.sleep(2)
        ev.expect(True,
                  _("{worker} (kube-proxy stopped): no rule for {ip} in {looks} looks over {period:g}s (kube-proxy's "
                    "syncPeriod)").format(worker=worker, ip=ip, looks=looks, period=period))
        lab.start_units([worker], ["kube-proxy"], ev)
        wait_for(lambda: rules(lab, worker, ip), 60, _("rules for {ip} on {worker}").format(ip=ip, worker=worker))
        ev.expect(True, _("kube-proxy started: {worker} has rules for {ip}").format(worker=worker, ip=ip))
