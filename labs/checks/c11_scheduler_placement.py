from labs.i18n import _
from labs.kube import (
    cordon,
    pod_manifest,
    refusal_evidence,
    run_deployment,
    scheduler_refuses,
    test_image,
    wait_ready_pods,
)
from labs.lab import Lab
from labs.registry import CheckSkipped, Evidence, check
from labs.restore import RESTORER
from labs.timing import wait_for


def cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


TAINT = {"key": "k8s-arch-lab/c11", "value": "closed", "effect": "NoSchedule"}


def taint(lab: Lab, node: str, on: bool) -> None:
    taints = [t.to_dict() for t in lab.core.read_node(node).spec.taints or [] if t.key != TAINT["key"]]
    lab.core.patch_node(node, {"spec": {"taints": taints + ([TAINT] if on else [])}})


def failed_scheduling(lab: Lab, ns: str, pod: str) -> str:
    events = lab.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod},reason=FailedScheduling")
    return events.items[0].message if events.items else ""


@check(
    "C11", _("The scheduler places pods by requests, constraints and policies"),
    claim=_("The scheduler chooses nodes by resource requests, constraints and policies, and places new replicas as "
            "demand changes."),
    texts=["001", "004"],
    see=["kubectl describe node w1 | grep -A6 Allocatable",
         "kubectl create deployment big --image=@image@; kubectl set resources deployment big --requests=cpu=64",
         "sleep 5; kubectl get events --field-selector reason=FailedScheduling   # Insufficient cpu",
         "kubectl create deployment web --image=@image@; kubectl rollout status deployment web --timeout=90s",
         "kubectl cordon w1; kubectl scale deployment web --replicas=3; kubectl rollout status deployment web "
         "--timeout=90s",
         "kubectl get pods -l app=web -o wide   # no new one on w1",
         "kubectl uncordon w1; kubectl taint node w2 k8s-arch-lab/c11=closed:NoSchedule",
         "kubectl scale deployment web --replicas=5; kubectl rollout status deployment web --timeout=90s; kubectl "
         "get pods -l app=web -o wide   # no new one on w2",
         "kubectl taint node w2 k8s-arch-lab/c11-; kubectl delete deployment big web"],
    does=_("Asks for a pod with more CPU than any node can allocate (Pending, FailedScheduling: Insufficient cpu); "
           "pins a pod to the last worker with a node selector (placed there). Runs a one-replica Deployment; cordons "
           "the first worker, waits until the scheduler refuses a probe pod that only that worker may take (it has "
           "seen the cordon) and scales up: every new replica is bound by default-scheduler elsewhere; uncordons it. "
           "Then taints the last worker NoSchedule, waits the same way and scales up again: no new replica lands "
           "there; removes the taint. (Needs two workers for the cordon and taint legs; disruptive because cordons "
           "and taints change where every other pod may go.)"),
    hints=[
        _("*pod asking N CPUs: node …*: a node can allocate that much (the check computes N from the nodes, so this "
          "means a node's allocatable changed during the check), or a scheduler placed it without comparing requests "
          "with free resources."),
        _("*timed out … waiting for FailedScheduling for the big pod*: kube-scheduler is stopped — or it bound the "
          "pod to a node, so it never refused it: its configuration disables the `NodeResourcesFit` filter."),
        _("*nodeSelector w2: placed on …*: a scheduler that ignores node selectors."),
        _("*new replica …: on w1 (cordoned node: w1), Scheduled by {'default-scheduler'}*: the scheduler placed a pod "
          "on a cordoned node: its configuration disables the `NodeUnschedulable` filter. *on w2 (tainted node: w2)*: "
          "the same for taints (`TaintToleration`). *on cp1*: the control-plane taint is gone (`kubectl describe node "
          "cp1 | grep Taints`)."),
        _("*timed out … waiting for web-…'s Scheduled event*: the replica has a node but no Scheduled event — "
          "something else set `nodeName`, or the event was lost (an API server restarted): re-run. A set other than "
          "`{'default-scheduler'}` after *Scheduled by*: another scheduler bound it."),
        _("*timed out … ready pods*: kube-controller-manager is stopped (no replicas are created), or the open worker "
          "cannot run them."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    if len(lab.workers) < 2:
        raise CheckSkipped(_("needs two workers: one cordoned or tainted, one open (settings.yml: the profile's "
                             "number of workers)"))
    nodes = lab.core.list_node().items
    most = max(cores(n.status.allocatable["cpu"]) for n in nodes)
    closed = sorted(n.metadata.name for n in nodes if n.spec.unschedulable or any(
        t.effect in ("NoSchedule", "NoExecute") for t in n.spec.taints or []))
    ev.add(_("largest allocatable CPU: {most:g} cores; tainted NoSchedule or cordoned: {closed}").format(
        most=most, closed=", ".join(closed) or _("none")))
    with lab.namespace("C11") as ns:
        big = int(most) + 1
        lab.core.create_namespaced_pod(ns, pod_manifest("big", test_image(),
                                                         container={"resources": {"requests": {"cpu": str(big)}}}))
        msg = wait_for(lambda: failed_scheduling(lab, ns, "big"), 60, _("FailedScheduling for the big pod"))
        node = lab.core.read_namespaced_pod("big", ns).spec.node_name
        ev.expect("Insufficient cpu" in msg and not node,
                  _("pod asking {big} CPUs: Pending, FailedScheduling: {msg}").format(big=big, msg=msg),
                  _("pod asking {big} CPUs: node {node}, event {msg!r}").format(big=big, node=node, msg=msg))

        target = lab.workers[-1]
        lab.core.create_namespaced_pod(ns, pod_manifest("pinned", test_image(),
                                                         nodeSelector={"kubernetes.io/hostname": target}))
        node = wait_for(lambda: lab.core.read_namespaced_pod("pinned", ns).spec.node_name, 60,
                        _("the pinned pod's node"))
        ev.expect(node == target,
                  _("nodeSelector kubernetes.io/hostname={target}: placed on {node}").format(target=target, node=node),
                  _("nodeSelector {target}: placed on {node}").format(target=target, node=node))

        known = {p.metadata.name for p in run_deployment(lab, ns, "web", 1)}
        replicas = 1
        for node, close, what in ((lab.workers[0], cordon, _("cordoned")), (lab.workers[-1], taint, _("tainted"))):
            RESTORER.push(_("open {node} again").format(node=node), lambda n=node, c=close: c(lab, n, False))
            close(lab, node, True)
            refusal = scheduler_refuses(lab, ns, node)  # the scheduler has seen it (or never refuses: see below)
            ev.add(refusal_evidence(node, what, refusal))
            replicas += 2
            lab.apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": replicas}})
            pods = wait_ready_pods(lab, ns, "web", replicas)
            placed = {p.metadata.name: p.spec.node_name for p in pods}
            new = sorted(set(placed) - known)
            ev.add(_("{node} {what}; scaled web to {replicas}: new {pods}").format(
                node=node, what=what, replicas=replicas, pods=", ".join(f"{p}@{placed[p]}" for p in new)))
            for name in new:
                events = wait_for(lambda n=name: lab.core.list_namespaced_event(
                    ns, field_selector=f"involvedObject.name={n},reason=Scheduled").items, 30,
                    _("{name}'s Scheduled event").format(name=name))
                by = sorted({e.reporting_component or (e.source and e.source.component) or "?" for e in events})
                ev.expect(by == ["default-scheduler"] and placed[name] != node and placed[name] not in closed,
                          _("new replica {name}: bound to {placed} by {by}, not to the {what} {node}").format(
                              name=name, placed=placed[name], by=", ".join(by), what=what, node=node),
                          _("new replica {name}: on {placed} ({what} node: {node}), Scheduled by {by}").format(
                              name=name, placed=placed[name], what=what, node=node, by=", ".join(by)))
            close(lab, node, False)
            RESTORER.discard(_("open {node} again").format(node=node))
            known = set(placed)
