"""The lab from a host that has only Vagrant and a hypervisor (issue: any learner's laptop): a clean clone, a PATH
with no Python, pip, make, Go or Ansible on it, and `vagrant up` alone. The controller machine inside the lab
(settings.yml controller: lab) must then hold everything — the virtualenv, the artifact cache (this host's, offline),
the state folder — provision its siblings and run the checks; the host keeps only the machines' SSH key.

K8S_LAB_CONTROLLER_TEST says where: `docker` (containers: `make test-controller`) or `libvirt` (VMs under emulation
here: `make test-vm-controller`); unset, the module is skipped. K8S_LAB_CONTROLLER_PROFILE: the profile (single by
default on libvirt, where every VM costs minutes; default on docker)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = os.environ.get("K8S_LAB_CONTROLLER_TEST", "")
pytestmark = pytest.mark.skipif(PROVIDER not in ("docker", "libvirt"),
                                reason="the clean-host controller test runs from `make test-controller` (docker) "
                                       "and `make test-vm-controller` (libvirt)")
PROFILE = os.environ.get("K8S_LAB_CONTROLLER_PROFILE") or ("single" if PROVIDER == "libvirt" else "default")
# A lab of its own beside any other on this host: its name (machines, networks, volumes) and node network.
CLUSTER, NODE_CIDR = "k8s-ctl", "192.168.58.0/24"
HIDDEN = re.compile(r"^(python.*|pip.*|make|gmake|go|gofmt|ansible.*|pytest.*|molecule|ruff|yamllint)$")
TIMEOUT = 7200 if PROVIDER == "libvirt" else 1800


def _clean_path(tmp: Path) -> Path:
    """A PATH directory with every command of this host but the lab's tools (Python, pip, make, Go, Ansible)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        for entry in sorted(Path(folder).glob("*")) if Path(folder).is_dir() else []:
            if not HIDDEN.match(entry.name) and not (bin_dir / entry.name).exists():
                (bin_dir / entry.name).symlink_to(entry)
    return bin_dir


def _packages() -> set[str]:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\n"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.fixture(scope="module")
def clean_host(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clean-host")
    clone = tmp / "k8s-arch-lab"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    doc = yaml.safe_load((clone / "settings.yml").read_text())
    text = (clone / "settings.yml").read_text()
    text = text.replace(f"cluster_name: {doc['cluster_name']}", f"cluster_name: {CLUSTER}", 1)
    text = text.replace(f"node_cidr: {doc['network']['node_cidr']}", f"node_cidr: {NODE_CIDR}", 1)
    (clone / "settings.yml").write_text(text)
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": str(_clean_path(tmp)), "TERM": "dumb",
           "K8S_LAB_PROFILE": PROFILE, "K8S_LAB_PROVIDER": PROVIDER}
    if PROVIDER == "docker":
        env["K8S_LAB_CONTROLLER"] = "lab"  # auto is the host for containers; libvirt: auto says lab here
    else:
        # This host's KVM runs no guest (tools/hypervisor.py's probe, which needs Python, says so): the VMs run
        # under emulation, as a learner without VT-x would be told to set.
        env["K8S_LAB_ACCEL"] = "emulation"
    for tool in ("python3", "make", "go", "ansible-playbook", "pip"):
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is on the clean host's PATH"
    before = _packages()
    yield clone, env, before
    subprocess.run(["vagrant", "destroy", "-f"], cwd=clone, env=env, capture_output=True, timeout=1800, check=False)
    subprocess.run([str(ROOT / "tools/node-image/cleanup.sh"), CLUSTER, NODE_CIDR], capture_output=True,
                   timeout=600, check=False)
    subprocess.run([str(ROOT / "tools/vm-cleanup.sh"), CLUSTER], capture_output=True, timeout=600, check=False)


def _run(clean_host, *args, timeout=TIMEOUT) -> tuple[subprocess.CompletedProcess, float]:
    clone, env, _ = clean_host
    started = time.monotonic()
    proc = subprocess.run(list(args), cwd=clone, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    elapsed = time.monotonic() - started
    print(f"\n{' '.join(args)}: rc {proc.returncode} in {elapsed:.0f} s")
    return proc, elapsed


def test_vagrant_up_alone_builds_the_lab_from_the_controller_machine(clean_host):
    clone, _, before = clean_host
    proc, _ = _run(clean_host, "vagrant", "up", "--no-parallel")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    phases = re.findall(r"controller: controller: (.*)", proc.stdout)
    print("\n".join(phases))
    assert any("cluster provisioned" in p for p in phases), phases
    # Nothing of the lab's Python or of the cluster on the host: no virtualenv, and of the state folder only the
    # machines' SSH key (the certificates, kubeconfigs and encryption key are the controller's).
    assert not (clone / ".venv").exists()
    assert sorted(p.name for p in (clone / ".lab").iterdir()) == ["ssh"]
    assert _packages() == before, "vagrant up installed host packages"


def test_the_checks_run_inside_the_controller(clean_host):
    proc, _ = _run(clean_host, "vagrant", "ssh", "controller", "-c", "lab check --no-disruptive")
    print(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    summary = re.search(r"(\d+) passed, (\d+) failed", proc.stdout)
    assert summary and int(summary.group(1)) > 0 and summary.group(2) == "0", proc.stdout[-2000:]


def test_the_controller_knows_its_cluster_and_memory_is_small(clean_host):
    proc, _ = _run(clean_host, "vagrant", "ssh", "controller", "-c",
                   "lab status >/dev/null; echo status=$?; kubectl get nodes -o json; free -m", timeout=600)
    assert "status=0" in proc.stdout, proc.stdout[-3000:]
    nodes = json.loads(proc.stdout[proc.stdout.index("{"):proc.stdout.rindex("}") + 1])
    assert {n["metadata"]["name"] for n in nodes["items"]}
    print(proc.stdout[proc.stdout.rindex("}") + 1:])


def test_a_second_provision_from_the_controller_changes_nothing(clean_host):
    proc, _ = _run(clean_host, "vagrant", "provision", "controller")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    recap = re.findall(r"controller: (\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout)
    assert recap and all(changed == "0" for _, changed in recap), recap
