"""Where the lab keeps what it makes on this host, decided in one place (standard library only, so that the shell
scripts can ask before the virtualenv exists):

    python3 -m tools.locations cache|state

* the artifact cache: $K8S_LAB_CACHE, else $XDG_CACHE_HOME/k8s-arch-lab, else ~/.cache/k8s-arch-lab; it outlives
  checkouts and is shared by them (release files, built binaries, images, the node image's root filesystem, the
  VM box, the Go toolchain);
* the state folder of this checkout's cluster: $K8S_LAB_STATE_DIR, else .lab in the checkout (SSH key,
  certificates, kubeconfigs, the encryption key, the record of the profile and provider, benchmark reports).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_ENV = "K8S_LAB_STATE_DIR"
STATE_DIR = ROOT / ".lab"


def default_cache() -> Path:
    env = os.environ.get("K8S_LAB_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "k8s-arch-lab"


def state_dir() -> Path:
    """The lab's state folder: $K8S_LAB_STATE_DIR, else .lab in the checkout."""
    return Path(os.environ.get(STATE_ENV) or STATE_DIR).expanduser().absolute()


def main(argv: list[str]) -> int:
    if argv not in (["cache"], ["state"]):
        print("usage: python3 -m tools.locations cache|state", file=sys.stderr)
        return 2
    print(default_cache() if argv == ["cache"] else state_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
