"""kube_proxy: the pinned release in the configured mode, healthy, its rules
in place: the kubernetes Service's ClusterIP reaches the API server from the
node."""

import yaml
from component import assert_pinned_kubernetes_release, assert_running_and_enabled


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "kube-proxy")


def test_binary_is_the_pinned_release(host):
    assert_pinned_kubernetes_release(host, "kube-proxy")


def test_configuration(host):
    assert host.file("/var/lib/kube-proxy/kubeconfig").mode == 0o600
    proxy = yaml.safe_load(host.file("/var/lib/kube-proxy/config.yaml").content_string)
    assert proxy["mode"] == "iptables"
    assert proxy["clusterCIDR"] == "10.244.0.0/16"
    # nf_conntrack_max is read-only in a container node.
    in_container = host.run("systemd-detect-virt --container").rc == 0
    assert (proxy["conntrack"]["maxPerCore"] == 0) is in_container


def test_healthy(host):
    assert host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:10256/healthz") == "200"


def test_kubernetes_service_reaches_the_api_server(host):
    assert "10.96.0.1" in host.check_output("iptables -t nat -S KUBE-SERVICES")
    ca = "/etc/kubernetes/pki/ca.crt"
    through_service = f"curl -sf --cacert {ca} --resolve kubernetes:443:10.96.0.1 https://kubernetes/readyz"
    assert host.check_output(through_service) == "ok"
