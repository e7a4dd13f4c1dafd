"""api_loadbalancer: haproxy and keepalived on every control-plane node, the
virtual IP on exactly one of them, the API answering through it, and the
address moving to another node when its holder's haproxy stops."""

import os
import ssl
import time
import urllib.request
from pathlib import Path

import testinfra
import yaml

PLATFORMS = yaml.safe_load(Path(os.environ["MOLECULE_FILE"]).read_text())["platforms"]
NODES = {p["name"]: testinfra.get_host(f"docker://{p['name']}") for p in PLATFORMS}
# As the scenario's inventory decides (tests/molecule/group_vars/all.yml): the .10 address, port 8443.
VIP = PLATFORMS[0]["networks"][0]["ipv4_address"].rsplit(".", 1)[0] + ".10"
CA = Path(os.environ["K8S_LAB_STATE_DIR"]) / "pki" / "ca.crt"


def holders():
    return [name for name, node in NODES.items() if f"inet {VIP}/32 " in node.check_output("ip -4 addr show eth0")]


def api_ready(attempts=10):
    context = ssl.create_default_context(cafile=CA)
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(f"https://{VIP}:8443/readyz", context=context, timeout=3) as answer:
                return answer.read().decode()
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(1)


def test_haproxy_and_keepalived_run_on_every_node(host):
    for name in ("haproxy", "keepalived"):
        service = host.service(name)
        assert service.is_running and service.is_enabled, name
        # both come back by themselves when they die (keepalived by the role's drop-in: Debian's unit does not)
        assert host.run(f"systemctl show -p Restart --value {name}").stdout.strip() in ("always", "on-failure"), name
    # Bound to the API's virtual address and the node's own address, not to every address of the node.
    addresses = host.interface("eth0").addresses
    node_ip = next(p["networks"][0]["ipv4_address"] for p in PLATFORMS if p["networks"][0]["ipv4_address"] in addresses)
    assert host.socket(f"tcp://{VIP}:8443").is_listening
    assert host.socket(f"tcp://{node_ip}:8443").is_listening
    assert not host.socket("tcp://0.0.0.0:8443").is_listening
    haproxy = host.file("/etc/haproxy/haproxy.cfg")
    for platform in PLATFORMS:
        assert haproxy.contains(f"server {platform['name']} {platform['networks'][0]['ipv4_address']}:6443 ")


def test_virtual_ip_is_on_one_node_and_reaches_the_api():
    assert len(holders()) == 1
    assert api_ready() == "ok"


def test_virtual_ip_moves_when_its_holders_haproxy_stops():
    before = holders()[0]
    NODES[before].run("systemctl stop haproxy")
    try:
        for _ in range(30):
            if holders() not in ([], [before]):
                break
            time.sleep(1)
        assert len(holders()) == 1 and holders() != [before]
        assert api_ready() == "ok"
    finally:
        NODES[before].run("systemctl start haproxy")
