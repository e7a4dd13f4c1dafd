"""artifacts: every release file the nodes need is in the controller's cache,
archives unpacked (and marked with their checksum), image archives present;
nothing is copied to the nodes."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(ROOT))

from tools import artifacts  # noqa: E402

# The plan the role followed: the same producer, this host's architecture, the default cache (K8S_LAB_CACHE...).
PLAN = artifacts.node_plan(artifacts.load_versions(), [artifacts.host_arch()], "cache")
NODE = PLAN["arches"][artifacts.host_arch()]
CACHE = Path(PLAN["cache_dir"])


def test_release_files_are_cached_and_unpacked():
    for item in NODE["files"]:
        assert (CACHE / item["relpath"]).is_file(), item["id"]
        if item["archive"]:
            assert list((CACHE / ".extracted" / item["relpath"]).glob(".sha256-*")), f"{item['id']}: no checksum mark"
            for name, binary in item["binaries"].items():
                path = Path(binary["path"])
                assert path.is_file() and os.access(path, os.X_OK), (name, path)


def test_unpacked_etcd_is_the_pinned_release():
    etcd = next(item for item in NODE["files"] if item["id"] == "etcd")
    out = subprocess.check_output([etcd["binaries"]["etcd"]["path"], "--version"], text=True)
    assert f"etcd Version: {etcd['version'].lstrip('v')}" in out


def test_image_archives_are_cached():
    assert {i["id"] for i in NODE["images"]} == {"image/pause", "image/coredns", "image/echo"}
    for image in NODE["images"]:
        assert re.fullmatch(r"images/.+/image-linux-(amd64|arm64)\.tar", image["relpath"])
        assert Path(image["path"]).is_file(), image["id"]


def test_nothing_is_installed_on_the_node(host):
    for binary in ("etcd", "kubelet", "containerd"):
        assert not host.file(f"/usr/local/bin/{binary}").exists, binary
