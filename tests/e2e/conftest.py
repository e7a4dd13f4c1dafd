"""One cluster at a time, shared by every end-to-end test of its profile.

Tests ask for a profile with `cluster_up("ha")`; the session brings that
profile up once (tearing down another one first) and destroys it at the end.

K8S_LAB_E2E_REUSE=ha (or default) uses the cluster of that profile that is
already running, as `make up PROFILE=ha` left it, and leaves it running: for
working on one test without a new bring-up each time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lab_check(*args: str, timeout: float = 1800) -> tuple[int, str]:
    """`lab check ARGS` on the running cluster, as a user runs it; its exit status and output (stdout printed)."""
    proc = subprocess.run([sys.executable, "-m", "labs.cli", "check", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)
    print(proc.stdout[-20000:])
    return proc.returncode, proc.stdout + proc.stderr


def make(target: str, profile: str, timeout: float, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PROFILE=profile, PROVIDER="docker")
    started = time.monotonic()
    proc = subprocess.run(["make", "--no-print-directory", target], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    print(f"make {target} PROFILE={profile}: rc={proc.returncode} in {time.monotonic() - started:.0f}s")
    if check and proc.returncode != 0:
        pytest.fail(f"make {target} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    return proc


class Clusters:
    def __init__(self) -> None:
        self.profile: str | None = None
        self.up_output: dict[str, subprocess.CompletedProcess] = {}

    def __call__(self, profile: str) -> subprocess.CompletedProcess | None:
        if os.environ.get("K8S_LAB_E2E_REUSE") == profile:
            os.environ["K8S_LAB_PROFILE"] = profile
            return self.up_output.get(profile)
        if self.profile != profile:
            make("down", self.profile or profile, timeout=300, check=False)
            self.profile = None
            self.up_output[profile] = make("up", profile, timeout=1500)
            self.profile = profile
        os.environ["K8S_LAB_PROFILE"] = profile
        return self.up_output[profile]

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
