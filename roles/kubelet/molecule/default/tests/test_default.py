"""kubelet: the pinned release, its API on 10250 with a serving certificate
from the cluster CA and no anonymous access, keys 0600, the cgroup driver that
fits the node; the node registered, Ready, labelled and tainted as a
control-plane node, with its pod range."""

import time

import yaml
from component import admin_client, assert_pinned_kubernetes_release, assert_running_and_enabled
from kubernetes import client

API = client.CoreV1Api(admin_client())


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "kubelet")


def test_binary_is_the_pinned_release(host):
    assert_pinned_kubernetes_release(host, "kubelet")


def test_serves_its_api_with_a_cluster_certificate_and_refuses_anonymous_requests(host):
    assert host.socket("tcp://10250").is_listening
    name = host.check_output("hostname")
    status = host.check_output(
        f"curl -s -o /dev/null -w '%{{http_code}}' --cacert /etc/kubernetes/pki/ca.crt https://{name}:10250/pods")
    assert status == "401"


def test_keys_and_configuration(host):
    for path in ("/var/lib/kubelet/pki/kubelet-serving.key", "/var/lib/kubelet/kubeconfig",
                 "/var/lib/kubelet/config.yaml", "/etc/systemd/system/kubelet.service"):
        assert host.file(path).mode == 0o600, path
    kubelet = yaml.safe_load(host.file("/var/lib/kubelet/config.yaml").content_string)
    cgroup_v2 = host.check_output("stat -fc %T /sys/fs/cgroup") == "cgroup2fs"
    assert kubelet["cgroupDriver"] == ("systemd" if cgroup_v2 else "cgroupfs")
    assert kubelet.get("failCgroupV1", True) is cgroup_v2
    assert kubelet["authentication"]["anonymous"]["enabled"] is False
    assert kubelet["clusterDNS"] == ["10.96.0.10"]


def test_node_is_registered_ready_labelled_and_tainted(host):
    name = host.check_output("hostname")
    for _ in range(30):
        node = API.read_node(name)
        if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions):
            break
        time.sleep(2)
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions), node.status.conditions
    assert "node-role.kubernetes.io/control-plane" in node.metadata.labels
    # (The not-ready taint stays too: no controller manager here to lift it.)
    assert ("node-role.kubernetes.io/control-plane", "NoSchedule") in [(t.key, t.effect) for t in node.spec.taints]
    assert node.spec.pod_cidr == "10.244.0.0/24"
    internal = [a.address for a in node.status.addresses if a.type == "InternalIP"]
    assert internal == [host.interface("eth0").addresses[0]]
