"""Unit tests of the molecule node, written once in tests/molecule/platform.yml: each scenario
(roles/<role>/molecule/default/molecule.yml), merged over .config/molecule/config.yml the way molecule merges
them, only places its nodes (names, groups, network) and leaves the node to the shared create and destroy
playbooks; those use every setting of the node; and the node is a lab node (tools/node-image/run-args) without
--privileged."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from tools import nodes

ROOT = Path(__file__).resolve().parents[2]
MOLECULE = ROOT / "tests" / "molecule"
BASE = yaml.safe_load((ROOT / ".config" / "molecule" / "config.yml").read_text())
SCENARIOS = sorted(ROOT.glob("roles/*/molecule/default/molecule.yml"))
NODE = yaml.safe_load((MOLECULE / "platform.yml").read_text())["lab_molecule_node"]
# What a scenario's platform says: the rest is the node's.
PLACEMENT = {"name", "groups", "networks", "docker_networks"}

# Linux capabilities in the order of their numbers (linux/capability.h). Docker 20.10 knows those up to AUDIT_READ:
# its --cap-add=ALL gives no PERFMON, BPF or CHECKPOINT_RESTORE.
LINUX_CAPS = [
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
    "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
    "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
    "CHECKPOINT_RESTORE",
]
DOCKER_20_10_CAPS = LINUX_CAPS[: LINUX_CAPS.index("AUDIT_READ") + 1]


def merged(scenario: Path) -> dict:
    """The scenario's configuration as molecule sees it: molecule.config.Config._combine loads the base config,
    then the scenario's molecule.yml, and merges them with molecule.util.merge_dicts (mappings key by key, lists
    replaced whole)."""
    merge_dicts = pytest.importorskip("molecule.util").merge_dicts
    return merge_dicts(BASE, yaml.safe_load(scenario.read_text()))


def role(scenario: Path) -> str:
    return scenario.parents[2].name


def test_every_role_with_a_scenario_is_found():
    assert len(SCENARIOS) >= 10


def test_the_base_config_has_no_platforms():
    # A scenario's `platforms` would replace them whole (lists are not merged): the node lives in platform.yml.
    assert "platforms" not in BASE


@pytest.mark.parametrize("scenario", SCENARIOS, ids=role)
def test_a_scenario_only_places_its_nodes(scenario):
    config = merged(scenario)
    platforms = config["platforms"]
    assert platforms, "a scenario has nodes"
    declared = {n["name"]: ipaddress.ip_network(n["ipam_config"][0]["subnet"])
                for p in platforms for n in p.get("docker_networks", [])}
    for platform in platforms:
        assert set(platform) <= PLACEMENT, (
            f"{platform['name']}: {sorted(set(platform) - PLACEMENT)} belong in tests/molecule/platform.yml")
        # Every platform ends up as the whole node (create.yml: the node combined with the platform).
        node = NODE | platform
        assert {k: node[k] for k in NODE} == NODE
        assert platform["groups"] and "k8s_cluster" in platform["groups"]
        # group_vars/all.yml reads the node's address from molecule_yml.platforms[].networks[0].ipv4_address;
        # create.yml creates the networks declared in docker_networks only.
        (network,) = platform["networks"]
        assert network["name"] in declared, f"{platform['name']}: network {network['name']} not in docker_networks"
        assert ipaddress.ip_address(network["ipv4_address"]) in declared[network["name"]]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=role)
def test_a_scenario_uses_the_shared_create_and_destroy_playbooks(scenario):
    config = merged(scenario)
    assert config["driver"]["name"] == "docker"
    for step in ("create", "destroy"):
        # Molecule resolves the playbooks' paths from the scenario's directory.
        assert (scenario.parent / config["ansible"]["playbooks"][step]).resolve() == MOLECULE / f"{step}.yml"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=role)
def test_a_scenario_is_valid_for_molecule(scenario):
    # The schemas molecule validates a scenario against: its own and the docker driver's (whose platforms take no
    # keys it does not know).
    data = Path(pytest.importorskip("molecule.data").__file__).parent
    driver = Path(pytest.importorskip("molecule_plugins.docker").__file__).parent
    config = merged(scenario)
    filled = config | {"platforms": [NODE | p for p in config["platforms"]]}  # what create.yml starts
    for schema in (data / "molecule.json", driver / "schema" / "driver.json"):
        jsonschema.validate(config, json.loads(schema.read_text()))
        jsonschema.validate(filled, json.loads(schema.read_text()))


def test_each_scenario_has_its_own_network():
    networks = [n for s in SCENARIOS for p in yaml.safe_load(s.read_text())["platforms"]
                for n in p.get("docker_networks", [])]
    names = [n["name"] for n in networks]
    subnets = [ipaddress.ip_network(n["ipam_config"][0]["subnet"]) for n in networks]
    assert len(set(names)) == len(names) == len(SCENARIOS)
    assert not any(a.overlaps(b) for i, a in enumerate(subnets) for b in subnets[i + 1:])
    assert all(s.subnet_of(ipaddress.ip_network("172.30.0.0/16")) for s in subnets)


def test_the_playbooks_use_every_setting_of_the_node():
    used = set()
    for step in ("create", "destroy"):
        playbook = (MOLECULE / f"{step}.yml").read_text()
        (play,) = yaml.safe_load(playbook)
        assert play["vars_files"] == ["platform.yml"]
        used |= set(re.findall(r"\blab_node\.(\w+)", playbook))
    assert set(NODE) <= used, f"not passed to Docker: {sorted(set(NODE) - used)}"
    assert used <= set(NODE) | PLACEMENT


def test_the_node_is_a_lab_node_without_privileged(monkeypatch):
    monkeypatch.setenv("K8S_LAB_NODE_PRIVILEGED", "false")
    args = [(a.split("=", 1)[0], a.split("=", 1)[1] if "=" in a else None) for a in nodes.run_args("molecule-node")]

    def values(flag: str) -> list[str]:
        return [v for f, v in args if f == flag]

    assert NODE["image"] == nodes.IMAGE
    assert NODE["privileged"] is False and "--privileged" not in dict(args)
    # --cap-add=ALL --cap-drop=...: every capability Docker 20.10 knows but those dropped.
    assert values("--cap-add") == ["ALL"]
    assert len(set(NODE["capabilities"])) == len(NODE["capabilities"])
    assert set(NODE["capabilities"]) == set(DOCKER_20_10_CAPS) - set(values("--cap-drop"))
    assert NODE["security_opts"] == values("--security-opt")
    assert NODE["cgroupns_mode"] == values("--cgroupns")[0]
    assert NODE["tmpfs"] == values("--tmpfs")
    # The lab's nodes also get FUSE where the host has it; molecule's never had it.
    assert NODE["devices"] == [d for d in values("--device") if d != "/dev/fuse"]
    # The lab names the volume after the node; molecule's is anonymous, removed with the container. The lab's
    # nodes also see the host's kernel modules (read-only); molecule's do not.
    lab_volumes = [v.split(":")[1] for v in values("--volume") if not v.startswith("/lib/modules/")]
    assert NODE["volumes"] == lab_volumes
    assert NODE["keep_volumes"] is False
    # Lab only: its own bookkeeping label (molecule labels its containers owner=molecule) and the stop signal of
    # `docker stop` (molecule's destroy kills: force_kill).
    handled = {"--privileged", "--cap-add", "--cap-drop", "--security-opt", "--cgroupns", "--tmpfs", "--device",
               "--volume"}
    # And every device to use (--device-cgroup-rule), for privileged pods: molecule's docker driver has no such
    # platform key, and no role's scenario runs a privileged pod.
    lab_only = {"--label", "--stop-signal", "--device-cgroup-rule"}
    assert {f for f, _ in args} <= handled | lab_only, "a new run-args flag: does molecule's node need it?"
