"""Security end to end on the default profile (the CIS benchmark is in test_cluster.py, which CI runs): rotating the key
that encrypts Secrets (make rotate-encryption-key) leaves every Secret readable, stored under the new key, and the
checks that look at Secrets and the API passing; the admin identity is a cluster-admin through RBAC, not
system:masters; renewing the certificates (make renew-certificates) reissues them and the checks pass after it.

`make test-security` runs it (K8S_LAB_SECURITY=1)."""

from __future__ import annotations

import json
import os

import pytest
from conftest import lab_check, make

from tools.locations import state_dir

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_SECURITY"),
                       reason="the security tests run with `make test-security` (K8S_LAB_SECURITY=1)"),
]
PROFILE = "default"


@pytest.fixture(scope="module")
def lab(cluster_up):
    return cluster_up.lab(PROFILE)


def test_a_key_rotation_keeps_every_secret_and_encrypts_with_the_new_key(lab):
    from kubernetes import client

    keys = state_dir() / "encryption-keys.json"
    (before,) = json.loads(keys.read_text())
    with lab.namespace("rotation") as ns:
        lab.core.create_namespaced_secret(ns, {"metadata": {"name": "kept"}, "stringData": {"v": "still-here"}})
        make("rotate-encryption-key", PROFILE, timeout=1200)
        (after,) = json.loads(keys.read_text())
        assert after["name"] != before["name"]
        kept = client.CoreV1Api(lab.api_client).read_namespaced_secret("kept", ns)
        assert kept.data["v"] == "c3RpbGwtaGVyZQ=="  # "still-here"
        prefix = lab.unit_arg(lab.control_plane[0], "kube-apiserver", "etcd-prefix") or "/registry"
        stored = lab.etcd_get(f"{prefix}/secrets/{ns}/kept")
        assert stored["value"].startswith(f"k8s:enc:secretbox:v1:{after['name']}:".encode()), stored["value"][:40]
    lab.delete_namespace(ns)
    rc, out = lab_check("C05", "C06", "C20")
    assert rc == 0, out[-3000:]


def served_certificate(lab, node: str):
    """The certificate the API server on ``node`` serves at its own address."""
    import ssl

    from cryptography import x509

    pem = ssl.get_server_certificate((lab.machine_ip(node), int(lab.unit_arg(node, "kube-apiserver", "secure-port"))))
    return x509.load_pem_x509_certificate(pem.encode())


def test_the_admin_is_a_cluster_admin_by_rbac_not_system_masters(lab):
    from kubernetes import client

    review = client.AuthenticationV1Api(lab.api_client).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    groups = review.status.user_info.groups
    assert "system:masters" not in groups and "k8s-arch-lab:cluster-admins" in groups, groups
    assert oct((state_dir() / "super-admin.kubeconfig").stat().st_mode & 0o777) == "0o600"


def test_a_certificate_renewal_reissues_every_leaf_and_the_checks_pass_after_it(lab):
    cp = lab.control_plane[0]
    before = served_certificate(lab, cp)
    days = (before.not_valid_after_utc - before.not_valid_before_utc).days
    assert 364 <= days <= 366, f"the API server's certificate is valid {days} days, not one year"
    make("renew-certificates", PROFILE, timeout=1800)
    after = served_certificate(lab, cp)
    assert after.serial_number != before.serial_number, "the API server still serves the old certificate"
    assert after.issuer == before.issuer and after.not_valid_before_utc > before.not_valid_before_utc
    rc, out = lab_check("C04", "C05", "C20", "C21")
    assert rc == 0, out[-3000:]
