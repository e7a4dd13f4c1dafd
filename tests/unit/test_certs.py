"""`lab certs` (labs/certs.py) on certificates made here: what a machine's gathering prints is parsed into each
certificate's identity, issuer and expiry; private keys beside a certificate are never taken; kubeconfigs give their
embedded client certificate; the table is sorted by expiry and flags the expired and those within 30 days."""

from __future__ import annotations

import base64
import datetime

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from labs import certs as C

NOW = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.UTC)


def name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def issue(subject: x509.Name, days: float, issuer=None, ca: bool = False):
    key = ec.generate_private_key(ec.SECP256R1())
    signer, issuer_name = (issuer if issuer else (key, subject))
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(NOW - datetime.timedelta(days=400))
            .not_valid_after(NOW + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(signer, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return pem, key_pem, key


@pytest.fixture
def pki():
    ca_pem, _, ca_key = issue(name("kubernetes-ca"), 3650, ca=True)
    ca = (ca_key, name("kubernetes-ca"))
    return {
        "ca": ca_pem,
        "apiserver": issue(name("kube-apiserver"), 365, ca)[0],
        "kubelet": issue(name("system:node:w1", "system:nodes"), 10, ca),
        "old": issue(name("system:kube-proxy"), -2, ca)[0],
    }


def test_a_machine_s_gathering_gives_every_certificate_and_no_key(pki):
    kubelet_pem, kubelet_key, _ = pki["kubelet"]
    printed = "\n".join([
        "@@ /etc/kubernetes/pki/ca.crt", pki["ca"],
        "@@ /etc/kubernetes/pki/apiserver.crt", pki["apiserver"],
        # the kubelet's rotated pair: the gathering's sed keeps the certificate block only
        "@@ /var/lib/kubelet/pki/kubelet-client-current.pem", kubelet_pem,
        "@@ /etc/kubernetes/kube-proxy.kubeconfig", base64.b64encode(pki["old"].encode()).decode(),
        "@@ /etc/kubernetes/empty.kubeconfig",
    ])
    assert "PRIVATE KEY" not in printed and kubelet_key not in printed
    found = C.parse_gathered("w1", printed, NOW)
    by_path = {c.path: c for c in found}
    assert sorted(by_path) == ["/etc/kubernetes/kube-proxy.kubeconfig", "/etc/kubernetes/pki/apiserver.crt",
                               "/etc/kubernetes/pki/ca.crt", "/var/lib/kubelet/pki/kubelet-client-current.pem"]
    kubelet = by_path["/var/lib/kubelet/pki/kubelet-client-current.pem"]
    assert (kubelet.subject, kubelet.issuer, kubelet.is_ca) == ("CN=system:node:w1, O=system:nodes",
                                                              "CN=kubernetes-ca", False)
    assert kubelet.days_left == 10 and kubelet.state == "soon"
    assert by_path["/etc/kubernetes/pki/ca.crt"].is_ca
    assert by_path["/etc/kubernetes/kube-proxy.kubeconfig"].state == "expired"
    assert by_path["/etc/kubernetes/pki/apiserver.crt"].state == "ok"


def test_the_gathering_reads_certificate_blocks_only():
    """The command itself: certificate files through sed's BEGIN..END range, kubeconfigs' client-certificate-data."""
    script = C.GATHER.format(folders=" ".join(C.NODE_FOLDERS))
    assert "/-----BEGIN CERTIFICATE-----/,/-----END CERTIFICATE-----/p" in script
    assert "client-certificate-data" in script and "client-key-data" not in script
    assert "cat " not in script


def test_the_controller_s_pki_and_kubeconfigs(pki, tmp_path):
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_text(pki["ca"])
    (tmp_path / "pki" / "ca.key").write_text("-----BEGIN PRIVATE KEY-----\nnot read\n-----END PRIVATE KEY-----\n")
    admin = {"users": [{"name": "admin", "user": {"client-certificate-data": base64.b64encode(
        pki["kubelet"][0].encode()).decode(), "client-key-data": "c2VjcmV0"}}]}
    (tmp_path / "admin.kubeconfig").write_text(yaml.safe_dump(admin))
    found = C.on_controller(tmp_path, NOW)
    assert [(c.machine, c.path.rsplit("/", 1)[-1]) for c in found] == [("controller", "ca.crt"),
                                                                       ("controller", "admin.kubeconfig")]


def test_the_table_is_sorted_by_expiry_and_flags_what_expires(pki):
    found = C.parse_gathered("cp1", "\n".join(["@@ /a.crt", pki["apiserver"], "@@ /b.crt", pki["old"],
                                                 "@@ /c.crt", pki["kubelet"][0]]), NOW)
    found.sort(key=lambda c: c.days_left)
    text = C.render(found)
    lines = text.splitlines()
    assert [line.split()[3] for line in lines[1:4]] == ["cp1:/b.crt", "cp1:/c.crt", "cp1:/a.crt"]
    assert lines[1].endswith("EXPIRED") and lines[2].endswith("expires within 30 days")
    assert lines[-1] == "3 certificates: 1 expired, 1 expire within 30 days"


def test_status_counts_an_expired_certificate_as_a_problem_and_warns_of_one_soon(monkeypatch):
    from labs import status

    found = [C.Cert("cp1", "/etc/kubernetes/pki/apiserver.crt", "CN=kube-apiserver", "CN=ca", "2026-12-01T00:00:00",
                    -6, False),
             C.Cert("w1", "/var/lib/kubelet/pki/kubelet.crt", "CN=w1", "CN=w1-ca", "2026-12-20T00:00:00", 13, False)]
    monkeypatch.setattr(C, "collect", lambda lab: found)
    report = status.Report()
    status.certificates(None, report)
    assert report.problems == ["cp1:/etc/kubernetes/pki/apiserver.crt (CN=kube-apiserver) expired on 2026-12-01"]
    assert any(line.startswith("  WARN  w1:/var/lib/kubelet/pki/kubelet.crt (CN=w1) expires on 2026-12-20, in 13 days")
               for line in report.lines)
    monkeypatch.setattr(C, "collect", lambda lab: found[1:])
    healthy = status.Report()
    status.certificates(None, healthy)
    assert not healthy.problems


def test_each_machine_is_asked_for_what_it_serves():
    from types import SimpleNamespace

    ips = {"cp1": "192.168.56.11", "w1": "192.168.56.21", "e1": "192.168.56.91"}
    lab = SimpleNamespace(etcd_members=["cp1", "e1"], control_plane=["cp1"], nodes=["cp1", "w1"],
                          setting=lambda name: {"etcd_client": 2379, "etcd_peer": 2380, "api_server": 6443},
                          machine_ip=ips.get)
    ports = {m: [(address, port) for _label, address, port in C.endpoints(lab, m)] for m in ("cp1", "w1", "e1")}
    assert ports == {
        "cp1": [("192.168.56.11", 2379), ("192.168.56.11", 2380), ("192.168.56.11", 6443), ("127.0.0.1", 10257),
                ("127.0.0.1", 10259), ("192.168.56.11", 10250)],
        "w1": [("192.168.56.21", 10250)],
        "e1": [("192.168.56.91", 2379), ("192.168.56.91", 2380)],
    }
    script = C.served_script(lab, "w1")
    assert "openssl s_client -connect 192.168.56.21:10250" in script and "@@ served on 192.168.56.21:10250 (kubelet)" \
        in script


def test_a_served_chain_gives_each_of_its_certificates(pki):
    printed = "\n".join(["@@ served on 192.168.56.11:6443 (kube-apiserver)", pki["apiserver"], pki["ca"]])
    found = C.parse_gathered("cp1", printed, NOW)
    assert [(c.path, c.subject, c.is_ca) for c in found] == [
        ("served on 192.168.56.11:6443 (kube-apiserver)", "CN=kube-apiserver", False),
        ("served on 192.168.56.11:6443 (kube-apiserver)", "CN=kubernetes-ca", True)]
    assert "cp1: served on 192.168.56.11:6443 (kube-apiserver)" in C.render(found)
