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
import tempfile
import uuid
from dataclasses import dataclass
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


SCRIPT = "\n".join([
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


@dataclass
class Run:
    """The fresh host's run: its container (kept after it exits, for its output) and the checkout copy it uses."""

    name: str
    workdir: Path


# The run started in the background when the session's tests were collected (tests/integration/conftest.py), or
# the error that kept it from starting.
BACKGROUND: dict = {}


def start(image: str) -> Run:
    """`make deps` and the image build in a clean Debian 12 container, started and left running. Low CPU weight
    (--cpu-shares 2): it takes what the tests around it leave, and most of what `make test` does is waiting."""
    workdir = Path(tempfile.mkdtemp(prefix="k8s-lab-fresh-src-"))
    # The checkout as a fresh clone has it: tracked and new files, no .venv, no state.
    src = workdir / "k8s-arch-lab"
    for rel in sh("git", "ls-files", "-co", "--exclude-standard", cwd=ROOT).stdout.split():
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    ca = ["-v", f"{HOST_CA}:/etc/k8s-lab-host-ca.crt:ro"] + [
        f"-e{name}=/etc/k8s-lab-host-ca.crt" for name in ("SSL_CERT_FILE", "PIP_CERT", "CURL_CA_BUNDLE",
                                                          "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO")]
    # What the container downloads, the Debian packages and Python wheels, is kept between runs in the artifact
    # cache, as a local package mirror would keep it: the container still installs everything, from files it
    # already has (the Go toolchain is downloaded each time: "deps: installing Go" is asserted below).
    downloads = A.default_cache() / "fresh-host"
    (downloads / "apt-archives" / "partial").mkdir(parents=True, exist_ok=True)
    (downloads / "pip").mkdir(parents=True, exist_ok=True)
    kept = ["-v", f"{downloads / 'apt-archives'}:/var/cache/apt/archives",
            "-v", f"{downloads / 'pip'}:/root/.cache/pip"]
    run = Run(f"k8s-lab-fresh-{uuid.uuid4().hex[:6]}", workdir)
    proc = sh("docker", "run", "-d", "--cpu-shares", "2", "--name", run.name,
              "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{src}:/src", "-e", "K8S_LAB_CACHE=/cache",
              *kept, *ca, image, "bash", "-c", SCRIPT)
    assert proc.returncode == 0, proc.stderr
    return run


def remove(run: Run) -> None:
    sh("docker", "rm", "-f", run.name)
    shutil.rmtree(run.workdir, ignore_errors=True)


def start_in_background() -> None:
    """Called once the session's tests are collected: start the run, or keep why it could not start."""
    try:
        if shutil.which("docker") and sh("docker", "info").returncode == 0:
            BACKGROUND["run"] = start(clean_debian12())
    except BaseException as exc:  # noqa: BLE001 - reported by the test itself (a skip stays a skip)
        BACKGROUND["error"] = exc


def test_make_deps_on_a_fresh_debian12_then_build_an_image_with_its_go():
    if "error" in BACKGROUND:
        raise BACKGROUND.pop("error")
    image = clean_debian12()
    assert sh("docker", "run", "--rm", image, "sh", "-c", "command -v go python3 vagrant make").stdout == ""
    run = BACKGROUND.pop("run", None) or start(image)
    try:
        waited = sh("docker", "wait", run.name, timeout=2400)
        logs = sh("docker", "logs", run.name)
    finally:
        remove(run)
    print(logs.stdout[-8000:], logs.stderr[-8000:])
    assert waited.returncode == 0 and waited.stdout.strip() == "0", (waited.stdout, logs.stderr[-4000:])
    assert "deps: installing Go" in logs.stdout
    assert "image/echo: done" in logs.stdout


@pytest.fixture(autouse=True)
def _docker_available():
    if shutil.which("docker") is None or sh("docker", "info").returncode != 0:
        pytest.skip("needs a running Docker daemon (`make deps` starts one)")
    if os.geteuid() != 0 and sh("sudo", "-n", "true").returncode != 0:
        pytest.skip("debootstrap needs root")
