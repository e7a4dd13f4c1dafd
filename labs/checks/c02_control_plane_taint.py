from labs.i18n import _
from labs.kube import pod_manifest, test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

TAINT = "node-role.kubernetes.io/control-plane"


@check(
    "C02", _("A control-plane node can run workloads that tolerate its taint"),
    claim=_("In small installations a control-plane node can also run workloads."),
    texts=["000"],
    see=["kubectl describe node cp1 | grep -A1 Taints",
         "kubectl run tolerant --image=@image@ "
         "--overrides='{\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"cp1\"},\"tolerations\":[{\"key\":\"node-role.kubernetes.io/control-plane\",\"effect\":\"NoSchedule\"}]}}'",
         "kubectl run plain --image=@image@ "
         "--overrides='{\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"cp1\"}}}'",
         "kubectl wait --for=condition=Ready pod/tolerant --timeout=90s; kubectl get pods tolerant plain -o wide   # "
         "plain: Pending",
         "kubectl get events --field-selector involvedObject.name=plain   # FailedScheduling: the taint",
         "kubectl delete pod tolerant plain"],
    does=_("Reads the taints of every control-plane node (each must carry the control-plane NoSchedule taint), then "
           "asks for two pods on each control-plane node: with the toleration it runs there; without it, it stays "
           "Pending with a FailedScheduling event naming the taint. Where the control plane takes workloads too (the "
           "single profile: one machine is the whole cluster), the node must carry no such taint and an ordinary pod, "
           "without toleration, runs there."),
    hints=[
        _("*cp1 lacks the NoSchedule taint (taints: …)*: someone removed it (`kubectl taint node cp1 "
          "node-role.kubernetes.io/control-plane:NoSchedule-`); re-run the playbooks (`make provision`) or add it "
          "back with `kubectl taint node cp1 node-role.kubernetes.io/control-plane=:NoSchedule`."),
        _("*timed out … waiting for the tolerating pod on cp1 to run*: the kubelet or containerd on cp1 is not "
          "working, or the scheduler is stopped."),
        _("*the pod without toleration for cp1: placed on cp1, …*: the taint was removed (or its effect changed) "
          "while the check ran."),
        _("*timed out … waiting for a FailedScheduling event for the pod without toleration on cp1*: kube-scheduler "
          "is stopped (nobody tries, so nobody refuses), or events are not being recorded."),
        _('*the pod without toleration for cp1: placed on nothing, …* without "untolerated taint" in the message: cp1 '
          'was refused for another reason first, e.g. it is cordoned ("unschedulable"; `kubectl uncordon cp1`).'),
        _("*cp1 takes workloads, yet carries the taint …*: on a cluster whose control plane takes workloads (the "
          "single profile) someone tainted it; `make provision` takes the taint off again, as does `kubectl taint "
          "node cp1 node-role.kubernetes.io/control-plane:NoSchedule-`."),
        _("*timed out … waiting for the ordinary pod on cp1 to run*: cp1 refuses ordinary pods (a taint: `kubectl "
          "describe node cp1`; cordoned), or its kubelet or containerd is not working, or the scheduler is stopped."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    # Where the control plane takes workloads too (the single profile: one machine), the claim is seen directly: no
    # taint, and an ordinary pod lands there. Elsewhere the taint keeps ordinary pods off and a toleration lets one in.
    taking = [n for n in lab.control_plane if n in lab.workload_nodes]
    for target in lab.control_plane:
        taints = [f"{t.key}:{t.effect}" for t in lab.core.read_node(target).spec.taints or []]
        if target in taking:
            ev.expect(f"{TAINT}:NoSchedule" not in taints,
                      _("{node} carries no control-plane taint: it takes workloads (taints: {taints})").format(
                          node=target, taints=taints or _("none")),
                      _("{node} takes workloads, yet carries the taint {taint}:NoSchedule").format(
                          node=target, taint=TAINT))
        else:
            ev.expect(f"{TAINT}:NoSchedule" in taints,
                      _("{node} carries the taint {taint}:NoSchedule").format(node=target, taint=TAINT),
                      _("{node} lacks the NoSchedule taint (taints: {taints})").format(
                          node=target, taints=taints or _("none")))
    with lab.namespace("C02") as ns:
        for i, target in enumerate(lab.control_plane):
            selector = {"kubernetes.io/hostname": target}
            if target not in taking:
                lab.core.create_namespaced_pod(ns, pod_manifest(
                    f"tolerating-{i}", test_image(), nodeSelector=selector,
                    tolerations=[{"key": TAINT, "effect": "NoSchedule", "operator": "Exists"}]))
            lab.core.create_namespaced_pod(ns, pod_manifest(f"plain-{i}", test_image(), nodeSelector=selector))
        for i, target in enumerate(lab.control_plane):
            if target in taking:
                wait_for(lambda i=i: lab.core.read_namespaced_pod(f"plain-{i}", ns).status.phase == "Running", 90,
                         _("the ordinary pod on {node} to run").format(node=target))
                ev.expect(True, _("an ordinary pod, without toleration, runs on {node}").format(node=target))
                continue
            wait_for(lambda i=i: lab.core.read_namespaced_pod(f"tolerating-{i}", ns).status.phase == "Running", 90,
                     _("the tolerating pod on {node} to run").format(node=target))
            ev.expect(True, _("the pod with the toleration runs on {node}").format(node=target))

            def refused(i=i):
                events = lab.core.list_namespaced_event(ns, field_selector=f"involvedObject.name=plain-{i}").items
                return [e.message for e in events if e.reason == "FailedScheduling"]

            messages = wait_for(refused, 60,
                                _("a FailedScheduling event for the pod without toleration on {node}").format(
                                    node=target))
            placed = lab.core.read_namespaced_pod(f"plain-{i}", ns).spec.node_name
            ev.expect(not placed and "untolerated taint" in messages[0],
                      _("the pod without toleration stays Pending on {node}: {event}").format(
                          node=target, event=messages[0]),
                      _("the pod without toleration for {node}: placed on {placed}, {event}").format(
                          node=target, placed=placed or _("nothing"), event=messages[0]))
