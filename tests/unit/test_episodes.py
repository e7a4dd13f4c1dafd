"""Observations one disruptive check shares with another in one run (labs.episodes): only within a run that holds
both, the reader right after the check it reads, and C14 reading C29's node loss only when it saw all C14 is about."""

from __future__ import annotations

import pytest

from labs.checks import c14_node_controller as c14
from labs.episodes import EPISODES, NodeLoss
from labs.registry import Check, Evidence, load_checks
from labs.runner import disruptive_order, run_check, run_checks


class Cluster:
    nodes: list[str] = []

    def settings(self) -> dict:
        return {}

    def wait_healthy(self, timeout: float, ev=None) -> None:
        pass


def checks(seen: dict) -> tuple[Check, Check]:
    def loses(lab, ev):
        loss = EPISODES.lose_node("C29", "w2", 40)
        loss.not_ready("Unknown", [c14.UNREACHABLE])
        loss.ready_again = True
        ev.expect(True, "lost")

    def reads(lab, ev):
        seen["loss"] = EPISODES.node_loss
        ev.expect(True, "read")

    return (Check("C29", "loses", "c", [], True, [], "d", loses),
            Check("C14", "reads", "c", [], True, [], "d", reads, [], "C29"))


def test_the_reader_runs_right_after_the_check_it_reads():
    ids = ["C08", "C14", "C25", "C29"]
    chks = [Check(i, i, "c", [], True, [], "d", lambda lab, ev: None, [], "C29" if i == "C14" else None) for i in ids]
    assert [c.id for c in disruptive_order(chks)] == ["C08", "C25", "C29", "C14"]
    # without C29 in the run, C14 keeps its place
    assert [c.id for c in disruptive_order([chks[0], chks[1], chks[2]])] == ["C08", "C14", "C25"]


def test_a_record_lives_only_in_the_run_that_holds_both_checks(capsys):
    seen: dict = {}
    loses, reads = checks(seen)
    results = run_checks(Cluster(), [reads, loses], jobs=1, tty=False)
    assert [r.id for r in results] == ["C29", "C14"]
    assert seen["loss"].worker == "w2" and EPISODES.node_loss is None and not EPISODES.open
    # run on their own (`lab check C29`, then `lab check C14`; a falsification test): nothing is shared
    run_check(Cluster(), loses, tty=False)
    run_check(Cluster(), reads, tty=False)
    assert seen["loss"] is None


def loss(**changes) -> NodeLoss:
    record = NodeLoss("C29", "w2", 40.0)
    record.not_ready("Unknown", [c14.UNREACHABLE])
    record.not_ready_after = 31.0
    record.ready_again = True
    for key, value in changes.items():
        setattr(record, key, value)
    return record


@pytest.mark.parametrize("changes", [
    {"status": "True"},  # never marked not Ready
    {"not_ready_after": None},  # C29 stopped before the node was marked
    {"not_ready_after": 61.0},  # later than C14's own bound (grace + 20 s)
    {"taints": ["node.kubernetes.io/not-ready"]},  # C29 took the not-ready taint; C14 wants the unreachable one
    {"ready_again": False},  # the node did not come back
])
def test_c14_loses_a_node_itself_unless_the_record_shows_all_its_claim(changes):
    assert c14.seen_all(loss())
    assert not c14.seen_all(loss(**changes))


def test_c14_from_the_record_passes_with_the_record_as_its_evidence():
    ev = Evidence()
    c14.from_record(loss(), ev)
    assert any("C29's node loss" in line for line in ev.lines)
    assert "ok: w2 Ready=Unknown 31 s after the stop, within the grace period" in ev.lines
    assert load_checks()["C14"].reads == "C29"
