"""kubeconfigs: on the controller, one kubeconfig per client identity (and one
per node's kubelet), 0600, each with the cluster CA, its own certificate and
the right API address (the local API server for the controllers)."""

import base64
import os
import stat
from pathlib import Path

import yaml

STATE = Path(os.environ["K8S_LAB_STATE_DIR"])
PLATFORMS = yaml.safe_load(Path(os.environ["MOLECULE_FILE"]).read_text())["platforms"]
API = f"https://{PLATFORMS[0]['networks'][0]['ipv4_address']}:6443"
LOCAL_API = "https://127.0.0.1:6443"
EXPECTED = {
    STATE / "admin.kubeconfig": ("admin", API),
    STATE / "kubeconfigs" / "admin-local.kubeconfig": ("admin", LOCAL_API),
    STATE / "kubeconfigs" / "controller-manager.kubeconfig": ("system:kube-controller-manager", LOCAL_API),
    STATE / "kubeconfigs" / "scheduler.kubeconfig": ("system:kube-scheduler", LOCAL_API),
    STATE / "kubeconfigs" / "kube-proxy.kubeconfig": ("system:kube-proxy", API),
    **{STATE / "kubeconfigs" / f"kubelet-{p['name']}.kubeconfig": (f"system:node:{p['name']}", API) for p in PLATFORMS},
}


def test_one_kubeconfig_per_identity_readable_by_its_owner_only():
    assert stat.S_IMODE((STATE / "kubeconfigs").stat().st_mode) == 0o700
    for path in EXPECTED:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    assert len(list((STATE / "kubeconfigs").glob("*.kubeconfig"))) == len(EXPECTED) - 1


def test_each_kubeconfig_names_its_user_server_ca_and_certificate():
    ca = (STATE / "pki" / "ca.crt").read_bytes().strip()
    for path, (user, server) in EXPECTED.items():
        config = yaml.safe_load(path.read_text())
        cluster = config["clusters"][0]["cluster"]
        assert cluster["server"] == server, path.name
        assert base64.b64decode(cluster["certificate-authority-data"]).strip() == ca, path.name
        assert config["users"][0]["name"] == user, path.name
        certificate = base64.b64decode(config["users"][0]["user"]["client-certificate-data"]).decode()
        assert certificate.startswith("-----BEGIN CERTIFICATE-----"), path.name
        assert config["current-context"] == f"{user}@{config['clusters'][0]['name']}", path.name
