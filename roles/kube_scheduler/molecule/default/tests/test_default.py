"""kube_scheduler: the pinned release, healthy on its local secure port,
leader, and scheduling (a pod is considered, found no node: this cluster has
none); kubeconfig 0600."""

import time

import yaml
from component import (
    VERSIONS,
    admin_client,
    assert_healthy_on_local_secure_port,
    assert_pinned_kubernetes_release,
    assert_running_and_enabled,
)
from kubernetes import client

API = admin_client()


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "kube-scheduler")


def test_binary_is_the_pinned_release(host):
    assert_pinned_kubernetes_release(host, "kube-scheduler")


def test_healthy_on_its_local_secure_port(host):
    assert_healthy_on_local_secure_port(host, 10259)


def test_configuration(host):
    assert host.file("/etc/kubernetes/scheduler.kubeconfig").mode == 0o600
    configuration = yaml.safe_load(host.file("/etc/kubernetes/kube-scheduler.yaml").content_string)
    assert configuration["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.kubeconfig"
    assert configuration["leaderElection"]["leaderElect"] is True
    assert configuration["enableProfiling"] is False and configuration["enableContentionProfiling"] is False
    # Upstream's timing at timeout_scale 1 (the settings scale it for VMs under emulation).
    timing = {k: configuration["leaderElection"][k] for k in ("leaseDuration", "renewDeadline", "retryPeriod")}
    assert timing == {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"}


def test_leads_and_schedules(host):
    lease = client.CoordinationV1Api(API).read_namespaced_lease("kube-scheduler", "kube-system")
    assert lease.spec.holder_identity.startswith(host.check_output("hostname"))
    core = client.CoreV1Api(API)
    # No controller manager here to make the namespace's service account.
    if not core.list_namespaced_service_account("default", field_selector="metadata.name=default").items:
        core.create_namespaced_service_account("default", client.V1ServiceAccount(metadata={"name": "default"}))
    pause = VERSIONS["images"]["pause"]
    pod = client.V1Pod(metadata={"name": "molecule-scheduled"},
                       spec={"containers": [{"name": "pause", "image": f"{pause['name']}:{pause['version']}"}]})
    core.create_namespaced_pod("default", pod)
    try:
        for _ in range(30):
            conditions = core.read_namespaced_pod("molecule-scheduled", "default").status.conditions or []
            if any(c.type == "PodScheduled" for c in conditions):
                break
            time.sleep(1)
        scheduled = next(c for c in conditions if c.type == "PodScheduled")
        assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    finally:
        core.delete_namespaced_pod("molecule-scheduled", "default", grace_period_seconds=0)
