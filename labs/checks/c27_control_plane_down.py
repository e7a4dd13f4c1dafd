from urllib.parse import urlsplit

import yaml

from labs.i18n import _
from labs.kube import ask_pod, echo_pod, pod_manifest, run_pod, test_image
from labs.lab import Lab
from labs.nodefacts import parse_journal_json
from labs.registry import Evidence, check
from labs.timing import parse_duration, wait_for

# On the control-plane nodes; etcd is stopped on its members (the same nodes, or an external etcd's machines).
UNITS = ["kube-scheduler", "kube-controller-manager", "kube-apiserver"]


@check(
    "C27", _("Without the control plane nothing can be managed, but workloads keep running"),
    claim=_("Without the control plane the cluster cannot be managed, but pods on the workers keep running and the "
            "kubelets keep trying to reconnect; when it returns, everything resumes."),
    texts=["004"],
    see=["kubectl run survivor --image=@image@; kubectl wait --for=condition=Ready pod/survivor --timeout=90s",
         "ip=$(kubectl get pod survivor -o jsonpath='{.status.podIP}'); echo $ip",
         "for n in @nodes.control_plane@; do lab ssh $n -- systemctl stop kube-scheduler kube-controller-manager "
         "kube-apiserver etcd; done",
         "kubectl get nodes --request-timeout=5s   # no answer",
         "lab ssh w1 -- curl -sS http://$ip:8080/   # from a worker: answers",
         "sleep 20; lab ssh w1 -- 'journalctl -u kubelet --since -1min | grep @api@ | tail -3'   # trying to "
         "reconnect",
         "for n in @nodes.control_plane@; do lab ssh $n -- systemctl start --no-block etcd kube-apiserver "
         "kube-scheduler kube-controller-manager; done",
         "lab status --wait 180   # the lab healthy again",
         "kubectl delete pod survivor"],
    does=_("Runs a pod, stops every control-plane unit on every control-plane node (and etcd on its members), sees "
           "the API not answer and the pod answer from a worker; then waits (at most twice the kubelet's node status "
           "update interval, plus 10 s) for lines in that worker's kubelet journal, written after the stop, that name "
           "the API server address from the kubelet's kubeconfig: its attempts to reconnect. Restores the units, "
           "waits for every node Ready and schedules a new pod."),
    hints=[
        _("*the API still answers writes*: the write succeeded — some control-plane unit did not stop (`lab ssh cp1 -- "
          "pgrep -a kube-apiserver`), or the kubeconfig reaches an API server outside the inventory's control plane."),
        _("*the pod did not answer: ''*: the pod network between the two workers is broken (claim C26; check with the "
          "control plane up), or the pod died."),
        _("*timed out … waiting for kubelet lines on w1 naming @api@ after the stop*: the kubelet logged nothing "
          "about its API server (`journalctl -u kubelet --since -2min` shows what it says), or the worker's journal "
          "is not kept."),
        _("*timed out after 180s waiting for all nodes Ready (…)*, or *… for every component's unit to be active "
          "again*: the control plane did not come back — etcd members waiting for a missing peer (`lab ssh cp2 -- "
          "journalctl -u etcd`), or kube-apiserver failing to start (`journalctl -u kube-apiserver`)."),
        _("*timed out after 90s waiting for the new pod to schedule*: kube-scheduler did not come back or did not "
          "become leader."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C27") as ns:
        pod = run_pod(lab, ns, echo_pod("survivor"))  # running and answering (its readiness probe)
        ev.step(_("pod survivor runs on {node}").format(node=pod.spec.node_name))
        worker = next((w for w in lab.workload_nodes if w != pod.spec.node_name), pod.spec.node_name)
        kubeconfig = yaml.safe_load(lab.sh(worker, f"cat {lab.unit_arg(worker, 'kubelet', 'kubeconfig')}"))
        server = urlsplit(kubeconfig["clusters"][0]["cluster"]["server"])
        address = f"{server.hostname}:{server.port or 443}"
        config = yaml.safe_load(lab.sh(worker, f"cat {lab.unit_arg(worker, 'kubelet', 'config')}")) or {}
        update = parse_duration(str(config.get("nodeStatusUpdateFrequency", "10s")))
        since = lab.sh(worker, "date +%s.%N")
        ev.step(_("{worker}'s kubelet reaches the API server at {address} and reports every {seconds:.0f} s").format(
            worker=worker, address=address, seconds=update))
        lab.stop_units(lab.control_plane, UNITS, ev)
        lab.stop_units(lab.etcd_members, ["etcd"], ev)
        error = lab.api_writes(ns, "nobody-home", timeout=5)
        ev.expect(error is not None,
                  _("the API does not answer: {error}").format(error=error),
                  _("the API still answers writes"))
        answer = ask_pod(lab, worker, pod.status.pod_ip, "pod=survivor")
        ev.expect(answer.startswith("pod=survivor"),
                  _("the pod still answers from {worker}: {answer}").format(worker=worker, answer=answer),
                  _("the pod did not answer: {answer!r}").format(answer=answer))

        def attempts():
            journal = lab.sh(worker, f"journalctl -u kubelet --since @{since} -o json --no-pager", check=False)
            return [line for line in parse_journal_json(journal) if address in line.text]

        lines = wait_for(attempts, 2 * update + 10,
                         _("kubelet lines on {worker} naming {address} after the stop").format(
                             worker=worker, address=address), 1)
        ev.expect(True,
                  _("{worker}'s kubelet, after the stop, tried {address} ({count} lines), e.g. {when:%H:%M:%S} "
                    "{text}").format(worker=worker, address=address, count=len(lines), when=lines[-1].when,
                                     text=lines[-1].text[:160]))
        lab.start_units(lab.etcd_members, ["etcd"], ev)
        lab.start_units(lab.control_plane, UNITS, ev)
        lab.wait_healthy(timeout=180, ev=ev)
        lab.core.create_namespaced_pod(ns, pod_manifest("newcomer", test_image()))
        wait_for(lambda: lab.core.read_namespaced_pod("newcomer", ns).spec.node_name, 90, _("the new pod to schedule"))
        ev.expect(True, _("control plane back: a new pod is scheduled"))
