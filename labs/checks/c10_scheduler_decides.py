import time

import yaml

from labs.i18n import _
from labs.kube import crictl_container, event_source, pod_manifest, test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for


@check(
    "C10", _("kube-scheduler decides where a pod runs, and starts nothing itself"),
    claim=_("kube-scheduler decides where a pod runs and records the decision through the API server; it starts "
            "nothing itself."),
    texts=["000", "001", "004"],
    see=["for n in @nodes.control_plane@; do lab ssh $n -- systemctl stop kube-scheduler; done",
         "kubectl run waiting --image=@image@; sleep 10; kubectl get pod waiting -o wide   # Pending, NODE <none>",
         "for n in @nodes.control_plane@; do lab ssh $n -- systemctl start kube-scheduler; done",
         "kubectl wait --for=condition=Ready pod/waiting --timeout=120s",
         "kubectl get events --field-selector reason=Scheduled,involvedObject.name=waiting   # by default-scheduler",
         "lab ssh $(kubectl get pod waiting -o jsonpath='{.spec.nodeName}') -- crictl ps --label "
         "io.kubernetes.pod.name=waiting",
         "kubectl delete pod waiting"],
    does=_("Times how long the running scheduler takes to bind a pod. Stops the scheduler on every control-plane "
           "node, creates a pod and sees it stay Pending without a node for as long as a running scheduler could have "
           "taken (its podMaxBackoffSeconds, or three times the time just measured, whichever is longer); starts the "
           "schedulers, sees the Scheduled event from default-scheduler and the container in the runtime of that node "
           "only."),
    hints=[
        _("*timed out after 60s waiting for the scheduler to bind a pod*: the scheduler was already down before the "
          "check (`systemctl status kube-scheduler`), or none of them is leader."),
        _("*the pod got node 'w1' without a scheduler*: a scheduler still runs — the unit did not stop it (a drop-in "
          "with `KillMode=none`; `lab ssh cp1 -- pgrep -a kube-scheduler`), or a second scheduler outside the "
          "inventory's control plane is connected to the API."),
        _("*timed out after 120s waiting for a node for the pod*: the schedulers did not come back (`systemctl status "
          "kube-scheduler`, `journalctl -u kube-scheduler`), or none of them became leader."),
        _("*timed out … waiting for the Scheduled event*: the event was not recorded (or lost when an API server "
          "restarted); re-run. *the Scheduled event comes from '…', not default-scheduler*: another scheduler bound "
          "it."),
        _("*w1: container presence wrong (runs=False, scheduled on w1)*: the pod's container is not running on its "
          "own node at that moment (it exited or is being restarted: `kubectl describe pod`). With *runs=True* on "
          "another node, a container carrying the check's namespace label runs where the scheduler did not send it — "
          "something other than the kubelet started it."),
        _("*timed out … waiting for the pod to run*: the chosen node's kubelet or containerd is not working (C17, "
          "C22)."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    cps = lab.control_plane
    config = yaml.safe_load(lab.sh(cps[0], f"cat {lab.unit_arg(cps[0], 'kube-scheduler', 'config')}")) or {}
    backoff = float(config.get("podMaxBackoffSeconds", 10))
    with lab.namespace("C10") as ns:
        started = time.monotonic()
        lab.core.create_namespaced_pod(ns, pod_manifest("first", test_image()))
        wait_for(lambda: lab.core.read_namespaced_pod("first", ns).spec.node_name, 60, _("the scheduler to bind a pod"))
        took = time.monotonic() - started
        window = max(backoff, 3 * took)
        ev.add(_("with the scheduler running, a new pod was bound in {took:.1f} s; podMaxBackoffSeconds "
                 "{backoff:g}").format(took=took, backoff=backoff))
        lab.stop_units(cps, ["kube-scheduler"], ev)
        lab.core.create_namespaced_pod(ns, pod_manifest("waiting", test_image()))
        time.sleep(window)
        pod = lab.core.read_namespaced_pod("waiting", ns)
        ev.expect(pod.status.phase == "Pending" and not pod.spec.node_name,
                  _("{window:.0f} s after creation, with no scheduler, the pod is Pending with no node").format(
                      window=window),
                  _("the pod got node {node!r} without a scheduler").format(node=pod.spec.node_name))
        lab.start_units(cps, ["kube-scheduler"], ev)
        node = wait_for(lambda: lab.core.read_namespaced_pod("waiting", ns).spec.node_name, 120,
                        _("a node for the pod"))
        # Events are written asynchronously, shortly after the binding.
        events = wait_for(lambda: lab.core.list_namespaced_event(
            ns, field_selector="involvedObject.name=waiting,reason=Scheduled").items, 30, _("the Scheduled event"))
        source = event_source(events[0])[0]
        ev.expect(source == "default-scheduler",
                  _("Scheduled event by {source}: {message}").format(source=source, message=events[0].message),
                  _("the Scheduled event comes from {source!r}, not default-scheduler").format(source=source))
        wait_for(lambda: lab.core.read_namespaced_pod("waiting", ns).status.phase == "Running", 90, _("the pod to run"))
        for name in lab.nodes:
            found = crictl_container(lab, name, ns, "waiting")
            ev.expect(bool(found) == (name == node),
                      (_("{name}: runs container of the pod") if found
                       else _("{name}: no container of the pod")).format(name=name),
                      _("{name}: container presence wrong (runs={found}, scheduled on {node})").format(
                          name=name, found=bool(found), node=node))
