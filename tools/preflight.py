"""Before `vagrant up` creates anything: say which provider runs the machines and why, get what that provider
needs ready (the node image; libvirtd and the box), and stop with one clear message when something cannot be had.

    python3 -m tools.preflight      # `make up` runs it; exit 0 = ready, 2 = not (nothing was created)
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tools import settings as lab_settings

ROOT = Path(__file__).resolve().parent.parent
VAGRANT_SERVER = "https://vagrantcloud.com"  # where Vagrant looks up a box given by name (VAGRANT_SERVER_URL)


class PreflightError(Exception):
    pass


def installed_boxes() -> set[tuple[str, str]]:
    """(name, provider) of the boxes Vagrant has."""
    proc = subprocess.run(["vagrant", "box", "list", "--machine-readable"], capture_output=True, text=True,
                          timeout=120, check=False)
    boxes, name = set(), None
    for line in proc.stdout.splitlines():
        fields = line.split(",")
        if len(fields) >= 4 and fields[2] == "box-name":
            name = fields[3]
        elif len(fields) >= 4 and fields[2] == "box-provider" and name:
            boxes.add((name, fields[3]))
    return boxes


def reachable(url: str, timeout: float = 5.0) -> bool:
    """Can a TCP connection be made to the URL's host and port (DNS included), within the timeout?"""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)),
                                      timeout=timeout):
            return True
    except OSError:
        return False


def box_problem(box: str, provider: str, *, boxes: set[tuple[str, str]], can_download: bool) -> str | None:
    """Why the box cannot be had, with the ways out; None when Vagrant has it or can download it."""
    if (box, provider) in boxes:
        return None
    if "://" in box or box.endswith(".box") or Path(box).exists():
        return None  # a URL or a file: Vagrant reports its own errors about those
    if can_download:
        return None
    ways = []
    if provider == "libvirt":
        ways.append(f"build the lab's own box offline: `make box`, and set box.libvirt: {lab_settings.LAB_BOX} in "
                    "settings.yml (the default)")
    ways.append(f"add a {provider} box by hand: `vagrant box add --name {box} --provider {provider} FILE.box`")
    ways.append("or use containers instead of VMs: `make up PROVIDER=docker`")
    return (f"the Vagrant box {box} ({provider}) is not installed, and Vagrant's box catalogue "
            f"({os.environ.get('VAGRANT_SERVER_URL') or VAGRANT_SERVER}) cannot be reached from this host. "
            "Nothing was created. Ways out:\n  - " + "\n  - ".join(ways))


def route_conflicts(routes: list[dict], cidr: str, own: set[str]) -> list[str]:
    """The host's routes (``ip -j route`` entries) into the lab's node network ``cidr`` through an interface that
    is not the lab's own (``own``): another lab's node network, or a network of the host, on the same addresses.
    With two, the host's traffic to the nodes goes to one of them, and the other lab stops working."""
    net = ipaddress.ip_network(cidr, strict=False)
    found = []
    for route in routes:
        dst, dev = route.get("dst", ""), route.get("dev", "")
        if dst in ("", "default") or dev in own:
            continue
        try:
            overlaps = ipaddress.ip_network(dst, strict=False).overlaps(net)
        except ValueError:
            continue
        if overlaps:
            found.append(f"{dst} via {dev}")
    return found


def quiet(cmd: list[str]) -> str:
    """A command's output, "" when it fails or is missing (the lab's own networks may not exist yet)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def own_interfaces(settings: dict) -> set[str]:
    """The host interfaces of this lab's node network, where it exists already (a lab brought up again): the bridge
    of Vagrant's docker network for the node CIDR when only this lab's machines use it, or of the libvirt network
    named after the lab."""
    own = set()
    cidr, name = settings["network"]["node_cidr"], settings["cluster_name"]
    info = quiet(["docker", "network", "inspect", f"vagrant_network_{cidr}"])
    if info:
        (net,) = json.loads(info)
        users = [c.get("Name", "") for c in (net.get("Containers") or {}).values()]
        if all(u.startswith(f"{name}-") for u in users):
            own.add(net.get("Options", {}).get("com.docker.network.bridge.name") or f"br-{net['Id'][:12]}")
    for line in quiet(["virsh", "-c", "qemu:///system", "net-info", f"{name}-nodes"]).splitlines():
        if line.startswith("Bridge:"):
            own.add(line.split()[-1])
    return own


def check_node_network(settings: dict) -> None:
    cidr = settings["network"]["node_cidr"]
    routes = json.loads(quiet(["ip", "-j", "route", "show"]) or "[]")
    conflicts = route_conflicts(routes, cidr, own_interfaces(settings))
    if conflicts:
        raise PreflightError(
            f"the node network {cidr} (settings: network.node_cidr) is already in use on this host: "
            f"{', '.join(conflicts)} — another lab's machines, or a network of the host. Two networks on the same "
            "addresses break both. Give this lab another network.node_cidr (and its own cluster_name), or bring the "
            "other lab down first (`make down` in its checkout); nothing was created")


def run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, check=False)
    if proc.returncode != 0:
        raise PreflightError(f"{' '.join(cmd)} failed (exit status {proc.returncode}); nothing was created")


def preflight(settings: dict) -> None:
    provider = settings["provider"]
    print(f"preflight: provider {provider} ({settings['accel']}): {settings['provider_reason']}")
    if settings["provider_warning"]:
        print(f"preflight: WARNING: {settings['provider_warning']}")
    check_node_network(settings)
    if provider == "docker":
        run([str(ROOT / "tools/node-image/build.sh")])
        return
    if provider == "libvirt":
        run([str(ROOT / "tools/libvirtd.sh")])
        if settings["box_is_lab"]:
            run([str(ROOT / "tools/box/build.sh")])
            return
    problem = box_problem(settings["box"], provider, boxes=installed_boxes(),
                          can_download=reachable(os.environ.get("VAGRANT_SERVER_URL") or VAGRANT_SERVER))
    if problem:
        raise PreflightError(problem)


def main() -> int:
    try:
        settings = lab_settings.load()
    except lab_settings.SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        preflight(settings)
    except PreflightError as exc:
        print(f"preflight: error: {exc}", file=sys.stderr)
        return 2
    path = lab_settings.record(settings)
    print(f"preflight: ready; recorded profile {settings['profile']}, provider {settings['provider']} in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
