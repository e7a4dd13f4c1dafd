#!/usr/bin/env python3
"""Ansible dynamic inventory of the lab, computed from settings.yml by tools/settings.py,
so the playbooks and the Vagrantfile cannot disagree about nodes and addresses, and
the nodes' artifact plan from versions.yml by tools/artifacts.py (node_plan), so the
artifacts role and `make artifacts` cannot disagree about files, URLs and cache paths.

    inventory/lab.py --list | --host NAME
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Ansible runs this file from anywhere, possibly through a symlink: find the repository from its real path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import artifacts  # noqa: E402
from tools import settings as lab_settings  # noqa: E402


def hostvars(node: dict, settings: dict) -> dict:
    return {
        "ansible_host": node["ip"],
        "ansible_user": "root",
        # The lab's nodes are Debian 12 (tools/node-image, tools/box): naming their Python spares Ansible its
        # interpreter discovery, a round trip per node at the start of every run (about 2 s of a re-run on ha).
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_private_key_file": str(Path(settings["state_dir"]) / "ssh" / "id_ed25519"),
        "lab_node_ip": node["ip"],
        "lab_pod_cidr": node["pod_cidr"],
        "lab_node_role": node["role"],
        # The node's container runtime, its CRI socket and its units (tools/settings.py RUNTIMES); etcd machines
        # have none.
        **({"lab_runtime": node["runtime"], "lab_cri_socket": node["cri_socket"],
            "lab_runtime_units": list(settings["runtimes"][node["runtime"]]["units"])} if node["runtime"] else {}),
    }


def inventory(settings: dict) -> dict:
    nodes = settings["nodes"]
    # The nodes run on the host's architecture (containers, or VMs of the host's CPU).
    plan = artifacts.node_plan(artifacts.load_versions(), [settings["arch"]], **settings["artifacts"],
                               needed_sets=settings["artifact_sets"])
    return {
        "_meta": {"hostvars": {n["name"]: hostvars(n, settings) for n in nodes}},
        "all": {"vars": {"lab_settings": settings, "lab_artifacts": plan}},
        "control_plane": {"hosts": [n["name"] for n in nodes if n["role"] == "control_plane"]},
        "workers": {"hosts": [n["name"] for n in nodes if n["role"] == "worker"]},
        "etcd": {"hosts": [n["name"] for n in nodes if n["etcd"]]},
        "k8s_cluster": {"children": ["control_plane", "workers"]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--list", action="store_true", help="all groups and host variables")
    mode.add_argument("--host", metavar="NAME", help="the variables of one host")
    args = parser.parse_args(argv)
    try:
        inv = inventory(lab_settings.load())
    except (lab_settings.SettingsError, artifacts.ArtifactError) as exc:
        print(exc, file=sys.stderr)
        return 1
    # An unknown host has no variables: Ansible expects {} rather than an error.
    print(json.dumps(inv if args.list else inv["_meta"]["hostvars"].get(args.host, {}), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
