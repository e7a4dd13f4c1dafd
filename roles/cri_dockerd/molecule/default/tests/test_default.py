"""cri_dockerd: Docker Engine from the distribution with the pinned cri-dockerd and the lab's runc, running and
answering over CRI on the node's socket with the network ready, the cgroup driver that fits the node, no network of
Docker's own, and the node images in Docker's image store under their exact names."""

import json

from component import VERSIONS, assert_a_container_runs, assert_images_held_over_cri, assert_running_and_enabled
from component import crictl as crictl_on

SOCKET = "unix:///run/cri-dockerd.sock"


def crictl(host, args):
    return crictl_on(host, SOCKET, args)


def test_services_are_running_and_enabled(host):
    assert_running_and_enabled(host, "docker")
    assert_running_and_enabled(host, "cri-docker")


def test_binaries_are_the_pinned_releases(host):
    pinned = {name: c["version"] for name, c in VERSIONS["components"].items()}
    assert f"cri-dockerd {pinned['cri_dockerd'].lstrip('v')}" in host.check_output("cri-dockerd --version 2>&1")
    assert f"runc version {pinned['runc'].lstrip('v')}" in host.check_output("/usr/local/sbin/runc --version")
    assert host.package("docker.io").is_installed


def test_answers_over_cri_as_docker_with_the_pod_network_ready(host):
    version = crictl(host, "version")
    assert "RuntimeName:  docker" in version, version
    info = json.loads(crictl(host, "info"))
    conditions = {c["type"]: c["status"] for c in info["status"]["conditions"]}
    assert conditions["RuntimeReady"] is True and conditions["NetworkReady"] is True, conditions


def test_crictl_is_pointed_at_cri_dockerd(host):
    assert host.file("/etc/crictl.yaml").contains(SOCKET)


def test_cgroup_driver_fits_the_node_and_docker_makes_no_network_of_its_own(host):
    systemd = host.check_output("stat -fc %T /sys/fs/cgroup") == "cgroup2fs"
    info = json.loads(host.check_output("docker info --format '{{json .}}'"))
    assert info["CgroupDriver"] == ("systemd" if systemd else "cgroupfs"), info["CgroupDriver"]
    assert not host.interface("docker0").exists


def test_images_are_imported_under_their_exact_names(host):
    assert_images_held_over_cri(host, SOCKET)


def test_a_container_runs(host):
    assert_a_container_runs(host, SOCKET, "molecule-cri-dockerd")
