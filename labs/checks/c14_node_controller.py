from labs.i18n import _
from labs.kube import node_ready
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

UNREACHABLE = "node.kubernetes.io/unreachable"


@check(
    "C14", _("The node controller notices a node that stops reporting"),
    claim=_("The node controller watches node health and reacts when a node stops reporting."),
    texts=["001", "004"],
    see=["ssh w2 systemctl stop kubelet", "kubectl get node w2 -w   # Ready -> Unknown after the grace period",
         "kubectl describe node w2 | grep Taints", "ssh w2 systemctl start kubelet"],
    does=_("Stops the kubelet on a worker, waits at most the controller manager's --node-monitor-grace-period (plus "
           "the lease renewal margin) for Ready to turn Unknown/False and the unreachable taint to appear, then "
           "starts the kubelet and waits for Ready."),
    hints=[
        _("*w2 is Ready* marked NOT: the node was already not Ready before the check; fix that first (`kubectl "
          "describe node w2`, `ssh w2 systemctl status kubelet`)."),
        _("*timed out after 60s waiting for w2 to be marked not Ready*: the kubelet kept reporting — the stop did not "
          "end it (`ssh w2 pgrep -a kubelet`) — or the node controller is not running (kube-controller-manager "
          "stopped, or not leader anywhere)."),
        _("*timed out after 30s waiting for the unreachable taint*: the node lifecycle controller marks the condition "
          "but does not taint — a controller-manager flag or feature gate changed."),
        _("*timed out after 90s waiting for w2 Ready again*: the kubelet does not come back (`ssh w2 journalctl -u "
          "kubelet`), e.g. its client certificate or kubeconfig is unusable."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    worker = lab.workers[-1]
    grace = lab.node_monitor_grace()
    ev.add(_("kube-controller-manager --node-monitor-grace-period: {grace:.0f}s").format(grace=grace))
    ev.expect(node_ready(lab, worker) == "True", _("{worker} is Ready").format(worker=worker))
    lab.stop_units([worker], ["kubelet"], ev)
    status = wait_for(lambda: (s := node_ready(lab, worker)) != "True" and s, grace + 20,
                      _("{worker} to be marked not Ready").format(worker=worker), 1)
    ev.expect(status in ("Unknown", "False"),
              _("{worker} Ready={status} within the grace period").format(worker=worker, status=status))
    taints = wait_for(lambda: [t.key for t in lab.core.read_node(worker).spec.taints or [] if t.key == UNREACHABLE],
                      30, _("the unreachable taint"), 1)
    ev.expect(bool(taints), _("{worker} tainted {taint}").format(worker=worker, taint=UNREACHABLE))
    lab.start_units([worker], ["kubelet"], ev)
    wait_for(lambda: node_ready(lab, worker) == "True", 90, _("{worker} Ready again").format(worker=worker), 1)
    ev.expect(True, _("kubelet started: {worker} Ready again").format(worker=worker))
