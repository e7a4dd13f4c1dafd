import time

from labs.core import Evidence, Lab, check, event_source, pod_manifest, test_image, wait_for


@check(
    "C10", "kube-scheduler decides where a pod runs, and starts nothing itself",
    claim="kube-scheduler decides where a pod runs and records the decision through the API server; it starts "
          "nothing itself.",
    texts=["000", "001", "004"],
    see=["ssh cp1 systemctl stop kube-scheduler  # on every control-plane node", "kubectl run p --image=...  # Pending",
         "kubectl get events --field-selector reason=Scheduled", "ssh w1 crictl ps --name main"],
    does="Stops the scheduler on every control-plane node, creates a pod and sees it stay Pending without a node; "
         "starts the schedulers, sees the Scheduled event from default-scheduler and the container in the "
         "runtime of that node only.",
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    cps = lab.control_plane
    with lab.namespace("C10") as ns:
        lab.stop_units(cps, ["kube-scheduler"], ev)
        lab.core.create_namespaced_pod(ns, pod_manifest("waiting", test_image()))
        time.sleep(10)
        pod = lab.core.read_namespaced_pod("waiting", ns)
        ev.expect(pod.status.phase == "Pending" and not pod.spec.node_name,
                  "10 s after creation, with no scheduler, the pod is Pending with no node",
                  f"the pod got node {pod.spec.node_name!r} without a scheduler")
        lab.start_units(cps, ["kube-scheduler"], ev)
        node = wait_for(lambda: lab.core.read_namespaced_pod("waiting", ns).spec.node_name, 120, "a node for the pod")
        # Events are written asynchronously, shortly after the binding.
        events = wait_for(lambda: lab.core.list_namespaced_event(
            ns, field_selector="involvedObject.name=waiting,reason=Scheduled").items, 30, "the Scheduled event")
        source = event_source(events[0])[0]
        ev.expect(source == "default-scheduler", f"Scheduled event by {source}: {events[0].message}",
                  f"the Scheduled event comes from {source!r}, not default-scheduler")
        wait_for(lambda: lab.core.read_namespaced_pod("waiting", ns).status.phase == "Running", 90, "the pod to run")
        for name in lab.nodes:
            found = lab.sh(name, f"crictl ps -q --name main --label io.kubernetes.pod.namespace={ns}", check=False)
            ev.expect(bool(found) == (name == node), f"{name}: {'runs' if found else 'no'} container of the pod",
                      f"{name}: container presence wrong (runs={bool(found)}, scheduled on {node})")
