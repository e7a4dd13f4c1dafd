"""`lab check --html FILE`: one self-contained page an instructor can open in a browser: the live diagram, every
check's result with the course's words for its claim and its evidence, and the hints under each failure, in the
chosen language (labs.i18n). No script, no link outside the page."""

from __future__ import annotations

import html
import time

from labs.course import LANGUAGE_NAMES, passages
from labs.i18n import _, language, tr
from labs.registry import REGISTRY, Result, plain
from labs.runner import STATUS, summary

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #1d2430; }
h1 { font-size: 1.5em; } table { border-collapse: collapse; width: 100%; margin: 1em 0; }
td, th { border-bottom: 1px solid #dde3ea; padding: .3em .5em; text-align: left; vertical-align: top; }
.passed { color: #1a7f37; } .failed, .error { color: #cf222e; font-weight: bold; } .skipped { color: #9a6700; }
details { margin: .4em 0; } summary { cursor: pointer; } pre { white-space: pre-wrap; margin: .3em 0 .3em 1.5em; }
.hint { background: #fff8c5; padding: .3em .6em; margin: .2em 0 .2em 1.5em; } .diagram svg { max-width: 100%; }
blockquote { margin: .3em 0 .3em 1.5em; color: #4a5568; }
"""


def quotes(ident: str) -> str:
    """The course's sentences for a check: each in its own language, with its gloss in the language shown."""
    parts = []
    for text, quotes in passages(ident):
        for q in quotes:
            gloss = f" — <i>{html.escape(tr(q.gloss))}</i>" if q.language != language() else ""
            parts.append(f'<blockquote>{text} ({html.escape(tr(LANGUAGE_NAMES[q.language]))}): '
                         f'<span lang="{q.language}">«{html.escape(q.original)}»</span>{gloss}</blockquote>')
    return "".join(parts)


def page(results: list[Result], svg: str = "", cluster: str = "", settings: dict | None = None) -> str:
    def status(r: Result) -> str:
        return f'<span class="{r.status}">{html.escape(tr(STATUS[r.status]))}</span>'

    rows = "".join(
        f"<tr><td>{html.escape(r.id)}</td><td>{html.escape(tr(r.title))}</td>"
        f"<td>{status(r)}</td><td>{r.seconds:.1f}s</td></tr>" for r in results)
    title = html.escape(tr(_("k8s-arch-lab check report")))
    parts = [f'<!DOCTYPE html><html lang="{language()}"><head><meta charset="utf-8"><title>{title}</title>'
             f"<style>{STYLE}</style></head><body>",
             f"<h1>{title}</h1>",
             f"<p>{html.escape(cluster)} — {time.strftime('%Y-%m-%d %H:%M')} — {html.escape(tr(summary(results)))}</p>"]
    if svg:
        parts.append(f'<div class="diagram">{svg[svg.find("<svg"):]}</div>')
    heads = "".join(f"<th>{html.escape(h)}</th>" for h in ("ID", tr(_("claim")), tr(_("result")), tr(_("time"))))
    parts.append(f"<table><tr>{heads}</tr>{rows}</table>")
    for r in results:
        opened = " open" if r.status in ("failed", "error") else ""
        parts.append(f"<details{opened}><summary><b>{html.escape(r.id)}</b> {html.escape(tr(r.title))}: "
                     f"{status(r)}</summary>")
        parts.append(quotes(r.id))
        parts.append("<pre>" + html.escape("\n".join(tr(line) for line in r.evidence)) + "</pre>")
        if r.message and r.status != "passed":
            parts.append(f"<p class=\"{r.status}\">{html.escape(tr(r.message))}</p>")
        if r.status in ("failed", "error") and r.id in REGISTRY:
            hints = REGISTRY[r.id].hints_for(r.message, settings)
            parts += ['<p class="hint">' + html.escape(tr(_("hint: {hint}").format(hint=plain(h)))) + "</p>"
                      for h in hints]
        parts.append("</details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
