"""The parts of the lab pages (docs/labs/CNN.md) that come from the lab's code, so that they have one source: the
quotes under "Course texts" are labs.course's, the commands under "See it yourself" the check's (as `lab show`
prints them for the default profile), the "When it fails" section is the check's hints.

    python3 -m labs.docs [--check]   # rewrite the sections from the checks (--check: only say which are stale)
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

from labs.course import passages
from labs.registry import Check, load_checks, render_see

PAGES = Path(__file__).resolve().parent.parent / "docs" / "labs"
WIDTH = 115
SECTION = re.compile(r"^## When it fails\n.*?(?=^## |\Z)", re.S | re.M)
SEE = re.compile(r"(^## See it yourself\n\n)(?:(?!```).*?\n\n)?```sh\n.*?```\n", re.S | re.M)
SEE_INTRO = ("From the repository root, in one shell with the lab's PATH (`. .venv/bin/activate`) and the KUBECONFIG "
             "that `make up` prints, one command after the other; `lab show {id}` prints them with your cluster's "
             "names and addresses (here: the default profile's).")
QUOTES = re.compile(r"(^\*\*Course texts:\*\*[^\n]*\n\n).*?\n\n(?=## )", re.S | re.M)


KEEP = "\x00"  # a space inside `code`, where no line may break


def bullet(hint: str) -> str:
    """One hint as a Markdown list item, wrapped at WIDTH, never inside a `code span`."""
    whole = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", KEEP), hint)
    text = textwrap.fill(whole, WIDTH, initial_indent="- ", subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)
    return text.replace(KEEP, " ")


def shipped_settings() -> dict:
    """The settings the pages show: settings.yml's default profile (never a running cluster's)."""
    from tools import settings

    return settings.load(settings.SETTINGS_FILE, profile="default", provider="docker")


def hints_section(chk: Check, values: dict | None = None) -> str:
    values = shipped_settings() if values is None else values
    return "## When it fails\n\n" + "\n".join(bullet(render_see(h, values)) for h in chk.hints) + "\n\n"


def see_section(chk: Check, values: dict | None = None) -> str:
    """The intro and the code block of "See it yourself": the check's commands filled from ``values`` (English)."""
    values = shipped_settings() if values is None else values
    intro = textwrap.fill(SEE_INTRO.format(id=chk.id), WIDTH, break_long_words=False, break_on_hyphens=False)
    return intro + "\n\n```sh\n" + "\n".join(render_see(line, values) for line in chk.see) + "\n```\n"


def quotes_section(chk: Check) -> str:
    """The course's sentences for the check, one item per course text: each quote in its language, its gloss."""
    return "\n".join(bullet(f"{text}: " + " ".join(f"«{q.original}» — *{q.gloss}*" for q in quotes))
                     for text, quotes in passages(chk.id)) + "\n\n"


def updated(page: str, chk: Check, values: dict | None = None) -> str:
    """The page with its course quotes from labs.course and its "When it fails" section made from the check's hints
    (filled from ``values``, by default the shipped settings)."""
    if not SECTION.search(page):
        raise ValueError(f"{chk.id}: the page has no '## When it fails' section")
    if not QUOTES.search(page):
        raise ValueError(f"{chk.id}: the page has no '**Course texts:**' paragraph")
    if not SEE.search(page):
        raise ValueError(f"{chk.id}: the page has no '## See it yourself' section with a ```sh block")
    section, quotes = hints_section(chk, values), quotes_section(chk)
    page = QUOTES.sub(lambda m: m.group(1) + quotes, page, count=1)
    page = SEE.sub(lambda m: m.group(1) + see_section(chk, values), page, count=1)
    return SECTION.sub(lambda _: section, page, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m labs.docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a page is stale")
    args = parser.parse_args(argv)
    stale, values = [], shipped_settings()
    for ident, chk in load_checks().items():
        path = PAGES / f"{ident}.md"
        text = path.read_text()
        new = updated(text, chk, values)
        if new != text:
            stale.append(ident)
            if not args.check:
                path.write_text(new)
    print(f"{'stale' if args.check else 'updated'}: {', '.join(stale) or 'none'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
