"""Unit tests of `make cis`'s summary, on a recorded kube-bench report (tests/unit/data)."""

import json
from pathlib import Path

import yaml

from tools import cis

REPORT = json.loads((Path(__file__).with_name("data") / "kube-bench-node.json").read_text())


def test_every_result_of_a_report():
    results = cis.results_of(REPORT)
    assert [(r["id"], r["status"]) for r in results] == [
        ("4.1.1", "FAIL"), ("4.1.2", "PASS"), ("4.1.3", "WARN"), ("4.2.1", "FAIL"), ("4.2.2", "FAIL"),
        ("4.2.3", "FAIL")]
    assert results[0]["section"].startswith("4.1 ") and "chmod 600" in results[0]["remediation"]


def test_the_summary_counts_per_machine_and_section_and_lists_each_finding():
    text, totals = cis.summarize({"w1": REPORT, "w2": REPORT}, {"1.1.12": "no etcd user on this design"}, "cis-1.12")
    assert totals == {"FAIL": 8, "PASS": 2, "WARN": 2}
    assert "Totals: 2 PASS, 8 FAIL, 2 WARN, 0 INFO" in text
    assert "| w1 | 4.1 Worker Node Configuration Files | 1 | 1 | 1 | 0 |" in text
    assert "## FAIL (8)" in text and "## WARN (2)" in text
    assert "- **4.1.1** (w1, node) Ensure that the kubelet service file permissions" in text
    assert "- **1.1.12**: no etcd user on this design" in text


def test_the_pinned_benchmark_is_shipped_by_the_pinned_kube_bench():
    cfg = yaml.safe_load(cis.CONFIG.read_text())
    assert cfg["benchmark"] == "cis-1.12"
    assert all(isinstance(reason, str) and reason for reason in (cfg.get("skip") or {}).values())
