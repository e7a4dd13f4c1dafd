from labs.i18n import _
from labs.lab import THREE_WRITE_ATTEMPTS, Lab
from labs.registry import CheckSkipped, Evidence, check
from labs.timing import wait_for


@check(
    "C09", _("etcd needs a majority: three members survive the loss of one, not of two"),
    claim=_("etcd is consistent and fault tolerant, and needs at least three members for that: three members survive "
            "the loss of one; losing two of three stops writes."),
    texts=["000"],
    see=["lab ssh cp1 -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl member list -w table'",
         "lab ssh cp1 -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl endpoint health --cluster'",
         "lab ssh cp1 -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl endpoint status --cluster -w table'   # the "
         "leader, the Raft term and index",
         "lab ssh cp3 -- systemctl stop etcd; kubectl create configmap one-down --request-timeout=10s   # works",
         "lab ssh cp2 -- systemctl stop etcd; kubectl create configmap two-down --request-timeout=10s   # fails",
         "lab ssh cp2 -- systemctl start --no-block etcd; lab ssh cp3 -- systemctl start --no-block etcd",
         "lab status --wait 180   # the lab healthy again",
         "kubectl delete configmap one-down two-down --ignore-not-found   # two-down may be there: a write that timed "
         "out is not a write that failed"],
    does=_("With three members: stops one, writes (succeeds), stops a second, writes (fails), starts both, and finds "
           "three healthy members and the data written before. Skipped below three members."),
    hints=[
        _("*timed out after 60s waiting for a write with one member down*: the two remaining members did not form a "
          "quorum — one of them was already unhealthy before the check (`etcdctl endpoint health --cluster`), or the "
          "API servers name only the stopped member (`systemctl cat kube-apiserver | grep etcd-servers`)."),
        _("*timed out after 30s waiting for writes to fail with two members down*: the members did not really stop (a "
          "unit with `KillMode=none`; `lab ssh cp2 -- pgrep -a etcd`), or the cluster has more than three members, so "
          "two down still leaves a majority."),
        _("*timed out after 120s waiting for three healthy members*: a restarted member cannot rejoin — see `lab ssh "
          "cp3 -- journalctl -u etcd` (peer certificate, a changed member ID after its data directory was removed)."),
        _("*timed out … waiting for the data written with one member down*: the API server is not back yet, or, with "
          "a 404, the committed write was lost — which Raft should never allow."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    etcd = lab.etcd_members
    if len(etcd) < 3:
        raise CheckSkipped(_("the cluster has {count} etcd member(s); the claim needs three: bring the lab up with "
                             "PROFILE=ha (settings.yml: profile: ha)").format(count=len(etcd)))
    members = lab.etcdctl("member list", node=etcd[0]).splitlines()
    ev.add(_("etcd members: {count}").format(count=len(members)))
    with lab.namespace("C09", pods=False) as ns:
        lab.stop_units([etcd[-1]], ["etcd"], ev)
        error = wait_for(lambda: lab.api_writes(ns, "one-down") is None or None, 60, _("a write with one member down"))
        ev.expect(error is True, _("one of three down: the write succeeds"))
        lab.stop_units([etcd[-2]], ["etcd"], ev)
        failure = wait_for(lambda: lab.api_writes(ns, "two-down"), THREE_WRITE_ATTEMPTS,
                           _("writes to fail with two members down"), 2)
        ev.expect(True, _("two of three down: the write fails ({failure})").format(failure=failure))
        lab.start_units([etcd[-2], etcd[-1]], ["etcd"], ev)
        health = wait_for(lambda: lab.etcdctl("endpoint health --cluster", node=etcd[0]).count("is healthy") == 3
                          and "3 healthy", 120, _("three healthy members"))
        ev.expect(bool(health), _("all three members healthy again"))
        kept = wait_for(lambda: lab.core.read_namespaced_config_map("one-down", ns, _request_timeout=5), 60,
                        _("the data written with one member down"))
        ev.expect(kept.data == {"written": "yes"}, _("the write made with one member down is intact"))
