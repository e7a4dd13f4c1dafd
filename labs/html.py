"""`lab check --html FILE`: one self-contained page an instructor can open in a browser: the live diagram, every
check's result with its evidence, and the hints under each failure. No script, no link outside the page."""

from __future__ import annotations

import html
import time

from labs.registry import REGISTRY, Result, plain

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #1d2430; }
h1 { font-size: 1.5em; } table { border-collapse: collapse; width: 100%; margin: 1em 0; }
td, th { border-bottom: 1px solid #dde3ea; padding: .3em .5em; text-align: left; vertical-align: top; }
.passed { color: #1a7f37; } .failed, .error { color: #cf222e; font-weight: bold; } .skipped { color: #9a6700; }
details { margin: .4em 0; } summary { cursor: pointer; } pre { white-space: pre-wrap; margin: .3em 0 .3em 1.5em; }
.hint { background: #fff8c5; padding: .3em .6em; margin: .2em 0 .2em 1.5em; } .diagram svg { max-width: 100%; }
"""


def page(results: list[Result], svg: str = "", cluster: str = "", settings: dict | None = None) -> str:
    counts = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "skipped", "error")}
    rows = "".join(
        f"<tr><td>{html.escape(r.id)}</td><td>{html.escape(r.title)}</td>"
        f'<td class="{r.status}">{r.status}</td><td>{r.seconds:.1f}s</td></tr>' for r in results)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>k8s-arch-lab report</title>"
             f"<style>{STYLE}</style></head><body>",
             "<h1>k8s-arch-lab check report</h1>",
             f"<p>{html.escape(cluster)} — {time.strftime('%Y-%m-%d %H:%M')} — {counts['passed']} passed, "
             f"{counts['failed'] + counts['error']} failed, {counts['skipped']} skipped</p>"]
    if svg:
        parts.append(f'<div class="diagram">{svg[svg.find("<svg"):]}</div>')
    parts.append(f"<table><tr><th>ID</th><th>claim</th><th>result</th><th>time</th></tr>{rows}</table>")
    for r in results:
        opened = " open" if r.status in ("failed", "error") else ""
        parts.append(f'<details{opened}><summary><b>{html.escape(r.id)}</b> {html.escape(r.title)}: '
                     f'<span class="{r.status}">{r.status}</span></summary>')
        parts.append("<pre>" + html.escape("\n".join(r.evidence)) + "</pre>")
        if r.message and r.status != "passed":
            parts.append(f"<p class=\"{r.status}\">{html.escape(r.message)}</p>")
        if r.status in ("failed", "error") and r.id in REGISTRY:
            parts += [f'<p class="hint">hint: {html.escape(plain(h))}</p>'
                      for h in REGISTRY[r.id].hints_for(r.message, settings)]
        parts.append("</details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
