"""The lab's checks on a live ha cluster: every check passes; each check fails
while its claim is made false (falsification); the disruptive checks leave the
cluster as healthy as they found it, even run twice in a row."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from labs.cli import run_check
from labs.core import Lab, load_checks

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.labs]

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "labs.cli"]


@pytest.fixture(scope="module")
def lab(cluster_up):
    cluster_up("ha")
    lab = Lab()
    lab.ping()
    return lab


def lab_check(*args: str, timeout: float = 1800) -> tuple[int, str]:
    proc = subprocess.run([*LAB, "check", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          check=False)
    print(proc.stdout[-20000:])
    return proc.returncode, proc.stdout + proc.stderr


def test_every_check_passes_on_the_ha_profile(lab, tmp_path):
    report = tmp_path / "report.json"
    rc, out = lab_check("--all", "--json", str(report), "--junit", str(tmp_path / "r.xml"),
                        "--markdown", str(tmp_path / "r.md"))
    results = json.loads(report.read_text())
    bad = {r["id"]: r["message"] for r in results if r["status"] != "passed"}
    assert not bad, bad
    assert rc == 0
    assert len(results) == len(load_checks())


def lab_namespaces(lab: Lab) -> list[str]:
    return [n.metadata.name for n in lab.core.list_namespace(label_selector="k8s-arch-lab/check").items]


def test_disruptive_checks_twice_leave_the_cluster_healthy(lab):
    disruptive = [c.id for c in load_checks().values() if c.disruptive]
    for _ in range(2):
        rc, out = lab_check(*disruptive)
        assert rc == 0, out[-3000:]
    assert lab.ready_nodes() == sorted(lab.nodes)
    for node in lab.control_plane:
        for unit in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    for node in lab.nodes:
        for unit in ("kubelet", "kube-proxy", "containerd"):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    leftovers = [n for n in lab_namespaces(lab) if lab.core.read_namespace(n).status.phase != "Terminating"]
    assert not leftovers, leftovers


# --- falsification: make each claim false, see its check fail, restore ------------------


@contextlib.contextmanager
def unstoppable(lab: Lab, nodes: list[str], *units: str):
    """`systemctl stop` leaves the components running: the claim that they stopped is false."""
    for node in nodes:
        for unit in units:
            dropin = f"/etc/systemd/system/{unit}.service.d/zz-lab-falsify.conf"
            lab.sh(node, f"mkdir -p $(dirname {dropin}) && printf '[Service]\\nKillMode=none\\nExecStop=/bin/true\\n'"
                         f" > {dropin} && systemctl daemon-reload")
    try:
        yield
    finally:
        for node in nodes:
            for unit in units:
                dropin = f"/etc/systemd/system/{unit}.service.d/zz-lab-falsify.conf"
                lab.sh(node, f"rm -f {dropin} && systemctl daemon-reload && pkill -x {unit[:15]} ; sleep 1; "
                             f"systemctl restart --no-block {unit}", check=False)
        lab.wait_healthy(timeout=240)


@contextlib.contextmanager
def stopped(lab: Lab, nodes: list[str], unit: str):
    for node in nodes:
        lab.sh(node, f"systemctl stop {unit}")
    try:
        yield
    finally:
        for node in nodes:
            lab.sh(node, f"systemctl start --no-block {unit}")
        lab.wait_healthy(timeout=240)


@contextlib.contextmanager
def transient_unit(lab: Lab, node: str, unit: str):
    """A process calling itself a control-plane component, on a worker."""
    lab.sh(node, f"systemd-run --unit={unit} --collect sleep 600")
    try:
        yield
    finally:
        lab.sh(node, f"systemctl stop {unit}", check=False)


@contextlib.contextmanager
def untainted(lab: Lab, node: str):
    taint = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    body = lab.core.read_node(node)
    lab.core.patch_node(node, {"spec": {"taints": [t.to_dict() for t in body.spec.taints or []
                                                   if t.key != taint["key"]]}})
    try:
        yield
    finally:
        current = [t.to_dict() for t in lab.core.read_node(node).spec.taints or []]
        lab.core.patch_node(node, {"spec": {"taints": current + [taint]}})


def vip_holder(lab: Lab) -> str:
    vip = lab.server.split("//")[1].rsplit(":", 1)[0]
    return next(n for n in lab.control_plane if vip in lab.sh(n, "ip -4 -o addr show", check=False))


def falsifiers(lab: Lab) -> dict:
    worker, cp = lab.workers[0], lab.control_plane[0]
    return {
        "C01": lambda: transient_unit(lab, worker, "kube-scheduler"),
        "C02": lambda: untainted(lab, cp),
        "C03": lambda: stopped(lab, [worker], "kube-proxy"),
        "C08": lambda: unstoppable(lab, lab.groups["etcd"], "etcd"),
        "C10": lambda: unstoppable(lab, lab.control_plane, "kube-scheduler"),
        "C13": lambda: unstoppable(lab, lab.control_plane, "kube-controller-manager"),
        "C14": lambda: unstoppable(lab, [lab.workers[-1]], "kubelet"),
        "C16": lambda: stopped(lab, [worker], "kubelet"),
        "C25": lambda: unstoppable(lab, [lab.workers[-1]], "kube-proxy"),
        "C27": lambda: unstoppable(lab, lab.control_plane, "etcd", "kube-apiserver"),
        "C28": lambda: stopped(lab, [n for n in lab.control_plane if n != vip_holder(lab)], "kube-apiserver"),
    }


FALSIFIED = ["C01", "C02", "C03", "C08", "C10", "C13", "C14", "C16", "C25", "C27", "C28"]


@pytest.mark.parametrize("check_id", FALSIFIED)
def test_check_fails_while_its_claim_is_false(lab, check_id):
    chk = load_checks()[check_id]
    with falsifiers(lab)[check_id]():
        result = run_check(lab, chk, tty=False)
    print("\n".join(result.evidence), "\n→", result.message)
    assert result.status == "failed", f"{check_id} did not fail while its claim was false: {result.status}"
    assert not lab_namespaces(lab) or all(lab.core.read_namespace(n).status.phase == "Terminating"
                                          for n in lab_namespaces(lab))
