"""Kubernetes' own conformance tests against the running lab (`make conformance`), offline.

    python3 -m tools.conformance [--focus REGEX] [--procs N] [--timeout MINUTES] [--list]

The suite is the pinned release's e2e.test and ginkgo (versions.yml: components.kubernetes.files.kubernetes-test, in
the opt-in set "conformance"), its images built offline (versions.yml's images of that set), both made by `python3
-m tools.artifacts --with conformance`. The images are imported on every node (playbooks/conformance.yml), then the
tests tagged [Conformance] (or --focus) run from this host with the admin kubeconfig, minus the skip list of
tools/conformance.yml (each entry with its reason), in parallel on --procs ginkgo processes (the [Serial] ones at the
end, alone). Results in the lab's state folder, under conformance/<UTC time>/: junit.xml, the suite's log, and
summary.md (passed / selected / all [Conformance] tests of the release, the duration, every failure with its
message, the skip list grouped by reason). Exit status 1 when a selected test fails, 2 when the suite could not run.
`--list` prints the selection (a dry run: nothing touches the cluster)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import yaml

from tools import artifacts
from tools.locations import state_dir

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path(__file__).with_name("conformance.yml")
SET = "conformance"
CONFORMANCE = r"\[Conformance\]"


def config(path: Path = CONFIG) -> dict:
    """tools/conformance.yml, checked: every skip entry a valid regular expression with a group and a reason."""
    data = yaml.safe_load(path.read_text()) or {}
    for i, entry in enumerate(data.get("skip") or []):
        missing = [k for k in ("match", "group", "reason") if not str(entry.get(k) or "").strip()]
        if missing:
            raise ValueError(f"{path}: skip[{i}] lacks {', '.join(missing)}")
        try:
            re.compile(entry["match"])
        except re.error as exc:
            raise ValueError(f"{path}: skip[{i}].match {entry['match']!r}: {exc}") from exc
    return data


def skip_regex(entries: list[dict]) -> str:
    """One regular expression for ginkgo's --skip: any entry's match."""
    return "|".join(f"(?:{e['match']})" for e in entries)


def results_of(junit: str) -> list[dict]:
    """The specs of a ginkgo JUnit report that ran or failed: name, state (passed, failed, ...), seconds, message.
    Specs the focus or skip left out (ginkgo reports them skipped) are not listed."""
    out = []
    for case in ET.fromstring(junit).iter("testcase"):  # noqa: S314 - the report of our own run of the suite
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        state = case.get("status") or ("failed" if failure is not None else
                                        "skipped" if case.find("skipped") is not None else "passed")
        if state == "skipped" or state == "pending":
            continue
        message = (failure.get("message") or failure.text or "") if failure is not None else ""
        out.append({"name": case.get("name", ""), "state": state, "seconds": float(case.get("time") or 0),
                    "message": " ".join(message.split())[:600]})
    return out


def is_spec(name: str) -> bool:
    """A test, not one of the suite's setup or report nodes ([SynchronizedBeforeSuite], [ReportAfterSuite], ...)."""
    return not re.match(r"\[(Synchronized)?(Before|After)Suite\]|\[Report(Before|After)Suite\]", name)


def summarize(results: list[dict], *, total: int, selected: int, skip: list[dict], seconds: float,
              focus: str, release: str) -> tuple[str, Counter]:
    """The Markdown summary of a run and the count per state of its tests."""
    counts: Counter = Counter(r["state"] for r in results if is_spec(r["name"]))
    failed = [r for r in results if r["state"] != "passed"]
    states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != "passed")
    lines = [f"# Conformance tests of Kubernetes {release} on the lab", "",
             f"- focus: `{focus}`",
             f"- **{counts['passed']} passed** of {selected} selected; {total} tests of the release match the focus"
             f" ({100 * selected / total:.1f} % selected)" if total else f"- {counts['passed']} passed",
             f"- failed: {len(failed)}" + (f" ({states})" if failed else ""),
             f"- duration: {seconds / 60:.1f} min", ""]
    if failed:
        lines += [f"## Failed ({len(failed)})", ""]
        lines += [f"- **{r['name']}** ({r['state']}, {r['seconds']:.0f} s): {r['message']}" for r in failed]
        lines.append("")
    groups: dict[str, list[dict]] = {}
    for entry in skip:
        groups.setdefault(entry["group"], []).append(entry)
    lines += [f"## Skipped by the lab ({len(skip)} entries)", ""]
    for group, entries in groups.items():
        lines += [f"### {group}", ""]
        lines += [f"- `{e['match']}`: {' '.join(str(e['reason']).split())}" for e in entries]
        lines.append("")
    if not skip:
        lines += ["none", ""]
    return "\n".join(lines), counts


def suite(arch: str) -> tuple[Path, Path]:
    """e2e.test and ginkgo from the cache's kubernetes-test archive (unpacked next to the other archives)."""
    art = next(a for a in artifacts.plan(artifacts.load_versions(), arch, (SET,)) if a.id == "kubernetes-test")
    archive = artifacts.cached_file(art.id, arch, (SET,))
    if not archive.is_file():
        raise SystemExit(f"conformance: {archive} missing: run `python3 -m tools.artifacts --with {SET}`")
    found = {}
    for member, name in art.spec["binaries"].items():
        dest = artifacts.default_cache() / ".extracted" / art.relpath / member
        if not dest.is_file() or dest.stat().st_mtime < archive.stat().st_mtime:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(artifacts.extract_member(archive, member))
            dest.chmod(0o755)
        found[name] = dest
    return found["e2e.test"], found["ginkgo"]


