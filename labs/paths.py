"""Where the lab finds its files in the checkout: the repository root and the Ansible inventory the playbooks use
(which publishes the rest, the state folder with the admin kubeconfig included: lab_settings.state_dir)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INVENTORY = ROOT / "inventory"
