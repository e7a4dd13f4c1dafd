"""Unit tests of the playbooks' structure: one order of roles (site.yml), reused by the role tests; layer
playbooks read the earlier layers' facts through the roles' facts entry points, which change nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
LAYERS = ("nodes.yml", "pki.yml", "control_plane.yml", "workers.yml", "addons.yml")
# Modules that only read (or set facts): what a facts entry point may use.
READ_ONLY = {"ansible.builtin.command", "ansible.builtin.shell", "ansible.builtin.slurp", "ansible.builtin.stat",
             "ansible.builtin.set_fact", "ansible.builtin.assert"}


def load(path: Path):
    return yaml.safe_load(path.read_text())


def site_roles() -> list[tuple[str, dict]]:
    """(layer playbook, role entry) of every role site.yml applies, in order."""
    imported = [p["ansible.builtin.import_playbook"] for p in load(PLAYBOOKS / "site.yml")]
    assert tuple(imported) == LAYERS
    return [(layer, entry) for layer in LAYERS for play in load(PLAYBOOKS / layer) for entry in play.get("roles", [])]


def test_every_role_of_the_site_can_be_left_out_by_site_roles():
    roles = site_roles()
    names = [entry["role"] for _, entry in roles]
    assert len(names) == len(set(names)), "each role once, in one place"
    for layer, entry in roles:
        conditions = entry["when"] if isinstance(entry["when"], list) else [entry["when"]]
        guard = f"site_roles is not defined or '{entry['role']}' in site_roles"
        assert conditions[0] == guard, f"{layer}: {entry['role']}"


def test_layer_playbooks_read_the_facts_instead_of_applying_whole_roles():
    for layer in ("control_plane.yml", "workers.yml"):
        for play in load(PLAYBOOKS / layer):  # control_plane.yml: etcd on its members, then the control plane
            included = [t["ansible.builtin.include_role"] for t in play["pre_tasks"]]
            assert included == [{"name": "common", "tasks_from": "facts"},
                                {"name": "artifacts", "tasks_from": "facts"}], play["name"]
            assert not {"common", "artifacts"} & {r["role"] for r in play["roles"]}


@pytest.mark.parametrize("role", ["common", "artifacts"])
def test_facts_entry_points_change_nothing(role):
    tasks = load(ROOT / "roles" / role / "tasks" / "facts.yml")
    for task in tasks:
        module = next(k for k in task if k.startswith("ansible.builtin."))
        assert module in READ_ONLY, f"{role}: {task['name']}"
        if module in ("ansible.builtin.command", "ansible.builtin.shell"):
            assert task.get("changed_when") is False, f"{role}: {task['name']}"
    main = load(ROOT / "roles" / role / "tasks" / "main.yml")
    assert any(task.get("ansible.builtin.import_tasks") == "facts.yml" for task in main), "main runs the facts too"
    specs = load(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]
    assert {"main", "facts"} <= set(specs)


def test_the_role_tests_converge_is_the_site_playbook():
    converge = load(ROOT / "tests" / "molecule" / "converge.yml")
    assert converge[-1]["ansible.builtin.import_playbook"] == "../../playbooks/site.yml"
    assert not any("roles" in play for play in converge), "the roles and their order are site.yml's only"
    runs = load(ROOT / "tests" / "molecule" / "roles.yml")
    assert runs["site_roles"] == "{{ lab_molecule_runs[lab_molecule_role] }}"
    known = {entry["role"] for _, entry in site_roles()}
    for scenario, roles in runs["lab_molecule_runs"].items():
        assert scenario in roles and set(roles) <= known, scenario


# What gather_subset ["!all", "!min", distribution, platform] gives that the roles read (ansible_facts['...']).
GATHERED = {"architecture", "os_family"}


def test_every_play_that_gathers_facts_gathers_the_few_the_roles_read():
    subset = None
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        for play in load(path):
            if play.get("gather_facts") and play.get("hosts") != "localhost":
                subset = subset or play["gather_subset"]
                assert play["gather_subset"] == subset == ["!all", "!min", "distribution", "platform"], path.name
    read = set()
    for path in ROOT.glob("roles/*/*/*.yml"):
        read |= set(re.findall(r"ansible_facts\['(\w+)'\]", path.read_text()))
    assert read and read <= GATHERED, f"facts the roles read but the playbooks do not gather: {read - GATHERED}"
