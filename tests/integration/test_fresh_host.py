"""A fresh host installs everything: `make deps` in a clean Debian 12 container (debootstrap minbase: no Go, no
Python, no Vagrant), then one of the lab's images built with the Go toolchain that `make deps` installed.

The container talks to this host's Docker daemon through its socket (as a fresh host's own daemon would be
used), and trusts what this host trusts (its CA bundle, passed in as SSL_CERT_FILE and friends): the package
registries are reached the way this host reaches them. Part of `make test` (about 2 minutes); `make
test-fresh-host` runs it alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tools import artifacts as A

pytestmark = [pytest.mark.integration, pytest.mark.fresh_host]

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "k8s-arch-lab/fresh-debian12"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def sh(*cmd: str, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


def debian_mirror() -> str:
    text = ""
    for path in [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]:
        with contextlib.suppress(OSError):
            text += path.read_text()
    for word in text.split():
        if word.startswith("http") and word.rstrip("/").endswith("/debian"):
            return word
    pytest.skip("no Debian mirror in this host's apt sources")


@pytest.fixture(scope="module")
def clean_debian12() -> str:
    """A Docker image of a minimal Debian 12 (debootstrap minbase), cached as a tarball in the artifact cache."""
    if sh("docker", "image", "inspect", f"{IMAGE}:bookworm").returncode == 0:
        return f"{IMAGE}:bookworm"
    tarball = A.default_cache() / "fresh-host" / "rootfs-bookworm-minbase.tar"
    if not tarball.is_file():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        rootfs = Path(f"/var/tmp/k8s-lab-fresh-{uuid.uuid4().hex[:6]}")
        try:
            proc = sh("debootstrap", "--variant=minbase", "bookworm", str(rootfs), debian_mirror(), timeout=900)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            proc = sh("tar", "-C", str(rootfs), "--numeric-owner", "-cf", f"{tarball}.part", ".")
            assert proc.returncode == 0, proc.stderr
            Path(f"{tarball}.part").rename(tarball)
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
    with tarball.open("rb") as tar:
        proc = subprocess.run(["docker", "import", "-", f"{IMAGE}:bookworm"], stdin=tar, capture_output=True,
                              timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return f"{IMAGE}:bookworm"


def test_make_deps_on_a_fresh_debian12_then_build_an_image_with_its_go(clean_debian12, tmp_path):
    assert sh("docker", "run", "--rm", clean_debian12, "sh", "-c", "command -v go python3 vagrant make").stdout == ""
    # The checkout as a fresh clone has it: tracked and new files, no .venv, no state.
    src = tmp_path / "k8s-arch-lab"
    files = sh("git", "ls-files", "-co", "--exclude-standard", cwd=ROOT).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    ca = ["-v", f"{HOST_CA}:/etc/k8s-lab-host-ca.crt:ro"] + [
        f"-e{name}=/etc/k8s-lab-host-ca.crt" for name in ("SSL_CERT_FILE", "PIP_CERT", "CURL_CA_BUNDLE",
                                                          "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO")]
    script = "\n".join([
        "set -eux",
        "export DEBIAN_FRONTEND=noninteractive",
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null",
        "cd /src && make deps",
        "test \"$(readlink -f .venv/bin/go)\" = /cache/go/go$(.venv/bin/python -c "
        "'import yaml; print(yaml.safe_load(open(\"versions.yml\"))[\"host_tools\"][\"go\"][\"version\"])')-$(dpkg "
        "--print-architecture)/bin/go",
        "! test -x /usr/local/go/bin/go",
        "PATH=/src/.venv/bin:$PATH .venv/bin/python -m tools.artifacts --only image/echo --source build",
        "make deps > /tmp/deps-again.log && grep 'linked as' /tmp/deps-again.log",  # a second run works too
    ])
    # What the container downloads, the Debian packages and Python wheels, is kept between runs in the artifact
    # cache, as a local package mirror would keep it: the container still installs everything, from files it
    # already has (the Go toolchain is downloaded each time: "deps: installing Go" is asserted below).
    downloads = A.default_cache() / "fresh-host"
    (downloads / "apt-archives" / "partial").mkdir(parents=True, exist_ok=True)
    (downloads / "pip").mkdir(parents=True, exist_ok=True)
    kept = ["-v", f"{downloads / 'apt-archives'}:/var/cache/apt/archives",
            "-v", f"{downloads / 'pip'}:/root/.cache/pip"]
    name = f"k8s-lab-fresh-{uuid.uuid4().hex[:6]}"
    proc = sh("docker", "run", "--rm", "--name", name, "-v", "/var/run/docker.sock:/var/run/docker.sock",
              "-v", f"{src}:/src", "-e", "K8S_LAB_CACHE=/cache", *kept, *ca, clean_debian12, "bash", "-c", script,
              timeout=2400)
    print(proc.stdout[-8000:], proc.stderr[-8000:])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "deps: installing Go" in proc.stdout
    assert "image/echo: done" in proc.stdout


@pytest.fixture(autouse=True)
def _docker_available():
    if shutil.which("docker") is None or sh("docker", "info").returncode != 0:
        pytest.skip("needs a running Docker daemon (`make deps` starts one)")
    if os.geteuid() != 0 and sh("sudo", "-n", "true").returncode != 0:
        pytest.skip("debootstrap needs root")
