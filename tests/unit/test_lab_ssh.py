"""`lab ssh NODE [-- CMD]`: the ssh command line comes from the inventory, as the playbooks reach the machine."""

import os

import pytest

from labs.cli import ssh_command
from labs.registry import LabError

INVENTORY = {"_meta": {"hostvars": {
    "cp1": {"ansible_host": "192.168.56.11", "ansible_user": "root", "ansible_ssh_private_key_file": "/k/id"},
    "e1": {"ansible_host": "192.168.56.91", "ansible_port": 2222},
}}}


def test_a_command_on_a_node():
    argv = ssh_command(INVENTORY, "cp1", ["systemctl", "status", "etcd"])
    assert argv[0] == "ssh" and argv[argv.index("-i"):argv.index("-i") + 2] == ["-i", "/k/id"]
    assert argv[-4:] == ["root@192.168.56.11", "systemctl", "status", "etcd"]
    assert "-t" not in argv


def test_an_interactive_shell_on_any_machine():
    argv = ssh_command(INVENTORY, "e1", [])
    assert argv[-1] == "root@192.168.56.91" and "-t" in argv
    assert argv[argv.index("-p") + 1] == "2222"


def test_an_unknown_machine_names_the_known_ones():
    with pytest.raises(LabError, match="no machine 'w9' in the inventory; the machines: cp1, e1"):
        ssh_command(INVENTORY, "w9", [])


def test_venv_on_path_finds_the_checkouts_ansible_from_another_python(monkeypatch, tmp_path):
    """`python3 -m tools.benchmark` (not the venv's Python) still reaches .venv/bin's ansible-inventory."""
    from labs import nodes

    monkeypatch.setattr(nodes, "ROOT", tmp_path)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    monkeypatch.setattr(nodes.sys, "executable", "/usr/bin/python3")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    nodes.venv_on_path()
    assert os.environ["PATH"].split(os.pathsep) == [str(tmp_path / ".venv" / "bin"), "/usr/bin", "/bin"]
    nodes.venv_on_path()  # a second call adds nothing
    assert os.environ["PATH"].split(os.pathsep) == [str(tmp_path / ".venv" / "bin"), "/usr/bin", "/bin"]


def test_a_closed_pipe_ends_lab_quietly(capsys, monkeypatch):
    """`lab break --list | head -5`: the reader leaves early; lab exits 1 without a traceback."""
    from labs import cli

    def gone(*_args, **_kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "cmd_list", gone)
    assert cli.main(["list"]) == 1


def test_a_new_lab_reaches_the_machines_of_the_inventory_as_it_is_now(tmp_path):
    """In one process (the end-to-end tests: the default profile, then ha, under the same inventory path) each
    NodeAccess reads the inventory afresh: testinfra's own get_host would keep the first cluster's inventory and
    look for a machine of the second by its bare name (CI: `ssh: Could not resolve hostname cp2`)."""
    from labs.nodes import NodeAccess, venv_on_path

    venv_on_path()
    inventory = tmp_path / "hosts.yml"

    def reach(hosts: dict[str, str], name: str) -> str:
        inventory.write_text("all:\n  hosts:\n" + "".join(
            f"    {h}:\n      ansible_host: {ip}\n      ansible_user: root\n" for h, ip in hosts.items()))
        access = NodeAccess()
        access.inventory, access._groups, access._hosts = inventory, None, {}
        ssh = access.host(name).backend.ansible_runner.get_host(name)
        return ssh.backend.host.name

    assert reach({"cp1": "10.9.0.11"}, "cp1") == "10.9.0.11"
    assert reach({"cp1": "10.9.0.21", "cp2": "10.9.0.22"}, "cp2") == "10.9.0.22"
    assert reach({"cp1": "10.9.0.21", "cp2": "10.9.0.22"}, "cp1") == "10.9.0.21"
