"""artifacts: every release file the nodes need is in the controller's cache,
archives unpacked (and marked with their checksum), image archives present;
nothing is copied to the nodes."""

import os
import platform
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[5]
DEFAULTS = yaml.safe_load((ROOT / "roles" / "artifacts" / "defaults" / "main.yml").read_text())
VERSIONS = yaml.safe_load((ROOT / "versions.yml").read_text())
CACHE = Path(os.environ.get("K8S_LAB_CACHE") or Path.home() / ".cache" / "k8s-arch-lab")
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}[platform.machine()]


def expand(text, version):
    return text.replace("{version}", version).replace("{bare}", version.lstrip("v")).replace("{arch}", ARCH)


def wanted():
    """(file id, version, cache-relative path, {path inside: binary}) of each file the role plans."""
    ids = DEFAULTS["artifacts_node_files"] + DEFAULTS["artifacts_control_plane_files"]
    for comp in VERSIONS["components"].values():
        for fid, spec in comp["files"].items():
            if fid in ids:
                relpath = re.sub("^https?://", "", expand(spec["url"], comp["version"]))
                binaries = {expand(k, comp["version"]): v for k, v in spec["binaries"].items()}
                yield fid, comp["version"], relpath, binaries


def test_release_files_are_cached_and_unpacked():
    for fid, _, relpath, binaries in wanted():
        assert (CACHE / relpath).is_file(), fid
        if re.search(r"\.(tar\.gz|tgz)$", relpath):
            unpacked = CACHE / ".extracted" / relpath
            assert list(unpacked.glob(".sha256-*")), f"{fid}: no checksum mark"
            for inner in binaries:
                binary = unpacked / inner.removeprefix("./")
                assert binary.is_file() and os.access(binary, os.X_OK), binary


def test_unpacked_etcd_is_the_pinned_release():
    for fid, version, relpath, binaries in wanted():
        if fid == "etcd":
            etcd = CACHE / ".extracted" / relpath / next(k for k, v in binaries.items() if v == "etcd")
            assert f"etcd Version: {version.lstrip('v')}" in subprocess.check_output([etcd, "--version"], text=True)


def test_image_archives_are_cached():
    for iid in DEFAULTS["artifacts_images"]:
        image = VERSIONS["images"][iid]
        assert (CACHE / "images" / image["name"] / str(image["version"]) / f"image-linux-{ARCH}.tar").is_file(), iid


def test_nothing_is_installed_on_the_node(host):
    for binary in ("etcd", "kubelet", "containerd"):
        assert not host.file(f"/usr/local/bin/{binary}").exists, binary
