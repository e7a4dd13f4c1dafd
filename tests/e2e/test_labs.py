"""The lab's checks on a live ha cluster: the live diagram; each check fails while its claim is made false
(falsification), and the cluster is restored; last, after all those breaks and repairs, the cluster is as healthy
as before and every check passes on it (`lab check --all`), the disruptive ones leaving it as healthy as they found
it (with `make test-labs`, run twice in a row)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time

import pytest
from conftest import after_call, check_module, lab_check, lab_namespaces

from labs.faults import CATALOGUE, TEST_ONLY, Fault, broken, stop
from labs.kube import test_image as echo_image  # not "test_*" here: pytest would collect it
from labs.lab import Lab
from labs.registry import load_checks
from labs.runner import run_check

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.labs]


@pytest.fixture(scope="module")
def lab(cluster_up):
    return cluster_up.lab("ha")


@pytest.fixture(autouse=True)
def no_fault_left_behind(lab):
    """A test whose fault could not be undone fails with the undo's error and leaves the fault's record (for `lab
    break --undo`). The next test undoes it first, with a Lab of its own, so that one failure does not refuse every
    later case ("a break-and-fix exercise is already active"); if the cluster still cannot be restored, the test
    errors in its setup, naming the fault, instead of failing as if its check had been wrong."""
    from labs.journal import Journal, undo

    left = Journal.load()
    if left is not None:
        errors = undo(Lab(), left)
        if errors:
            pytest.fail(f"fault {left.fault} of an earlier test is still in place: {'; '.join(map(str, errors))}")
    yield


def assert_healthy(lab: Lab) -> None:
    """All nodes Ready, every component running, no namespace of a check left behind."""
    assert lab.ready_nodes() == sorted(lab.nodes)
    for node in lab.machines:
        for unit in lab.control_plane_components(node):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    for node in lab.nodes:
        for unit in ("kubelet", "kube-proxy", "containerd"):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    assert not lab_namespaces(lab)


# --- the live diagram (lab diagram): the connections the machines hold, a forbidden one in red ---------


def test_the_live_diagram_draws_the_connections_the_cluster_holds(lab, tmp_path):
    """On the healthy cluster only API servers talk to etcd; every kubelet and the scheduler and controller
    manager of every control-plane node reach an API server (the API address or one directly). With C04's fault
    (a rogue etcd client on cp1), its connection is an edge drawn red, in the DOT, the Mermaid block and the SVG."""
    from labs import diagram as D

    def to_api(edges, machine: str, component: str) -> bool:
        return any(e.src == (machine, component) and e.dst[1] in (D.API, "kube-apiserver") for e in edges)

    healthy = D.observe(lab)
    etcd_clients = {e.src[1] for e in healthy.edges if e.dst[1] == "etcd" and e.src[1] != "etcd"}
    assert etcd_clients == {"kube-apiserver"}, healthy.edges
    assert all(e.ok for e in healthy.edges), [e for e in healthy.edges if not e.ok]
    assert all(to_api(healthy.edges, node, "kubelet") for node in lab.nodes), healthy.edges
    for cp in lab.control_plane:
        for component in ("kube-scheduler", "kube-controller-manager"):
            assert to_api(healthy.edges, cp, component), (cp, component, healthy.edges)
    fault = next(f for f in CATALOGUE if f.id == "C04")
    with broken(lab, fault):
        graph = D.observe(lab)  # the rogue client holds a watch: its connection stays open
        red = [e for e in graph.edges if not e.ok]
        assert red and all(e.dst[1] == "etcd" and e.src[0] == lab.control_plane[0] for e in red), graph.edges
        files = {p.suffix: p for p in D.render(graph, tmp_path)}
        assert "color=red" in files[".dot"].read_text() and "stroke:red" in files[".mmd"].read_text()
        assert 'stroke="red"' in files[".svg"].read_text()
    print(D.to_mermaid(graph))
    assert not [e for e in D.observe(lab).edges if not e.ok]


# --- falsification: make each claim false, see its check fail, restore ------------------
# The faults are the catalogue's (labs/faults.py), the same that `lab break` puts into a learner's cluster: each
# recorded in the state folder as it goes in (labs/journal.py) and undone at the end of its case. Three claims can
# only be made false in the middle of their check (TEST_ONLY there): those cases wrap a function of the check
# (conftest.after_call); so can C34's, whose case is in test_drills.py.


@contextlib.contextmanager
def image_removed(lab: Lab, node: str, image: str):
    """The runtime no longer holds the image of a running container under its name (removed from containerd's
    k8s.io namespace); its content is kept meanwhile under a second name, given back afterwards (the node has no
    archive of it: the containerd role removes each one once imported)."""
    kept = f"{image}-k8s-arch-lab-test"
    lab.sh(node, f"ctr -n k8s.io images tag --force {image} {kept}")
    lab.sh(node, f"ctr -n k8s.io images rm {image}")
    try:
        yield
    finally:
        lab.sh(node, f"ctr -n k8s.io images ls -q | grep -qx '{image}' || ctr -n k8s.io images tag {kept} {image}",
               check=False)
        lab.sh(node, f"ctr -n k8s.io images rm {kept}", check=False)


def stopped(lab: Lab, check_id: str, nodes: list[str], unit: str):
    """A unit stopped for the body of the ``with`` (the catalogue's labs.faults.stop, recorded and undone as every
    fault is: started again with every service stopped along with it, then the cluster healthy)."""
    return broken(lab, Fault(f"{check_id}-{unit}-stopped", check_id,
                             lambda lab_, journal: stop(lab_, journal, nodes, unit)))


def falsifiers(lab: Lab) -> dict[str, tuple]:
    """Per case: (the check, the falsifier making its claim false, a pattern the failure message must match: the
    reason the check gives is the broken claim, never an unrelated error). Where a check looks at each of several
    instances (etcd members, API servers, kubelets, control-plane nodes, workers), only one of them is broken.
    Every fault of the catalogue but those of another topology's checks, and the test-only ones."""
    cases = {fault.id: (fault.check, lambda fault=fault: broken(lab, fault), fault.reason_for(lab))
             for fault in CATALOGUE if fault.check not in CASES_ELSEWHERE and fault.id not in FAULTS_ELSEWHERE}
    cases.update({
        # once the Deployment runs, the controllers stop: a deleted pod is not replaced
        "C12": ("C12", lambda: after_call(check_module("C12"), "run_deployment",
                                          lambda _pods: stopped(lab, "C12", lab.control_plane,
                                                                "kube-controller-manager")),
                r"waiting for \d+ ready pods app=web"),
        # once the pod runs, its node's kubelet stops: a killed container is not restarted
        "C18": ("C18", lambda: after_call(check_module("C18"), "run_pod",
                                          lambda pod: stopped(lab, "C18", [pod.spec.node_name], "kubelet")),
                r"waiting for the container to be restarted"),
        # once the pod runs, the runtime of its node no longer holds the pod's image
        "C22": ("C22", lambda: after_call(check_module("C22"), "run_pod",
                                          lambda pod: image_removed(lab, pod.spec.node_name, echo_image())),
                r": \S+ not in containerd"),
    })
    return cases


