"""Every "see it yourself" command that `lab show CNN` prints runs as printed, copy-pasted, from the repository root.

The learner's shell: the lab's PATH (`. .venv/bin/activate`: lab, kubectl), KUBECONFIG at the admin kubeconfig, the
`default` namespace. A check's commands run one after the other in one bash (a command may use a variable an earlier
one set, as `ip=$(...)`), each as printed, its comment included; a command "in another terminal" runs in the
background beside the others and must still be running (or have ended well) when they are done. A command whose
comment says it fails ("# fails", "# refused", "# nothing", "# Forbidden", ...) must exit non-zero, every other one
with 0, and none may print the signs of a wrong command (unknown flag, command not found, no such file). Afterwards
the lab is healthy and the commands have left nothing behind: the same objects in `default`, the same taints and
cordons on the nodes.

`make test-see` runs it on the default profile (K8S_LAB_SEE=1; K8S_LAB_SEE_PROFILE=ha for the checks that need three
control-plane nodes): about 18 minutes on 2 cores, not in CI. The checks whose topology the profile lacks are
skipped, as `lab check` skips them."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from labs.paths import ROOT
from labs.registry import SEE_COMMENT, load_checks

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_SEE"),
                       reason="the see-it-yourself commands run with `make test-see` (K8S_LAB_SEE=1)"),
]
PROFILE = os.environ.get("K8S_LAB_SEE_PROFILE", "default")
# The profile each topology-bound check's commands need (the check itself skips elsewhere).
NEEDS = {"C09": ("ha",), "C28": ("ha",), "C31": ("external-etcd",), "C32": ("runtimes",)}
# A comment that starts so announces a command that fails (exit status not 0).
FAILS = re.compile(r"^(fails|refused|nothing|forbidden|gone|no answer|no$|422)", re.I)
# "No such file or directory" as a shell or coreutils prints it, capitalised: a component's log that a command shows
# (journalctl) may hold Go's lower-case "no such file or directory" without anything wrong with the command.
WRONG = re.compile(r"command not found|unknown (shorthand )?flag|unknown command|(?-i:No such file or directory)|"
                   r"syntax error|unexpected EOF|auth info \".*\" does not exist|error: unknown", re.I)
# A comment that starts with an HTTP status or an outcome's word names what the output shows.
# The first that matches counts (kubectl says "invalid" for a 422).
SHOWS = [(re.compile(r"^422\b"), lambda m: "invalid"), (re.compile(r"^forbidden", re.I), lambda m: "forbidden"),
         (re.compile(r"^(\d{3})\b"), lambda m: m.group(1))]
UNFILLED = re.compile(r"<[a-z_]+(\.[a-z0-9_]+)?>")  # a placeholder the cluster's settings could not fill
BACKGROUND = "in another terminal"
LINE_TIMEOUT = 600  # seconds for one check's commands together (each waits boundedly by itself)


def printed(check_id: str) -> list[str]:
    """The commands `lab show CNN` prints under "See it yourself:" (English), as a learner copies them."""
    env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    out = subprocess.run([sys.executable, "-m", "labs.cli", "show", check_id, "--lang", "en"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    section = out.split("See it yourself:\n", 1)[1].split("\n\n", 1)[0]
    return [line.removeprefix("  $ ") for line in section.splitlines()]


def comment(line: str) -> str:
    match = SEE_COMMENT.match(line)
    return match.group(2).strip() if match else ""


def command_part(line: str) -> str:
    match = SEE_COMMENT.match(line)
    return match.group(1).rstrip().removesuffix("#").rstrip() if match else line


def script(lines: list[str], logs: Path) -> str:
    """One bash script: each command as printed between markers with its exit status; the background ones with
    their output in a file of their own."""
    parts = ["cd " + shlex.quote(str(ROOT))]
    for i, line in enumerate(lines):
        if BACKGROUND in comment(line):
            parts += [f"{command_part(line)} > {logs}/bg{i}.log 2>&1 &", f"bg{i}=$!", f"echo '@@bg {i} started'"]
        else:
            # the status on a line of its own, whether or not the output ended its last line
            parts += [f"echo '@@begin {i}'", line, f"rc=$?; printf '\\n@@end {i} %s\\n' $rc"]
    for i, line in enumerate(lines):
        if BACKGROUND in comment(line):
            parts += [f"if kill -0 $bg{i} 2>/dev/null; then echo '@@bg {i} running'; kill $bg{i}; "
                      f"else wait $bg{i}; echo \"@@bg {i} exited $?\"; fi"]
    return "\n".join(parts) + "\n"


def outcomes(output: str) -> dict[int, tuple[int, str]]:
    """Each foreground command's exit status and output, by index."""
    found = {}
    for match in re.finditer(r"^@@begin (\d+)\n(.*?)^@@end \1 (\d+)$", output, re.S | re.M):
        found[int(match.group(1))] = (int(match.group(3)), match.group(2))
    return found


