"""pki: on the controller, both CAs, one certificate per identity (etcd ones
for etcd members only, kubelet ones for every node) signed by the right CA,
the API server's names and addresses, private keys 0600, the encryption key."""

import base64
import ipaddress
import json
import os
import stat
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

PKI = Path(os.environ["K8S_LAB_STATE_DIR"]) / "pki"
PLATFORMS = yaml.safe_load(Path(os.environ["MOLECULE_FILE"]).read_text())["platforms"]
NODES = [p["name"] for p in PLATFORMS]
ETCD = [p["name"] for p in PLATFORMS if "etcd" in p["groups"]]
CONTROL_PLANE = [p for p in PLATFORMS if "control_plane" in p["groups"]]


def cert(name):
    return x509.load_pem_x509_certificate((PKI / f"{name}.crt").read_bytes())


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_private_keys_are_readable_by_their_owner_only():
    assert mode(PKI) == 0o700
    keys = list(PKI.glob("*.key"))
    assert len(keys) > 10
    for key in keys:
        assert mode(key) == 0o600, key.name


def test_each_identity_is_signed_by_its_ca():
    ca, etcd_ca, front_proxy_ca = cert("ca"), cert("etcd-ca"), cert("front-proxy-ca")
    for c in (ca, etcd_ca, front_proxy_ca):
        assert c.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name in ("apiserver", "apiserver-kubelet-client", "controller-manager", "scheduler", "kube-proxy", "admin"):
        cert(name).verify_directly_issued_by(ca)
    for name in ("apiserver-etcd-client", "etcd-healthcheck-client"):
        cert(name).verify_directly_issued_by(etcd_ca)
    cert("front-proxy-client").verify_directly_issued_by(front_proxy_ca)  # the aggregation layer's, trusted alone
    for node in NODES:
        cert(f"kubelet-{node}").verify_directly_issued_by(ca)
        subject = cert(f"kubelet-{node}").subject
        assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == f"system:node:{node}"
        assert subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
        assert (PKI / f"etcd-server-{node}.crt").exists() == (node in ETCD), node
    for node in ETCD:
        cert(f"etcd-server-{node}").verify_directly_issued_by(etcd_ca)
        cert(f"etcd-peer-{node}").verify_directly_issued_by(etcd_ca)


def test_api_server_certificate_names_every_way_to_reach_it():
    sans = cert("apiserver").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = sans.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("10.96.0.1") in ips
    assert "kubernetes.default.svc.cluster.local" in sans.get_values_for_type(x509.DNSName)
    for node in CONTROL_PLANE:
        assert ipaddress.ip_address(node["networks"][0]["ipv4_address"]) in ips
        assert node["name"] in sans.get_values_for_type(x509.DNSName)


def test_service_account_keys_and_encryption_key():
    assert (PKI / "sa.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    keys_file = PKI.parent / "encryption-keys.json"
    assert mode(keys_file) == 0o600
    (key,) = json.loads(keys_file.read_text())  # one key at first: it encrypts
    assert key["name"].startswith("key-") and len(base64.b64decode(key["secret"])) == 32
