"""Disaster drills on a live cluster: etcd's state saved and brought back (make etcd-snapshot, make etcd-restore).

A marker is written and a namespace made, a snapshot is taken, then the marker changes, a namespace is made and the
first one deleted. A damaged copy of the snapshot is refused before anything changes (same etcd cluster, API
servers not restarted). The restore from the good snapshot brings the marker's old value and the deleted namespace
back, the later namespace is gone, and every member is in a new etcd cluster (another cluster ID); the cluster is
healthy after. `make test-drills` runs it (K8S_LAB_DRILLS=1) on the default profile, DRILL_PROFILE=ha or
external-etcd on the others."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from conftest import make

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


def cluster_ids(lab) -> dict[str, str]:
    """Each member's etcd cluster ID, as the member itself reports it."""
    def one(node: str) -> str:
        return str(json.loads(lab.etcdctl("endpoint status -w json", node=node))[0]["Status"]["header"]["cluster_id"])
    return lab.on_each(lab.etcd_members, one)


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
