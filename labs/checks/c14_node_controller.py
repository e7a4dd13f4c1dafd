from labs.episodes import EPISODES, NodeLoss
from labs.i18n import _
from labs.kube import node_ready
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

UNREACHABLE = "node.kubernetes.io/unreachable"
# Beyond the grace period, the time the node may take to be marked (its last lease renewal, the controller's poll).
MARK_MARGIN = 20


@check(
    "C14", _("The node controller notices a node that stops reporting"),
    claim=_("The node controller watches node health and reacts when a node stops reporting."),
    texts=["001", "004"],
    see=["kubectl get node w2 -w   # in another terminal: Ready -> Unknown after the grace period",
         "lab ssh w2 -- systemctl stop kubelet",
         "kubectl -n kube-node-lease get lease w2 -o jsonpath='{.spec.renewTime}'; echo   # no longer moves",
         "kubectl wait --for=condition=Ready=Unknown node/w2 --timeout=120s; kubectl describe node w2 | grep -A2 "
         "Taints   # node.kubernetes.io/unreachable",
         "kubectl get node w2 -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].message}'; echo",
         "lab ssh w2 -- systemctl start kubelet; kubectl wait --for=condition=Ready node/w2 --timeout=120s"],
    does=_("Stops the kubelet on a worker, waits at most the controller manager's --node-monitor-grace-period (plus "
           "the lease renewal margin) for Ready to turn Unknown/False and the unreachable taint to appear, then "
           "starts the kubelet and waits for Ready. In a run that holds C29 too (`lab check --all`), C29 loses the "
           "worker first and C14 reads what C29 saw of that loss (the same observations, made once: a node loss "
           "takes the whole grace period); C14 alone, or after a C29 that did not see all of it, loses the worker "
           "itself."),
    hints=[
        _("*w2 is Ready* marked NOT: the node was already not Ready before the check; fix that first (`kubectl "
          "describe node w2`, `lab ssh w2 -- systemctl status kubelet`)."),
        _("*timed out after 60s waiting for w2 to be marked not Ready*: the kubelet kept reporting — the stop did not "
          "end it (`lab ssh w2 -- pgrep -a kubelet`) — or the node controller is not running (kube-controller-manager "
          "stopped, or not leader anywhere)."),
        _("*timed out after 30s waiting for the unreachable taint*: the node lifecycle controller marks the condition "
          "but does not taint — a controller-manager flag or feature gate changed."),
        _("*timed out after 90s waiting for w2 Ready again*: the kubelet does not come back (`lab ssh w2 -- journalctl "
          "-u kubelet`), e.g. its client certificate or kubeconfig is unusable."),
    ],
    disruptive=True,
    reads="C29",
)
def run(lab: Lab, ev: Evidence) -> None:
    loss = EPISODES.node_loss
    if loss and seen_all(loss):
        return from_record(loss, ev)
    worker = lab.workload_nodes[-1]
    grace = lab.node_monitor_grace()
    ev.add(_("kube-controller-manager --node-monitor-grace-period: {grace:.0f}s").format(grace=grace))
    ev.expect(node_ready(lab, worker) == "True", _("{worker} is Ready").format(worker=worker))
    lab.stop_units([worker], ["kubelet"], ev)
    status = wait_for(lambda: (s := node_ready(lab, worker)) != "True" and s, grace + MARK_MARGIN,
                      _("{worker} to be marked not Ready").format(worker=worker), 1)
    ev.expect(status in ("Unknown", "False"),
              _("{worker} Ready={status} within the grace period").format(worker=worker, status=status))
    taints = wait_for(lambda: [t.key for t in lab.core.read_node(worker).spec.taints or [] if t.key == UNREACHABLE],
                      30, _("the unreachable taint"), 1)
    ev.expect(bool(taints), _("{worker} tainted {taint}").format(worker=worker, taint=UNREACHABLE))
    lab.start_units([worker], ["kubelet"], ev)
    wait_for(lambda: node_ready(lab, worker) == "True", 90, _("{worker} Ready again").format(worker=worker), 1)
    ev.expect(True, _("kubelet started: {worker} Ready again").format(worker=worker))


def seen_all(loss: NodeLoss) -> bool:
    """Another check's node loss shows all this claim is about: the node not Ready within the grace period (the
    same bound as below), tainted unreachable, Ready again once its kubelet started. Anything less, and C14 loses a
    node itself: only its own observations can fail it."""
    return (loss.status in ("Unknown", "False") and loss.not_ready_after is not None
            and loss.not_ready_after <= loss.grace + MARK_MARGIN and UNREACHABLE in loss.taints and loss.ready_again)


def from_record(loss: NodeLoss, ev: Evidence) -> None:
    ev.add(_("seen during {check}'s node loss in this run, {seconds:.0f} s ago (C14 alone loses a node itself)").format(
        check=loss.by, seconds=loss.age()))
    ev.add(_("kube-controller-manager --node-monitor-grace-period: {grace:.0f}s").format(grace=loss.grace))
    ev.add(_("{check} stopped kubelet on {worker}").format(check=loss.by, worker=loss.worker))
    # seen_all held: each expectation below is the record's, checked once more where it is shown
    ev.expect(loss.status in ("Unknown", "False"),
              _("{worker} Ready={status} {seconds:.0f} s after the stop, within the grace period").format(
                  worker=loss.worker, status=loss.status, seconds=loss.not_ready_after))
    ev.expect(UNREACHABLE in loss.taints, _("{worker} tainted {taint}").format(worker=loss.worker, taint=UNREACHABLE))
    ev.expect(loss.ready_again, _("kubelet started: {worker} Ready again").format(worker=loss.worker))
