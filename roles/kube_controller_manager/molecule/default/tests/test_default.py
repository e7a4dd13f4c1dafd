"""kube_controller_manager: the pinned release, healthy on its local secure
port, leader of the cluster, and doing its job (service accounts and the
root CA published in every namespace); keys 0600."""

import os
import time
from pathlib import Path

import yaml
from kubernetes import client, config

VERSIONS = yaml.safe_load((Path(__file__).resolve().parents[5] / "versions.yml").read_text())
STATE = Path(os.environ["K8S_LAB_STATE_DIR"])
API = config.new_client_from_config(str(STATE / "admin.kubeconfig"))


def test_service_is_running_and_enabled(host):
    service = host.service("kube-controller-manager")
    assert service.is_running and service.is_enabled


def test_binary_is_the_pinned_release(host):
    version = VERSIONS["components"]["kubernetes"]["version"]
    assert host.check_output("/usr/local/bin/kube-controller-manager --version") == f"Kubernetes {version}"


def test_healthy_on_its_local_secure_port(host):
    assert host.socket("tcp://127.0.0.1:10257").is_listening
    assert host.check_output("curl -sk https://127.0.0.1:10257/healthz") == "ok"


def test_keys_and_kubeconfig_are_readable_by_root_only(host):
    for path in ("pki/ca.key", "pki/sa.key", "controller-manager.kubeconfig"):
        assert host.file(f"/etc/kubernetes/{path}").mode == 0o600, path


def test_leads_and_runs_the_controllers(host):
    lease = client.CoordinationV1Api(API).read_namespaced_lease("kube-controller-manager", "kube-system")
    assert lease.spec.holder_identity.startswith(host.check_output("hostname"))
    core = client.CoreV1Api(API)
    for _ in range(30):
        accounts = core.list_namespaced_service_account("default", field_selector="metadata.name=default").items
        ca = core.list_namespaced_config_map("default", field_selector="metadata.name=kube-root-ca.crt").items
        if accounts and ca:
            break
        time.sleep(2)
    assert accounts, "no default service account"
    assert ca and ca[0].data["ca.crt"].strip() == (STATE / "pki" / "ca.crt").read_text().strip()
