"""Break-and-fix as a learner meets it, on the default profile, through the `lab` command only: for every exercise
of the catalogue this cluster can have, `lab break FAULT` puts it in, `lab check CNN` fails and prints a hint,
`lab break --undo` takes it out, and `lab status` is healthy again with nothing left behind. And `lab status`
names a stopped component and exits non-zero.

`make test-breaks` runs it (K8S_LAB_BREAKS=1): about 40 minutes on 2 cores, not in CI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import lab_namespaces

from labs.faults import CATALOGUE
from labs.paths import ROOT

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_BREAKS"),
                       reason="the break-and-fix tests run with `make test-breaks` (K8S_LAB_BREAKS=1)"),
]
PROFILE = "default"


def lab_cmd(*args: str, timeout: float = 900) -> tuple[int, str]:
    """`lab ARGS` as a learner runs it (English, no terminal): exit status and output."""
    env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    proc = subprocess.run([sys.executable, "-m", "labs.cli", *args, "--lang", "en"], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False, env=env)
    print(f"$ lab {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}")
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def lab(cluster_up):
    return cluster_up.lab(PROFILE)


def test_lab_status_names_a_stopped_component(lab):
    node = lab.control_plane[0]
    try:
        lab.sh(node, "systemctl stop kube-scheduler")
        rc, out = lab_cmd("status")
        assert rc != 0 and "kube-scheduler" in out, out
    finally:
        lab.sh(node, "systemctl start kube-scheduler", check=False)
        lab.wait_healthy(timeout=240)
    rc, out = lab_cmd("status")
    assert rc == 0, out


@pytest.mark.parametrize("fault", [f.id for f in CATALOGUE])
def test_break_check_undo(lab, fault):
    found = next(f for f in CATALOGUE if f.id == fault)
    if why := found.unfit(lab):
        pytest.skip(f"{fault} cannot be put into this cluster: {why}")
    rc, out = lab_cmd("status")
    assert rc == 0, f"the cluster was not healthy before {fault}: {out}"
    try:
        rc, out = lab_cmd("break", fault)
        assert rc == 0, out
        rc, out = lab_cmd("check", found.check)
        assert rc != 0, f"lab check {found.check} passed with {fault} in the cluster"
        assert "hint:" in out, f"lab check {found.check} failed without a hint"
    finally:
        rc, out = lab_cmd("break", "--undo")
    assert rc == 0, out
    rc, out = lab_cmd("status")
    assert rc == 0, out
    assert not lab_namespaces(lab)
