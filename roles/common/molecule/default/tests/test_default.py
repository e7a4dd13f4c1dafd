"""common: kernel settings in force and persisted, the node packages, no swap,
every node named in /etc/hosts."""

import os
from pathlib import Path

import yaml

DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[3] / "defaults" / "main.yml").read_text())
PLATFORMS = yaml.safe_load(Path(os.environ["MOLECULE_FILE"]).read_text())["platforms"]


def test_kernel_settings_are_in_force_and_persisted(host):
    persisted = host.file(DEFAULTS["common_sysctl_file"])
    for key, value in DEFAULTS["common_sysctls"].items():
        assert host.sysctl(key) == int(value), key
        assert persisted.contains(f"^{key}={value}$"), key


def test_node_packages_are_installed(host):
    for name in DEFAULTS["common_packages"]:
        assert host.package(name).is_installed, name


def test_no_swap(host):
    assert host.check_output("swapon --show --noheadings") == ""


def test_every_node_is_named_in_etc_hosts(host):
    hosts = host.file("/etc/hosts")
    for platform in PLATFORMS:
        # The role's block, or the container runtime's own line (a tab) where that already names the node.
        assert hosts.contains(f"^{platform['networks'][0]['ipv4_address']}[[:space:]]\\+{platform['name']}$"), \
            platform["name"]
