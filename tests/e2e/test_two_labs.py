"""Two labs on one host: a second lab with its own cluster_name, node network and state folder comes up beside
the default profile's, both are healthy at once, and `make down` of the second leaves the first healthy and
untouched (its containers, volumes and network).

`make test-two-labs` runs it (K8S_LAB_TWO_LABS=1); not part of `make test`."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from labs.lab import Lab

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_TWO_LABS"),
                       reason="two labs side by side run with `make test-two-labs` (K8S_LAB_TWO_LABS=1)"),
]
SECOND = {"cluster_name": "k8s-arch-lab-two", "node_cidr": "192.168.59.0/24"}


def second_lab_env() -> dict:
    """The environment of a second lab from this checkout: its settings file and state folder."""
    base = Path(tempfile.mkdtemp(prefix="k8s-lab-two-"))
    doc = yaml.safe_load((ROOT / "settings.yml").read_text())
    doc["cluster_name"] = SECOND["cluster_name"]
    doc["network"]["node_cidr"] = SECOND["node_cidr"]
    (base / "settings.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_LAB_") or k == "K8S_LAB_TWO_LABS"}
    return env | {"K8S_LAB_SETTINGS": str(base / "settings.yml"), "K8S_LAB_STATE_DIR": str(base / "state"),
                  "PROVIDER": "docker", "PROFILE": "default"}


def run(cmd: list[str], env: dict | None = None, timeout: float = 1500) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    print(f"{' '.join(cmd)}: rc={proc.returncode}")
    return proc


def containers(label: str) -> list[str]:
    return run(["docker", "ps", "-a", "--filter", f"label=org.k8s-arch-lab.cluster={label}",
                "--format", "{{.Names}}"]).stdout.split()


@pytest.fixture(scope="module")
def first(cluster_up):
    cluster_up("default")
    lab = Lab()
    lab.ping()
    return lab


def test_a_second_lab_on_the_same_network_is_refused_before_anything_is_made(first):
    env = second_lab_env()
    doc = yaml.safe_load(Path(env["K8S_LAB_SETTINGS"]).read_text())
    doc["network"]["node_cidr"] = first.settings()["network"]["node_cidr"]
    Path(env["K8S_LAB_SETTINGS"]).write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = run(["make", "--no-print-directory", "up"], env)
    assert proc.returncode != 0
    assert "is already in use on this host" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert not containers(SECOND["cluster_name"])


def test_two_labs_side_by_side_and_down_of_one_leaves_the_other(first):
    name = first.settings()["cluster_name"]
    before = containers(name)
    env = second_lab_env()
    try:
        up = run(["make", "--no-print-directory", "up"], env)
        assert up.returncode == 0, (up.stdout + up.stderr)[-6000:]
        status = run([str(ROOT / ".venv/bin/lab"), "status"], env, timeout=300)
        assert status.returncode == 0, status.stdout[-3000:]
        assert sorted(containers(SECOND["cluster_name"])) == [f"{SECOND['cluster_name']}-{n}" for n in
                                                               ("cp1", "w1", "w2")]
        assert run([str(ROOT / ".venv/bin/lab"), "status"], timeout=300).returncode == 0  # the first lab, at once
    finally:
        down = run(["make", "--no-print-directory", "down"], env, timeout=600)
    assert down.returncode == 0, (down.stdout + down.stderr)[-3000:]
    assert not containers(SECOND["cluster_name"])
    assert containers(name) == before
    assert first.ready_nodes() == sorted(first.nodes)
    rc = run([str(ROOT / ".venv/bin/lab"), "status"], timeout=300).returncode
    assert rc == 0
