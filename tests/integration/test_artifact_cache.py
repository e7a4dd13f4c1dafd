"""The artifact cache holds every pinned component, each reporting its
pinned version, and a damaged file is detected and rebuilt."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tools import artifacts as A

pytestmark = pytest.mark.integration

# Binary -> arguments that print its version.
VERSION_ARGS = {
    "kube-apiserver": ["--version"], "kube-controller-manager": ["--version"], "kube-scheduler": ["--version"],
    "kubelet": ["--version"], "kube-proxy": ["--version"], "kubectl": ["version", "--client"],
    "etcd": ["--version"], "etcdctl": ["version"], "etcdutl": ["version"],
    "containerd": ["--version"], "ctr": ["--version"], "containerd-shim-runc-v2": ["-v"],
    "runc": ["--version"], "crictl": ["--version"], "coredns": ["-version"],
    "bridge": [], "host-local": [], "loopback": [], "portmap": [], "kube-bench": ["version"],
}


def binaries(cache: Path, art: A.Artifact, into: Path) -> dict[str, Path]:
    """Extract (or copy) each binary of ``art`` into ``into``."""
    out = {}
    source = cache / art.relpath
    for inner, name in art.spec["binaries"].items():
        inner = A.expand(inner, art.version, art.arch)
        target = into / name
        if tarfile.is_tarfile(source):
            target.write_bytes(A.extract_member(source, inner))
        else:
            shutil.copyfile(source, target)
        target.chmod(0o755)
        out[name] = target
    return out


@pytest.mark.parametrize("art", [a for a in A.plan(A.load_versions(), A.host_arch()) if a.kind == "file"],
                         ids=lambda a: a.id)
def test_every_cached_binary_reports_its_pinned_version(art, tmp_path):
    cache = A.default_cache()
    assert A.Manifest(cache).verify(art) is None, "run `make artifacts` first"
    for name, path in binaries(cache, art, tmp_path).items():
        proc = subprocess.run([str(path), *VERSION_ARGS[name]], capture_output=True, text=True, timeout=30,
                              check=False)
        output = proc.stdout + proc.stderr
        print(f"{name}: {output.strip().splitlines()[0] if output.strip() else '(nothing)'}")
        assert art.version.lstrip("v") in output, f"{name} does not report {art.version}: {output!r}"


def test_a_corrupted_file_is_detected_and_rebuilt(tmp_path):
    cache = A.default_cache()
    runc = next(a for a in A.plan(A.load_versions(), A.host_arch()) if a.id == "runc")
    assert A.Manifest(cache).verify(runc) is None, "run `make artifacts` first"
    # A private copy of the cache entry, so the shared cache stays intact.
    copy = tmp_path / "cache"
    (copy / runc.relpath).parent.mkdir(parents=True)
    shutil.copyfile(cache / runc.relpath, copy / runc.relpath)
    shutil.copyfile(cache / A.MANIFEST, copy / A.MANIFEST)
    assert A.Manifest(copy).verify(runc) is None
    with (copy / runc.relpath).open("r+b") as handle:
        handle.truncate(1000)
    assert "truncated" in A.Manifest(copy).verify(runc)

    rc = A.main(["--cache", str(copy), "--only", "runc", "--source", "build"])
    assert rc == 0
    assert A.Manifest(copy).verify(runc) is None
    out = subprocess.run([str(copy / runc.relpath), "--version"], capture_output=True, text=True, check=True).stdout
    assert runc.version.lstrip("v") in out


def test_a_complete_cache_rebuilds_nothing():
    import time

    start = time.monotonic()
    counts = A.ensure(A.default_cache(), "auto", A.host_arch(), log=lambda *a: None)
    elapsed = time.monotonic() - start
    print(f"complete cache verified in {elapsed:.1f}s: {counts}")
    assert counts["build"] == counts["download"] == 0
