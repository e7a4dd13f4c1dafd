from labs.i18n import _
from labs.kube import ask_pod, echo_pod, run_pod
from labs.lab import THREE_WRITE_ATTEMPTS, Lab
from labs.registry import Evidence, check
from labs.timing import wait_for


@check(
    "C08", _("etcd is the cluster's memory: nothing works without it, nothing is lost when it returns"),
    claim=_("etcd is the cluster's memory: without it the cluster cannot work, and nothing is lost when it returns."),
    texts=["001"],
    see=["kubectl run survivor --image=@image@; kubectl wait --for=condition=Ready pod/survivor --timeout=90s",
         "ip=$(kubectl get pod survivor -o jsonpath='{.status.podIP}'); echo $ip",
         "for n in @nodes.etcd@; do lab ssh $n -- systemctl stop etcd; done   # every etcd member",
         "kubectl create configmap x --request-timeout=10s   # fails: nothing can store it",
         "lab ssh w1 -- curl -sS http://$ip:8080/   # the pod still answers",
         "for n in @nodes.etcd@; do lab ssh $n -- systemctl start --no-block etcd; done",
         "lab status --wait 180   # the lab healthy again",
         "kubectl get configmaps   # what was there before is still there",
         "kubectl delete pod survivor"],
    does=_("Creates a ConfigMap and a pod, stops etcd on every member, tries an API write (it fails) and calls the "
           "pod from a worker (it answers), starts etcd again and finds the ConfigMap intact."),
    hints=[
        _("*timed out after 30s waiting for API writes to fail without etcd*: etcd did not really stop (a drop-in "
          "with `KillMode=none` or `ExecStop=`, `pgrep -a etcd` still shows it), or the API server is connected to an "
          "etcd outside the inventory's `etcd` group (`systemctl cat kube-apiserver | grep etcd-servers`)."),
        _("*the pod did not answer while etcd was down: ''*: the pod network between w2 and the pod's node is broken "
          "(claim C26) — this does not depend on etcd; check it with etcd running."),
        _("*timed out after 120s waiting for the API to read again*: etcd did not come back (`lab ssh cp1 -- "
          "journalctl -u etcd`; in `ha`, a member waiting for its peers), or kube-apiserver gave up (`systemctl status "
          "kube-apiserver`). With *(last error: … 404 …)* the API is back but the ConfigMap is gone: etcd came back "
          "with an empty data directory."),
        _("*wrote ConfigMap 'before' through the API* marked NOT: the cluster was not writable before the check "
          "began."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    etcd = lab.etcd_members
    with lab.namespace("C08") as ns:
        ev.expect(lab.api_writes(ns, "before") is None, _("wrote ConfigMap 'before' through the API"))
        pod = run_pod(lab, ns, echo_pod("web"))  # running and answering (its readiness probe)
        ip, node = pod.status.pod_ip, pod.spec.node_name
        lab.stop_units(etcd, ["etcd"], ev)
        error = wait_for(lambda: lab.api_writes(ns, "during"), THREE_WRITE_ATTEMPTS,
                         _("API writes to fail without etcd"), 2)
        ev.expect(True, _("with etcd stopped an API write fails: {error}").format(error=error))
        answer = ask_pod(lab, lab.workload_nodes[-1], ip, "pod=web")
        ev.expect(answer.startswith("pod=web"),
                  _("the running pod on {node} still answers: {answer}").format(node=node, answer=answer),
                  _("the pod did not answer while etcd was down: {answer!r}").format(answer=answer))
        lab.start_units(etcd, ["etcd"], ev)
        kept = wait_for(lambda: lab.core.read_namespaced_config_map("before", ns, _request_timeout=5), 120,
                        _("the API to read again"))
        ev.expect(kept.data == {"written": "yes"}, _("after etcd returned, ConfigMap 'before' is intact"))
