"""Every runtime the course names, side by side, end to end on the docker provider: the `runtimes` profile (one
control-plane node on containerd, workers on containerd, CRI-O and Docker Engine with cri-dockerd). Every node
Ready and reporting the runtime its settings give it, `lab check --all` passes with C32 passing, a second
provision changes nothing, and C32 fails while one worker's runtime is stopped.

`make test-runtimes` runs it (K8S_LAB_RUNTIMES=1); not part of `make test`. CRI-O and cri-dockerd are an opt-in
artifact set (versions.yml set runtimes): where the cache lacks them (a fresh machine without a mirror or their
source trees), the tests skip and say so. K8S_LAB_E2E_REUSE=runtimes uses a running cluster of that profile."""

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
from tools import settings

PROFILE = "runtimes"


def lacking() -> list[str]:
    """What the cache lacks for the runtimes profile, as the settings check says it (empty: nothing)."""
    try:
        settings.load(profile=PROFILE, provider="docker")
    except settings.SettingsError as exc:
        return [p for p in exc.problems if "lacks" in p]
    return []


pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_RUNTIMES"),
                       reason="the runtimes profile runs with `make test-runtimes` (K8S_LAB_RUNTIMES=1)"),
]


@pytest.fixture(scope="module")
def runtimes(cluster_up):
    missing = lacking()
    if missing:
        pytest.skip("the artifact cache lacks the runtimes set: " + " ".join(missing))
    up = cluster_up(PROFILE)
    lab = Lab()
    lab.ping()
    return lab, up


def test_every_node_reports_the_runtime_its_settings_give_it(runtimes):
    lab, up = runtimes
    if up is not None:
        assert not [h for h, r in recap(up.stdout).items() if r["failed"] or r["unreachable"]], up.stdout[-4000:]
    assert lab.ready_nodes() == ["cp1", "w1", "w2", "w3"]
    reported = {n.metadata.name: n.status.node_info.container_runtime_version for n in lab.core.list_node().items}
    print(reported)
    assert {n: v.split("://")[0] for n, v in reported.items()} == {
        "cp1": "containerd", "w1": "containerd", "w2": "cri-o", "w3": "docker"}, reported


def test_every_check_passes_on_runtimes(runtimes, tmp_path):
    report = tmp_path / "report.json"
    rc, out = lab_check("--all", "--json", str(report))
    results = {r["id"]: r for r in json.loads(report.read_text())}
    bad = {i: r["message"] for i, r in results.items() if r["status"] not in ("passed", "skipped")}
    assert not bad, bad
    skipped = {i: r["message"] for i, r in results.items() if r["status"] == "skipped"}
    print("skipped:", skipped)
    # One control-plane node, stacked etcd: C09 and C28 need ha, C31 an external etcd.
    assert set(skipped) == {"C09", "C28", "C31"}, skipped
    assert results["C32"]["status"] == "passed"
    assert rc == 0, out[-3000:]
    assert len(results) == len(load_checks())


def test_second_provision_changes_nothing_on_runtimes(runtimes):
    again = make("provision", PROFILE, timeout=900)
    result = recap(again.stdout)
    print({h: r["changed"] for h, r in result.items()})
    assert set(result) >= {"cp1", "w1", "w2", "w3"}, again.stdout[-3000:]
    changed = {host: r["changed"] for host, r in result.items() if r["changed"]}
    assert not changed, f"second run changed something: {changed}\n{again.stdout[-6000:]}"


def test_c32_fails_while_the_cri_o_worker_runtime_is_stopped(runtimes):
    """The falsification of C32 (test_labs.CASES_ELSEWHERE): CRI-O stopped on its worker (the catalogue's fault C32,
    `lab break C32`)."""
    lab, _ = runtimes
    assert "C32" in CASES_ELSEWHERE
    fault = FAULTS["C32"]
    with broken(lab, fault):
        result = run_check(lab, load_checks()["C32"], tty=False, wait_healthy=False)
    print("\n".join(result.evidence), "\n→", result.message)
    assert result.status == "failed", result.status
    assert fault.reason_for(lab) == r"w2: crictl on unix://\S+/crio\.sock: "
    assert re.search(fault.reason_for(lab), result.message), result.message
    assert not lab_namespaces(lab)
    after = run_check(lab, load_checks()["C32"], tty=False)
    assert after.status == "passed", after.message
