"""Unit tests of the checks `make up` makes before Vagrant creates anything (tools/preflight.py)."""

from __future__ import annotations

import json

import pytest

from tools import preflight as P

HAVE = {("k8s-arch-lab/debian12", "libvirt"), ("debian/bookworm64", "virtualbox")}


def test_an_installed_box_or_a_reachable_catalogue_is_enough():
    assert P.box_problem("k8s-arch-lab/debian12", "libvirt", boxes=HAVE, can_download=False) is None
    assert P.box_problem("generic/debian12", "libvirt", boxes=HAVE, can_download=True) is None


def test_a_box_that_cannot_be_had_names_the_ways_out():
    msg = P.box_problem("generic/debian12", "libvirt", boxes=HAVE, can_download=False)
    assert "generic/debian12 (libvirt) is not installed" in msg and "Nothing was created" in msg
    assert "make box" in msg and "vagrant box add" in msg and "PROVIDER=docker" in msg
    # The box of another provider does not count, and VirtualBox has no lab box to build.
    msg = P.box_problem("k8s-arch-lab/debian12", "virtualbox", boxes=HAVE, can_download=False)
    assert msg and "make box" not in msg


def test_urls_and_files_are_left_to_vagrant(tmp_path):
    box = tmp_path / "local.box"
    box.write_bytes(b"")
    assert P.box_problem(str(box), "libvirt", boxes=set(), can_download=False) is None
    assert P.box_problem("https://example.invalid/x.box", "libvirt", boxes=set(), can_download=False) is None


def test_reachable_is_bounded_and_false_for_a_closed_port():
    assert P.reachable("https://127.0.0.1:9", timeout=2) is False


ROUTES = [
    {"dst": "default", "gateway": "10.0.0.1", "dev": "eth0"},
    {"dst": "10.0.0.0/24", "dev": "eth0"},
    {"dst": "172.17.0.0/16", "dev": "docker0"},
    {"dst": "192.168.56.0/24", "dev": "virbr2"},
]


def test_the_node_network_of_another_lab_is_a_conflict():
    assert P.route_conflicts(ROUTES, "192.168.56.0/24", own=set()) == ["192.168.56.0/24 via virbr2"]
    # an overlapping, not equal, range conflicts too
    assert P.route_conflicts(ROUTES, "192.168.56.128/25", own=set()) == ["192.168.56.0/24 via virbr2"]


def test_the_labs_own_network_and_other_ranges_are_not_conflicts():
    assert P.route_conflicts(ROUTES, "192.168.56.0/24", own={"virbr2"}) == []
    assert P.route_conflicts(ROUTES, "192.168.58.0/24", own=set()) == []


def test_a_conflict_stops_make_up_before_anything_is_made(monkeypatch):
    monkeypatch.setattr(P, "quiet", lambda cmd: json.dumps(ROUTES) if cmd[:2] == ["ip", "-j"] else "")
    settings = {"network": {"node_cidr": "192.168.56.0/24"}, "cluster_name": "lab2"}
    with pytest.raises(P.PreflightError, match=r"192.168.56.0/24 .* already in use .* virbr2"):
        P.check_node_network(settings)
