"""Bounds the checks derive from the components' own settings (pure arithmetic, no cluster)."""

from labs.checks.c19_nodes_report import heartbeat_limit


def test_a_heartbeat_may_be_half_a_report_interval_late_after_a_change():
    # kubelet defaults: nodeStatusReportFrequency 5m, nodeStatusUpdateFrequency 10s, lease 40s; a healthy cp2
    # once showed a heartbeat 354 s old, more than the report interval plus the lease (340 s)
    assert heartbeat_limit(300, 10, 40) == 500
    assert heartbeat_limit(300, 10, 40) > 354
    assert heartbeat_limit(60, 10, 40) == 140
