"""Two node containers from the node image: systemd running, reachable over
SSH by Ansible, and containerd + runc from the artifact cache running a
container of the lab's test image inside one of them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tools import artifacts as A
from tools import nodes

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def ansible(*args: str, inventory: Path, key: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "all", "-i", str(inventory), "--private-key", str(key), *args],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )


@pytest.fixture(scope="module")
def cache() -> Path:
    cache = A.default_cache()
    manifest = A.Manifest(cache)
    missing = [a.id for a in A.plan(A.load_versions(), A.host_arch()) if manifest.verify(a)]
    assert not missing, f"artifact cache incomplete ({', '.join(missing)}): run `make artifacts`"
    return cache


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nodes")
    key = tmp / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    suffix = uuid.uuid4().hex[:6]
    network = f"k8s-arch-lab-it-{suffix}"
    names = [f"it-{suffix}-1", f"it-{suffix}-2"]
    nodes.create_network(network)
    try:
        started = [nodes.start(name, network, key.with_suffix(".pub")) for name in names]
        yield started, key, tmp
    finally:
        nodes.remove(names, network)


def test_nodes_reach_systemd_running(cluster):
    started, _, _ = cluster
    for node in started:
        t0 = time.monotonic()
        state = nodes.wait_running(node)
        print(f"{node.name}: systemd {state} after {time.monotonic() - t0:.1f}s")
        failed = node.exec("systemctl", "--failed", "--no-legend", "--plain")
        assert state == "running", f"{node.name}: systemd {state}, failed units: {failed}"
        # Kernel interfaces the entrypoint makes writable for kubelet and containerd.
        node.exec("sh", "-c", "touch /sys/fs/cgroup/cpu/ 2>/dev/null || test -w /sys/fs/cgroup")
        assert "rw" in node.exec("sh", "-c", "awk '$2==\"/proc/sys\" {print $4}' /proc/self/mounts || true") or \
            node.exec("sh", "-c", "test -w /proc/sys/net/ipv4/ip_forward && echo rw") == "rw"


def test_ansible_reaches_both_nodes_over_ssh(cluster):
    started, key, tmp = cluster
    for node in started:
        nodes.wait_running(node)
    inventory = tmp / "hosts.ini"
    inventory.write_text(
        "[nodes]\n" + "".join(f"{n.name} ansible_host={n.address} ansible_user=root\n" for n in started)
    )
    deadline = time.monotonic() + 30
    while True:  # sshd generates its host keys at first start: allow it a few seconds
        result = ansible("-m", "ansible.builtin.ping", inventory=inventory, key=key)
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    for node in started:
        assert f"{node.name} | SUCCESS" in result.stdout
    facts = ansible("-m", "ansible.builtin.setup", "-a", "filter=ansible_distribution*", inventory=inventory, key=key)
    assert facts.stdout.count('"ansible_distribution_major_version": "12"') == 2, facts.stdout


def test_containerd_and_runc_from_the_cache_run_the_test_image(cluster, cache):
    started, _, tmp = cluster
    node = started[0]
    nodes.wait_running(node)
    items = {a.id: a for a in A.plan(A.load_versions(), A.host_arch())}

    def push(art_id: str, dest: str) -> None:
        nodes.docker("cp", str(cache / items[art_id].relpath), f"{node.name}:{dest}")

    push("containerd", "/var/tmp/containerd.tar.gz")
    push("runc", "/usr/local/sbin/runc")
    push("image/pause", "/var/tmp/pause.tar")
    push("image/echo", "/var/tmp/echo.tar")
    node.exec("chmod", "0755", "/usr/local/sbin/runc")
    node.exec("tar", "-C", "/usr/local", "-xzf", "/var/tmp/containerd.tar.gz")

    versions = A.load_versions()["components"]
    assert versions["containerd"]["version"] in node.exec("containerd", "--version")
    assert versions["runc"]["version"].lstrip("v") in node.exec("runc", "--version")

    node.exec("systemd-run", "--unit=containerd-it", "--property=Delegate=yes", "--property=KillMode=process",
              "/usr/local/bin/containerd")
    deadline = time.monotonic() + 60
    while not node.succeeds("ctr", "version", timeout=10) and time.monotonic() < deadline:
        time.sleep(0.5)
    print(node.exec("ctr", "version"))

    pause = A.load_versions()["images"]["pause"]
    echo = A.load_versions()["images"]["echo"]
    for tarball in ("/var/tmp/pause.tar", "/var/tmp/echo.tar"):
        node.exec("ctr", "-n", "k8s.io", "images", "import", tarball)
    images = node.exec("ctr", "-n", "k8s.io", "images", "ls", "-q")
    print(images)
    assert f"{pause['name']}:{pause['version']}" in images.splitlines()
    assert f"{echo['name']}:{echo['version']}" in images.splitlines()

    ref = f"{echo['name']}:{echo['version']}"
    shell = node.exec("ctr", "-n", "k8s.io", "run", "--rm", ref, "it-shell", "/bin/sh", "-c", "echo shell-ok; id -u")
    assert shell.splitlines() == ["shell-ok", "0"]

    node.exec("ctr", "-n", "k8s.io", "run", "-d", "--net-host", "--env", "POD_NAME=it-echo", ref, "it-echo")
    try:
        deadline = time.monotonic() + 20
        answer = ""
        while time.monotonic() < deadline:
            answer = node.exec("curl", "-fsS", "http://127.0.0.1:8080/", check=False, timeout=10)
            if answer:
                break
            time.sleep(0.5)
        print(answer)
        assert answer.startswith("pod=it-echo "), answer
    finally:
        node.exec("ctr", "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", "it-echo", check=False)
        time.sleep(1)
        node.exec("ctr", "-n", "k8s.io", "tasks", "rm", "-f", "it-echo", check=False)
        node.exec("ctr", "-n", "k8s.io", "containers", "rm", "it-echo", check=False)
