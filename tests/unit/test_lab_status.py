"""`lab status`: which units each machine must have, by its roles (pure logic; the live run is end to end)."""

from labs.nodes import NodeAccess
from labs.status import Report, expected_units


class Machines(NodeAccess):
    def __init__(self, groups: dict) -> None:
        self._groups = {**groups, "k8s_cluster": sorted(set(groups["control_plane"]) | set(groups["workers"]))}
        self._hostvars = {}


def test_units_by_role_stacked_and_external_etcd():
    ha = Machines({"control_plane": ["cp1", "cp2", "cp3"], "workers": ["w1"], "etcd": ["cp1", "cp2", "cp3"]})
    assert expected_units(ha, "cp1") == ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager",
                                         "containerd", "kubelet", "kube-proxy", "pod-network", "haproxy",
                                         "keepalived"]
    assert expected_units(ha, "w1") == ["containerd", "kubelet", "kube-proxy", "pod-network"]
    default = Machines({"control_plane": ["cp1"], "workers": ["w1"], "etcd": ["cp1"]})
    assert "haproxy" not in expected_units(default, "cp1")
    external = Machines({"control_plane": ["cp1", "cp2"], "workers": ["w1"], "etcd": ["e1"]})
    assert expected_units(external, "e1") == ["etcd"]
    assert "etcd" not in expected_units(external, "cp1")


def test_a_report_is_healthy_only_without_problems():
    report = Report()
    report.ok("cp1: etcd")
    assert not report.problems
    report.bad("w1: kubelet inactive", "journal line", "more: lab ssh w1 -- journalctl -u kubelet")
    assert report.problems == ["w1: kubelet inactive"]
    assert report.lines[-3:] == ["  DOWN  w1: kubelet inactive", "          journal line",
                                 "          more: lab ssh w1 -- journalctl -u kubelet"]
