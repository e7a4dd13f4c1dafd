"""The lab runner's verdicts and its undo stacks, as pure logic: a check here is a plain function and the
"cluster" only answers whether it is healthy. (The checks themselves are tested on a live cluster, in
tests/e2e/test_labs.py.)"""

from __future__ import annotations

import threading

import pytest

from labs.registry import Check, CheckFailed, CheckSkipped
from labs.restore import RESTORER, Restorer
from labs.runner import run_check


class Cluster:
    """Only what run_check asks of a Lab: wait until healthy, or fail saying why."""

    def __init__(self, healthy: bool = True) -> None:
        self.healthy = healthy
        self.waits = 0

    def wait_healthy(self, timeout: float, ev=None) -> None:
        self.waits += 1
        if not self.healthy:
            raise CheckFailed(f"timed out after {timeout:.0f}s waiting for every component's unit")


def make_check(body, disruptive: bool = False) -> Check:
    return Check("C99", "a claim", "claim", [], disruptive, [], "does", body)


def passes(lab, ev):
    ev.expect(True, "seen")


def fails(lab, ev):
    ev.expect(False, "not seen")


def skips(lab, ev):
    raise CheckSkipped("needs three etcd members (profile ha)")


def breaks(lab, ev):
    raise RuntimeError("boom")


@pytest.mark.parametrize(("body", "status", "message"), [
    (passes, "passed", ""),
    (fails, "failed", "not seen"),
    (skips, "skipped", "needs three etcd members (profile ha)"),
    (breaks, "error", "RuntimeError: boom"),
])
def test_verdict_of_a_check(body, status, message):
    result = run_check(Cluster(), make_check(body), tty=False)
    assert (result.status, result.message) == (status, message)


def test_undo_actions_run_newest_first_whatever_the_verdict():
    done = []

    def body(lab, ev):
        RESTORER.push("first", lambda: done.append("first"))
        RESTORER.push("second", lambda: done.append("second"))
        ev.expect(False, "claim false")

    result = run_check(Cluster(), make_check(body), tty=False)
    assert done == ["second", "first"]
    assert result.status == "failed"
    assert result.evidence[-2:] == ["restored: second", "restored: first"]


def test_an_undo_that_fails_makes_the_result_an_error():
    def body(lab, ev):
        RESTORER.push("start etcd", lambda: (_ for _ in ()).throw(OSError("unit not found")))

    result = run_check(Cluster(), make_check(body), tty=False)
    assert result.status == "error"
    assert "could not restore: start etcd: unit not found" in result.message


def test_a_false_claim_stays_failed_when_restoring_also_goes_wrong():
    def body(lab, ev):
        RESTORER.push("start etcd", lambda: (_ for _ in ()).throw(OSError("unit not found")))
        ev.expect(False, "", "writes went on without etcd")

    cluster = Cluster(healthy=False)
    result = run_check(cluster, make_check(body, disruptive=True), tty=False)
    assert result.status == "failed"
    assert result.message.startswith("writes went on without etcd; could not restore: start etcd: unit not found")
    assert "cluster not healthy after the check" in result.message


def test_a_disruptive_check_that_leaves_the_cluster_unhealthy_is_an_error():
    cluster = Cluster(healthy=False)
    result = run_check(cluster, make_check(passes, disruptive=True), tty=False)
    assert cluster.waits == 1
    assert result.status == "error"
    assert "cluster not healthy after the check" in result.message


def test_observing_and_skipped_checks_do_not_wait_for_health():
    cluster = Cluster(healthy=False)
    assert run_check(cluster, make_check(passes), tty=False).status == "passed"
    assert run_check(cluster, make_check(skips, disruptive=True), tty=False).status == "skipped"
    assert cluster.waits == 0


def test_falsification_keeps_the_verdict_while_the_cluster_is_still_broken():
    """A falsification test waits for health itself after its repair: the check's failure is its verdict."""
    cluster = Cluster(healthy=False)
    result = run_check(cluster, make_check(fails, disruptive=True), tty=False, wait_healthy=False)
    assert (result.status, result.message, cluster.waits) == ("failed", "not seen", 0)


def test_restorer_keeps_one_stack_per_thread_and_undoes_them_all_when_interrupted():
    restorer, done = Restorer(), []
    pushed = threading.Barrier(2)

    def check(name: str) -> None:
        restorer.push(name, lambda: done.append(name))
        pushed.wait()

    threads = [threading.Thread(target=check, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert restorer.run_all() == [] and done == []  # this thread pushed nothing
    restorer.run_everything()
    assert sorted(done) == ["a", "b"]
    restorer.push("late", lambda: done.append("late"))  # closed: carried out at once
    assert done[-1] == "late"


def test_restorer_forgets_an_action_the_check_carried_out_itself():
    restorer, done = Restorer(), []
    restorer.push("delete namespace", lambda: done.append("ns"))
    restorer.push("start kubelet", lambda: done.append("kubelet"))
    restorer.discard("start kubelet")
    restorer.run_all()
    assert done == ["ns"]


def test_see_commands_are_shown_with_the_clusters_values():
    from labs.registry import render_see

    settings = {"nodes": [{"name": "cp1", "ip": "192.168.56.11"}], "ports": {"etcd_client": 2379},
                "paths": {"etcd_pki_dir": "/etc/etcd/pki"}, "api": {"endpoint": "https://192.168.56.11:7443"}}
    line = "curl --cacert @paths.etcd_pki_dir@/ca.crt https://@ip.cp1@:@ports.etcd_client@/health; grep @api@"
    assert render_see(line, settings) == ("curl --cacert /etc/etcd/pki/ca.crt https://192.168.56.11:2379/health; "
                                          "grep 192.168.56.11:7443")
    # Without settings (another inventory), the placeholders stay readable; other text is left alone.
    assert render_see("ssh @ip.w1@ awk '{print $2}' @ user@host", {}) == "ssh <ip.w1> awk '{print $2}' @ user@host"


def test_fewer_observing_checks_side_by_side_on_slow_machines(monkeypatch):
    from labs import cli
    from labs.timing import Timing

    monkeypatch.setattr(Timing, "scale", 1.0)
    assert cli.default_jobs() == cli.JOBS
    monkeypatch.setattr(Timing, "scale", 8.0)  # VMs under software emulation
    assert cli.default_jobs() == cli.SLOW_JOBS < cli.JOBS


def test_progress_counts_the_checks_done_on_a_terminal_only():
    from labs.runner import Progress

    shown = Progress(3, True)
    assert shown.tick().startswith(" [1/3 done, ") and shown.tick().startswith(" [2/3 done, ")
    assert Progress(3, False).tick() == ""
