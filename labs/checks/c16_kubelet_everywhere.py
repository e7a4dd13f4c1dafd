from labs.i18n import _
from labs.lab import Lab
from labs.registry import Evidence, check


@check(
    "C16", _("kubelet runs on every node, control plane included, and registers it"),
    claim=_("kubelet runs on every node, control plane included, and registers it."),
    texts=["000"],
    see=["kubectl get nodes",
         "lab ssh cp1 -- systemctl status kubelet",
         "kubectl get nodes -o custom-columns=NAME:.metadata.name,KUBELET:.status.nodeInfo.kubeletVersion; lab ssh "
         "w1 -- kubelet --version",
         "kubectl -n kube-node-lease get leases",
         "lab ssh cp1 -- 'journalctl -u kubelet | grep -i register | tail -3'"],
    does=_("For each inventory machine: kubelet.service active with a kubelet as its main process, a Node object of "
           "the same name whose kubelet version is that binary's, Ready, and a current heartbeat (its Lease renewed "
           "within leaseDurationSeconds, by the API server's clock)."),
    hints=[
        _("*w1: kubelet.service is inactive (main process none)*: the unit is stopped or crash-looping (`lab ssh w1 -- "
          "systemctl status kubelet`, `journalctl -u kubelet`); C14 stops it for a minute while it runs. *failed*, "
          "*activating* or *deactivating* instead: it is exiting or restarting."),
        _("*w1: kubelet.service is active (main process pid … /usr/bin/… (kubelet.service))*: the unit runs another "
          "program than the kubelet (a drop-in that replaces `ExecStart`: `systemctl cat kubelet`)."),
        _("*w1: no Node object*: the kubelet runs but never registered — it cannot reach the API server (`journalctl "
          "-u kubelet | grep -i -e register -e refused`), its certificate is refused, or its Node was deleted by hand "
          "(a kubelet restart registers it again)."),
        _("*w1: the Node reports kubelet v… but the node runs v…*: the binary was replaced and the kubelet not "
          "restarted since, or the Node belongs to another machine of the same name."),
        _("*w1: Ready=False, Lease renewed …s ago (leaseDurationSeconds 40)*: the node is not Ready (`kubectl "
          "describe node w1`), or its kubelet has stopped renewing its Lease (it cannot reach the API server). A "
          "Lease age far off on every node: this host's clock is off."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    registered = {n.metadata.name: n for n in lab.core.list_node().items}
    for name in lab.nodes:
        snap = lab.snapshot(name)
        unit = snap.units.get("kubelet")
        proc = snap.procs.get(unit.main_pid) if unit and unit.main_pid else None
        ev.expect(unit is not None and unit.state == "active" and proc is not None and proc.binary == "kubelet",
                  _("{name}: kubelet.service active, main process {proc}").format(name=name, proc=proc),
                  _("{name}: kubelet.service is {state} (main process {proc})").format(
                      name=name, state=unit.state if unit else _("missing"), proc=proc or _("none")))
        node = registered.get(name)
        ev.expect(node is not None,
                  _("{name}: Node object registered").format(name=name),
                  _("{name}: no Node object").format(name=name))
        running = lab.sh(name, f"/proc/{unit.main_pid}/exe --version").split()[-1]
        reported = node.status.node_info.kubelet_version
        ev.expect(reported == running,
                  _("{name}: the Node reports kubelet {reported}, the node runs {running}").format(
                      name=name, reported=reported, running=running),
                  _("{name}: the Node reports kubelet {reported} but the node runs {running}").format(
                      name=name, reported=reported, running=running))
        ready = next((c for c in node.status.conditions or [] if c.type == "Ready"), None)
        lease = lab.coordination.read_namespaced_lease(name, "kube-node-lease").spec
        age = (lab.server_now() - lease.renew_time).total_seconds()
        ev.expect(ready is not None and ready.status == "True" and age <= lease.lease_duration_seconds,
                  _("{name}: Ready; its Lease renewed {age:.0f}s ago (leaseDurationSeconds "
                    "{duration})").format(name=name, age=age, duration=lease.lease_duration_seconds),
                  _("{name}: Ready={ready}, Lease renewed {age:.0f}s ago (leaseDurationSeconds {duration})").format(
                      name=name, ready=ready.status if ready else _("unknown"), age=age,
                      duration=lease.lease_duration_seconds))
