"""The topologies beside default and ha, end to end on the docker provider: the `external-etcd` profile (etcd on
three machines of its own, two control-plane nodes without etcd, two workers). Every node Ready, `lab check --all`
passes with C31 passing, a second provision changes nothing, and C31 fails while an etcd runs on a control-plane
node.

`make test-topologies` runs it (K8S_LAB_TOPOLOGIES=1); not part of `make test`, whose time budget the default and
ha profiles already fill. K8S_LAB_E2E_REUSE=external-etcd uses a running cluster of that profile."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import lab_check, make
from test_cluster import recap
from test_labs import CASES_ELSEWHERE, lab_namespaces

from labs.faults import FAULTS, broken
from labs.lab import Lab
from labs.registry import load_checks
from labs.runner import run_check

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_TOPOLOGIES"),
                       reason="the other topologies run with `make test-topologies` (K8S_LAB_TOPOLOGIES=1)"),
]
PROFILE = "external-etcd"


@pytest.fixture(scope="module")
def external(cluster_up):
    up = cluster_up(PROFILE)
    lab = Lab()
    lab.ping()
    return lab, up


def test_external_etcd_machines_are_no_nodes(external):
    lab, up = external
    if up is not None:
        assert not [h for h, r in recap(up.stdout).items() if r["failed"] or r["unreachable"]], up.stdout[-4000:]
    assert lab.external_etcd == ["e1", "e2", "e3"], lab.groups
    assert lab.control_plane == ["cp1", "cp2"]
    assert lab.ready_nodes() == ["cp1", "cp2", "w1", "w2"]


def test_every_check_passes_on_external_etcd(external, tmp_path):
    report = tmp_path / "report.json"
    rc, out = lab_check("--all", "--json", str(report))
    results = {r["id"]: r for r in json.loads(report.read_text())}
    bad = {i: r["message"] for i, r in results.items() if r["status"] != "passed"}
    assert not bad, bad
    assert results["C31"]["status"] == "passed"
    assert rc == 0, out[-3000:]
    assert len(results) == len(load_checks())


def test_second_provision_changes_nothing_on_external_etcd(external):
    again = make("provision", PROFILE, timeout=900)
    result = recap(again.stdout)
    assert set(result) >= {"cp1", "cp2", "w1", "w2", "e1", "e2", "e3"}, again.stdout[-3000:]
    changed = {host: r["changed"] for host, r in result.items() if r["changed"]}
    assert not changed, f"second run changed something: {changed}\n{again.stdout[-6000:]}"


def test_c31_fails_while_etcd_runs_on_a_control_plane_node(external):
    """The falsification of C31 (test_labs.CASES_ELSEWHERE): a real etcd, started by hand on the last control-plane
    node, is etcd on the control plane after all (the catalogue's fault C31, which `lab break C31` puts in)."""
    lab, _ = external
    assert "C31" in CASES_ELSEWHERE
    node = lab.control_plane[-1]
    fault = FAULTS["C31"]
    with broken(lab, fault):
        result = run_check(lab, load_checks()["C31"], tty=False, wait_healthy=False)
    print("\n".join(result.evidence), "\n→", result.message)
    assert result.status == "failed", result.status
    reason = rf"{node} \(control plane\) runs etcd: pid \d+ /usr/local/sbin/lab-stray/etcd"
    assert fault.reason_for(lab) == reason
    assert re.search(reason, result.message), f"{result.message!r} does not match {reason!r}"
    assert not lab_namespaces(lab)
