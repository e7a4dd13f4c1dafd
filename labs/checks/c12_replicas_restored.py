from labs.i18n import _
from labs.kube import run_deployment, wait_ready_pods
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

REPLICAS = 3


@check(
    "C12", _("Controllers drive the actual state towards the desired state"),
    claim=_("Controllers are loops that drive the actual state towards the desired state: the replication controllers "
            "keep the number of pods."),
    texts=["000", "001", "004"],
    see=["kubectl create deployment web --image=@image@ --replicas=3; kubectl rollout status deployment web "
         "--timeout=90s",
         "kubectl delete $(kubectl get pods -l app=web -o name | head -1); kubectl get pods -l app=web",
         "kubectl rollout status deployment web --timeout=90s; kubectl get pods -l app=web   # three again, one of "
         "them new",
         "kubectl get events --field-selector reason=SuccessfulCreate   # by replicaset-controller",
         "kubectl delete deployment web"],
    does=_("Runs a Deployment of {replicas} replicas, deletes one of its pods, and waits (bounded) until a "
           "replacement with a new name, owned by the same ReplicaSet, is ready and the count is back to {replicas}; "
           "shows the ReplicaSet controller's SuccessfulCreate event for it.").format(replicas=REPLICAS),
    hints=[
        _("*timed out … 3 ready pods*: kube-controller-manager is stopped (no replacement is created) or "
          "kube-scheduler is (the replacement stays Pending)."),
        _("*the replacement's owner is …*: something else than the ReplicaSet created the pod."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C12") as ns:
        pods = run_deployment(lab, ns, "web", REPLICAS)
        names = {p.metadata.name for p in pods}
        owner = pods[0].metadata.owner_references[0]
        ev.add(_("desired {replicas}, running: {names} (owned by {kind} {name})").format(
            replicas=REPLICAS, names=", ".join(sorted(names)), kind=owner.kind, name=owner.name))
        victim = sorted(names)[0]
        lab.core.delete_namespaced_pod(victim, ns, grace_period_seconds=0)
        ev.step(_("deleted pod {victim}").format(victim=victim))
        wait_for(lambda: victim not in {p.metadata.name for p in lab.core.list_namespaced_pod(ns).items}, 60,
                 _("{victim} to disappear").format(victim=victim))
        after = wait_ready_pods(lab, ns, "web", REPLICAS)
        new = [p for p in after if p.metadata.name not in names]
        ev.expect(len(after) == REPLICAS and len(new) == 1 and victim not in {p.metadata.name for p in after},
                  _("back to {count} ready pods; replacement {name}").format(
                      count=len(after), name=new[0].metadata.name if new else "?"),
                  _("after the delete: {names}").format(names=[p.metadata.name for p in after]))
        replacement = new[0]
        ev.expect(replacement.metadata.owner_references[0].uid == owner.uid,
                  _("the replacement is owned by the same {kind} {name}").format(kind=owner.kind, name=owner.name),
                  _("the replacement's owner is {owner}").format(owner=replacement.metadata.owner_references))
        # Events are written asynchronously: wait (bounded) for the one about the replacement.
        created = wait_for(lambda: [e for e in lab.core.list_namespaced_event(
            ns, field_selector=f"involvedObject.name={owner.name},reason=SuccessfulCreate").items
            if replacement.metadata.name in e.message], 30, _("the SuccessfulCreate event of the replacement"))
        ev.expect(bool(created),
                  _("event by {source}: {message}").format(source=created[0].source.component if created else "",
                                                           message=created[0].message if created else ""),
                  _("no SuccessfulCreate event for the replacement"))
