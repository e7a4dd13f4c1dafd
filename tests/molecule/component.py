"""What the component scenarios check the same way, imported by their
testinfra files (roles/<role>/molecule/default/tests/test_default.py).

The verifier puts this folder on PYTHONPATH (.config/molecule/config.yml)."""

from __future__ import annotations

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
