"""Every check has its page (docs/labs/CNN.md) with the check's title and claim, listed in the index."""

from pathlib import Path

import pytest

from labs.docs import updated
from labs.registry import load_checks, symptom_pattern

PAGES = Path(__file__).resolve().parents[2] / "docs" / "labs"


@pytest.mark.parametrize("ident", sorted(load_checks()))
def test_every_check_has_its_page(ident):
    chk = load_checks()[ident]
    page = (PAGES / f"{ident}.md").read_text()
    assert page.startswith(f"# {ident} — {chk.title}\n"), page.splitlines()[0]
    assert f"**Claim.** {chk.claim}" in page
    assert f"[{ident}]({ident}.md)" in (PAGES / "README.md").read_text()


@pytest.mark.parametrize("ident", sorted(load_checks()))
def test_the_page_says_what_a_failure_means_from_the_checks_hints(ident):
    """One source: the page's "When it fails" section is the check's hints (`python3 -m labs.docs` rewrites it)."""
    chk = load_checks()[ident]
    assert chk.hints, f"{ident} has no hints"
    page = (PAGES / f"{ident}.md").read_text()
    assert updated(page, chk) == page, f"docs/labs/{ident}.md is stale: run `python3 -m labs.docs`"


def test_a_failure_message_picks_the_hints_for_its_symptom():
    chk = load_checks()["C09"]
    picked = chk.hints_for("timed out after 30s waiting for writes to fail with two members down (last error: x)")
    assert len(picked) == 1 and picked[0].startswith("*timed out after 30s waiting for writes to fail")
    assert chk.hints_for("an unknown failure") == chk.hints
    assert symptom_pattern("*etcd … answered a client without a certificate*: x").search(
        "etcd cp2 answered a client without a certificate: {}")


def test_a_symptom_names_example_nodes_and_durations_and_matches_any():
    """A break puts its fault on whichever node the cluster has (`lab break C16` stops the last worker's kubelet):
    the symptom written for w1 picks that failure out of C16's hints, as "after 60s" does with a scaled timeout."""
    chk = load_checks()["C16"]
    picked = chk.hints_for("w2: kubelet.service is inactive (main process none)")
    assert len(picked) == 1 and picked[0].startswith("*w1: kubelet.service is inactive"), picked
    assert len(load_checks()["C09"].hints_for(
        "timed out after 120s waiting for writes to fail with two members down (last error: x)")) == 1
