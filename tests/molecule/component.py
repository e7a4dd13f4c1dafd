"""What the component scenarios check the same way, imported by their
testinfra files (roles/<role>/molecule/default/tests/test_default.py).

The verifier puts this folder on PYTHONPATH (.config/molecule/config.yml)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = yaml.safe_load((ROOT / "versions.yml").read_text())
KUBERNETES_VERSION = VERSIONS["components"]["kubernetes"]["version"]
# The scenario's certificates and kubeconfigs (molecule's ephemeral folder).
STATE = Path(os.environ["K8S_LAB_STATE_DIR"])


def admin_client() -> client.ApiClient:
    """The official client with the scenario's admin kubeconfig."""
    return config.new_client_from_config(str(STATE / "admin.kubeconfig"))


def assert_running_and_enabled(host, unit: str) -> None:
    service = host.service(unit)
    assert service.is_running, f"{unit} is not running"
    assert service.is_enabled, f"{unit} is not enabled"


def assert_pinned_kubernetes_release(host, binary: str) -> None:
    """The binary in /usr/local/bin reports the Kubernetes version of versions.yml."""
    assert host.check_output(f"/usr/local/bin/{binary} --version") == f"Kubernetes {KUBERNETES_VERSION}"


def assert_healthy_on_local_secure_port(host, port: int) -> None:
    """A control-plane component's /healthz on its loopback secure port (the certificate is self-signed)."""
    assert host.socket(f"tcp://127.0.0.1:{port}").is_listening
    assert host.check_output(f"curl -sk https://127.0.0.1:{port}/healthz") == "ok"


def crictl(host, socket: str, args: str) -> str:
    """crictl through a given CRI socket (a runtime scenario's own, not /etc/crictl.yaml)."""
    return host.check_output(f"crictl --runtime-endpoint {socket} --image-endpoint {socket} {args}")


def assert_images_held_over_cri(host, socket: str) -> None:
    """Every image of versions.yml but the opt-in sets' is known over CRI under its exact name; those are not."""
    held = {tag for image in json.loads(crictl(host, socket, "images -o json"))["images"] for tag in image["repoTags"]}
    for image in VERSIONS["images"].values():
        ref = f"{image['name']}:{image['version']}"
        assert (ref in held) is not bool(image.get("set")), ref


def assert_a_container_runs(host, socket: str, uid: str) -> None:
    """A pod sandbox and a container of the lab's test image, started over CRI and removed again."""
    image = f"{VERSIONS['images']['echo']['name']}:{VERSIONS['images']['echo']['version']}"
    pod = {"metadata": {"name": "molecule", "namespace": "default", "uid": uid, "attempt": 1},
           "linux": {}, "log_directory": "/tmp"}
    box = {"metadata": {"name": "echo"}, "image": {"image": image}, "log_path": "echo.log",
           "envs": [{"key": "POD_NAME", "value": "molecule"}]}
    host.check_output(f"echo '{json.dumps(pod)}' > /tmp/pod.json; echo '{json.dumps(box)}' > /tmp/box.json")
    sandbox = crictl(host, socket, "runp /tmp/pod.json")
    try:
        cid = crictl(host, socket, f"create {sandbox} /tmp/box.json /tmp/pod.json")
        crictl(host, socket, f"start {cid}")
        assert json.loads(crictl(host, socket, f"inspect {cid}"))["status"]["state"] == "CONTAINER_RUNNING"
    finally:
        crictl(host, socket, f"stopp {sandbox}")
        crictl(host, socket, f"rmp {sandbox}")
