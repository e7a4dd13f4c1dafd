"""Measure the lab: warm artifact check, node image, bring-up per phase,
re-run, smoke, the running cluster's memory, and `lab check` without and
with the disruptive checks. A benchmark, not a test: it prints figures and
exits 0 unless a step fails (a failing lab check is reported, not fatal).

Usage: python3 -m tools.benchmark [--profile PROFILE] [--keep] [--no-checks] [--repeat N] [--json FILE]
       python3 -m tools.benchmark --checks-only [--repeat N]   # only `lab check`, on the cluster that is up

Every check that does not pass is printed with its verdict and message, and every `lab check` report is kept in
benchmark/ in the lab's state folder (tools.settings.state_dir()).

Destroys any running lab first (make down) and, unless --keep, at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tools.settings import recorded, state_dir

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["nodes", "pki", "control_plane", "workers", "addons"]


def changed_tasks(recap: str) -> int:
    """How many tasks a playbook run changed, over every host of its recap."""
    return sum(int(c) for c in re.findall(r"changed=(\d+)", recap))


def run(cmd: list[str], env: dict, label: str, results: dict) -> str:
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    results[label] = round(elapsed, 1)
    print(f"{label:32} {elapsed:7.1f} s", flush=True)
    if cmd[0].endswith("ansible-playbook"):  # kept, with each task's time (profile_tasks), to see where time went
        REPORTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
        (REPORTS / f"{time.strftime('%Y%m%dT%H%M%S')}-{name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"benchmark: {label} failed")
    return proc.stdout


REPORTS = state_dir() / "benchmark"  # every lab check report the benchmark made, kept
PERFORMANCE = ROOT / "docs" / "performance.md"  # the table of figures each full benchmark run appends a row to
UNITS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "containerd",
         "haproxy", "keepalived")
# On a machine: per active component unit, its main process's resident memory (kB) and CPU time (clock ticks), then
# the machine's used memory (kB) and busy CPU ticks (from /proc/meminfo and /proc/stat; inside a container those are
# the host's, so the docker provider takes the node's own figures from its cgroup and docker stats).
USAGE = ("for u in " + " ".join(UNITS) + "; do pid=$(systemctl show -P MainPID $u 2>/dev/null); "
         "[ \"${pid:-0}\" -gt 0 ] || continue; "
         "echo \"$u $(awk '/^VmRSS/ {print $2}' /proc/$pid/status) $(awk '{print $14 + $15}' /proc/$pid/stat)\"; "
         "done; echo \"node $(awk '/^MemTotal/ {t=$2} /^MemAvailable/ {a=$2} END {print t - a}' /proc/meminfo) "
         "$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat)\"; getconf CLK_TCK")


# A node container's own memory figures: its cgroup's memory.stat (cgroup v1, else v2), then its usage.
MEMORY_STAT = ("cat /sys/fs/cgroup/memory/memory.stat 2>/dev/null || cat /sys/fs/cgroup/memory.stat; "
               "echo usage $(cat /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null "
               "|| cat /sys/fs/cgroup/memory.current)")


def memory_parts(text: str) -> dict[str, float]:
    """A node container's MEMORY_STAT output -> MiB of the memory it has in use, and of what that is made of:
    anonymous memory (the programs' heaps and stacks), page cache mapped by running programs (their code,
    etcd's database), and the kernel's memory for it and the rest (page tables, sockets, tmpfs); and apart, the
    page cache that no program maps (what the playbooks wrote, logs, image layers, the parts of binaries no
    program maps), which the kernel gives back when memory runs short, and which "in use" leaves out.

    `docker stats` shows the usage less the *inactive* page cache instead: a figure that depends on how often
    each cached page was read, not on what the programs use (a binary the copy module wrote and read back to
    compare checksums stayed on the active list and counted in full; one that rsync writes once does not, nor
    do the pages of it the program maps, while they sit on the inactive list). Both are reported."""
    stat = dict(line.split() for line in text.strip().splitlines() if len(line.split()) == 2)
    v1 = "total_rss" in stat
    anon = int(stat["total_rss" if v1 else "anon"])
    mapped = int(stat["total_mapped_file" if v1 else "file_mapped"])
    cache = int(stat["total_cache" if v1 else "file"]) - int(stat.get("total_shmem" if v1 else "shmem", 0))
    unmapped = max(0, cache - mapped)
    in_use = int(stat["usage"]) - unmapped
    mib = 1024 * 1024
    return {"in use": round(in_use / mib, 1), "anon": round(anon / mib, 1), "mapped files": round(mapped / mib, 1),
            "kernel and other": round(max(0, in_use - anon - mapped) / mib, 1),
            "page cache no program maps": round(unmapped / mib, 1)}


def host_cpu(stat: Path = Path("/proc/stat")) -> tuple[int, int]:
    """This host's CPU time so far (clock ticks): (stolen by the hypervisor, all). On a shared virtual machine the
    hypervisor may give the host's cores to others ("steal"); figures measured then are slower than the code is."""
    fields = [int(v) for v in stat.read_text().split("\n", 1)[0].split()[1:]]
    return fields[7] if len(fields) > 7 else 0, sum(fields[:8])


def steal_since(before: tuple[int, int], after: tuple[int, int] | None = None) -> float:
    """The share of CPU time (%) the hypervisor took between two host_cpu() readings."""
    after = after or host_cpu()
    return round(100 * (after[0] - before[0]) / max(1, after[1] - before[1]), 1)


def parse_usage(text: str) -> tuple[dict[str, tuple[int, int]], int]:
    """USAGE's output: name -> (kB, ticks) for each component and "node"; and the clock ticks per second."""
    lines = text.split("\n")
    figures = {}
    for line in lines[:-1]:
        name, kb, ticks = line.split()
        figures[name] = (int(kb), int(ticks))
    return figures, int(lines[-1])


def cluster_usage(interval: float = 10.0) -> dict:
    """Memory (MiB) and idle CPU (% of one core, over ``interval`` seconds) per machine and per component of the
    running cluster, through the lab's inventory (any provider)."""
    from labs.lab import Lab

    lab = Lab()
    machines = lab.machines  # the nodes, and the machines of an external etcd
    first = lab.on_each(machines, lambda m: parse_usage(lab.sh(m, USAGE)))
    started = time.monotonic()
    time.sleep(interval)
    second = lab.on_each(machines, lambda m: parse_usage(lab.sh(m, USAGE)))
    elapsed = time.monotonic() - started
    docker = docker_stats() if lab.setting("provider") == "docker" else {}
    parts = lab.on_each(machines, lambda m: memory_parts(lab.sh(m, MEMORY_STAT))) if docker else {}
    out: dict = {}
    for machine in machines:
        (a, hz), (b, _) = first[machine], second[machine]
        comps = {name: {"MiB": round(b[name][0] / 1024, 1),
                        "cpu %": round(100 * (b[name][1] - a[name][1]) / hz / elapsed, 1)}
                 for name in b if name in a and name != "node"}
        # A VM's memory in use: MemTotal less MemAvailable. A node container's: from its cgroup (memory_parts),
        # with `docker stats`'s figure next to it; its CPU from `docker stats` (/proc/stat is the host's).
        node = {"MiB": round(b["node"][0] / 1024, 1),
                "cpu %": round(100 * (b["node"][1] - a["node"][1]) / hz / elapsed, 1)}
        stats = docker.get(f"{lab.setting('cluster_name')}-{machine}")
        if stats and machine in parts:
            node = {"MiB": parts[machine]["in use"], "cpu %": stats["cpu %"], "docker stats MiB": stats["MiB"],
                    "memory MiB": {k: v for k, v in parts[machine].items() if k != "in use"}}
        out[machine] = {**node, "components": comps}
    return out


def docker_stats() -> dict[str, dict[str, float]]:
    """Memory (MiB) and CPU (% of one core) of every container, by name (docker stats)."""
    out = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}} {{.CPUPerc}}"],
                         capture_output=True, text=True, check=True).stdout
    usage = {}
    for line in out.splitlines():
        name, mem = line.split(" ", 1)
        value, unit = re.match(r"([\d.]+)\s*([KMG]i?B)", mem).groups()
        factor = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "kB": 1 / 1024, "MB": 1, "GB": 1024}[unit]
        cpu = re.search(r"([\d.]+)%\s*$", mem)
        usage[name] = {"MiB": round(float(value) * factor, 1), "cpu %": float(cpu.group(1)) if cpu else 0.0}
    return usage


