"""kube_controller_manager: the pinned release, healthy on its local secure
port, leader of the cluster, and doing its job (service accounts and the
root CA published in every namespace); keys 0600."""

import time

from component import (
    STATE,
    admin_client,
    assert_healthy_on_local_secure_port,
    assert_pinned_kubernetes_release,
    assert_running_and_enabled,
)
from kubernetes import client

API = admin_client()


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "kube-controller-manager")


def test_binary_is_the_pinned_release(host):
    assert_pinned_kubernetes_release(host, "kube-controller-manager")


def test_healthy_on_its_local_secure_port(host):
    assert_healthy_on_local_secure_port(host, 10257)


def test_keys_and_kubeconfig_are_readable_by_root_only(host):
    for path in ("pki/ca.key", "pki/sa.key", "controller-manager.kubeconfig"):
        assert host.file(f"/etc/kubernetes/{path}").mode == 0o600, path


def test_leader_election_timing_follows_the_timeout_scale(host):
    # Upstream's timing at timeout_scale 1 (the settings scale it for VMs under emulation).
    unit = host.file("/etc/systemd/system/kube-controller-manager.service").content_string
    for flag in ("--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s",
                 "--leader-elect-retry-period=2s"):
        assert flag in unit


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