def count(e2e: Path, focus: str, skip: str, workdir: Path) -> int:
    """How many tests the focus (minus the skip) selects: a dry run of the suite, nothing sent to a cluster."""
    report = workdir / f"dry-run-{abs(hash((focus, skip)))}.json"
    cmd = [str(e2e), "--ginkgo.dry-run", f"--ginkgo.focus={focus}", f"--ginkgo.json-report={report}",
           "--ginkgo.no-color", "--kubeconfig=/dev/null"]
    if skip:
        cmd.append(f"--ginkgo.skip={skip}")
    subprocess.run(cmd, check=False, capture_output=True, timeout=600, cwd=workdir)
    specs = [s for r in json.loads(report.read_text()) for s in r.get("SpecReports") or []]
    report.unlink()
    return sum(1 for s in specs if s.get("State") == "passed" and s.get("LeafNodeType") == "It")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--focus", default=os.environ.get("FOCUS") or CONFORMANCE,
                        help=f"the tests to run, a regular expression on their names (default: $FOCUS, else "
                             f"{CONFORMANCE})")
    parser.add_argument("--procs", type=int, default=int(os.environ.get("PROCS") or 4),
                        help="ginkgo processes running tests at once (default 4; [Serial] tests run alone)")
    parser.add_argument("--timeout", type=int, default=240, help="minutes the whole run may take (default 240)")
    parser.add_argument("--list", action="store_true", help="print the selected tests and stop (a dry run)")
    args = parser.parse_args(argv)
    try:
        cfg = config()
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    skip = cfg.get("skip") or []
    release = artifacts.load_versions()["components"]["kubernetes"]["version"]
    e2e, ginkgo = suite(artifacts.host_arch())
    if args.list:  # no results folder: nothing runs
        subprocess.run([str(e2e), "--ginkgo.dry-run", "--ginkgo.v", "--ginkgo.no-color", f"--ginkgo.focus={args.focus}",
                        *([f"--ginkgo.skip={skip_regex(skip)}"] if skip else []), "--kubeconfig=/dev/null"],
                       check=False, cwd=e2e.parent, timeout=600)
        return 0
    started = datetime.now(UTC)
    out = state_dir() / "conformance" / started.strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True)
    total, selected = count(e2e, args.focus, "", out), count(e2e, args.focus, skip_regex(skip), out)
    print(f"conformance: {selected} of the {total} tests of {release} that match {args.focus} selected "
          f"({len(skip)} skip entries, tools/conformance.yml); {args.procs} processes; results in {out}", flush=True)
    venv = Path(sys.executable).parent
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    proc = subprocess.run([str(venv / "ansible-playbook"), "-i", "inventory", "playbooks/conformance.yml"], cwd=ROOT,
                          env=env, check=False)
    if proc.returncode != 0:
        print("conformance: the suite's images are not on every node (see above; "
              f"`python3 -m tools.artifacts --with {SET}` builds them)", file=sys.stderr)
        return 2
    kubeconfig = state_dir() / "admin.kubeconfig"
    kubectl = artifacts.cached_file("kubectl")  # the suite's kubectl tests run it
    cmd = [str(ginkgo), "run", f"--procs={args.procs}", f"--timeout={args.timeout}m", f"--focus={args.focus}",
           "--no-color", "--junit-report=junit.xml", f"--output-dir={out}", "--flake-attempts=1"]
    if skip:
        cmd.append(f"--skip={skip_regex(skip)}")
    cmd += [str(e2e), "--", f"--kubeconfig={kubeconfig}", "--provider=skeleton", f"--report-dir={out}",
            f"--kubectl-path={kubectl}"]
    begun = time.monotonic()
    with (out / "e2e.log").open("w") as log:
        try:
            run = subprocess.run(cmd, cwd=out, stdout=log, stderr=subprocess.STDOUT, check=False,
                                 timeout=args.timeout * 60 + 300, env=dict(os.environ, KUBECONFIG=str(kubeconfig)))
            code = run.returncode
        except subprocess.TimeoutExpired:
            code = -1
    seconds = time.monotonic() - begun
    junit = out / "junit.xml"
    if not junit.is_file():
        print(f"conformance: the suite wrote no report (exit {code}); its log: {out / 'e2e.log'}", file=sys.stderr)
        return 2
    text, counts = summarize(results_of(junit.read_text()), total=total, selected=selected, skip=skip,
                             seconds=seconds, focus=args.focus, release=release)
    (out / "summary.md").write_text(text)
    print(text.split("\n## ")[0])
    print(f"conformance: {out / 'summary.md'}; the suite's log: {out / 'e2e.log'}")
    return 1 if code != 0 or set(counts) - {"passed"} else 0


if __name__ == "__main__":
    sys.exit(main())
