"""The disaster drills from Python (C34, tests/e2e/test_drills.py): the project's own playbooks run the way `make
etcd-snapshot` and `make etcd-restore` run them — ansible-playbook from the lab's virtualenv, on the inventory the Lab
reads, with the checkout's ansible.cfg — each bounded in time (scaled for the cluster's machines); and what each etcd
member says of itself (its cluster ID, its revision)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from labs.i18n import Text, _
from labs.nodes import venv_on_path
from labs.paths import ROOT, state_dir
from labs.registry import CheckFailed
from labs.timing import scaled

if TYPE_CHECKING:
    from labs.lab import Lab

PLAYBOOKS = ROOT / "playbooks"
# Seconds on real hardware (labs.timing.scaled). The snapshot takes 6-8 s, the restore 18 s with one member and 37 s
# with three (docs/drills.md); the restore's own waits allow 120 s for etcd's members and 120 s for the API servers.
SNAPSHOT_TIMEOUT = 120
RESTORE_TIMEOUT = 420
# A playbook run by this process that is still running: at most one. An interrupted check's undo (Ctrl-C, SIGTERM:
# labs.restore, run while the interrupted playbook may still be at work) stops it before it runs the next.
_running: list[subprocess.Popen] = []


def unavailable(*names: str) -> Text | None:
    """Why the named playbooks cannot run from here, None when they can: no ansible-playbook, or a lab that is not
    run from its checkout (the playbooks are not beside it)."""
    venv_on_path()
    if not shutil.which("ansible-playbook"):
        return _("ansible-playbook is not installed: run `make deps` (it installs Ansible into .venv) and use "
                 ".venv/bin/lab")
    missing = [f"playbooks/{name}.yml" for name in names if not (PLAYBOOKS / f"{name}.yml").is_file()]
    if missing:
        return _("{playbooks} not found in {root}: the check runs the lab's own playbooks, from the checkout `lab` "
                 "belongs to").format(playbooks=", ".join(missing), root=ROOT)
    return None


def _stop(proc: subprocess.Popen) -> None:
    """End a playbook run and the processes it started (its session: Ansible's workers, their ssh)."""
    if proc.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def failure_of(output: str) -> str:
    """What a failed playbook run says about its failure: from its last failed task (or Ansible's own error) to the
    recap, on one line, at most 600 characters."""
    starts = [m.start() for m in re.finditer(r"^(fatal: |ERROR! |\[ERROR\])", output, re.M)]
    text = output[starts[-1]:] if starts else output[-600:]
    text = text.split("PLAY RECAP", 1)[0]
    return " ".join(text.split())[:600]


def run_playbook(inventory: Path, name: str, timeout: float, extra_vars: dict | None = None) -> str:
    """``playbooks/<name>.yml`` on the inventory, as the Makefile runs it; its output. Bounded by ``timeout``
    (seconds on real hardware, scaled); a failure or a timeout raises CheckFailed saying which."""
    for proc in list(_running):
        _stop(proc)
    _running.clear()
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    env.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    command = ["ansible-playbook", "-i", str(inventory), str(PLAYBOOKS / f"{name}.yml")]
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    limit = scaled(timeout)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own session: ended with its workers, whatever ends it
    _running.append(proc)
    try:
        output = proc.communicate(timeout=limit)[0]
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise CheckFailed(_("playbooks/{name}.yml did not finish within {timeout:.0f}s").format(
            name=name, timeout=limit)) from None
    except BaseException:
        _stop(proc)
        raise
    finally:
        if proc in _running:
            _running.remove(proc)
    if proc.returncode != 0:
        raise CheckFailed(_("playbooks/{name}.yml failed (exit {rc}): {error}").format(
            name=name, rc=proc.returncode, error=failure_of(output)))
    return output


def snapshot_store(lab: Lab) -> Path:
    """Where the snapshot playbook keeps its snapshots: the state folder's etcd-snapshots/ (the etcd role's
    etcd_snapshot_store), the state folder as the inventory publishes it."""
    return Path(lab.setting("state_dir") or state_dir()) / "etcd-snapshots"


def take_snapshot(lab: Lab, timeout: float = SNAPSHOT_TIMEOUT) -> Path:
    """A snapshot of etcd by playbooks/etcd-snapshot.yml (make etcd-snapshot): the .db file it wrote into the store,
    its description (.json) beside it. What a failed run left there is removed."""
    store = snapshot_store(lab)

    def listing() -> set[Path]:
        return set(store.glob("etcd-*")) if store.is_dir() else set()

    before = listing()
    try:
        run_playbook(lab.inventory, "etcd-snapshot", timeout)
    except BaseException:
        for path in listing() - before:
            path.unlink(missing_ok=True)
        raise
    new = listing() - before
    taken = [p for p in new if p.suffix == ".db" and p.with_suffix(".json") in new]
    if len(taken) != 1:
        for path in new:
            path.unlink(missing_ok=True)
        raise CheckFailed(_("playbooks/etcd-snapshot.yml left no snapshot with its description in {store} (new "
                            "there: {files})").format(store=store, files=", ".join(sorted(p.name for p in new))
                                                      or _("nothing")))
    return taken[0]


def restore_snapshot(lab: Lab, snapshot: Path, timeout: float = RESTORE_TIMEOUT) -> float:
    """Every etcd member restored from ``snapshot`` as a new cluster by playbooks/etcd-restore.yml (make
    etcd-restore SNAPSHOT=…); the seconds it took."""
    started = time.monotonic()
    run_playbook(lab.inventory, "etcd-restore", timeout, {"etcd_restore_snapshot": str(snapshot.resolve())})
    return time.monotonic() - started


def member_status(lab: Lab, node: str) -> dict:
    """What the etcd member on ``node`` says of itself (`etcdctl endpoint status` against that member): its Status,
    whose header holds its cluster_id, member_id, revision and raft_term."""
    return json.loads(lab.etcdctl("endpoint status -w json", node=node))[0]["Status"]


def cluster_ids(lab: Lab) -> dict[str, int]:
    """Each member's etcd cluster ID, as the member itself reports it."""
    return lab.on_each(lab.etcd_members, lambda node: int(member_status(lab, node)["header"]["cluster_id"]))
