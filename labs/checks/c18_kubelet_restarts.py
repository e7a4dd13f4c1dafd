
from labs.i18n import _
from labs.kube import (
    container_pid,
    crictl_container,
    event_source,
    pod_events,
    pod_exec,
    pod_manifest,
    run_pod,
    test_image,
)
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import scaled, wait_for

# The liveness probe, on real hardware: every 2 s, 2 failures in a row restart the container. Its period and its
# timeout grow with the machines' timeout scale (probe()): the default 1 s timeout is missed now and then by a
# healthy container on a VM under software emulation that also runs the whole control plane (the single profile),
# and an extra restart the check did not cause would be reported as the kubelet's answer to its kill.
PROBE = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 2, "timeoutSeconds": 1,
         "failureThreshold": 2}
BACKOFF = 10  # kubelet's first crash-loop back-off, before the second restart


def probe() -> dict:
    """PROBE with its period and timeout scaled for this cluster's machines (whole seconds, as the API takes)."""
    return {**PROBE, "periodSeconds": max(PROBE["periodSeconds"], round(scaled(PROBE["periodSeconds"]))),
            "timeoutSeconds": max(PROBE["timeoutSeconds"], round(scaled(PROBE["timeoutSeconds"])))}


def restarted(lab: Lab, ns: str, count: int):
    """The container status once it has restarted ``count`` times and runs again."""
    status = lab.core.read_namespaced_pod("probed", ns).status.container_statuses[0]
    return status if status.restart_count >= count and status.state.running and status.ready else None


@check(
    "C18", _("kubelet restarts failed containers and reports their state"),
    claim=_("kubelet watches the containers it started, restarts failed ones and reports their state."),
    texts=["000", "004"],
    see=["kubectl run probed --image=@image@ "
         "--overrides='{\"spec\":{\"containers\":[{\"name\":\"probed\",\"image\":\"@image@\",\"livenessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080},\"periodSeconds\":2}}]}}'",
         "kubectl wait --for=condition=Ready pod/probed --timeout=90s; node=$(kubectl get pod probed -o "
         "jsonpath='{.spec.nodeName}')",
         "lab ssh $node -- 'crictl inspect --output go-template --template \"{{.info.pid}}\" $(crictl ps -q --label "
         "io.kubernetes.pod.name=probed)'   # its main process",
         "lab ssh $node -- 'kill -9 $(crictl inspect --output go-template --template \"{{.info.pid}}\" $(crictl ps "
         "-q --label io.kubernetes.pod.name=probed))'",
         "kubectl wait --for=jsonpath='{.status.containerStatuses[0].restartCount}'=1 pod/probed --timeout=60s; "
         "kubectl get pod probed   # RESTARTS 1",
         "kubectl exec probed -- sh -c ': > /tmp/unhealthy'   # /healthz fails: the liveness probe kills it",
         "kubectl wait --for=jsonpath='{.status.containerStatuses[0].restartCount}'=2 pod/probed --timeout=90s",
         "kubectl get events --field-selector involvedObject.name=probed   # Unhealthy, Killing",
         "kubectl delete pod probed"],
    does=_("Runs a pod with an HTTP liveness probe on /healthz. Finds its container's main process on the node "
           "(crictl inspect) and kills it with SIGKILL: restartCount goes up, the last state shows the kill (137), "
           "and the pod runs again. Then makes /healthz fail (exec: create /tmp/unhealthy): the kubelet reports "
           "Unhealthy, kills and restarts the container."),
    hints=[
        _("*timed out … the container to be restarted*: the kubelet on the pod's node is stopped."),
        _("*last exit …* other than 137: the process had exited by itself before the kill."),
        _("*timed out … the liveness probe to restart the container*: the probe is not running (kubelet stopped) or "
          "`/healthz` does not fail (an older test image without the `/tmp/unhealthy` switch)."),
        _("*exec sh -c … : …*: the exec failed (API server cannot reach the kubelet, see C21)."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C18") as ns:
        pod = run_pod(lab, ns, pod_manifest("probed", test_image(), container={"livenessProbe": probe()}))
        node = pod.spec.node_name
        cid = crictl_container(lab, node, ns, "probed")
        pid = container_pid(lab, node, cid)
        cmd = lab.sh(node, f"tr '\\0' ' ' < /proc/{pid}/cmdline")
        ev.add(_("{node}: container {cid} runs as pid {pid} ({command}); restartCount 0").format(
            node=node, cid=cid[:13], pid=pid, command=cmd.strip()))
        lab.sh(node, f"kill -9 {pid}")
        ev.step(_("{node}: kill -9 {pid}").format(node=node, pid=pid))
        status = wait_for(lambda: restarted(lab, ns, 1), BACKOFF + 60, _("the container to be restarted"))
        last = status.last_state.terminated
        ev.expect(status.restart_count == 1 and last.exit_code == 137,
                  _("restartCount {count}, last state {reason} exit {code} (SIGKILL), running again since "
                    "{started:%H:%M:%S}").format(count=status.restart_count, reason=last.reason, code=last.exit_code,
                                                  started=status.state.running.started_at),
                  _("restartCount {count}, last exit {code}").format(count=status.restart_count, code=last.exit_code))

        pod_exec(lab, ns, "probed", ["sh", "-c", ": > /tmp/unhealthy"])
        ev.step(_("exec: sh -c ': > /tmp/unhealthy' (now /healthz answers 500)"))
        limit = PROBE["periodSeconds"] * PROBE["failureThreshold"] + BACKOFF + 60
        status = wait_for(lambda: restarted(lab, ns, 2), limit, _("the liveness probe to restart the container"))
        ev.expect(status.restart_count == 2,
                  _("restartCount {count}, running again (fresh container, no /tmp/unhealthy)").format(
                      count=status.restart_count),
                  _("restartCount {count}").format(count=status.restart_count))
        events = {e.reason: e for e in pod_events(lab, ns, "probed")}
        for reason in ("Unhealthy", "Killing"):
            e = events.get(reason)
            ev.expect(e is not None,
                      _("event {reason} by {source}: {message}").format(
                          reason=reason, source=" on ".join(event_source(e)) if e else "",
                          message=e.message if e else ""),
                      _("no {reason} event").format(reason=reason))
