"""Every check has its page (docs/labs/CNN.md) with the check's title and claim, listed in the index."""

from pathlib import Path

import pytest

from labs.registry import load_checks

PAGES = Path(__file__).resolve().parents[2] / "docs" / "labs"


@pytest.mark.parametrize("ident", sorted(load_checks()))
def test_every_check_has_its_page(ident):
    chk = load_checks()[ident]
    page = (PAGES / f"{ident}.md").read_text()
    assert page.startswith(f"# {ident} — {chk.title}\n"), page.splitlines()[0]
    assert f"**Claim.** {chk.claim}" in page
    assert f"[{ident}]({ident}.md)" in (PAGES / "README.md").read_text()
