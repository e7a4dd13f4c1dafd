from labs.i18n import _, join
from labs.kube import crictl_container, event_source, pod_events, pod_manifest, test_image, wait_running
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for


@check(
    "C17", _("kubelet starts the pods the API server assigns to its node"),
    claim=_("kubelet learns through the API server that a pod was assigned to its node and starts it through the "
            "container runtime."),
    texts=["000", "004"],
    see=["kubectl run bound --image=@image@ --overrides='{\"spec\":{\"nodeName\":\"w1\"}}'; kubectl wait "
         "--for=condition=Ready pod/bound --timeout=90s",
         "kubectl get events --field-selector involvedObject.name=bound   # no Scheduled event; the kubelet's events",
         "lab ssh w1 -- crictl ps --label io.kubernetes.pod.name=bound",
         "lab ssh w2 -- crictl ps --label io.kubernetes.pod.name=bound   # an empty list",
         "kubectl delete pod bound"],
    does=_("Creates, for every worker, a pod with spec.nodeName already set to it (the scheduler is not involved: no "
           "Scheduled event). Each pod runs; its events come from that worker's kubelet; its container is in that "
           "worker's containerd (crictl, same id as the pod status) and in no other node's."),
    hints=[
        _("*timed out … waiting for pod lab-c17-…/bound-1 to run*: the kubelet of that pod's worker is stopped or its "
          "node NotReady."),
        _("*bound-0: a Scheduled event exists: the scheduler took part*: the pod went through a scheduler after all "
          "(an admission webhook cleared `nodeName`)."),
        _("*bound-0: no Started event from w1's kubelet*: the container was started, but the event is missing or "
          "reported by someone else (events can be lost when an API server restarts): re-run."),
        _("*w1: crictl shows '', bound-0's status says …*: the runtime on the pod's own node does not list the "
          "container the pod status names."),
        _("*w2: bound-0's container … too*: the container is also on another machine — two machines registered the "
          "same node name."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C17") as ns:
        names = {target: f"bound-{i}" for i, target in enumerate(lab.workload_nodes)}
        for target, name in names.items():
            lab.core.create_namespaced_pod(ns, pod_manifest(name, test_image(), nodeName=target))
        for target, name in names.items():
            pod = wait_running(lab, ns, name)
            ev.expect(pod.spec.node_name == target,
                      _("{name}, bound straight to {target}, runs (host IP {host_ip})").format(
                          name=name, target=target, host_ip=pod.status.host_ip),
                      _("{name} runs on {node}, not {target}").format(
                          name=name, node=pod.spec.node_name, target=target))
            # Events are written asynchronously: wait (bounded) for the kubelet's Started event.
            def started(n=name):
                events = pod_events(lab, ns, n)
                return events if any(e.reason == "Started" for e in events) else None

            events = wait_for(started, 30, _("{name}'s Started event").format(name=name))
            ev.add(_("{name}'s events: {events}").format(name=name, events=join("; ", (
                _("{reason} by {component} on {host}").format(reason=e.reason, component=event_source(e)[0],
                                                              host=event_source(e)[1]) for e in events))))
            ev.expect(not any(e.reason == "Scheduled" for e in events),
                      _("{name}: no Scheduled event: no scheduler involved").format(name=name),
                      _("{name}: a Scheduled event exists: the scheduler took part").format(name=name))
            ev.expect(any(e.reason == "Started" and event_source(e)[1] == target for e in events),
                      _("{name}: Started by the kubelet of {target}").format(name=name, target=target),
                      _("{name}: no Started event from {target}'s kubelet").format(name=name, target=target))
            status_id = pod.status.container_statuses[0].container_id.split("://")[-1]
            for node in lab.nodes:
                found = crictl_container(lab, node, ns, name)
                if node == target:
                    ev.expect(bool(found) and status_id.startswith(found),
                              _("{node}: crictl lists {name}'s container {found}").format(
                                  node=node, name=name, found=found),
                              _("{node}: crictl shows {found!r}, {name}'s status says {status_id}").format(
                                  node=node, found=found, name=name, status_id=status_id))
                else:
                    ev.expect(not found,
                              _("{node}: no container of {name}").format(node=node, name=name),
                              _("{node}: {name}'s container {found} too").format(node=node, name=name, found=found))
