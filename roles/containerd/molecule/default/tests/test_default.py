"""containerd: the pinned containerd, runc and crictl, running and answering
over CRI with the network ready, the cgroup driver that fits the node, and
every image of versions.yml imported under its exact name."""

import json

from component import VERSIONS, assert_running_and_enabled


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "containerd")


def test_binaries_are_the_pinned_releases(host):
    pinned = {name: c["version"] for name, c in VERSIONS["components"].items()}
    assert pinned["containerd"] in host.check_output("containerd --version")
    assert f"runc version {pinned['runc'].lstrip('v')}" in host.check_output("/usr/local/sbin/runc --version")
    assert host.check_output("crictl --version") == f"crictl version {pinned['crictl']}"


def test_answers_over_cri_with_the_pod_network_ready(host):
    info = json.loads(host.check_output("crictl info"))
    conditions = {c["type"]: c["status"] for c in info["status"]["conditions"]}
    assert conditions["RuntimeReady"] is True and conditions["NetworkReady"] is True, conditions


def test_cgroup_driver_fits_the_node(host):
    systemd = host.check_output("stat -fc %T /sys/fs/cgroup") == "cgroup2fs"
    assert host.file("/etc/containerd/config.toml").contains(f"SystemdCgroup = {str(systemd).lower()}")


def test_images_are_imported_under_their_exact_names(host):
    held = host.check_output("ctr --namespace k8s.io images list --quiet").splitlines()
    for image in VERSIONS["images"].values():
        if image.get("set"):  # an opt-in set's image (conformance): imported by its own playbook only
            assert f"{image['name']}:{image['version']}" not in held
            continue
        assert f"{image['name']}:{image['version']}" in held


def test_archives_are_removed_once_imported_and_each_import_recorded(host):
    """The node keeps each image once, in containerd: a record per import (named after the archive's sha256)
    instead of the archive."""
    listing = host.check_output("ls /var/lib/k8s-arch-lab/images").split()
    assert not [name for name in listing if name.endswith(".tar")], listing
    for image_id, image in VERSIONS["images"].items():
        if image.get("set"):
            continue
        records = [name for name in listing if name.startswith(f"{image_id}.") and name.endswith(".imported")]
        assert len(records) == 1, (image_id, listing)
        assert host.file(f"/var/lib/k8s-arch-lab/images/{records[0]}").content_string.strip() == (
            f"{image['name']}:{image['version']}")
