"""Where the lab finds its files in the checkout: the repository root, the admin kubeconfig `make up` writes and the
Ansible inventory the playbooks use."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_KUBECONFIG = ROOT / ".lab/admin.kubeconfig"
DEFAULT_INVENTORY = ROOT / "inventory"
