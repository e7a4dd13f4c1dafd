import json
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from labs.drills import cluster_ids, member_status, restore_snapshot, take_snapshot, unavailable
from labs.i18n import _
from labs.lab import THREE_WRITE_ATTEMPTS, Lab
from labs.registry import CheckFailed, CheckSkipped, Evidence, check
from labs.restore import RESTORER
from labs.timing import wait_for

MARKER = "marker"
# Seconds (real hardware) for the cluster to be healthy after the restore: the playbook has started every component
# again, but the leaders of the snapshot's Leases must expire before new ones take over, and every kubelet renews its
# Node from the restored state.
HEALTHY_AFTER_RESTORE = 300


@dataclass
class Drill:
    """What the check has done that its end must take back: the snapshot's files (kept while the cluster still needs
    them), the members' data it took away (until a restore has succeeded), whether quorum was destroyed."""

    snapshot: Path | None = None
    files: list[Path] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)  # member -> where its data directory was put aside
    destroyed: bool = False
    restored: bool = False

    @property
    def needed(self) -> bool:
        """The cluster still depends on the snapshot and the data put aside: quorum destroyed, not restored."""
        return self.destroyed and not self.restored


def later_change(lab: Lab, kept: str, doomed: str) -> str:
    """The changes after the snapshot, which the restore must take back: the marker's new value, a namespace made, a
    namespace of the snapshot deleted (waited for until it is gone). The namespace made."""
    from kubernetes.client.rest import ApiException

    lab.core.patch_namespaced_config_map(MARKER, kept, {"data": {"value": "after"}}, _request_timeout=10)
    later = lab.scratch_namespace("C34")
    lab.core.delete_namespace(doomed, _request_timeout=10)

    def gone() -> bool:
        try:
            lab.core.read_namespace(doomed, _request_timeout=5)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    wait_for(gone, 60, _("namespace {name} to be deleted").format(name=doomed), 1)
    return later


