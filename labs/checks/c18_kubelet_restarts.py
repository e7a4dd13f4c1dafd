import json

from labs.kube import crictl_container, event_source, pod_events, pod_exec, pod_manifest, run_pod, test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

PROBE = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 2, "failureThreshold": 2}
BACKOFF = 10  # kubelet's first crash-loop back-off, before the second restart


def restarted(lab: Lab, ns: str, count: int):
    """The container status once it has restarted ``count`` times and runs again."""
    status = lab.core.read_namespaced_pod("probed", ns).status.container_statuses[0]
    return status if status.restart_count >= count and status.state.running and status.ready else None


@check(
    "C18", "kubelet restarts failed containers and reports their state",
    claim="kubelet watches the containers it started, restarts failed ones and reports their state.",
    texts=["000", "004"],
    see=["ssh w1 'crictl inspect $(crictl ps -q --name main --label io.kubernetes.pod.name=probed) | grep pid'",
         "ssh w1 kill -9 <that pid>; kubectl get pod probed -w    # RESTARTS 1, Running",
         "kubectl exec probed -- sh -c ': > /tmp/unhealthy' # /healthz fails: the liveness probe kills it",
         "kubectl get events --field-selector involvedObject.name=probed   # Unhealthy, Killing"],
    does="Runs a pod with an HTTP liveness probe on /healthz. Finds its container's main process on the node "
         "(crictl inspect) and kills it with SIGKILL: restartCount goes up, the last state shows the kill (137), and "
         "the pod runs again. Then makes /healthz fail (exec: create /tmp/unhealthy): the kubelet reports Unhealthy, "
         "kills and restarts the container.",
    hints=[
        "*timed out … the container to be restarted*: the kubelet on the pod's node is stopped.",
        "*last exit …* other than 137: the process had exited by itself before the kill.",
        "*timed out … the liveness probe to restart the container*: the probe is not running (kubelet stopped) or "
         "`/healthz` does not fail (an older test image without the `/tmp/unhealthy` switch).",
        "*exec sh -c … : …*: the exec failed (API server cannot reach the kubelet, see C21).",
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C18") as ns:
        pod = run_pod(lab, ns, pod_manifest("probed", test_image(), container={"livenessProbe": PROBE}))
        node = pod.spec.node_name
        cid = crictl_container(lab, node, ns, "probed")
        pid = json.loads(lab.sh(node, f"crictl inspect {cid}"))["info"]["pid"]
        cmd = lab.sh(node, f"tr '\\0' ' ' < /proc/{pid}/cmdline")
        ev.add(f"{node}: container {cid[:13]} runs as pid {pid} ({cmd.strip()}); restartCount 0")
        lab.sh(node, f"kill -9 {pid}")
        ev.step(f"{node}: kill -9 {pid}")
        status = wait_for(lambda: restarted(lab, ns, 1), BACKOFF + 60, "the container to be restarted")
        last = status.last_state.terminated
        ev.expect(status.restart_count == 1 and last.exit_code == 137,
                  f"restartCount {status.restart_count}, last state {last.reason} exit {last.exit_code} "
                  f"(SIGKILL), running again since {status.state.running.started_at:%H:%M:%S}",
                  f"restartCount {status.restart_count}, last exit {last.exit_code}")

        pod_exec(lab, ns, "probed", ["sh", "-c", ": > /tmp/unhealthy"])
        ev.step("exec: sh -c ': > /tmp/unhealthy' (now /healthz answers 500)")
        limit = PROBE["periodSeconds"] * PROBE["failureThreshold"] + BACKOFF + 60
        status = wait_for(lambda: restarted(lab, ns, 2), limit, "the liveness probe to restart the container")
        ev.expect(status.restart_count == 2, f"restartCount {status.restart_count}, running again (fresh container, "
                  "no /tmp/unhealthy)", f"restartCount {status.restart_count}")
        events = {e.reason: e for e in pod_events(lab, ns, "probed")}
        for reason in ("Unhealthy", "Killing"):
            e = events.get(reason)
            ev.expect(e is not None, f"event {reason} by {' on '.join(event_source(e)) if e else ''}: "
                      f"{e.message if e else ''}", f"no {reason} event")
