"""Disaster drills on a live cluster: etcd's state saved and brought back (make etcd-snapshot, make etcd-restore).

A marker is written and a namespace made, a snapshot is taken, then the marker changes, a namespace is made and the
first one deleted. A damaged copy of the snapshot is refused before anything changes (same etcd cluster, API
servers not restarted). The restore from the good snapshot brings the marker's old value and the deleted namespace
back, the later namespace is gone, and every member is in a new etcd cluster (another cluster ID); the cluster is
healthy after. Then the lab's check of the same claim, C34, which runs the same playbooks: it passes, and it fails
when the snapshot it restores was taken after its change (its falsification, test_labs.CASES_ELSEWHERE). `make
test-drills` runs it (K8S_LAB_DRILLS=1) on the default profile, DRILL_PROFILE=ha or external-etcd on the others."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid

import pytest
from conftest import after_call, check_module, lab_namespaces, make

from labs.drills import cluster_ids, snapshot_store, take_snapshot
from labs.registry import load_checks
from labs.runner import run_check
from labs.timing import wait_for
from tools.locations import state_dir

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_DRILLS"),
                       reason="the disaster drills run with `make test-drills` (K8S_LAB_DRILLS=1)"),
]
PROFILE = os.environ.get("DRILL_PROFILE", "default")


@pytest.fixture(scope="module")
def lab(cluster_up):
    return cluster_up.lab(PROFILE)


def started_at(lab, unit: str) -> dict[str, str]:
    return lab.on_each(lab.control_plane,
                       lambda node: lab.sh(node, f"systemctl show -P ActiveEnterTimestampMonotonic {unit}"))


def test_a_restore_brings_back_the_snapshot_state_as_a_new_etcd_cluster(lab, tmp_path):
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    tag = uuid.uuid4().hex[:5]
    kept, doomed, later = f"drill-kept-{tag}", f"drill-doomed-{tag}", f"drill-later-{tag}"
    created = []

    def namespace(name: str) -> None:
        lab.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        created.append(name)

    try:
        namespace(kept)
        namespace(doomed)
        lab.core.create_namespaced_config_map(kept, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="marker"),
                                                                       data={"v": "before"}))
        make("etcd-snapshot", PROFILE, timeout=600)
        store = state_dir() / "etcd-snapshots"
        snapshot = max(store.glob("*.db"), key=lambda p: p.stat().st_mtime)
        described = json.loads(snapshot.with_suffix(".json").read_text())
        print(f"snapshot {snapshot.name}: {described}")
        assert described["revision"] > 0 and described["totalKey"] > 0 and described["member"] in lab.etcd_members
        assert snapshot.stat().st_mode & 0o777 == 0o600

        # Changes after the snapshot: lost by the restore.
        lab.core.patch_namespaced_config_map("marker", kept, {"data": {"v": "after"}})
        namespace(later)
        lab.core.delete_namespace(doomed)
        def deleted() -> bool:
            try:
                lab.core.read_namespace(doomed)
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            return False

        wait_for(deleted, 120, f"namespace {doomed} to be deleted")
        before = cluster_ids(lab)
        assert len(set(before.values())) == 1, before

        # A damaged snapshot: refused before anything changes.
        damaged = tmp_path / "damaged.db"
        data = bytearray(snapshot.read_bytes())
        middle = len(data) // 2
        data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])  # changed whatever was there
        damaged.write_bytes(bytes(data))
        apiservers = started_at(lab, "kube-apiserver")
        proc = make("etcd-restore", PROFILE, timeout=600, check=False, args=(f"SNAPSHOT={damaged}",))
        assert proc.returncode != 0
        assert "is not a sound etcd snapshot" in proc.stdout, proc.stdout[-3000:]
        assert "expected sha256" in proc.stdout, proc.stdout[-3000:]  # refused for its hash, not for another reason
        assert "Nothing was changed" in proc.stdout
        assert cluster_ids(lab) == before
        assert started_at(lab, "kube-apiserver") == apiservers, "the API servers were restarted"
        assert lab.core.read_namespaced_config_map("marker", kept).data == {"v": "after"}

        # The restore from the good snapshot (the newest in the store).
        started = time.monotonic()
        make("etcd-restore", PROFILE, timeout=1200)
        print(f"restore: {time.monotonic() - started:.0f} s")
        lab.wait_healthy(timeout=300)
        after = cluster_ids(lab)
        assert len(set(after.values())) == 1, after
        assert set(after.values()) != set(before.values()), "the restored members are not a new cluster"
        assert lab.core.read_namespaced_config_map("marker", kept).data == {"v": "before"}
        assert lab.core.read_namespace(doomed).status.phase == "Active"
        with pytest.raises(ApiException) as gone:
            lab.core.read_namespace(later)
        assert gone.value.status == 404
        assert lab.ready_nodes() == sorted(lab.nodes)
    finally:
        for name in created:
            try:
                lab.core.delete_namespace(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def test_a_restore_without_a_snapshot_is_refused(lab, tmp_path):
    proc = make("etcd-restore", PROFILE, timeout=300, check=False, args=(f"SNAPSHOT={tmp_path}/none.db",))
    assert proc.returncode != 0
    assert "no snapshot" in proc.stdout and "Nothing was changed" in proc.stdout, proc.stdout[-2000:]


# --- C34, the lab's check of the same claim -------------------------------------------------------------------


def store_now(lab) -> set:
    store = snapshot_store(lab)
    return set(store.glob("*")) if store.is_dir() else set()


def left_behind(lab, store_before: set) -> tuple[list[str], list[str]]:
    """What a run of C34 left: files in the snapshot store, namespaces of the checks (not being deleted)."""
    files = sorted(p.name for p in store_now(lab) - store_before)
    return files, lab_namespaces(lab)


def show(result) -> None:
    print("\n".join(f"{at:6.1f}s {line}" for at, line in zip(result.evidence_at, result.evidence, strict=False)),
          "\n→", result.message)


def test_c34_restores_the_whole_cluster_from_its_snapshot_and_leaves_nothing_behind(lab):
    before = store_now(lab)
    result = run_check(lab, load_checks()["C34"], tty=False)
    show(result)
    assert result.status == "passed", result.message
    assert any(line.startswith("lost with the restore:") for line in result.evidence), result.evidence
    assert left_behind(lab, before) == ([], [])


@contextlib.contextmanager
def a_later_snapshot_in_place_of_the_checks(lab):
    """C34's claim made false: right after the check's later change, a snapshot taken then takes the place of the
    check's own in the state folder (a backup overwritten by a newer one). The check restores that one."""
    store, before = snapshot_store(lab), store_now(lab)

    @contextlib.contextmanager
    def overwritten(_later_namespace):
        own = [p for p in store.glob("*.db") if p not in before]
        assert len(own) == 1, own  # the check's, taken since the case began
        newer = take_snapshot(lab)
        for suffix in (".db", ".json"):
            os.replace(newer.with_suffix(suffix), own[0].with_suffix(suffix))
        yield

    with after_call(check_module("C34"), "later_change", overwritten):
        yield


def test_c34_fails_when_the_snapshot_it_restores_was_taken_after_its_change(lab):
    before = store_now(lab)
    started = time.monotonic()
    with a_later_snapshot_in_place_of_the_checks(lab):
        result = run_check(lab, load_checks()["C34"], tty=False, wait_healthy=False)
    show(result)
    print(f"C34 with a later snapshot: {time.monotonic() - started:.0f} s")
    assert result.status == "failed", f"C34 did not fail with a later snapshot: {result.status}"
    assert re.search(r"ConfigMap \S+/marker holds 'after', not the snapshot's 'before'", result.message), \
        f"C34 failed for another reason than the later snapshot: {result.message!r}"
    lab.wait_healthy(timeout=300)  # the check restored the cluster (to the later snapshot's state) itself
    assert lab.ready_nodes() == sorted(lab.nodes)
    assert left_behind(lab, before) == ([], [])
