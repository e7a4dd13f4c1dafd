"""etcd: a healthy three-member cluster over TLS with client certificates,
the pinned release, private keys 0600."""

import pytest
from component import VERSIONS, assert_running_and_enabled

ETCDCTL = ". /etc/etcd/etcdctl.env && etcdctl"


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "etcd")


def test_binaries_are_the_pinned_release(host):
    version = VERSIONS["components"]["etcd"]["version"].lstrip("v")
    for command in ("etcd --version", "etcdctl version", "etcdutl version"):
        assert version in host.check_output(f"/usr/local/bin/{command}"), command


def test_keys_are_readable_by_root_only(host):
    assert host.file("/etc/etcd/pki").mode == 0o700
    assert host.file("/var/lib/etcd").mode == 0o700
    for key in ("server", "peer", "healthcheck-client"):
        assert host.file(f"/etc/etcd/pki/{key}.key").mode == 0o600, key
    assert host.file("/etc/systemd/system/etcd.service").mode == 0o600
    assert not host.file("/etc/etcd/etcd.conf.yml").exists


def test_runs_as_its_own_user(host):
    assert host.file("/var/lib/etcd").user == "etcd"
    assert host.file("/etc/etcd/pki/server.key").user == "etcd"
    assert host.process.get(comm="etcd").user == "etcd"


def test_listens_for_clients_and_peers(host):
    address = host.interface("eth0").addresses[0]
    assert host.socket(f"tcp://{address}:2379").is_listening
    assert host.socket("tcp://127.0.0.1:2379").is_listening
    assert host.socket(f"tcp://{address}:2380").is_listening


@pytest.mark.parametrize("port", [2379, 2380])
def test_refuses_clients_without_a_certificate(host, port):
    address = host.interface("eth0").addresses[0]
    ca = "/etc/etcd/pki/ca.crt"
    assert host.run(f"curl -sf --cacert {ca} https://{address}:{port}/health").rc != 0
    assert host.run(f"curl -sf http://{address}:{port}/health").rc != 0


def test_every_member_is_healthy(host):
    members = host.check_output(f"{ETCDCTL} member list").splitlines()
    assert len(members) == 3 and all(", started, " in m for m in members)
    health = host.check_output(f"{ETCDCTL} endpoint health --cluster")
    assert health.count("is healthy") == 3, health
