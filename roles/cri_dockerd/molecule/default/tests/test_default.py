"""cri_dockerd: Docker Engine from the distribution with the pinned cri-dockerd and the lab's runc, running and
answering over CRI on the node's socket with the network ready, the cgroup driver that fits the node, no network of
Docker's own, and the node images in Docker's image store under their exact names."""

import json

from component import VERSIONS, assert_running_and_enabled

SOCKET = "unix:///run/cri-dockerd.sock"


def crictl(host, args):
    return host.check_output(f"crictl --runtime-endpoint {SOCKET} --image-endpoint {SOCKET} {args}")


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
    held = {tag for image in json.loads(crictl(host, "images -o json"))["images"] for tag in image["repoTags"]}
    for image in VERSIONS["images"].values():
        ref = f"{image['name']}:{image['version']}"
        assert (ref in held) is not bool(image.get("set")), ref


def test_a_container_runs(host):
    """A pod sandbox and a container of the lab's test image, started over CRI and removed again."""
    image = f"{VERSIONS['images']['echo']['name']}:{VERSIONS['images']['echo']['version']}"
    pod = {"metadata": {"name": "molecule", "namespace": "default", "uid": "molecule-cri-dockerd", "attempt": 1},
           "linux": {}, "log_directory": "/tmp"}
    box = {"metadata": {"name": "echo"}, "image": {"image": image}, "log_path": "echo.log",
           "envs": [{"key": "POD_NAME", "value": "molecule"}]}
    host.check_output(f"echo '{json.dumps(pod)}' > /tmp/pod.json; echo '{json.dumps(box)}' > /tmp/box.json")
    sandbox = crictl(host, "runp /tmp/pod.json")
    try:
        cid = crictl(host, f"create {sandbox} /tmp/box.json /tmp/pod.json")
        crictl(host, f"start {cid}")
        assert json.loads(crictl(host, f"inspect {cid}"))["status"]["state"] == "CONTAINER_RUNNING"
    finally:
        crictl(host, f"stopp {sandbox}")
        crictl(host, f"rmp {sandbox}")
