"""Node containers for tests: start them from the node image, wait for
systemd, tear them down (containers, volumes, network) whatever happens."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_ARGS = ROOT / "tools/node-image/run-args"
IMAGE = "k8s-arch-lab/node:bookworm"


def docker(*args: str, check: bool = True, timeout: float = 120) -> str:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


@dataclass
class Node:
    name: str
    address: str

    def exec(self, *cmd: str, check: bool = True, timeout: float = 120) -> str:
        return docker("exec", self.name, *cmd, check=check, timeout=timeout)

    def succeeds(self, *cmd: str, timeout: float = 30) -> bool:
        proc = subprocess.run(["docker", "exec", self.name, *cmd], capture_output=True, timeout=timeout, check=False)
        return proc.returncode == 0


def run_args(name: str) -> list[str]:
    return subprocess.run([str(RUN_ARGS), name], capture_output=True, text=True, check=True).stdout.splitlines()


def start(name: str, network: str, pubkey: Path, image: str = IMAGE) -> Node:
    docker("run", "-d", "--name", name, "--hostname", name, "--network", network,
           f"--volume={pubkey}:/etc/ssh/authorized_keys.d/root:ro", *run_args(name), image)
    address = docker("inspect", "-f", f"{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}", name)
    return Node(name, address)


def wait_running(node: Node, timeout: float = 60) -> str:
    """Wait (bounded) until systemd reports running or degraded; return the state."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = node.exec("systemctl", "is-system-running", check=False, timeout=10)
        if state in ("running", "degraded"):
            return state
        time.sleep(0.5)
    failed = node.exec("systemctl", "--failed", "--no-legend", check=False)
    raise TimeoutError(f"{node.name}: systemd is {state!r} after {timeout}s; failed units: {failed}")


def create_network(name: str) -> None:
    docker("network", "rm", name, check=False)
    docker("network", "create", "--label", "org.k8s-arch-lab.network=test", name)


def remove(names: list[str], network: str | None = None) -> None:
    for name in names:
        docker("rm", "-f", "-v", name, check=False)
        for data in ("containerd", "containers", "docker"):
            docker("volume", "rm", "-f", f"k8s-arch-lab-{name}-{data}", check=False)
    if network:
        docker("network", "rm", network, check=False)
