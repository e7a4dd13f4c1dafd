"""`lab check --html`'s page opens in a real browser (headless Chromium, `make test-tools`) with no console message at
all (the page has no script: anything Chromium logs is an error, such as a malformed SVG attribute), and renders
at 1280 px wide. The detector is shown to catch a console error first, so that a silent browser proves something.

The page is made from recorded results (one of each status, a failure with its hint), in Russian, around the
diagram Graphviz draws of a recorded cluster with a forbidden etcd client (tests/unit/test_diagram.py)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from labs import diagram as D
from labs.html import page
from labs.i18n import set_language
from labs.registry import Result, load_checks

pytestmark = pytest.mark.integration

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_diagram import graph  # noqa: E402 - the recorded cluster of the diagram's unit tests

CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? (.*)")
WIDTH = 1280


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is missing: `make test-tools` installs it (make test does)"
    return found


def open_in_browser(html_file: Path, png: Path) -> list[str]:
    """Chromium's console messages for the page (its log on stderr), after a screenshot at WIDTH px wide."""
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--window-size={WIDTH},2400", f"--screenshot={png}", html_file.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert png.exists(), f"Chromium made no screenshot (rc={proc.returncode}): {proc.stderr[-3000:]}"
    return [m.group(1) for line in proc.stderr.splitlines() if (m := CONSOLE.search(line))]


def png_size(png: Path) -> tuple[int, int]:
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_detector_sees_a_console_error(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><svg><path d="M 0 0 L x"/></svg></body></html>')
    assert open_in_browser(bad, tmp_path / "bad.png"), "a malformed SVG path logged nothing: the detector is blind"


def test_the_html_report_opens_without_a_console_message(tmp_path):
    checks = load_checks()
    set_language("ru")
    try:
        results = [
            Result("C04", checks["C04"].title, "failed", ["ok: etcd cp1 refuses a client without a certificate"],
                   "cp1: rogue-client (pid 4321, /usr/local/sbin/rogue-client) -> etcd 192.168.56.11:2379", 12.0,
                   False),
            Result("C16", checks["C16"].title, "passed", ["ok: w1: kubelet.service is active"], "", 5.0, False),
            Result("C09", checks["C09"].title, "skipped", [], "needs three etcd members (profile ha)", 0.0, True),
        ]
        svg = D.to_svg(graph())
        assert "<svg" in svg, "Graphviz's dot is missing (make deps installs graphviz)"
        report = tmp_path / "report.html"
        report.write_text(page(results, svg=svg, cluster="ha", settings={}))
    finally:
        set_language("en")
    text = report.read_text()
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text, "a link outside the page"
    png = tmp_path / "report.png"
    assert open_in_browser(report, png) == []
    width, height = png_size(png)
    assert width == WIDTH and png.stat().st_size > 20_000, (width, height, png.stat().st_size)
