from labs.kube import node_ready
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

UNREACHABLE = "node.kubernetes.io/unreachable"


@check(
    "C14", "The node controller notices a node that stops reporting",
    claim="The node controller watches node health and reacts when a node stops reporting.",
    texts=["001", "004"],
    see=["ssh w2 systemctl stop kubelet", "kubectl get node w2 -w   # Ready -> Unknown after the grace period",
         "kubectl describe node w2 | grep Taints", "ssh w2 systemctl start kubelet"],
    does="Stops the kubelet on a worker, waits at most the controller manager's --node-monitor-grace-period (plus "
         "the lease renewal margin) for Ready to turn Unknown/False and the unreachable taint to appear, then starts "
         "the kubelet and waits for Ready.",
    hints=[
        "*w2 is Ready* marked NOT: the node was already not Ready before the check; fix that first (`kubectl describe "
         "node w2`, `ssh w2 systemctl status kubelet`).",
        "*timed out after 60s waiting for w2 to be marked not Ready*: the kubelet kept reporting — the stop did not "
         "end it (`ssh w2 pgrep -a kubelet`) — or the node controller is not running (kube-controller-manager "
         "stopped, or not leader anywhere).",
        "*timed out after 30s waiting for the unreachable taint*: the node lifecycle controller marks the condition "
         "but does not taint — a controller-manager flag or feature gate changed.",
        "*timed out after 90s waiting for w2 Ready again*: the kubelet does not come back (`ssh w2 journalctl -u "
         "kubelet`), e.g. its client certificate or kubeconfig is unusable.",
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    worker = lab.workers[-1]
    grace = lab.node_monitor_grace()
    ev.add(f"kube-controller-manager --node-monitor-grace-period: {grace:.0f}s")
    ev.expect(node_ready(lab, worker) == "True", f"{worker} is Ready")
    lab.stop_units([worker], ["kubelet"], ev)
    status = wait_for(lambda: (s := node_ready(lab, worker)) != "True" and s, grace + 20,
                      f"{worker} to be marked not Ready", 1)
    ev.expect(status in ("Unknown", "False"), f"{worker} Ready={status} within the grace period")
    taints = wait_for(lambda: [t.key for t in lab.core.read_node(worker).spec.taints or [] if t.key == UNREACHABLE],
                      30, "the unreachable taint", 1)
    ev.expect(bool(taints), f"{worker} tainted {UNREACHABLE}")
    lab.start_units([worker], ["kubelet"], ev)
    wait_for(lambda: node_ready(lab, worker) == "True", 90, f"{worker} Ready again", 1)
    ev.expect(True, f"kubelet started: {worker} Ready again")
