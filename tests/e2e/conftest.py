"""One cluster at a time, shared by every end-to-end test of its profile.

Tests ask for a profile with `cluster_up("ha")`; the session brings that
profile up once (tearing down another one first) and destroys it at the end.

The default and single profiles are brought up with the API server's port and
the Service range moved away from settings.yml's (MOVED: a settings file of
its own, K8S_LAB_SETTINGS), so that every test of those profiles, the lab
checks included, also proves that the layers take those values from the
settings alone; the ha profile keeps the shipped settings.

K8S_LAB_E2E_REUSE=ha (or default) uses the cluster of that profile that is
already running, as `make up PROFILE=ha` left it, and leaves it running: for
working on one test without a new bring-up each time."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# The default and single profiles' settings differ from settings.yml in these (network.*) values.
MOVED = {"api_server_port": 7443, "service_cidr": "10.112.0.0/16"}
MOVED_PROFILES = ("default", "single")


def use_settings(profile: str) -> None:
    """Point this session (and the make/lab commands it runs) at the settings the profile is tested with."""
    if profile not in MOVED_PROFILES:
        os.environ.pop("K8S_LAB_SETTINGS", None)
        return
    doc = yaml.safe_load((ROOT / "settings.yml").read_text())
    doc["network"].update(MOVED)
    path = Path(tempfile.mkdtemp(prefix="k8s-lab-e2e-")) / "settings.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    os.environ["K8S_LAB_SETTINGS"] = str(path)


def lab_check(*args: str, timeout: float = 1800) -> tuple[int, str]:
    """`lab check ARGS` on the running cluster, as a user runs it; its exit status and output (stdout printed)."""
    proc = subprocess.run([sys.executable, "-m", "labs.cli", "check", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)
    print(proc.stdout[-20000:])
    return proc.returncode, proc.stdout + proc.stderr


def make(target: str, profile: str, timeout: float, check: bool = True, args: tuple[str, ...] = ()) \
        -> subprocess.CompletedProcess:
    env = dict(os.environ, PROFILE=profile, PROVIDER="docker")
    started = time.monotonic()
    proc = subprocess.run(["make", "--no-print-directory", target, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    print(f"make {target} PROFILE={profile}: rc={proc.returncode} in {time.monotonic() - started:.0f}s")
    if check and proc.returncode != 0:
        pytest.fail(f"make {target} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    return proc


@contextlib.contextmanager
def after_call(module, function: str, disrupt):
    """Run the check as it is, but once ``module.function`` has returned (its pod or Deployment runs), make the
    claim false with ``disrupt(result)``, a context manager (e.g. ``stopped``) left at the end of the test. The
    cluster itself is changed, not the check."""
    real = getattr(module, function)
    with contextlib.ExitStack() as falsified:
        def wrapped(*args, **kwargs):
            result = real(*args, **kwargs)
            falsified.enter_context(disrupt(result))
            return result

        setattr(module, function, wrapped)
        try:
            yield
        finally:
            setattr(module, function, real)


def check_module(check_id: str):
    """The module of a check, whose functions after_call wraps."""
    from labs.registry import load_checks

    return sys.modules[load_checks()[check_id].func.__module__]


class Clusters:
    def __init__(self) -> None:
        self.profile: str | None = None
        self.up_output: dict[str, subprocess.CompletedProcess] = {}

    def __call__(self, profile: str) -> subprocess.CompletedProcess | None:
        if os.environ.get("K8S_LAB_E2E_REUSE") == profile:
            os.environ["K8S_LAB_PROFILE"] = profile  # the running cluster's settings, whatever they are
            return self.up_output.get(profile)
        if self.profile != profile:
            make("down", self.profile or profile, timeout=300, check=False)
            self.profile = None
            use_settings(profile)
            self.up_output[profile] = make("up", profile, timeout=1500)
            self.profile = profile
        os.environ["K8S_LAB_PROFILE"] = profile
        return self.up_output[profile]

    def lab(self, profile: str):
        """The profile's cluster up (as __call__), and a Lab on it that has answered a first request."""
        from labs.lab import Lab

        self(profile)
        lab = Lab()
        lab.ping()
        return lab

    def down(self) -> None:
        if self.profile:
            make("down", self.profile, timeout=300, check=False)
            self.profile = None


@pytest.fixture(scope="session")
def cluster_up():
    clusters = Clusters()
    try:
        yield clusters
    finally:
        clusters.down()


def lab_namespaces(lab) -> list[str]:
    """The namespaces of the lab's checks (their label) that are not being deleted: what a check left behind."""
    from labs.lab import LAB_LABEL

    return [n.metadata.name for n in lab.core.list_namespace(label_selector=LAB_LABEL).items
            if n.status.phase != "Terminating"]
