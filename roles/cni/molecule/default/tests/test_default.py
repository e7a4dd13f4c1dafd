"""cni: the pinned plugins, a bridge network for the node's own pod range, and
the pod-network unit (enabled, active) routing to every other node's range
and masquerading pod traffic that leaves the cluster's pod range."""

import ipaddress
import json
import os
from pathlib import Path

import testinfra
import yaml
from component import VERSIONS

PLATFORMS = yaml.safe_load(Path(os.environ["MOLECULE_FILE"]).read_text())["platforms"]
CONFLIST = "/etc/cni/net.d/10-bridge.conflist"


def pod_range(host):
    return json.loads(host.file(CONFLIST).content_string)["plugins"][0]["ipam"]["ranges"][0][0]["subnet"]


def test_plugins_are_the_pinned_release(host):
    for plugin in ("bridge", "host-local", "loopback", "portmap"):
        assert host.file(f"/opt/cni/bin/{plugin}").mode == 0o755, plugin
    version = VERSIONS["components"]["cni_plugins"]["version"]
    assert f"CNI bridge plugin {version}" in host.check_output("/opt/cni/bin/bridge 2>&1")


def test_bridge_network_for_the_nodes_own_pod_range(host):
    network = json.loads(host.file(CONFLIST).content_string)
    assert [p["type"] for p in network["plugins"]] == ["bridge", "portmap"]
    assert ipaddress.ip_network(pod_range(host)).subnet_of(ipaddress.ip_network("10.244.0.0/16"))


def test_pod_network_unit_is_enabled_and_active(host):
    unit = host.service("pod-network")
    assert unit.is_enabled and unit.is_running


def test_routes_to_every_other_nodes_pod_range(host):
    me = host.check_output("hostname")
    others = [p for p in PLATFORMS if p["name"] != me]
    assert others
    for other in others:
        subnet = pod_range(testinfra.get_host(f"docker://{other['name']}"))
        assert subnet != pod_range(host)
        via = f"via {other['networks'][0]['ipv4_address']}"
        assert via in host.check_output(f"ip route show {subnet}"), other["name"]


def test_pod_traffic_leaving_the_cluster_is_masqueraded(host):
    rule = f"POSTROUTING -s {pod_range(host)} ! -d 10.244.0.0/16 -j MASQUERADE"
    assert host.run(f"iptables -t nat -C {rule}").rc == 0
