from labs.core import (
    Evidence,
    Lab,
    check,
    pod_manifest,
    run_deployment,
    test_image,
    wait_for,
    wait_ready_pods,
)


def cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def failed_scheduling(lab: Lab, ns: str, pod: str) -> str:
    events = lab.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod},reason=FailedScheduling")
    return events.items[0].message if events.items else ""


@check(
    "C11", "The scheduler places pods by requests, constraints and policies",
    claim="The scheduler chooses nodes by resource requests, constraints and policies, and places new replicas as "
          "demand changes.",
    texts=["001", "004"],
    see=["kubectl describe node w1 | grep -A6 Allocatable",
         "kubectl create deployment big --image=localhost/k8s-arch-lab/echo:1.1.0",
         "kubectl set resources deployment big --requests=cpu=64; kubectl get events | grep FailedScheduling",
         "kubectl describe node cp1 | grep Taints",
         "kubectl scale deployment web --replicas=4; kubectl get pods -o wide"],
    does="Asks for a pod with more CPU than any node can allocate (Pending, FailedScheduling: Insufficient cpu); "
         "pins a pod to the last worker with a node selector (placed there); scales a Deployment from 1 to twice the "
         "number of workers and sees every new replica bound by default-scheduler, none on a tainted or cordoned "
         "node.",
)
def run(lab: Lab, ev: Evidence) -> None:
    nodes = lab.core.list_node().items
    most = max(cores(n.status.allocatable["cpu"]) for n in nodes)
    closed = sorted(n.metadata.name for n in nodes if n.spec.unschedulable or any(
        t.effect in ("NoSchedule", "NoExecute") for t in n.spec.taints or []))
    ev.add(f"largest allocatable CPU: {most:g} cores; tainted NoSchedule or cordoned: {', '.join(closed) or 'none'}")
    with lab.namespace("C11") as ns:
        big = int(most) + 1
        lab.core.create_namespaced_pod(ns, pod_manifest("big", test_image(),
                                                         container={"resources": {"requests": {"cpu": str(big)}}}))
        msg = wait_for(lambda: failed_scheduling(lab, ns, "big"), 60, "FailedScheduling for the big pod")
        node = lab.core.read_namespaced_pod("big", ns).spec.node_name
        ev.expect("Insufficient cpu" in msg and not node, f"pod asking {big} CPUs: Pending, FailedScheduling: {msg}",
                  f"pod asking {big} CPUs: node {node}, event {msg!r}")

        target = lab.workers[-1]
        lab.core.create_namespaced_pod(ns, pod_manifest("pinned", test_image(),
                                                         nodeSelector={"kubernetes.io/hostname": target}))
        node = wait_for(lambda: lab.core.read_namespaced_pod("pinned", ns).spec.node_name, 60, "the pinned pod's node")
        ev.expect(node == target, f"nodeSelector kubernetes.io/hostname={target}: placed on {node}",
                  f"nodeSelector {target}: placed on {node}")

        first = {p.metadata.name for p in run_deployment(lab, ns, "web", 1)}
        replicas = 2 * len(lab.workers)
        lab.apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": replicas}})
        pods = wait_ready_pods(lab, ns, "web", replicas)
        placed = {p.metadata.name: p.spec.node_name for p in pods}
        ev.add(f"scaled web 1 -> {replicas}: " + ", ".join(f"{p}@{n}" for p, n in sorted(placed.items())))
        for name in sorted(set(placed) - first):
            events = wait_for(lambda n=name: lab.core.list_namespaced_event(
                ns, field_selector=f"involvedObject.name={n},reason=Scheduled").items, 30, f"{name}'s Scheduled event")
            by = {e.reporting_component or (e.source and e.source.component) for e in events}
            ev.expect(by == {"default-scheduler"} and placed[name] not in closed,
                      f"new replica {name}: bound to {placed[name]} by {', '.join(by)}",
                      f"new replica {name}: on {placed[name]}, Scheduled by {by or 'nobody'}")
