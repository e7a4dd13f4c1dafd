"""The Vagrantfile under every provider, without bringing anything up: Vagrant loads it (the settings resolved for
that provider, the machines defined) and validates the configuration; bad settings for a provider stop it before
anything is created. VirtualBox is not installed here, so its provider configuration is validated with
--ignore-provider; the VirtualBox-specific settings checks (host-only ranges) run through the Vagrantfile."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tools.hypervisor import vagrant_libvirt_installed

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def vagrant(provider: str, tmp_path: Path, *args: str, settings: Path | None = None,
            controller: str = "host") -> subprocess.CompletedProcess:
    env = dict(os.environ, K8S_LAB_PROVIDER=provider, K8S_LAB_PROFILE="ha", K8S_LAB_STATE_DIR=str(tmp_path / "state"),
               VAGRANT_DOTFILE_PATH=str(tmp_path / "dot"), K8S_LAB_CONTROLLER=controller)
    if settings:
        env["K8S_LAB_SETTINGS"] = str(settings)
    return subprocess.run(["vagrant", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


@pytest.fixture(autouse=True)
def _vagrant():
    if not shutil.which("vagrant"):
        pytest.skip("Vagrant is not installed (`make deps`)")


@pytest.mark.parametrize("provider", ["virtualbox", "libvirt", "docker"])
def test_the_vagrantfile_validates(provider, tmp_path):
    # Vagrant needs the libvirt provider's plugin to read that provider's configuration at all (VirtualBox's and
    # Docker's are built in); libvirt itself need not be installed.
    if provider == "libvirt":
        assert vagrant_libvirt_installed(), "Vagrant's libvirt plugin is missing: `make test-tools` installs it"
    proc = vagrant(provider, tmp_path, "validate", "--ignore-provider")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validated successfully" in proc.stdout
    machines = {line.split()[1].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("==> ")}
    assert machines == {"cp1", "cp2", "cp3", "w1", "w2"}, proc.stdout


def test_a_virtualbox_node_network_outside_the_host_only_ranges_stops_vagrant(tmp_path):
    settings = yaml.safe_load((ROOT / "settings.yml").read_text())
    settings["network"]["node_cidr"] = "10.10.0.0/24"
    path = tmp_path / "settings.yml"
    path.write_text(yaml.safe_dump(settings))
    proc = vagrant("virtualbox", tmp_path, "validate", "--ignore-provider", settings=path)
    assert proc.returncode != 0
    assert "the settings are invalid, nothing was created" in proc.stderr
    assert "outside the host-only ranges VirtualBox allows" in proc.stderr
    assert vagrant("docker", tmp_path, "validate", "--ignore-provider", settings=path).returncode == 0


def _machines(out: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("==> ")}


@pytest.mark.parametrize("provider", ["virtualbox", "libvirt", "docker"])
def test_controller_lab_adds_the_controller_machine(provider, tmp_path):
    proc = vagrant(provider, tmp_path, "validate", "--ignore-provider", controller="lab")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _machines(proc.stdout) == {"cp1", "cp2", "cp3", "w1", "w2", "controller"}, proc.stdout


@pytest.mark.parametrize("provider", ["virtualbox", "libvirt"])
def test_a_host_with_only_vagrant_gets_the_controller_machine_without_running_a_host_command(provider, tmp_path):
    """A clean clone (no virtualenv) and a PATH holding nothing but vagrant and the Ruby it runs on (and rsync for
    libvirt): no Python, no shell, no ssh-keygen. The Vagrantfile reads the machines in Ruby, makes the SSH key in
    Ruby, and defines the nodes and the controller machine (controller: lab, as auto means without a virtualenv) —
    what a Windows or macOS laptop with VirtualBox runs."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # libvirt hosts are Linux: there the controller's copy of the checkout goes by rsync (VirtualBox: its shared
    # folders, which need nothing on the host).
    for tool in ("vagrant", "ruby") + (("rsync",) if provider == "libvirt" else ()):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": str(bin_dir), "K8S_LAB_PROVIDER": provider,
           "K8S_LAB_PROFILE": "default", "VAGRANT_DOTFILE_PATH": str(tmp_path / "dot")}
    proc = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _machines(proc.stdout) == {"cp1", "w1", "w2", "controller"}, proc.stdout
    key = clone / ".lab" / "ssh" / "id_ed25519"
    assert key.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert sorted(p.name for p in (clone / ".lab").iterdir()) == ["ssh"]
    assert not (clone / ".venv").exists()
