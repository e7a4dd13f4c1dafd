"""The "see it yourself" commands as `lab show` prints them, for each shipped profile: filled in from the settings,
reaching the machines through `lab ssh` (no ssh configuration needed), made of commands the learner has at hand.
tests/e2e/test_see_it_yourself.py runs them on a live cluster."""

import functools
import re
import shlex

import pytest

from labs.registry import SEE_COMMENT, load_checks, render_see
from tools import settings

# What a command may start with: the lab's own tools and what a Debian host has (the e2e test runs every one).
PROGRAMS = {"kubectl", "lab", "curl", "python", "make", "sleep", "for", "ip=", "node=", "port=", "echo"}


@functools.cache
def printed(profile: str) -> list[tuple[str, str]]:
    values = settings.load(settings.SETTINGS_FILE, profile=profile, provider="docker")
    return [(ident, render_see(line, values)) for ident, chk in load_checks().items() for line in chk.see]


def body(line: str) -> str:
    """A line without its comment."""
    match = SEE_COMMENT.match(line)
    return match.group(1).rstrip().removesuffix("#").rstrip() if match else line


def commands(line: str) -> list[str]:
    """The simple commands of a line (split at ; && || & and pipes), without its comment."""
    return [part.strip() for part in re.split(r";|&&|\|\||&|\|", body(line)) if part.strip()]


@pytest.mark.parametrize("profile", ["default", "ha", "external-etcd"])
def test_every_placeholder_is_filled(profile):
    unfilled = [(i, line) for i, line in printed(profile) if re.search(r"<[a-z_]+(\.[a-z0-9_]+)?>", body(line))
                and not (i == "C28" and profile != "ha")]  # no virtual IP without three control-plane nodes
    assert not unfilled


def test_machines_are_reached_with_lab_ssh_and_every_line_parses():
    for ident, line in printed("ha"):
        assert not re.search(r"(^|[;&|(]\s*)ssh ", line), f"{ident}: plain ssh needs the learner's ssh config: {line}"
        shlex.split(body(line))  # balanced quotes
        first = commands(line)[0].split()[0]
        assert first in PROGRAMS or first.split("=")[0] + "=" in PROGRAMS, f"{ident}: {line}"


def test_a_loop_over_a_role_names_every_machine_of_it():
    lines = [line for ident, line in printed("ha") if ident == "C08"]
    assert any(line.startswith("for n in cp1 cp2 cp3; do lab ssh $n -- systemctl stop etcd; done") for line in lines)
