"""`make conformance` (tools/conformance.py): the skip list's shape, the selection regex, the JUnit report parsed
and summarised; and the opt-in set of versions.yml it relies on (tools/artifacts.py)."""

from __future__ import annotations

import re

import pytest

from tools import artifacts as A
from tools import conformance as C

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="2" errors="0" failures="1" time="120.5">
  <testsuite name="Kubernetes e2e suite" package="/e2e" tests="5" disabled="2" skipped="0" errors="0" failures="1">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="3.1"></testcase>
    <testcase name="[It] [sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]"
              classname="Kubernetes e2e suite" status="passed" time="20.2"></testcase>
    <testcase name="[It] [sig-network] DNS should provide DNS for services  [Conformance]"
              classname="Kubernetes e2e suite" status="failed" time="61.0">
      <failure message="timed out waiting for the condition" type="failed">[FAILED] timed out
        waiting for the condition
      </failure>
    </testcase>
    <testcase name="[It] [sig-storage] CSI mock volume should work [Slow]" classname="Kubernetes e2e suite"
              status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[It] [sig-node] Pods should be pending [Conformance]" classname="Kubernetes e2e suite"
              status="pending" time="0"></testcase>
  </testsuite>
</testsuites>
"""


def test_the_skip_list_gives_every_entry_a_group_and_a_reason():
    cfg = C.config()
    assert cfg["skip"], "tools/conformance.yml lists no skip entry"
    for entry in cfg["skip"]:
        assert entry["group"].strip() and len(entry["reason"].split()) >= 5, entry
        re.compile(entry["match"])


def test_a_skip_entry_without_a_reason_or_with_a_broken_pattern_is_refused(tmp_path):
    bad = tmp_path / "c.yml"
    bad.write_text("skip:\n  - match: 'x'\n    group: g\n")
    with pytest.raises(ValueError, match=r"skip\[0\] lacks reason"):
        C.config(bad)
    bad.write_text("skip:\n  - match: '(['\n    group: g\n    reason: r\n")
    with pytest.raises(ValueError, match=r"skip\[0\]\.match"):
        C.config(bad)


def test_the_skip_regex_matches_any_entry_and_nothing_else():
    regex = C.skip_regex([{"match": r"Sample API Server"}, {"match": r"pull policy of Always"}])
    assert re.search(regex, "[sig-api-machinery] Aggregator Should be able to support the 1.17 Sample API Server")
    assert re.search(regex, "Image Volume should succeed with pod and pull policy of Always [LinuxOnly]")
    assert not re.search(regex, "[sig-apps] Deployment should run the lifecycle of a Deployment [Conformance]")


def test_the_report_lists_what_ran_and_leaves_out_what_the_selection_skipped():
    results = C.results_of(JUNIT)
    assert [r["state"] for r in results] == ["passed", "passed", "failed"]
    failed = results[2]
    assert failed["message"] == "timed out waiting for the condition" and failed["seconds"] == 61.0


def test_the_summary_counts_tests_not_the_suites_setup_and_names_each_failure():
    skip = [{"match": "Sample API Server", "group": "an image not built offline yet", "reason": "no image"},
            {"match": "Always", "group": "no image registry", "reason": "offline"}]
    text, counts = C.summarize(C.results_of(JUNIT), total=462, selected=460, skip=skip, seconds=3600,
                               focus=C.CONFORMANCE, release="v1.37.2")
    assert counts == {"passed": 1, "failed": 1}  # [SynchronizedBeforeSuite] is no test
    assert "**1 passed** of 460 selected; 462 tests of the release match the focus (99.6 % selected)" in text
    assert "duration: 60.0 min" in text
    assert "- **[It] [sig-network] DNS should provide DNS for services  [Conformance]** (failed, 61 s): timed out" \
        in text
    assert "### an image not built offline yet" in text and "### no image registry" in text


def test_the_conformance_set_is_opt_in():
    versions = A.load_versions()
    assert "conformance" in A.optional_sets(versions)
    plain = {a.id for a in A.plan(versions, "amd64")}
    with_set = {a.id for a in A.plan(versions, "amd64", ("conformance",))}
    assert "kubernetes-test" not in plain and "image/e2e_agnhost" not in plain
    assert {"kubernetes-test", "image/e2e_agnhost", "image/e2e_busybox"} <= with_set
    plan = A.node_plan(versions, ["amd64"], "cache", "", "/c")["arches"]["amd64"]
    assert not any(i["id"].startswith("image/e2e_") for i in plan["images"])  # `make up` imports none of them
    extra = plan["sets"]["conformance"]
    assert extra["paths"]["image/e2e_agnhost"] == \
        "/c/images/registry.k8s.io/e2e-test-images/agnhost/2.66.1/image-linux-amd64.tar"
    assert not extra["files"]  # the suite itself runs on the host only


def test_an_unknown_set_is_refused(capsys):
    assert A.main(["--with", "nosuch", "--list"]) == 1
    assert "versions.yml has no such set" in capsys.readouterr().err