# Checks whose claim needs another topology than ha are falsified in the tests of that topology (OTHER_TOPOLOGY: ha
# skips them); C34's in the disaster drills, beside the drills' own restore (make test-drills).
CASES_ELSEWHERE = {"C31": "test_topologies.py (external-etcd profile)",
                   "C32": "test_runtimes.py (runtimes profile)",
                   "C34": "test_drills.py (make test-drills: a restore from a snapshot taken after the change)"}
OTHER_TOPOLOGY = {"C31", "C32"}
# Faults of a check that ha runs as well, whose fault needs another topology (C02 on a control plane that takes
# workloads).
FAULTS_ELSEWHERE = {"C02-single": "test_cluster.py (single profile)"}
CASES = ["C01", "C02", "C03", "C04", "C04-member", "C05", "C06", "C07", "C07-scheduler", "C08", "C09", "C10",
         "C11", "C11-cordon", "C12", "C13", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21", "C22", "C23",
         "C24", "C25", "C26", "C27", "C28", "C29", "C30"]


def test_every_check_has_a_falsification_case():
    assert {case.split("-")[0] for case in CASES} | set(CASES_ELSEWHERE) == set(load_checks())
    # the cases are the catalogue's faults (those of another topology's checks aside) and the test-only ones
    assert set(CASES) == {f.id for f in CATALOGUE if f.check not in CASES_ELSEWHERE
                          and f.id not in FAULTS_ELSEWHERE} | (set(TEST_ONLY) - set(CASES_ELSEWHERE))


