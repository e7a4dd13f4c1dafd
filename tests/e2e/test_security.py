"""Security end to end on the default profile: the CIS benchmark (make cis) finds no FAIL, and rotating the key
that encrypts Secrets (make rotate-encryption-key) leaves every Secret readable, stored under the new key, and the
checks that look at Secrets and the API passing.

`make test-security` runs it (K8S_LAB_SECURITY=1)."""

from __future__ import annotations

import json
import os

import pytest
from conftest import lab_check, make

from labs.lab import Lab
from tools.locations import state_dir

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_SECURITY"),
                       reason="the security tests run with `make test-security` (K8S_LAB_SECURITY=1)"),
]
PROFILE = "default"


@pytest.fixture(scope="module")
def lab(cluster_up):
    cluster_up(PROFILE)
    lab = Lab()
    lab.ping()
    return lab


def test_the_cis_benchmark_finds_no_failure(lab):
    proc = make("cis", PROFILE, timeout=900, check=False)
    summary = (state_dir() / "cis" / "summary.md").read_text()
    print(summary.split("\n## ")[0])
    assert proc.returncode == 0, summary[:6000]


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
