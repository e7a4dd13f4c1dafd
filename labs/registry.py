"""The checks and their registry: the @check decorator each check module registers itself with, the Evidence a check
writes, the Result the runner makes of it, and the exceptions that decide it.

A check module stays about its claim:

    @check("C16", _("kubelet runs on every node and registers it"), claim=_(...), texts=[...], ...)
    def run(lab: Lab, ev: Evidence) -> None:
        ...observe...
        ev.expect(condition, _("what was seen on {node}").format(node=node))      # fails the check when False

Its texts are marked with labs.i18n's _() and shown in the chosen language; what it records stays English.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from labs.i18n import Text, _, tr
from labs.paths import ROOT


class LabError(Exception):
    """Bad input or an unusable cluster: reported as one paragraph, exit 2."""


class CheckFailed(Exception):
    """The claim does not hold on this cluster."""


class CheckSkipped(Exception):
    """The cluster lacks the topology the claim needs."""


# --------------------------------------------------------------------------
# Checks and their registry


@dataclass
class Check:
    """A check as registered: its texts are English Texts (labs.i18n), translated where they are shown."""

    id: str
    title: Text
    claim: Text
    texts: list[str]
    disruptive: bool
    see: list[str]
    does: Text
    func: Callable
    # What a failure usually means: each "*symptom*: advice" (Markdown, with the @placeholders@ of render_see), the
    # symptom a pattern of the failure message where "…" stands for anything. Printed under a failed check, by
    # `lab hint`, and on the check's page (labs.docs).
    hints: list[Text] = field(default_factory=list)
    # A check whose observations this one reads when both are in one run (labs.episodes): the runner runs it first.
    reads: str | None = None

    def hints_for(self, message: str, settings: dict | None = None, lang: str | None = None) -> list[str]:
        """The hints whose symptom matches ``message``, all of them when none does; in ``lang`` (default: the
        chosen language), filled from ``settings``. The symptoms are matched in English, as the message is."""
        matching = [h for h in self.hints if (p := symptom_pattern(render_see(h, settings or {})))
                    and p.search(message)]
        return [render_see(tr(h, lang), settings or {}) for h in matching or self.hints]


# A "see it yourself" command's comment: after the first " # " (the comments are extracted for translation by
# labs.i18n.extract, the commands stay as they are).
SEE_COMMENT = re.compile(r"^(.*?\S\s+#\s)(.+)$")


def see_line(line: str, lang: str | None = None) -> str:
    """A "see it yourself" command with its comment in ``lang``."""
    match = SEE_COMMENT.match(line)
    return match.group(1) + tr(_(match.group(2)), lang) if match else line


# In a symptom, the shipped profiles' node names (cp1, w2, etcd1) are examples: any node of the failing cluster
# matches them; so do durations ("after 60s": the timeouts grow with the timeout scale).
EXAMPLE_NODE = re.compile(r"\b(?:cp|w|etcd)\d+\b")
DURATION = re.compile(r"\b\d+(?:\\\.\d+)?s\b")


def symptom_literal(part: str) -> str:
    """One literal stretch of a symptom as a pattern: its example node names and durations stand for any."""
    escaped = re.escape(part.strip())
    return DURATION.sub(r"\\d+(?:\\.\\d+)?s", EXAMPLE_NODE.sub(r"[\\w.-]+", escaped))


def symptom_pattern(hint: str) -> re.Pattern | None:
    """The failure messages a hint's *symptom* describes: its text, "…" (and "[…]") standing for anything, its
    example node names and durations for any node and any duration."""
    match = re.match(r"\*(.+?)\*:", hint)
    if not match:
        return None
    parts = re.split(r"\[…\]|…", match.group(1))
    return re.compile(".*?".join(symptom_literal(part) for part in parts), re.S)


def plain(hint: str) -> str:
    """A hint for the terminal: its symptom without the Markdown emphasis."""
    return re.sub(r"^\*(.+?)\*:", r"\1:", hint, count=1)


REGISTRY: dict[str, Check] = {}

# In a check's "see it yourself" commands, @name@ stands for a value of the cluster the command is shown for, read
# from the lab settings the inventory publishes: @api@ the API address (host:port), @vip@ the control plane's virtual
# IP, @ip.<node>@ a node's address, @nodes.<role>@ the names of the nodes in a role (control_plane, worker, etcd: the
# etcd members), space-separated for a shell `for` loop, @ports.<name>@ and @paths.<name>@ the settings' ports and
# paths on the nodes, @image@ the lab's test image (versions.yml), @state@ the lab's state folder on this machine
# (relative to the repository root when inside it: its pki/ holds the cluster CA). A learner runs the commands from
# the repository root with the lab's PATH (`. .venv/bin/activate`: lab, kubectl) and KUBECONFIG, one after the other
# in one shell, in the `default` namespace; tests/e2e/test_see_it_yourself.py runs them so.
PLACEHOLDER = re.compile(r"@([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)@")


def see_values(settings: dict) -> dict:
    """The values the placeholders of render_see stand for."""
    nodes = settings.get("nodes", [])
    values: dict = {"ip": {n["name"]: n["ip"] for n in nodes},
                    "nodes": {role: " ".join(n["name"] for n in nodes if n.get("role") == role)
                              for role in ("control_plane", "worker")}
                    | {"etcd": " ".join(n["name"] for n in nodes if n.get("etcd"))},
                    "ports": settings.get("ports", {}), "paths": settings.get("paths", {}),
                    "runtimes": settings.get("runtimes", {})}
    api = settings.get("api", {})
    if api.get("endpoint"):
        values["api"] = urlsplit(api["endpoint"]).netloc
    if api.get("vip"):
        values["vip"] = api["vip"]
    if settings.get("state_dir"):
        state = Path(settings["state_dir"])
        values["state"] = str(state.relative_to(ROOT)) if state.is_relative_to(ROOT) else str(state)
    from labs.kube import test_image

    values["image"] = test_image()
    return values


def render_see(line: str, settings: dict) -> str:
    """A "see it yourself" command with its @placeholders@ filled from ``settings`` (lab_settings); a value the
    settings lack stays visible as <name>."""
    values = see_values(settings)

    def fill(match: re.Match) -> str:
        value: object = values
        for part in match.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return str(value) if isinstance(value, str | int) and value != "" else f"<{match.group(1)}>"

    return PLACEHOLDER.sub(fill, line)


def check(id: str, title: str, *, claim: str, texts: list[str], see: list[str], does: str,
          hints: list[str] | None = None, disruptive: bool = False, reads: str | None = None):
    """Register a check function ``func(lab, ev)``."""

    def register(func: Callable) -> Callable:
        REGISTRY[id] = Check(id, title, claim, texts, disruptive, see, does, func, list(hints or []), reads)
        return func

    return register


def load_checks() -> dict[str, Check]:
    import importlib
    import pkgutil

    from labs import checks

    for mod in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"labs.checks.{mod.name}")
    return dict(sorted(REGISTRY.items()))


@dataclass
class Evidence:
    """What a check looked at and saw; printed as the learner's notes."""

    lines: list[str] = field(default_factory=list)
    progress: Callable[[str], None] | None = None
    # When each line was written: seconds since the evidence was opened (the report's evidence_at), so that a
    # slow or timed-out step shows where a check spends its time.
    at: list[float] = field(default_factory=list)
    opened: float = field(default_factory=time.monotonic)

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.at.append(round(time.monotonic() - self.opened, 1))

    def step(self, line: str) -> None:
        """Progress of a long check (shown while it runs, kept as evidence)."""
        self.add(line)
        if self.progress:
            self.progress(line)

    def expect(self, condition: bool, seen: str, failure: str | None = None) -> None:
        if condition:
            self.add(_("ok: {seen}").format(seen=seen))
            return
        self.add(_("NOT: {failure}").format(failure=failure or seen))
        raise CheckFailed(failure or seen)


def message_of(exc: Exception) -> str:
    """What an exception says, as the Text it was raised with when it was (so that it can be shown translated)."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], Text) else str(exc)


@dataclass
class Result:
    """One check's outcome. Its strings are English (the JSON and JUnit reports); those the lab wrote are Texts,
    shown translated on the terminal and in the Markdown and HTML reports."""

    id: str
    title: str
    status: str  # passed | failed | skipped | error
    evidence: list[str]
    message: str
    seconds: float
    disruptive: bool
    evidence_at: list[float] = field(default_factory=list)  # seconds into the check at which each line was written
