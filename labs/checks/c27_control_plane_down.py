import time

from labs.core import Evidence, Lab, check, pod_manifest, test_image, wait_for

UNITS = ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]


@check(
    "C27", "Without the control plane nothing can be managed, but workloads keep running",
    claim="Without the control plane the cluster cannot be managed, but pods on the workers keep running and the "
          "kubelets keep trying to reconnect; when it returns, everything resumes.",
    texts=["004"],
    see=["ssh cp1 systemctl stop kube-scheduler kube-controller-manager kube-apiserver etcd",
         "kubectl get nodes   # no answer", "curl http://<pod-ip>:8080/   # from a worker: answers",
         "ssh w1 journalctl -u kubelet --since -1min | grep -i refused"],
    does="Runs a pod, stops every control-plane unit on every control-plane node, sees the API not answer, the pod "
         "answer from a worker and the kubelet log failed attempts to reach the API; restores the units, waits "
         "for every node Ready and schedules a new pod.",
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C27") as ns:
        lab.core.create_namespaced_pod(ns, pod_manifest("survivor", test_image()))
        pod = wait_for(lambda: (p := lab.core.read_namespaced_pod("survivor", ns)).status.phase == "Running" and p,
                       90, "the pod to run")
        worker = next(w for w in lab.workers if w != pod.spec.node_name)
        since = lab.sh(worker, "date '+%Y-%m-%d %H:%M:%S'")
        lab.stop_units(lab.control_plane, UNITS, ev)
        error = lab.api_writes(ns, "nobody-home", timeout=5)
        ev.expect(error is not None, f"the API does not answer: {error}")
        answer = lab.sh(worker, f"curl -sS -m 5 http://{pod.status.pod_ip}:8080/", check=False)
        ev.expect(answer.startswith("pod=survivor"), f"the pod still answers from {worker}: {answer}",
                  f"the pod did not answer: {answer!r}")
        time.sleep(15)
        log = lab.sh(worker, f"journalctl -u kubelet --since '{since}' --no-pager | grep -ciE "
                             "'connection refused|error getting node|failed to update|unable to|no route' || true")
        ev.expect(int(log or 0) > 0, f"{worker}'s kubelet logged {log} failed attempts to reach the API",
                  f"no reconnect attempts in {worker}'s kubelet log")
        lab.start_units(lab.control_plane, UNITS, ev)
        lab.wait_healthy(timeout=180, ev=ev)
        lab.core.create_namespaced_pod(ns, pod_manifest("newcomer", test_image()))
        wait_for(lambda: lab.core.read_namespaced_pod("newcomer", ns).spec.node_name, 90, "the new pod to schedule")
        ev.expect(True, "control plane back: a new pod is scheduled")
