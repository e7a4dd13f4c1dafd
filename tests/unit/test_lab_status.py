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


def test_a_leader_is_live_only_while_it_renews_its_lease():
    """Lab.leaders: held while renewed within half the lease's duration (API server clock); a lease that a leader
    that exited stopped renewing, one with no holder, and a missing one are not held."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from kubernetes.client.rest import ApiException

    from labs.lab import Lab

    now = datetime(2026, 12, 3, 7, 0, 0, tzinfo=UTC)

    def lease(holder, age):
        return SimpleNamespace(spec=SimpleNamespace(holder_identity=holder, lease_duration_seconds=15,
                                                    renew_time=now - timedelta(seconds=age)))

    def leaders(leases):
        def read(name, namespace, _request_timeout):
            assert namespace == "kube-system"
            if name not in leases:
                raise ApiException(status=404)
            return leases[name]
        lab = Lab.__new__(Lab)
        lab.coordination = SimpleNamespace(read_namespaced_lease=read)
        lab.server_now = lambda: now
        return lab.leaders()

    assert leaders({"kube-controller-manager": lease("cp2_4f1c", 2), "kube-scheduler": lease("cp1_9a0b", 7)}) == {
        "kube-controller-manager": ("cp2", True), "kube-scheduler": ("cp1", True)}
    assert leaders({"kube-controller-manager": lease("cp3_77aa", 9), "kube-scheduler": lease("", 1)}) == {
        "kube-controller-manager": ("cp3", False), "kube-scheduler": ("", False)}
    assert leaders({"kube-scheduler": lease("cp1_9a0b", 1)})["kube-controller-manager"] == ("", False)
