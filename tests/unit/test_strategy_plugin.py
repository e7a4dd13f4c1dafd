"""Unit test of the lab's strategy plugin (tools/ansible_plugins/strategy/mitogen_linear.py): Mitogen's planner
gets the installed collections from a list made once per run instead of listing them for every task."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import ansible.collections.list
import ansible_mitogen.planner

PLUGIN = Path(__file__).resolve().parents[2] / "tools" / "ansible_plugins" / "strategy" / "mitogen_linear.py"


class Invocation:
    def __init__(self):
        self._extra_sys_paths: set[str] = set()


def test_the_collections_are_listed_once_and_every_module_invocation_gets_them(monkeypatch):
    calls = []

    def listing():
        calls.append(1)
        return iter([b"/c/ansible_collections/ansible/posix", b"/c/ansible_collections/community/crypto"])

    monkeypatch.setattr(ansible.collections.list, "list_collection_dirs", listing)
    monkeypatch.setattr(ansible_mitogen.planner, "_load_collections", ansible_mitogen.planner._load_collections)
    spec = importlib.util.spec_from_file_location("lab_mitogen_linear", PLUGIN)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    assert ansible_mitogen.planner._load_collections is plugin._load_collections
    first, second = Invocation(), Invocation()
    ansible_mitogen.planner._load_collections(first)
    ansible_mitogen.planner._load_collections(second)
    expected = {"/c/ansible_collections/ansible/posix", "/c/ansible_collections/community/crypto"}
    assert first._extra_sys_paths == second._extra_sys_paths == expected
    assert len(calls) == 1