def kubectl_json(*args: str) -> dict:
    return json.loads(subprocess.run(["kubectl", *args, "-o", "json"], capture_output=True, text=True, timeout=60,
                                     check=True, env=learner_env()).stdout)


def footprint() -> dict:
    """What the commands may create or change: the objects in `default`, the nodes' taints and cordons."""
    kinds = "pods,deployments,replicasets,services,configmaps,secrets,serviceaccounts"
    objects = sorted(f"{o['kind']}/{o['metadata']['name']}"
                     for o in kubectl_json("-n", "default", "get", kinds)["items"])
    nodes = {n["metadata"]["name"]: (bool(n["spec"].get("unschedulable")),
                                     sorted(t["key"] for t in n["spec"].get("taints", [])))
             for n in kubectl_json("get", "nodes")["items"]}
    return {"objects": objects, "nodes": nodes}


_ENV: dict[str, str] = {}


def learner_env() -> dict[str, str]:
    if not _ENV:
        kubeconfig = subprocess.run([sys.executable, "-m", "tools.settings", "kubeconfig"], cwd=ROOT,
                                    capture_output=True, text=True, timeout=60, check=True).stdout.strip()
        _ENV.update(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
                    KUBECONFIG=kubeconfig, VIRTUAL_ENV=str(ROOT / ".venv"), LANG="C.UTF-8", LC_ALL="C.UTF-8")
        _ENV.pop("PYTHONPATH", None)
    return _ENV


@pytest.fixture(scope="module")
def lab(cluster_up):
    return cluster_up.lab(PROFILE)


@pytest.mark.parametrize("check_id", sorted(load_checks()))
def test_commands_run_as_printed(lab, check_id):
    if PROFILE not in NEEDS.get(check_id, (PROFILE,)):
        pytest.skip(f"{check_id}'s commands need the {' or '.join(NEEDS[check_id])} profile")
    lines = printed(check_id)
    assert lines, f"lab show {check_id} printed no command"
    env = learner_env()
    before = footprint()
    with tempfile.TemporaryDirectory(prefix="k8s-lab-see-") as logs:
        started = time.monotonic()
        proc = subprocess.Popen(["bash", "-c", script(lines, Path(logs))], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=LINE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            output = proc.communicate(timeout=30)[0] + f"\n(stopped after {LINE_TIMEOUT}s)"
        with contextlib.suppress(ProcessLookupError):  # what the commands left running in the background
            os.killpg(proc.pid, signal.SIGTERM)
        print(f"{check_id}: {len(lines)} commands in {time.monotonic() - started:.0f}s\n{output[-12000:]}")
        ran = outcomes(output)
        problems = []
        for i, line in enumerate(lines):
            if UNFILLED.search(command_part(line)):
                problems.append(f"{line}\n  -> a placeholder left unfilled")
            if BACKGROUND in comment(line):
                log = (Path(logs) / f"bg{i}.log").read_text(errors="replace")
                state = re.search(rf"^@@bg {i} (running|exited \d+)$", output, re.M)
                if not state or state.group(1) not in ("running", "exited 0") or WRONG.search(log):
                    problems.append(f"[background] {line}\n  -> {state and state.group(1)}: {log[-600:]}")
                continue
            if i not in ran:
                problems.append(f"{line}\n  -> did not run to its end")
                continue
            status, out = ran[i]
            fails = bool(FAILS.match(comment(line)))
            if (status != 0) != fails or WRONG.search(out):
                want = "a failure" if fails else "exit status 0"
                problems.append(f"{line}\n  -> exit status {status}, wanted {want}: {out[-600:]}")
            shows = next((shown(m) for pattern, shown in SHOWS if (m := pattern.match(comment(line)))), None)
            if shows and shows.lower() not in out.lower():
                problems.append(f"{line}\n  -> the output does not show {shows!r}: {out[-600:]}")
    assert not problems, f"{check_id}: commands that do not run as printed:\n" + "\n".join(problems)
    status = subprocess.run(["lab", "status", "--wait", "240"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert status.returncode == 0, f"the lab is not healthy after {check_id}'s commands:\n{status.stdout}"
    deadline = time.monotonic() + 90  # pods of a deleted Deployment terminate after it
    while (after := footprint()) != before and time.monotonic() < deadline:
        time.sleep(3)
    assert after == before, f"{check_id}'s commands left something behind"