@pytest.mark.parametrize("case", CASES)
def test_check_fails_while_its_claim_is_false(lab, case):
    check_id, falsify, reason = falsifiers(lab)[case]
    chk = load_checks()[check_id]
    # the falsifier keeps the claim false (and so the cluster unhealthy) until it exits; it waits for the
    # cluster to be healthy again itself, so the check's own health wait would only time out here
    started = time.monotonic()
    with falsify():
        applied = time.monotonic()
        result = run_check(lab, chk, tty=False, wait_healthy=False)
        checked = time.monotonic()
    # where a case spends its time (kept in the JUnit report of make test: junit_logging in pyproject.toml)
    lines = zip(result.evidence_at, result.evidence, strict=False)
    print("\n".join(f"{at:6.1f}s {line}" for at, line in lines), "\n→", result.message)
    print(f"{case}: fault put in {applied - started:.1f}s, check {checked - applied:.1f}s, "
          f"undone and healthy {time.monotonic() - checked:.1f}s")
    assert result.status == "failed", f"{case} did not fail while its claim was false: {result.status}"
    assert re.search(reason, result.message), f"{case} failed for another reason than the broken claim: " \
        f"{result.message!r} does not match {reason!r}"
    assert not lab_namespaces(lab)


def test_after_every_falsification_every_check_passes_and_leaves_the_cluster_healthy(lab, tmp_path):
    """Last of the module: the falsification tests above broke the cluster and restored it once per case. It is as
    healthy as before (all nodes Ready, every component running, no namespace left behind), and `lab check --all`
    passes on it (the disruptive checks once), leaving it as healthy again. With `make test-labs`
    (K8S_LAB_LABS_FULL=1), the disruptive checks once more in a row."""
    assert_healthy(lab)
    report = tmp_path / "report.json"
    # C34's restore of three members is a disaster drill: `make test-drills DRILL_PROFILE=ha` and `make test-labs`
    # run it on ha; make test runs it on single (test_cluster.py), within CI's budget.
    selected = ["--all"] if os.environ.get("K8S_LAB_LABS_FULL") == "1" else [c for c in load_checks() if c != "C34"]
    rc, out = lab_check(*selected, "--json", str(report), "--junit", str(tmp_path / "r.xml"),
                        "--markdown", str(tmp_path / "r.md"))
    results = json.loads(report.read_text())
    # ha has every topology but an external etcd's (C31) and workers on other runtimes (C32): skipped, with reasons
    skipped = {r["id"]: r["message"] for r in results if r["status"] == "skipped"}
    assert sorted(skipped) == sorted(OTHER_TOPOLOGY) and all(skipped.values()), skipped
    bad = {r["id"]: r["message"] for r in results if r["status"] not in ("passed", "skipped")}
    assert not bad, bad
    assert rc == 0
    assert len(results) == (len(load_checks()) if selected == ["--all"] else len(selected))

    if os.environ.get("K8S_LAB_LABS_FULL") == "1":
        disruptive = [c.id for c in load_checks().values() if c.disruptive]
        again = tmp_path / "again.json"
        rc, out = lab_check(*disruptive, "--json", str(again))
        bad = {r["id"]: r["message"] for r in json.loads(again.read_text()) if r["status"] != "passed"}
        assert not bad and rc == 0, (bad, out[-3000:])
    assert_healthy(lab)
