import threading

from labs.i18n import _, join
from labs.kube import established, node_ips, pod_exec, pod_manifest, run_pod, test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

EXEC_SECONDS = 15  # how long the exec keeps its stream (and the API server's connection to the kubelet) open


@check(
    "C21", _("The control plane reaches a node through the kubelet's authenticated HTTPS endpoint"),
    claim=_("The control plane reaches a node through the kubelet's own HTTPS endpoint, which requires "
            "authentication."),
    texts=["004"],
    see=["kubectl run talker --image=@image@; kubectl wait --for=condition=Ready pod/talker --timeout=90s",
         "kubectl logs talker; kubectl exec talker -- cat /etc/hostname",
         "lab ssh cp1 -- curl -sSk https://@ip.w1@:10250/pods   # Unauthorized",
         "kubectl exec talker -- sleep 20 & sleep 3; lab ssh $(kubectl get pod talker -o "
         "jsonpath='{.spec.nodeName}') -- \"ss -tnp state established '( sport = :10250 )'\"",
         "kubectl delete pod talker"],
    does=_("Reads a pod's logs and runs a command in it through the API server. Calls the kubelet's port on every "
           "node, control plane included, without credentials (401) and with the API server's kubelet-client "
           "certificate (200). During a {exec_seconds}s exec, lists the connections to the kubelet port on the pod's "
           "node: a new one comes from a control-plane node (the API server relaying the "
           "exec).").format(exec_seconds=EXEC_SECONDS),
    hints=[
        _("*w1's kubelet: anonymous GET https://…:10250/pods -> 200 (want 401), …*: anonymous authentication is on in "
          "that kubelet's config and its authorization mode is `AlwaysAllow`. With *-> 403* instead: anonymous "
          "requests are let in (and then refused by the webhook): `authentication.anonymous.enabled` is true."),
        _("*… with the kubelet-client certificate -> 403 (want 200)*: the ClusterRoleBinding for "
          "`kube-apiserver-kubelet-client` is missing (`roles/kubelet_rbac`); `kubectl logs` and `exec` fail the same "
          "way. *-> 000* on both: that kubelet does not answer (stopped, or its port unreachable from cp1)."),
        _("*timed out … a new connection*: the exec did not reach the kubelet (its error is printed by the thread)."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    ips = node_ips(lab)
    control = {ips[n]: n for n in lab.control_plane}
    with lab.namespace("C21") as ns:
        pod = run_pod(lab, ns, pod_manifest("target", test_image()))
        node = pod.spec.node_name
        port = lab.core.read_node(node).status.daemon_endpoints.kubelet_endpoint.port
        logs = wait_for(lambda: lab.core.read_namespaced_pod_log("target", ns), 30, _("the pod's first log line"))
        ev.expect("listening" in logs,
                  _("logs through the API: {line}").format(line=logs.strip().splitlines()[0]),
                  _("logs: {logs!r}").format(logs=logs))
        out = pod_exec(lab, ns, "target", ["cat", "/etc/hostname"]).strip()
        ev.expect(out == "target",
                  _("exec through the API: cat /etc/hostname -> {out}").format(out=out),
                  _("exec answered {out!r}").format(out=out))

        cp, pki = lab.control_plane[0], lab.path("pki_dir")
        for other in lab.nodes:
            kubelet_port = lab.core.read_node(other).status.daemon_endpoints.kubelet_endpoint.port
            url = f"https://{ips[other]}:{kubelet_port}/pods"
            anon = lab.sh(cp, f"curl -sk --max-time 10 -o /dev/null -w '%{{http_code}}' {url}", check=False)
            auth = lab.sh(cp, f"curl -s --max-time 10 -o /dev/null -w '%{{http_code}}' --cacert {pki}/ca.crt "
                              f"--cert {pki}/apiserver-kubelet-client.crt --key {pki}/apiserver-kubelet-client.key "
                              f"{url}", check=False)
            ev.expect(anon == "401" and auth == "200",
                      _("{other}'s kubelet: anonymous GET {url} -> {anon}; with the API server's kubelet-client "
                        "certificate -> {auth}").format(other=other, url=url, anon=anon, auth=auth),
                      _("{other}'s kubelet: anonymous GET {url} -> {anon} (want 401), with the kubelet-client "
                        "certificate -> {auth} (want 200)").format(other=other, url=url, anon=anon, auth=auth))

        def from_control_plane() -> set[tuple[str, str]]:
            return {(c.peer, control[c.peer_ip]) for c in established(lab, node, f"'( sport = :{port} )'")
                    if c.peer_ip in control}

        before = from_control_plane()
        thread = threading.Thread(target=pod_exec, args=(lab, ns, "target", ["sleep", str(EXEC_SECONDS)]), daemon=True)
        thread.start()
        new = wait_for(lambda: from_control_plane() - before, EXEC_SECONDS,
                       _("a new connection to {node}:{port} from a control-plane node").format(node=node, port=port))
        thread.join(EXEC_SECONDS + 30)
        ev.add(_("before the exec, {node}:{port} had connections from: {peers}").format(
            node=node, port=port, peers=", ".join(f"{p} ({n})" for p, n in sorted(before)) or _("none")))
        ev.expect(bool(new), _("during the exec, a new connection from {peers}").format(peers=join(", ", (
            _("{peer} ({node}, its API server)").format(peer=p, node=n) for p, n in sorted(new)))))
