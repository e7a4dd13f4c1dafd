"""The CIS Kubernetes Benchmark on the running lab (`make cis`): kube-bench on every machine (playbooks/cis.yml:
master, controlplane and node targets on the control-plane nodes, etcd on the etcd members, node on the workers),
the policies target from this host with the admin kubeconfig, then one summary.

    python3 -m tools.cis [--summary-only]

Results: one JSON per machine (and policies.json) and summary.md (PASS/FAIL/WARN/INFO per machine and section,
every FAIL and WARN with its remediation, the skipped checks with their reasons) in the lab's state folder, under
cis/. Exit status 1 when any check FAILs, 2 when the benchmark could not run."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

import yaml

from tools import artifacts
from tools.locations import state_dir

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path(__file__).with_name("cis.yml")
STATUSES = ("PASS", "FAIL", "WARN", "INFO")


def config() -> dict:
    return yaml.safe_load(CONFIG.read_text())


def results_of(report: dict) -> list[dict]:
    """Every check of a kube-bench JSON report: id, section, description, status, scored, remediation."""
    out = []
    for control in report.get("Controls", []):
        for group in control.get("tests") or []:
            for res in group.get("results") or []:
                out.append({"id": res["test_number"], "section": f"{group['section']} {group.get('desc', '')}".strip(),
                            "target": control.get("node_type", ""), "desc": res.get("test_desc", ""),
                            "status": res.get("status", "INFO"), "scored": res.get("scored", False),
                            "remediation": (res.get("remediation") or "").strip()})
    return out


def summarize(reports: dict[str, dict], skip: dict[str, str], benchmark: str) -> tuple[str, Counter]:
    """The Markdown summary of the reports (machine -> kube-bench JSON) and the totals per status."""
    totals: Counter = Counter()
    lines = [f"# CIS Kubernetes Benchmark ({benchmark}, kube-bench)", ""]
    table = ["| machine | section | PASS | FAIL | WARN | INFO |", "|---|---|---|---|---|---|"]
    findings = []
    for machine in sorted(reports):
        by_section: dict[str, Counter] = {}
        for res in results_of(reports[machine]):
            by_section.setdefault(res["section"], Counter())[res["status"]] += 1
            totals[res["status"]] += 1
            if res["status"] in ("FAIL", "WARN"):
                findings.append((res["status"], machine, res))
        for section, counts in by_section.items():
            table.append(f"| {machine} | {section} | " + " | ".join(str(counts[s]) for s in STATUSES) + " |")
    lines.append("Totals: " + ", ".join(f"{totals[s]} {s}" for s in STATUSES))
    lines += ["", *table, ""]
    for status in ("FAIL", "WARN"):
        chosen = [(m, r) for s, m, r in findings if s == status]
        lines += [f"## {status} ({len(chosen)})", ""]
        for machine, res in chosen:
            remedy = " ".join(res["remediation"].split())
            lines.append(f"- **{res['id']}** ({machine}, {res['target']}) {res['desc']}  \n  Remediation: {remedy}")
        lines.append("")
    lines += [f"## Skipped ({len(skip)})", ""]
    lines += [f"- **{ident}**: {reason}" for ident, reason in sorted(skip.items())] or ["none"]
    return "\n".join(lines) + "\n", totals


def cached(ids: tuple[str, ...]) -> dict[str, Path]:
    """The artifact cache's files for ``ids`` (artifact ids of versions.yml), for this host's architecture."""
    paths = {i: artifacts.cached_file(i) for i in ids}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise SystemExit(f"cis: {', '.join(missing)} missing: run `make artifacts`")
    return paths


def policies(out: Path, cfg: dict) -> None:
    """The policies target (RBAC, Pod Security, network policies, Secrets) from this host, as an administrator."""
    with tempfile.TemporaryDirectory() as tmp:
        files = cached(("kube-bench", "kubectl"))
        with tarfile.open(files["kube-bench"]) as tar:
            tar.extractall(tmp, filter="data")
        kubectl = Path(tmp) / "bin" / "kubectl"
        kubectl.parent.mkdir()
        shutil.copy(files["kubectl"], kubectl)
        kubectl.chmod(0o755)
        env = dict(os.environ, KUBECONFIG=str(state_dir() / "admin.kubeconfig"),
                   PATH=f"{kubectl.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        subprocess.run([str(Path(tmp) / "kube-bench"), "run", f"--config-dir={tmp}/cfg",
                        f"--config={tmp}/cfg/config.yaml", f"--benchmark={cfg['benchmark']}", "--targets=policies",
                        f"--skip={','.join(cfg.get('skip') or {})}", "--json", f"--outputfile={out}"],
                       check=True, env=env, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.cis", description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary-only", action="store_true", help="summarise the results already fetched")
    args = parser.parse_args(argv)
    cfg, results = config(), state_dir() / "cis"
    if not args.summary_only:
        shutil.rmtree(results, ignore_errors=True)
        results.mkdir(parents=True)
        venv = Path(sys.executable).parent
        proc = subprocess.run([str(venv / "ansible-playbook"), "-i", "inventory", "playbooks/cis.yml"], cwd=ROOT,
                              env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")), check=False)
        if proc.returncode != 0:
            print("cis: the benchmark did not run on every machine (see above)", file=sys.stderr)
            return 2
        try:
            policies(results / "policies.json", cfg)
        except subprocess.CalledProcessError as exc:
            print(f"cis: the policies target failed: {exc.stderr[-2000:]}", file=sys.stderr)
            return 2
    reports = {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}
    if not reports:
        print(f"cis: no results in {results}", file=sys.stderr)
        return 2
    text, totals = summarize(reports, cfg.get("skip") or {}, cfg["benchmark"])
    (results / "summary.md").write_text(text)
    print(text.split("\n## ")[0])
    print(f"cis: {results / 'summary.md'} lists every FAIL and WARN with its remediation")
    return 1 if totals["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
