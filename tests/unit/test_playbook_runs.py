"""labs.drills, the disaster drills' playbooks run from Python (C34, tests/e2e/test_drills.py), against a stand-in
ansible-playbook: run as the Makefile runs them, bounded in time and ended with whatever they started, their
failure said in one line, and a snapshot found as the one new file of the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from labs import drills
from labs.paths import ROOT
from labs.registry import CheckFailed

FAKE = """#!/bin/bash
printf '%s\\n' "$PWD" "$ANSIBLE_CONFIG" "$@" > "$FAKE_LOG"
case "$FAKE_MODE" in
  fail) printf 'TASK [x]\\nfatal: [cp1]: FAILED! =>\\n    msg: the snapshot is not sound\\n\\n'
        printf 'PLAY RECAP\\ncp1 : failed=1\\n'; exit 2 ;;
  hang) sleep 60 & echo $! > "$FAKE_CHILD"; sleep 60 ;;
  snapshot) mkdir -p "$FAKE_STORE"; echo db > "$FAKE_STORE/etcd-20260101T000000Z.db"
            echo '{"revision": 7}' > "$FAKE_STORE/etcd-20260101T000000Z.json" ;;
  half) mkdir -p "$FAKE_STORE"; echo db > "$FAKE_STORE/etcd-20260101T000000Z.db"; exit 2 ;;
esac
echo ok
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """ansible-playbook on PATH (before the virtualenv's own) as a script that records how it was run."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "ansible-playbook"
    script.write_text(FAKE)
    script.chmod(0o755)
    venv = [str(ROOT / ".venv" / "bin"), str(Path(sys.executable).parent)]
    monkeypatch.setenv("PATH", os.pathsep.join([str(bindir), *venv, os.environ.get("PATH", "")]))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("FAKE_CHILD", str(tmp_path / "child"))
    monkeypatch.setenv("FAKE_STORE", str(tmp_path / "state" / "etcd-snapshots"))
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    return tmp_path


def logged(tmp_path: Path) -> list[str]:
    return (tmp_path / "log").read_text().splitlines()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_a_playbook_runs_as_the_makefile_runs_it(fake, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "ok")
    out = drills.run_playbook(Path("/inv/lab.py"), "etcd-restore", 30, {"etcd_restore_snapshot": "/s/etcd-1.db"})
    assert out.strip() == "ok"
    cwd, config, *args = logged(fake)
    assert cwd == str(ROOT) and config == str(ROOT / "ansible.cfg")
    assert args == ["-i", "/inv/lab.py", str(ROOT / "playbooks" / "etcd-restore.yml"),
                    "-e", json.dumps({"etcd_restore_snapshot": "/s/etcd-1.db"})]


def test_a_failed_playbook_says_which_task_failed(fake, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "fail")
    with pytest.raises(CheckFailed) as failed:
        drills.run_playbook(Path("inventory"), "etcd-snapshot", 30)
    assert str(failed.value) == ("playbooks/etcd-snapshot.yml failed (exit 2): fatal: [cp1]: FAILED! => msg: the "
                                 "snapshot is not sound")


def test_a_playbook_that_hangs_is_ended_with_what_it_started(fake, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "hang")
    started = time.monotonic()
    with pytest.raises(CheckFailed, match=r"playbooks/etcd-restore.yml did not finish within 1s"):
        drills.run_playbook(Path("inventory"), "etcd-restore", 1)
    assert time.monotonic() - started < 15
    child = int((fake / "child").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the playbook's own child outlived it"
    assert not drills._running


def test_a_playbook_still_running_is_ended_before_the_next(fake, monkeypatch):
    """An interrupted check's undo runs while the interrupted playbook may still be at work: it goes first."""
    earlier = subprocess.Popen(["sleep", "60"], start_new_session=True)
    monkeypatch.setattr(drills, "_running", [earlier])
    monkeypatch.setenv("FAKE_MODE", "ok")
    drills.run_playbook(Path("inventory"), "etcd-restore", 30)
    assert earlier.poll() is not None and drills._running == []


def test_what_keeps_the_playbooks_from_running(fake, monkeypatch, tmp_path):
    assert drills.unavailable("etcd-snapshot", "etcd-restore") is None
    assert "playbooks/no-such.yml not found in" in drills.unavailable("etcd-snapshot", "no-such")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(drills, "venv_on_path", lambda: None)
    assert drills.unavailable("etcd-snapshot").startswith("ansible-playbook is not installed")


def snapshot_lab(tmp_path: Path):
    return SimpleNamespace(inventory=Path("inventory"), setting=lambda name, default=None: str(tmp_path / "state"))


def test_a_snapshot_is_the_one_new_file_of_the_store_with_its_description(fake, monkeypatch):
    store = fake / "state" / "etcd-snapshots"
    store.mkdir(parents=True)
    (store / "etcd-20250101T000000Z.db").write_text("an older one")
    monkeypatch.setenv("FAKE_MODE", "snapshot")
    taken = drills.take_snapshot(snapshot_lab(fake))
    assert taken == store / "etcd-20260101T000000Z.db"
    assert json.loads(taken.with_suffix(".json").read_text()) == {"revision": 7}


def test_what_a_failed_snapshot_left_is_removed(fake, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "half")
    with pytest.raises(CheckFailed, match="etcd-snapshot.yml failed"):
        drills.take_snapshot(snapshot_lab(fake))
    assert list((fake / "state" / "etcd-snapshots").iterdir()) == []
    monkeypatch.setenv("FAKE_MODE", "ok")  # succeeds, writes nothing
    with pytest.raises(CheckFailed, match="left no snapshot with its description"):
        drills.take_snapshot(snapshot_lab(fake))


@pytest.mark.parametrize(("message", "hint"), [
    ("playbooks/etcd-snapshot.yml failed (exit 2): fatal: [cp1]: FAILED! => msg: no etcd member is healthy",
     "*playbooks/etcd-snapshot.yml failed"),
    ("timed out after 240s waiting for API writes to fail without a quorum", "*timed out after 30s waiting for API"),
    ("playbooks/etcd-restore.yml failed (exit 2): fatal: [cp2]: FAILED! => msg: x", "*playbooks/etcd-restore.yml"),
    ("playbooks/etcd-restore.yml did not finish within 3360s", "*… did not finish within"),
    ("timed out after 300s waiting for all nodes Ready (cp1, w1, w2)", "*timed out … waiting for all nodes Ready"),
    ("after the restore the members report cluster IDs {'cp1': 1, 'cp2': 2}; before: {'cp1': 1, 'cp2': 1}",
     "*… cluster IDs"),
    ("after the restore ConfigMap lab-c34-1a2b3/marker holds 'after', not the snapshot's 'before'",
     "*… holds 'after'"),
    ("namespace lab-c34-1a2b3, deleted after the snapshot, is not back after the restore: 404 Not Found",
     "*namespace …, deleted after"),
    ("namespace lab-c34-1a2b3, made after the snapshot, is still there after the restore",
     "*namespace …, made after"),
])
def test_each_failure_of_c34_picks_its_hint(message, hint):
    from labs.registry import load_checks

    picked = load_checks()["C34"].hints_for(message)
    assert len(picked) == 1 and picked[0].startswith(hint), picked
