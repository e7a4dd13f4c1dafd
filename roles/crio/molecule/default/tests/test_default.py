"""crio: the pinned CRI-O with the lab's runc and the distribution's conmon, running and answering over CRI on the
node's socket with the network ready, the cgroup manager that fits the node, and the node images in its
containers-storage under their exact names."""

import json

from component import VERSIONS, assert_running_and_enabled

SOCKET = "unix:///run/crio/crio.sock"


def crictl(host, args):
    return host.check_output(f"crictl --runtime-endpoint {SOCKET} --image-endpoint {SOCKET} {args}")


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
    held = {tag for image in json.loads(crictl(host, "images -o json"))["images"] for tag in image["repoTags"]}
    for image in VERSIONS["images"].values():
        ref = f"{image['name']}:{image['version']}"
        assert (ref in held) is not bool(image.get("set")), ref


def test_a_container_runs(host):
    """A pod sandbox and a container of the lab's test image, started over CRI and removed again."""
    image = f"{VERSIONS['images']['echo']['name']}:{VERSIONS['images']['echo']['version']}"
    pod = {"metadata": {"name": "molecule", "namespace": "default", "uid": "molecule-crio", "attempt": 1},
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
