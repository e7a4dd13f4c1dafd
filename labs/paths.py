"""Where the lab finds its files in the checkout: the repository root and the Ansible inventory the playbooks use
(which publishes the rest, the state folder with the admin kubeconfig included: lab_settings.state_dir), and the
state folder itself, as tools/locations.py decides it."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INVENTORY = ROOT / "inventory"


def state_dir() -> Path:
    """The lab's state folder, decided by tools/locations.py (the one place that decides it; standard library only),
    loaded from the checkout: `lab` runs from anywhere, where the checkout's tools package is not importable. The
    same folder the lab's inventory publishes as lab_settings.state_dir, found without reading the inventory."""
    spec = importlib.util.spec_from_file_location("_k8s_lab_locations", ROOT / "tools" / "locations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.state_dir()
