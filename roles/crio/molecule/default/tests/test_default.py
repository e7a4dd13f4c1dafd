"""crio: the pinned CRI-O with the lab's runc and the distribution's conmon, running and answering over CRI on the
node's socket with the network ready, the cgroup manager that fits the node, and the node images in its
containers-storage under their exact names."""

import json

from component import VERSIONS, assert_a_container_runs, assert_images_held_over_cri, assert_running_and_enabled
from component import crictl as crictl_on

SOCKET = "unix:///run/crio/crio.sock"


def crictl(host, args):
    return crictl_on(host, SOCKET, args)


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "crio")


def test_binaries_are_the_pinned_releases(host):
    pinned = {name: c["version"] for name, c in VERSIONS["components"].items()}
    assert f"{pinned['crio'].lstrip('v')}" in host.check_output("crio --version")
    assert f"runc version {pinned['runc'].lstrip('v')}" in host.check_output("/usr/local/sbin/runc --version")
    assert host.package("conmon").is_installed


def test_answers_over_cri_as_cri_o_with_the_pod_network_ready(host):
    version = crictl(host, "version")
    assert "RuntimeName:  cri-o" in version, version
    info = json.loads(crictl(host, "info"))
    conditions = {c["type"]: c["status"] for c in info["status"]["conditions"]}
    assert conditions["RuntimeReady"] is True and conditions["NetworkReady"] is True, conditions


def test_crictl_is_pointed_at_cri_o(host):
    assert host.file("/etc/crictl.yaml").contains(SOCKET)


def test_cgroup_manager_fits_the_node(host):
    systemd = host.check_output("stat -fc %T /sys/fs/cgroup") == "cgroup2fs"
    conf = host.file("/etc/crio/crio.conf.d/10-k8s-arch-lab.conf")
    assert conf.contains(f'cgroup_manager = "{"systemd" if systemd else "cgroupfs"}"')


def test_images_are_imported_under_their_exact_names(host):
    assert_images_held_over_cri(host, SOCKET)


def test_a_container_runs(host):
    assert_a_container_runs(host, SOCKET, "molecule-crio")
