"""What the dynamic inventory publishes (lab_settings, lab_artifacts), for a molecule scenario's machines, written
as JSON for its group_vars.

A scenario's nodes are not the lab's (their names and addresses come from the scenario's molecule.yml), so the
dynamic inventory does not describe them. This script hands them to the same producers, tools.settings.derived and
tools.artifacts.node_plan, so that the API endpoint, ports, paths and artifact plan are decided exactly as for the
lab. tests/molecule/prepare.yml runs it:

    python3 tests/molecule/lab_settings.py ROLE OUT.json < platforms.json
"""

from __future__ import annotations

import ipaddress
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools import artifacts, settings  # noqa: E402


def molecule_settings(role: str, platforms: list[dict]) -> dict:
    doc = settings.load(provider="docker")
    net = doc["network"]
    subnets = ipaddress.ip_network(net["pod_cidr"]).subnets(new_prefix=net["pod_cidr_node_prefix"])
    # The scenario of a runtime's role runs that runtime on its nodes; every other scenario containerd.
    runtime = {"crio": "crio", "cri_dockerd": "docker"}.get(role, settings.DEFAULT_RUNTIME)
    nodes = [{"name": p["name"], "role": "control_plane" if "control_plane" in p.get("groups", []) else "worker",
              "ip": p["networks"][0]["ipv4_address"], "etcd": "etcd" in p.get("groups", []),
              "pod_cidr": str(next(subnets)), "runtime": runtime,
              "cri_socket": settings.RUNTIMES[runtime]["socket"]} for p in platforms]
    node_cidr = platforms[0]["docker_networks"][0]["ipam_config"][0]["subnet"]
    # A runtime's scenario (crio, cri_dockerd) is one worker and no control plane: the API endpoint derived()
    # names is then the scenario's own node, which those roles never read.
    api_nodes = nodes if any(n["role"] == "control_plane" for n in nodes) else \
        [{**nodes[0], "role": "control_plane"}, *nodes[1:]]
    return {
        **doc,
        **settings.derived(doc, api_nodes, node_cidr),
        "nodes": nodes,
        "cluster_name": f"molecule-{role.replace('_', '-')}",
        "runtimes_in_use": [runtime],
        "artifact_sets": settings.runtime_sets({"control_plane": 0, "workers": 1, "runtimes": {"w1": runtime}},
                                               artifacts.load_versions()),
        # Only the artifact cache: a scenario never downloads.
        "artifacts": {**doc["artifacts"], "source": "cache", "mirror": ""},
    }


def main(argv: list[str]) -> int:
    role, out = argv
    lab = molecule_settings(role, json.load(sys.stdin))
    plan = artifacts.node_plan(artifacts.load_versions(), [lab["arch"]], **lab["artifacts"],
                               needed_sets=lab["artifact_sets"])
    Path(out).write_text(json.dumps({"lab_settings": lab, "lab_artifacts": plan}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
