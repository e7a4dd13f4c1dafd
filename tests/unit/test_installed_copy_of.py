"""Unit test of the artifacts role's Jinja test installed_copy_of (roles/artifacts/test_plugins/artifacts.py): the
quick check (size, modification time in whole seconds, mode) that decides whether a role installs a binary again."""

import importlib.util
import os
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[2] / "roles" / "artifacts" / "test_plugins" / "artifacts.py"
spec = importlib.util.spec_from_file_location("artifacts_test_plugin", PLUGIN)
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)
installed_copy_of = plugin.TestModule().tests()["installed_copy_of"]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "kubelet"
    path.write_bytes(b"\x7fELF" + b"\0" * 60)
    os.utime(path, (1_700_000_000.25, 1_700_000_000.75))
    return path


def node_stat(**changes) -> dict:
    """What ansible.builtin.stat returns for the node's copy of `source` (get_checksum false), with changes."""
    return {"exists": True, "size": 64, "mtime": 1_700_000_000.0, "mode": "0755", **changes}


def test_a_copy_with_the_same_size_time_and_mode_is_installed(source):
    # rsync keeps the time; the node's file system may keep fewer digits of it: whole seconds are compared.
    assert installed_copy_of(node_stat(), str(source))
    assert installed_copy_of(node_stat(mtime=1_700_000_000.75), str(source))


@pytest.mark.parametrize("changes", [
    {"exists": False},
    {"size": 63},
    {"mtime": 1_700_000_001.0},
    {"mode": "0644"},
])
def test_a_missing_or_different_file_is_not(source, changes):
    stat = {"exists": False} if changes == {"exists": False} else node_stat(**changes)
    assert not installed_copy_of(stat, str(source))


def test_another_mode_can_be_asked_for(source):
    assert installed_copy_of(node_stat(mode="0700"), str(source), "0700")
    assert not installed_copy_of(node_stat(), str(source), "0700")


def test_a_source_missing_on_the_controller_is_not_installed(tmp_path):
    # The role then installs, and rsync says which file is missing.
    assert not installed_copy_of(node_stat(), str(tmp_path / "absent"))
