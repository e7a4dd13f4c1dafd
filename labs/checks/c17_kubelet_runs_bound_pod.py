from labs.core import (
    Evidence,
    Lab,
    check,
    crictl_container,
    event_source,
    pod_events,
    pod_manifest,
    run_pod,
    test_image,
)


@check(
    "C17", "kubelet starts the pods the API server assigns to its node",
    claim="kubelet learns through the API server that a pod was assigned to its node and starts it through the "
          "container runtime.",
    texts=["000", "004"],
    see=["kubectl run bound --image=localhost/k8s-arch-lab/echo:1.1.0 --overrides='{\"spec\":{\"nodeName\":\"w1\"}}'",
         "kubectl get events --field-selector involvedObject.name=bound   # no Scheduled event; kubelet's events",
         "ssh w1 crictl ps --name main --label io.kubernetes.pod.name=bound",
         "ssh w2 crictl ps --name main --label io.kubernetes.pod.name=bound   # nothing"],
    does="Creates a pod with spec.nodeName already set to a worker (the scheduler is not involved: no Scheduled "
         "event). The pod runs; its events come from that worker's kubelet; its container is in that worker's "
         "containerd (crictl, same id as the pod status) and in no other node's.",
)
def run(lab: Lab, ev: Evidence) -> None:
    target = lab.workers[0]
    with lab.namespace("C17") as ns:
        pod = run_pod(lab, ns, pod_manifest("bound", test_image(), nodeName=target))
        ev.expect(pod.spec.node_name == target, f"pod bound straight to {target} runs (host IP {pod.status.host_ip})")
        events = pod_events(lab, ns, "bound")
        reasons = [f"{e.reason} by {' on '.join(event_source(e))}" for e in events]
        ev.add(f"its events: {'; '.join(reasons)}")
        ev.expect(not any(e.reason == "Scheduled" for e in events), "no Scheduled event: no scheduler involved",
                  "a Scheduled event exists: the scheduler took part")
        ev.expect(any(e.reason == "Started" and event_source(e)[1] == target for e in events),
                  f"Started by the kubelet of {target}", f"no Started event from {target}'s kubelet")
        status_id = pod.status.container_statuses[0].container_id.split("://")[-1]
        for node in lab.nodes:
            found = crictl_container(lab, node, ns, "bound")
            if node == target:
                ev.expect(bool(found) and status_id.startswith(found), f"{node}: crictl lists container {found} "
                          f"(pod status: {pod.status.container_statuses[0].container_id[:25]}…)",
                          f"{node}: crictl shows {found!r}, pod status says {status_id}")
            else:
                ev.expect(not found, f"{node}: no such container", f"{node}: container {found} found too")
