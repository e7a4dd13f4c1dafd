from labs.core import CheckFailed, Evidence, Lab, check, pod_manifest, test_image, wait_for

TAINT = "node-role.kubernetes.io/control-plane"


@check(
    "C02", "A control-plane node can run workloads that tolerate its taint",
    claim="In small installations a control-plane node can also run workloads.",
    texts=["000"],
    see=["kubectl describe node cp1 | grep Taints",
         "kubectl run t --image=localhost/k8s-arch-lab/echo:1.1.0 --overrides='{\"spec\":{\"nodeSelector\":"
         "{\"kubernetes.io/hostname\":\"cp1\"},\"tolerations\":[{\"key\":\"node-role.kubernetes.io/control-plane\","
         "\"effect\":\"NoSchedule\"}]}}'"],
    does="Reads the control-plane taint, then asks for a pod on a control-plane node twice: with the toleration it "
         "runs there; without it, it stays Pending with a FailedScheduling event naming the taint.",
)
def run(lab: Lab, ev: Evidence) -> None:
    target = lab.control_plane[0]
    node = lab.core.read_node(target)
    taints = [f"{t.key}:{t.effect}" for t in node.spec.taints or []]
    ev.expect(f"{TAINT}:NoSchedule" in taints, f"{target} carries the taint {TAINT}:NoSchedule",
              f"{target} lacks the NoSchedule taint (taints: {taints})")
    selector = {"kubernetes.io/hostname": target}
    with lab.namespace("C02") as ns:
        tolerating = pod_manifest("tolerating", test_image(), nodeSelector=selector,
                                  tolerations=[{"key": TAINT, "effect": "NoSchedule", "operator": "Exists"}])
        plain = pod_manifest("plain", test_image(), nodeSelector=selector)
        lab.core.create_namespaced_pod(ns, tolerating)
        lab.core.create_namespaced_pod(ns, plain)
        wait_for(lambda: lab.core.read_namespaced_pod("tolerating", ns).status.phase == "Running", 90,
                 "the tolerating pod to run")
        ev.expect(True, f"the pod with the toleration runs on {target}")

        def refused():
            events = lab.core.list_namespaced_event(ns, field_selector="involvedObject.name=plain").items
            return [e.message for e in events if e.reason == "FailedScheduling"]

        messages = wait_for(refused, 60, "a FailedScheduling event for the pod without toleration")
        pod = lab.core.read_namespaced_pod("plain", ns)
        if pod.spec.node_name:
            raise CheckFailed(f"the pod without toleration was placed on {pod.spec.node_name}")
        ev.expect("untolerated taint" in messages[0], f"the pod without toleration stays Pending: {messages[0]}")
