"""The architecture names of the lab, in one place: what a machine calls its CPU (``uname -m``) -> the name
release files, images and the settings use. Read by tools/settings.py and by the artifact plan (tools/artifacts.py)."""

from __future__ import annotations

import platform

ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
SUPPORTED = ("amd64", "arm64")


def lab_arch(machine: str | None = None) -> str | None:
    """The lab's name for ``machine`` (default: this host's), None when the lab does not support it."""
    return ARCHES.get(machine if machine is not None else platform.machine())