@check(
    "C34", _("The cluster's state is etcd's state: a snapshot restored brings the whole cluster back to its moment"),
    claim=_("The cluster's state is etcd's state: a snapshot of etcd restored brings the whole cluster back to that "
            "moment."),
    texts=["000", "001"],
    see=["for n in @nodes.etcd@; do lab ssh $n -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl endpoint status "
         "-w fields | grep -E \"ClusterID|Revision\"'; done   # each member's cluster ID and revision now",
         "kubectl create configmap c34-marker --from-literal=value=before; kubectl create namespace c34-doomed",
         "make etcd-snapshot   # into @state@/etcd-snapshots/",
         "kubectl patch configmap c34-marker -p '{\"data\":{\"value\":\"after\"}}'; "
         "kubectl create namespace c34-later; kubectl delete namespace c34-doomed",
         "for n in @nodes.etcd@; do lab ssh $n -- 'systemctl stop etcd; mv @paths.etcd_data_dir@ "
         "@paths.etcd_data_dir@.c34'; done   # every member: the cluster's memory is gone",
         "make etcd-restore   # the newest snapshot: the one just taken",
         "lab status --wait 180   # the lab healthy again",
         "kubectl get configmap c34-marker -o jsonpath='{.data.value}'; echo   # before: the snapshot's value",
         "kubectl get namespace c34-doomed   # Active again",
         "kubectl get namespace c34-later   # gone: NotFound",
         "for n in @nodes.etcd@; do lab ssh $n -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl endpoint status "
         "-w fields | grep -E \"ClusterID|Revision\"'; done   # another cluster ID; the revision raised by a billion",
         "for n in @nodes.etcd@; do lab ssh $n -- rm -rf @paths.etcd_data_dir@.c34; done",
         "kubectl delete configmap c34-marker; kubectl delete namespace c34-doomed   # the snapshot stays in "
         "@state@/etcd-snapshots/"],
    does=_("Writes a marker ConfigMap (value 'before') and a second namespace, takes a snapshot with "
           "playbooks/etcd-snapshot.yml, then sets the marker to 'after', makes a third namespace and deletes the "
           "second. Destroys etcd's quorum: stops etcd on a majority of the members (on one member, that member) and "
           "takes their data directories away (read from each unit's --data-dir), and sees an API write fail. "
           "Restores every member from the one snapshot with playbooks/etcd-restore.yml, and finds the marker's old "
           "value and the deleted namespace back, the later namespace gone, a new etcd cluster ID on every member and "
           "the cluster healthy. Reports how long the restore took and what was lost since the snapshot."),
    hints=[
        _("*playbooks/etcd-snapshot.yml failed …*: no member was healthy to take the snapshot from (`lab ssh cp1 -- "
          "'. @paths.etcd_config_dir@/etcdctl.env; etcdctl endpoint health'`), or the state folder is not writable; "
          "nothing was destroyed yet. `make etcd-snapshot` shows the whole run."),
        _("*timed out after 30s waiting for API writes to fail without a quorum*: etcd did not really stop on the "
          "members (a unit with `KillMode=none`; `lab ssh cp1 -- pgrep -a etcd`), or the cluster has more etcd "
          "members than the inventory's `etcd` group, so a majority of the group is no majority of the cluster."),
        _("*playbooks/etcd-restore.yml failed …*: the restore stopped at the task the message names (a member that "
          "cannot start from the restored data: `lab ssh cp1 -- journalctl -u etcd`; an API server that never "
          "became ready). At its end the check restores again from the same snapshot; where that fails too (*could "
          "not restore*) the snapshot stays in @state@/etcd-snapshots/ and each destroyed member's data beside its "
          "data directory (`<data-dir>.c34-…`): `make etcd-restore SNAPSHOT=…` with that snapshot."),
        _("*… did not finish within …*: a playbook hung — a machine that stopped answering over SSH, or a wait of "
          "the playbook (etcd's members, the API servers' /readyz) that the machines were too slow for."),
        _("*timed out … waiting for all nodes Ready …*: after the restore a kubelet did not register again (`lab "
          "ssh w1 -- journalctl -u kubelet`); the restore restarts every kubelet and kube-proxy, and a node's Lease "
          "of the snapshot's moment must be renewed."),
        _("*… cluster IDs …*: a member kept its old data, so it is still in the old etcd cluster (the restore found "
          "a data directory in place and wrote none: `lab ssh cp1 -- ls @paths.etcd_data_dir@`), or the members did "
          "not form one new cluster (`etcdctl member list` on each)."),
        _("*… holds 'after', not the snapshot's 'before'*: the cluster came back in a later state than the "
          "snapshot's: the restore used a snapshot taken after the change, or a member kept the data it had (its "
          "--data-dir is not where the restore writes)."),
        _("*namespace …, deleted after the snapshot, is not back …*: the cluster came back in another state than "
          "the snapshot's: the restore used a snapshot taken after the deletion, or a member kept the data it had."),
        _("*namespace …, made after the snapshot, is still there …*: the cluster came back in a later state than the "
          "snapshot's: the restore used a snapshot taken after the change, or a member kept the data it had."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    missing = unavailable("etcd-snapshot", "etcd-restore")
    if missing:
        raise CheckSkipped(missing)
    if not lab.setting("state_dir"):
        raise CheckSkipped(_("the inventory {inventory} publishes no state folder (lab_settings.state_dir), where the "
                             "playbooks keep their snapshots: use the lab's inventory").format(
            inventory=lab.inventory))
    members = lab.etcd_members
    data_dirs = lab.on_each(members, lambda m: lab.unit_arg(m, "etcd", "data-dir"))
    for member, path in data_dirs.items():
        ev.expect(bool(path) and path.startswith("/") and path.strip("/") != "",
                  _("{member}: etcd keeps its data in {path} (its unit's --data-dir)").format(member=member, path=path),
                  _("{member}: etcd's unit gives no usable --data-dir ({path})").format(member=member, path=path))
    before = cluster_ids(lab)
    ev.expect(len(set(before.values())) == 1,
              _("etcd members {members}: each reports cluster ID {id} (asked of the member itself)").format(
                  members=", ".join(members), id=next(iter(before.values()))),
              _("before the check the members are in different clusters: {ids}").format(ids=before))

    drill = Drill()
    with lab.namespace("C34", pods=False) as kept, lab.namespace("C34", pods=False) as doomed:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        lab.core.create_namespaced_config_map(kept, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=MARKER), data={"value": "before"}), _request_timeout=10)
        ev.add(_("wrote ConfigMap {namespace}/{name} (value: before); namespace {doomed} exists").format(
            namespace=kept, name=MARKER, doomed=doomed))

        def forget_snapshot() -> None:
            if drill.needed:  # the cluster still needs it: kept for `make etcd-restore SNAPSHOT=…`
                return
            for path in drill.files:
                path.unlink(missing_ok=True)

        RESTORER.push(_("remove the check's snapshot from the state folder"), forget_snapshot)
        snapshot = take_snapshot(lab)
        drill.snapshot, drill.files = snapshot, [snapshot, snapshot.with_suffix(".json")]
        described = json.loads(snapshot.with_suffix(".json").read_text())
        ev.step(_("snapshot {name} from {member} (playbooks/etcd-snapshot.yml): revision {revision}, {keys} keys, "
                  "{size} bytes").format(name=snapshot.name, member=described.get("member"),
                                         revision=described.get("revision"), keys=described.get("totalKey"),
                                         size=described.get("totalSize")))

        later = later_change(lab, kept, doomed)
        at_destruction = int(member_status(lab, members[0])["header"]["revision"])
        ev.add(_("after the snapshot: ConfigMap {namespace}/{name} set to 'after', namespace {later} made, namespace "
                 "{doomed} deleted; etcd at revision {revision}").format(
            namespace=kept, name=MARKER, later=later, doomed=doomed, revision=at_destruction))

        # Quorum destroyed: a majority of the members stopped, their data taken away (moved beside it, removed once
        # the cluster is restored: the snapshot is then no longer the only copy of the cluster).
        majority = members[-(len(members) // 2 + 1):]
        tag = uuid.uuid4().hex[:5]

        def restore_if_destroyed() -> None:
            if drill.needed and drill.snapshot:
                try:
                    restore_snapshot(lab, drill.snapshot)
                except CheckFailed as exc:
                    raise CheckFailed(_("{error}; kept for a restore by hand: the snapshot {snapshot} and the data "
                                        "taken away ({kept}); `make etcd-restore SNAPSHOT={snapshot}`").format(
                        error=exc, snapshot=drill.snapshot,
                        kept=", ".join(f"{m}:{path}" for m, path in drill.kept.items()))) from exc
                drill.restored = True
            if drill.restored:
                lab.on_each(list(drill.kept), lambda m: lab.sh(m, f"rm -rf -- {shlex.quote(drill.kept[m])}"))

        RESTORER.push(_("restore etcd from the check's snapshot if its quorum is still destroyed, then remove the "
                        "members' data taken away"), restore_if_destroyed)
        drill.destroyed = True
        drill.kept = {m: f"{data_dirs[m]}.c34-{tag}" for m in majority}
        lab.on_each(majority, lambda m: lab.sh(m, f"systemctl stop etcd && mv -- {shlex.quote(data_dirs[m])} "
                                                  f"{shlex.quote(drill.kept[m])}"))
        ev.step(_("quorum destroyed: etcd stopped on {nodes} ({count} of {total} members), their data directories "
                  "taken away").format(nodes=", ".join(majority), count=len(majority), total=len(members)))
        for member in majority:
            path = shlex.quote(data_dirs[member])
            seen = lab.sh(member, f"systemctl is-active etcd; test -e {path} && echo present || echo absent",
                          check=False).split()
            ev.expect(len(seen) == 2 and seen[0] in ("inactive", "failed") and seen[1] == "absent",
                      _("{member}: etcd inactive, {path} gone (put aside as {kept} until the cluster is restored)")
                      .format(member=member, path=data_dirs[member], kept=drill.kept[member]),
                      _("{member}: etcd still active or {path} still there after the stop: {seen}").format(
                          member=member, path=data_dirs[member], seen=" ".join(seen)))
        error = wait_for(lambda: lab.api_writes(kept, "without-quorum"), THREE_WRITE_ATTEMPTS,
                         _("API writes to fail without a quorum"), 2)
        ev.expect(True, _("without a quorum an API write fails: {error}").format(error=error))

        seconds = restore_snapshot(lab, snapshot)
        drill.restored = True
        ev.step(_("restored every member ({members}) from {name} as a new etcd cluster in {seconds:.0f} s "
                  "(playbooks/etcd-restore.yml)").format(members=", ".join(members), name=snapshot.name,
                                                         seconds=seconds))
        lab.wait_healthy(HEALTHY_AFTER_RESTORE, ev)
        revision = described.get("revision")
        ev.add(_("lost with the restore: what etcd wrote after revision {revision} up to {destroyed} "
                 "({lost} revisions: the marker's new value, namespace {later}, the deletion of {doomed}, and the "
                 "cluster's own writes meanwhile: leases, events, statuses)").format(
            revision=revision, destroyed=at_destruction, lost=at_destruction - int(revision or 0), later=later,
            doomed=doomed))

        after = cluster_ids(lab)
        for member in members:
            ev.expect(after[member] != before[member] and len(set(after.values())) == 1,
                      _("{member}: cluster ID {before} -> {after}: a new etcd cluster").format(
                          member=member, before=before[member], after=after[member]),
                      _("after the restore the members report cluster IDs {after}; before: {before}").format(
                          after=after, before=before))
        now = int(member_status(lab, members[0])["header"]["revision"])
        ev.add(_("etcd's revision now: {now} (the snapshot's, raised by the restore and marked compacted, so that no "
                 "watch resumes from a revision the restored cluster reuses)").format(now=now))

        data = lab.core.read_namespaced_config_map(MARKER, kept, _request_timeout=10).data or {}
        ev.expect(data.get("value") == "before",
                  _("ConfigMap {namespace}/{name} holds the snapshot's value again: 'before'").format(
                      namespace=kept, name=MARKER),
                  _("after the restore ConfigMap {namespace}/{name} holds {value!r}, not the snapshot's "
                    "'before'").format(namespace=kept, name=MARKER, value=data.get("value")))
        try:
            phase = lab.core.read_namespace(doomed, _request_timeout=10).status.phase
        except ApiException as exc:
            phase = f"{exc.status} {exc.reason}"
        ev.expect(phase == "Active",
                  _("namespace {name}, deleted after the snapshot, is back: {phase}").format(name=doomed, phase=phase),
                  _("namespace {name}, deleted after the snapshot, is not back after the restore: {phase}").format(
                      name=doomed, phase=phase))
        try:
            lab.core.read_namespace(later, _request_timeout=10)
            found = True
        except ApiException as exc:
            if exc.status != 404:
                raise CheckFailed(_("namespace {name}: {status} {reason}").format(
                    name=later, status=exc.status, reason=exc.reason)) from exc
            found = False
        ev.expect(not found,
                  _("namespace {name}, made after the snapshot, is gone (404)").format(name=later),
                  _("namespace {name}, made after the snapshot, is still there after the restore").format(name=later))
