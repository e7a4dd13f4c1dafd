from labs.episodes import EPISODES
from labs.i18n import _, join
from labs.kube import cordon, node_ready, refusal_evidence, run_deployment, scheduler_refuses, wait_ready_pods
from labs.lab import Lab
from labs.registry import CheckSkipped, Evidence, check
from labs.restore import RESTORER
from labs.timing import wait_for

TOLERATION = 10  # seconds the check's pods tolerate an unreachable or not-ready node before they are evicted
REPLICAS = 2
NOEXECUTE = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
PLACEMENT_RETRIES = 2  # times a replica started on a cordoned worker is replaced before the check gives up


def pods(lab: Lab, ns: str) -> list:
    return lab.core.list_namespaced_pod(ns, label_selector="app=web").items


@check(
    "C29", _("When a node is lost, its workload is started again on other nodes"),
    claim=_("When a node becomes unavailable, the control plane moves its workload to other nodes."),
    texts=["004"],
    see=["kubectl create deployment web --image=@image@ --replicas=2; kubectl rollout status deployment web "
         "--timeout=90s",
         "kubectl get pods -l app=web -o wide   # note the node they run on, say w2",
         "kubectl get pods -l app=web -o wide -w   # in another terminal: after the pods' toleration (300 s by "
         "default): Terminating on w2, new ones elsewhere",
         "lab ssh w2 -- systemctl stop kubelet",
         "kubectl wait --for=condition=Ready=Unknown node/w2 --timeout=120s; kubectl describe node w2 | grep -A2 "
         "Taints",
         "lab ssh w2 -- systemctl start kubelet; kubectl wait --for=condition=Ready node/w2 --timeout=120s",
         "kubectl delete deployment web"],
    does=_("Runs a Deployment of {replicas} replicas, all on one worker (the other workers are cordoned while it "
           "starts, once the scheduler refuses a probe pod that only they may take; a replica that still starts on one "
           "is replaced, twice at most), whose pods tolerate an "
           "unreachable or not-ready node for {toleration} s (instead of the default 300 s). Stops that worker's "
           "kubelet: within the controller manager's --node-monitor-grace-period the node is no longer Ready and "
           "carries the NoExecute taint; within the toleration the pods are evicted (marked for deletion) and the "
           "Deployment's replacements run on other nodes. Starts the kubelet: the node is Ready again and the evicted "
           "pods are gone.").format(replicas=REPLICAS, toleration=TOLERATION),
    hints=[
        _("*the replicas did not all start on w2*: a worker was not cordoned, or w2 refused the pods (taints, "
          "`kubectl describe node w2`)."),
        _("*timed out … waiting for w2 to be marked not Ready* or *… a NoExecute taint on w2*: see C14."),
        _("*timed out … waiting for the pods on w2 to be evicted*: the taint-eviction controller does not run (`lab "
          "ssh cp1 -- systemctl cat kube-controller-manager | grep controllers`), or no controller manager leads."),
        _("*timed out … waiting for 2 ready pods app=web*: no replacements run — the ReplicaSet controller or the "
          "scheduler does not act, or no other node accepts the pods (`kubectl get events`)."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    if len(lab.workers) < 2:
        raise CheckSkipped(_("needs two workers: one lost, one to take its workload (settings.yml: the profile's "
                             "number of workers)"))
    worker, others = lab.workers[-1], lab.workers[:-1]
    grace = lab.node_monitor_grace()
    with lab.namespace("C29") as ns:
        def schedulable(on: bool) -> None:
            for node in others:
                cordon(lab, node, not on)

        RESTORER.push(_("uncordon {nodes}").format(nodes=", ".join(others)), lambda: schedulable(True))
        schedulable(False)

        def closed(nodes) -> None:
            """Wait until the scheduler refuses a probe pod on each of the cordoned ``nodes``."""
            for node in sorted(nodes):
                ev.step(refusal_evidence(node, _("cordoned"), scheduler_refuses(lab, ns, node)))

        closed(others)  # the scheduler knows before the Deployment's pods exist
        # A grace period, so that an evicted pod stays Terminating while only its lost node's kubelet could end it.
        first = run_deployment(lab, ns, "web", REPLICAS, terminationGracePeriodSeconds=30,
                               tolerations=[{"key": key, "operator": "Exists", "effect": "NoExecute",
                                             "tolerationSeconds": TOLERATION} for key in NOEXECUTE])
        for _retry in range(PLACEMENT_RETRIES):
            # A replica on a cordoned worker: the scheduler that placed it had an outdated view of the nodes (on ha,
            # a newly elected scheduler whose API server's cache lagged). Such a replica is replaced while the
            # cordons hold; a scheduler that ignores cordons keeps doing it, and the check fails below.
            strays = [p for p in first if p.spec.node_name != worker]
            if not strays:
                break
            ev.step(_("{pods} started on a cordoned worker: deleted, the ReplicaSet starts another").format(
                pods=", ".join(f"{p.metadata.name}@{p.spec.node_name}" for p in strays)))
            closed({p.spec.node_name for p in strays})
            for pod in strays:
                lab.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
            first = wait_ready_pods(lab, ns, "web", REPLICAS, timeout=90)
        schedulable(True)
        RESTORER.discard(_("uncordon {nodes}").format(nodes=", ".join(others)))
        placed = {p.metadata.name: p.spec.node_name for p in first}
        ev.expect(set(placed.values()) == {worker},
                  _("{replicas} replicas on {worker}: {placed}").format(
                      replicas=REPLICAS, worker=worker, placed=", ".join(placed)),
                  _("the replicas did not all start on {worker}: {placed}").format(worker=worker, placed=placed))

        lab.stop_units([worker], ["kubelet"], ev)
        loss = EPISODES.lose_node("C29", worker, grace)  # what C14 claims is seen on the way (labs.episodes)
        status = wait_for(lambda: (s := node_ready(lab, worker)) != "True" and s, grace + 20,
                          _("{worker} to be marked not Ready").format(worker=worker),
                          1)
        taints = wait_for(lambda: [t.key for t in lab.core.read_node(worker).spec.taints or []
                                   if t.key in NOEXECUTE and t.effect == "NoExecute"], 30,
                          _("a NoExecute taint on {worker}").format(worker=worker), 1)
        loss.not_ready(status, taints)
        ev.expect(True,
                  _("{worker} lost: Ready={status}, tainted {taints}:NoExecute").format(
                      worker=worker, status=status, taints=", ".join(taints)))

        def evicted() -> list | None:
            """The pods of the lost node once each is marked for deletion (Terminating) or already gone."""
            left = {p.metadata.name: p for p in pods(lab, ns) if p.metadata.name in placed}
            if any(not p.metadata.deletion_timestamp for p in left.values()):
                return None
            return [(_("{name} (Terminating)") if name in left else _("{name} (deleted)")).format(name=name)
                    for name in sorted(placed)]

        gone = wait_for(evicted, TOLERATION + 30,
                        _("the pods on {worker} to be evicted after their {toleration} s toleration").format(
                            worker=worker, toleration=TOLERATION), 1)
        events = lab.core.list_namespaced_event(ns, field_selector="reason=TaintManagerEviction").items
        ev.expect(True, _("after the {toleration} s toleration: {pods}; events: {events}").format(
            toleration=TOLERATION, pods=join(", ", gone),
            events="; ".join(sorted({f"{e.involved_object.name}: {e.message}" for e in events})) or _("none yet")))

        # The evicted pods are Terminating or gone: the ready pods not marked for deletion are the replacements.
        new = wait_ready_pods(lab, ns, "web", REPLICAS, timeout=90)
        ev.expect(all(p.spec.node_name != worker for p in new),
                  _("replacements running: {pods}").format(
                      pods=", ".join(f"{p.metadata.name}@{p.spec.node_name}" for p in new)),
                  _("a replacement runs on the lost node: {pods}").format(
                      pods=[(p.metadata.name, p.spec.node_name) for p in new]))

        lab.start_units([worker], ["kubelet"], ev)
        wait_for(lambda: node_ready(lab, worker) == "True", 90, _("{worker} Ready again").format(worker=worker), 1)
        loss.ready_again = True
        left = wait_for(lambda: not any(p.metadata.name in placed for p in pods(lab, ns)) or None, 90,
                        _("the evicted pods to disappear once {worker} is back").format(worker=worker), 1)
        ev.expect(bool(left),
                  _("kubelet started: {worker} Ready again, the evicted pods are gone; the Deployment runs {replicas} "
                    "replicas elsewhere").format(worker=worker, replicas=REPLICAS))