def print_usage(usage: dict) -> None:
    for machine, figures in usage.items():
        comps = ", ".join(f"{n} {c['MiB']:.0f} MiB {c['cpu %']:.1f}%" for n, c in figures["components"].items())
        stats = f" (docker stats {figures['docker stats MiB']:.0f})" if "docker stats MiB" in figures else ""
        print(f"{'  ' + machine:32} {figures['MiB']:7.1f} MiB{stats} {figures['cpu %']:5.1f}% cpu   {comps}",
              flush=True)
    parts = [figures["memory MiB"] for figures in usage.values() if "memory MiB" in figures]
    if parts:
        total = {name: round(sum(p[name] for p in parts), 1) for name in parts[0]}
        print(f"{'  of the memory, about':32} " + ", ".join(f"{name} {mib:.0f} MiB" for name, mib in total.items()),
              flush=True)


def append_performance(results: dict, path: Path = PERFORMANCE) -> None:
    """One row of the figures table in docs/performance.md: date, commit, machine, profile and the headline
    figures, so that a regression shows next to the earlier rows."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "?"
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "?")
    checks = results.get("lab check --all") or results.get("lab check --all #1") or {}
    row = [time.strftime("%Y-%m-%d"), commit, f"{os.cpu_count()} cores, {model}", results["profile"],
           results.get("bring-up total (to all nodes Ready)", ""), results.get("re-run site.yml", ""),
           results.get("re-run site.yml (settled)", ""), results.get("re-run changed", ""),
           results.get("memory MiB total", ""), results.get("docker stats MiB total", ""),
           results.get("idle cpu % total", ""),
           (results.get("lab check --no-disruptive") or {}).get("seconds", ""), checks.get("seconds", ""),
           results.get("cpu steal %", "")]
    with path.open("a") as out:
        out.write("| " + " | ".join(str(v) for v in row) + " |\n")


def time_checks(env: dict, venv: Path, repeat: int = 1) -> dict:
    """`lab check` without, then with the disruptive checks (``repeat`` times): seconds, counts, and the verdict
    and message of every check that did not pass. Each run's full report stays in REPORTS."""
    results = {}
    REPORTS.mkdir(parents=True, exist_ok=True)
    runs = [("lab check --no-disruptive", ["--no-disruptive"])]
    runs += [(f"lab check --all{f' #{i + 1}' if repeat > 1 else ''}", ["--all"]) for i in range(repeat)]
    for label, flags in runs:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        report = REPORTS / f"{stamp}-{label.split()[-1].lstrip('-#')}.json"
        started, cpu = time.monotonic(), host_cpu()
        proc = subprocess.run([str(venv / "lab"), "check", *flags, "--json", str(report)], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False)
        elapsed, steal = round(time.monotonic() - started, 1), steal_since(cpu)
        if not report.exists():
            print(f"{label:32} {elapsed:7.1f} s   no report: {proc.stderr.strip()[-500:]}", flush=True)
            results[label] = {"seconds": elapsed, "error": proc.stderr.strip()[-500:]}
            continue
        checks = json.loads(report.read_text())
        statuses = Counter(r["status"] for r in checks)
        others = {r["id"]: f"{r['status']}: {r['message']}" for r in checks if r["status"] != "passed"}
        results[label] = {"seconds": elapsed, "cpu steal %": steal, **statuses, "not passed": others,
                          "report": str(report)}
        print(f"{label:32} {elapsed:7.1f} s   {dict(statuses)}, cpu steal {steal} %", flush=True)
        for ident, what in others.items():
            print(f"{'':34}{ident} {what[:300]}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default", help="a profile of settings.yml (ha, ...)")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--no-checks", action="store_true", help="leave out the lab checks")
    parser.add_argument("--checks-only", action="store_true",
                        help="only time `lab check` (without, then with the disruptive checks) on the running cluster")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="run `lab check --all` N times")
    args = parser.parse_args()
    env = dict(os.environ, PROFILE=args.profile, PROVIDER="docker", K8S_LAB_PROFILE=args.profile,
               K8S_LAB_PROVIDER="docker", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="30")
    venv = ROOT / ".venv/bin"
    env["PATH"] = f"{venv}:{env['PATH']}"
    playbook = [str(venv / "ansible-playbook"), "-i", "inventory"]
    results: dict = {"profile": args.profile}

    if args.checks_only:
        for name in ("PROFILE", "K8S_LAB_PROFILE"):  # the running cluster's own profile (recorded by make up)
            env.pop(name, None)
        results["profile"] = recorded().get("profile", "(not recorded)")
        print(f"k8s-arch-lab benchmark, checks only, profile {results['profile']}, {os.cpu_count()} cores")
        results["usage per machine"] = usage = cluster_usage()
        print(f"{'cluster memory, idle cpu':32} {sum(u['MiB'] for u in usage.values()):7.1f} MiB "
              f"{sum(u['cpu %'] for u in usage.values()):5.1f}% cpu (of one core), per machine:")
        print_usage(usage)
        results.update(time_checks(env, venv, args.repeat))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")
        return 0
    print(f"k8s-arch-lab benchmark, profile {args.profile}, {os.cpu_count()} cores")
    cpu = host_cpu()
    run(["make", "--no-print-directory", "deps"], env, "make deps (warm)", results)
    run(["make", "--no-print-directory", "artifacts"], env, "make artifacts (warm)", results)
    run(["make", "--no-print-directory", "node-image"], env, "make node-image (warm)", results)
    run(["make", "--no-print-directory", "down"], env, "make down (before)", results)
    started = time.monotonic()
    run([str(venv / "python"), "-m", "tools.settings", "record"], env, "record the profile", results)
    run(["vagrant", "up", "--no-parallel", "--no-provision"], env, "machines up (vagrant)", results)
    for layer in LAYERS:
        run(playbook + [f"playbooks/{layer}.yml"], env, f"playbook {layer}", results)
    results["bring-up total (to all nodes Ready)"] = round(time.monotonic() - started, 1)
    print(f"{'bring-up total':32} {results['bring-up total (to all nodes Ready)']:7.1f} s")
    rerun = run(playbook + ["playbooks/site.yml"], env, "re-run site.yml", results)
    results["re-run changed"] = changed_tasks(rerun)
    print(f"{'re-run changed tasks':32} {results['re-run changed']:7d}")
    run(playbook + ["playbooks/smoke.yml"], env, "smoke playbook", results)
    usage = cluster_usage()
    results["usage per machine"] = usage
    results["memory MiB total"] = round(sum(u["MiB"] for u in usage.values()), 1)
    if all("docker stats MiB" in u for u in usage.values()):
        results["docker stats MiB total"] = round(sum(u["docker stats MiB"] for u in usage.values()), 1)
    results["idle cpu % total"] = round(sum(u["cpu %"] for u in usage.values()), 1)
    print(f"{'cluster memory, idle cpu':32} {results['memory MiB total']:7.1f} MiB {results['idle cpu % total']:5.1f}% "
          "cpu (of one core), per machine:")
    print_usage(usage)
    # Once more on the cluster that has settled (a minute idle): what a learner's re-run after a change costs,
    # without the work of a cluster that has only just come up (its controllers' first syncs, CoreDNS starting).
    rerun = run(playbook + ["playbooks/site.yml"], env, "re-run site.yml (settled)", results)
    results["re-run changed"] += changed_tasks(rerun)
    print(f"{'re-run changed tasks (both runs)':32} {results['re-run changed']:7d}")
    if not args.no_checks:
        results.update(time_checks(env, venv, args.repeat))
    results["cpu steal %"] = steal_since(cpu)
    print(f"{'host cpu stolen by the hypervisor':32} {results['cpu steal %']:7.1f} %   (figures measured with much "
          "steal are slower than the code is)")
    append_performance(results)
    print(f"figures appended to {PERFORMANCE.relative_to(ROOT)}")
    if not args.keep:
        run(["make", "--no-print-directory", "down"], env, "make down", results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
