"""The values the layers share are written once, by their producer (docs/architecture.md, "The contract between
the layers"): outside tests and documentation, each literal below appears in its producer's file only. A role
default, a template, the Makefile or a lab check that writes one of them again fails here."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# literal -> the only file (outside tests/ and docs) allowed to contain it
PRODUCERS = {
    "6443": "settings.yml",  # network.api_server_port
    "8443": "settings.yml",  # network.api_lb_port
    "2379": "settings.yml",  # network.etcd_client_port
    "2380": "settings.yml",  # network.etcd_peer_port
    "/etc/kubernetes/pki": "tools/settings.py",  # NODE_PATHS
    "/etc/etcd/pki": "tools/settings.py",
    "/run/containerd/containerd.sock": "tools/settings.py",
    "/run/crio/crio.sock": "tools/settings.py",  # RUNTIMES
    "/run/cri-dockerd.sock": "tools/settings.py",
    "/opt/cni/bin": "tools/settings.py",
    "/etc/cni/net.d": "tools/settings.py",
    # The artifact cache's default place and STATE_DIR; the Vagrantfile's Ruby repeats both for a host without the
    # lab's Python (controller: lab), and tests/unit/test_vagrant_host_code.py holds the two to the same answers.
    ".cache/k8s-arch-lab": ("tools/locations.py", "tools/vagrant/lab_host.rb"),
    ".lab": ("tools/locations.py", "tools/vagrant/lab_host.rb"),
}


@functools.cache
def shipped_files() -> dict[str, str]:
    """Path -> text of every tracked file outside tests, documentation and tool configuration (read once)."""
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {f: (ROOT / f).read_text(errors="replace") for f in out.splitlines()
            if not f.startswith(("tests/", "docs/", ".")) and "/molecule/" not in f and not f.endswith(".md")
            and (ROOT / f).is_file()}


@pytest.mark.parametrize("literal", sorted(PRODUCERS))
def test_shared_literal_has_one_producer(literal):
    pattern = re.compile(rf"(?<![\w.]){re.escape(literal)}(?![\w])" if literal[0].isdigit() or literal == ".lab"
                         else re.escape(literal))
    found = sorted(f for f, text in shipped_files().items() if pattern.search(text))
    producers = PRODUCERS[literal] if isinstance(PRODUCERS[literal], tuple) else (PRODUCERS[literal],)
    assert found == sorted(producers), f"{literal!r} written in {found}; only {producers} may"
