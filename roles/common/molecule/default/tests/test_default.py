"""common: kernel settings in force and persisted, the node packages, no swap,
every node named in /etc/hosts, Docker's DNS server answering at the node's
address (the scenario's node is on a user-defined Docker network)."""

import os
import textwrap
from pathlib import Path

import yaml

DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[3] / "defaults" / "main.yml").read_text())
PLATFORMS = yaml.safe_load(Path(os.environ["MOLECULE_FILE"]).read_text())["platforms"]


def test_kernel_settings_are_in_force_and_persisted(host):
    persisted = host.file(DEFAULTS["common_sysctl_file"])
    for key, value in DEFAULTS["common_sysctls"].items():
        assert host.sysctl(key) == int(value), key
        assert persisted.contains(f"^{key}={value}$"), key


def test_node_packages_are_installed(host):
    for name in DEFAULTS["common_packages"]:
        assert host.package(name).is_installed, name


def test_no_swap(host):
    assert host.check_output("swapon --show --noheadings") == ""


def test_every_node_is_named_in_etc_hosts(host):
    hosts = host.file("/etc/hosts")
    for platform in PLATFORMS:
        # The role's block, or the container runtime's own line (a tab) where that already names the node.
        assert hosts.contains(f"^{platform['networks'][0]['ipv4_address']}[[:space:]]\\+{platform['name']}$"), \
            platform["name"]


# One A query for a name, sent to a server's port 53 over UDP; prints the addresses of the answer.
DNS_QUERY = textwrap.dedent("""
    import socket, struct, sys
    name, server = sys.argv[1], sys.argv[2]
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(struct.pack(">HHHHHH", 0x1ab, 0x100, 1, 0, 0, 0) + question, (server, 53))
    reply = s.recv(512)
    count = struct.unpack(">H", reply[6:8])[0]
    print(count, socket.inet_ntoa(reply[-4:]) if count else "")
""")


def test_docker_dns_server_answers_at_the_node_address(host):
    """Pods cannot reach 127.0.0.11 (their own loopback): k8s-node-dns makes Docker's DNS server answer at the
    node's address, and the resolv.conf the kubelet hands to pods names that address."""
    assert host.file("/etc/resolv.conf").contains("^nameserver 127.0.0.11$"), "not on a user-defined Docker network"
    node = PLATFORMS[0]
    address = node["networks"][0]["ipv4_address"]
    assert host.service("k8s-node-dns").is_enabled
    assert host.file(DEFAULTS["common_node_dns_resolv_conf"]).contains(f"^nameserver {address}$")
    answer = host.check_output(f"python3 -c '{DNS_QUERY}' {node['name']} {address}")
    assert answer.split() == ["1", address], answer
