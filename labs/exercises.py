"""`lab break`: break-and-fix exercises. A real fault of the catalogue (labs/faults.py) put into the cluster and
recorded in the state folder (labs/journal.py); the learner is told only the symptom, `lab check` grades the
repair, `lab break --reveal` says what was broken, `lab break --undo` takes the fault out (from any shell, after a
reboot of the control host too) and waits until the cluster is healthy again.

    lab break C16 | C04-member | --random    put a fault in (one at a time)
    lab break --list                         the exercises and their symptoms
    lab break --reveal                       what was broken, and what --undo will do
    lab break --undo [--no-wait]             take it out (make repair does it too)
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from labs.faults import CATALOGUE, FAULTS, TEST_ONLY, Fault, faults_of
from labs.journal import OPS, Journal, already_active, describe, record_path, undo
from labs.registry import CheckFailed, LabError, load_checks
from labs.timing import scaled

if TYPE_CHECKING:
    import argparse

    from labs.lab import Lab

UNDO_TIMEOUT = 240  # seconds (real hardware) for the cluster to be healthy again after an undo
READY_TIMEOUT = 30  # for the cluster to be healthy before a fault goes in


def candidates(target: str | None, pick_random: bool) -> list[Fault]:
    """The faults `lab break TARGET` (a check: any of its faults; a fault id: that one) or `--random` picks from;
    LabError for anything else. Needs no cluster."""
    if pick_random:
        if target:
            raise LabError("`lab break --random` picks among every exercise: name no check with it.")
        return list(CATALOGUE)
    if not target:
        raise LabError("name what to break: a check (`lab break C16`), a fault of `lab break --list`, or "
                       "`lab break --random`.")
    wanted = target.upper()
    by_id = {i.upper(): f for i, f in FAULTS.items()}
    if wanted in by_id and "-" in wanted:
        return [by_id[wanted]]
    checks = load_checks()
    if wanted in checks:
        if wanted in TEST_ONLY:
            raise LabError(f"{wanted} has no break-and-fix exercise: {TEST_ONLY[wanted]}.")
        return faults_of(wanted)
    raise LabError(f"no check or exercise {target!r}: `lab break --list` shows the exercises, `lab list` the checks.")


def needs_text(fault: Fault) -> str:
    return f" (needs {fault.needs.__doc__.strip()})" if fault.needs and fault.needs.__doc__ else ""


def cmd_list() -> int:
    print(f"{'exercise':14} symptom")
    for fault in CATALOGUE:
        print(f"{fault.id:14} {fault.symptom}{needs_text(fault)}")
    print(f"\nNo exercise for {', '.join(TEST_ONLY)}: their claim can only be made false in the middle of the check "
          "(the tests do it). `lab break CNN` picks one of a check's exercises; `lab break --random` any.")
    return 0


def active_record() -> Journal | None:
    """The recorded exercise, if any (an unreadable record counts as one: it is reported when used)."""
    try:
        return Journal.load(record_path())
    except LabError:
        return Journal(record_path(), "?", "?", started="?")


def active_note() -> str | None:
    """One line for `lab check` and `lab status` while an exercise is active."""
    record = active_record()
    if record is None:
        return None
    return (f"a break-and-fix exercise is active on {record.check} (since {record.started}): `lab break --reveal` "
            "says what was broken, `lab break --undo` ends it")


def cmd_reveal() -> int:
    record = Journal.load(record_path())
    if record is None:
        raise LabError(f"no break-and-fix exercise is active (no record {record_path()}): nothing to reveal.")
    state = "" if record.complete else " (interrupted while the fault was being put in: part of it may be there)"
    print(f"Exercise on {record.check}, fault {record.fault}, since {record.started}{state}.\n")
    print(f"Symptom: {record.symptom}\n")
    print(f"What was broken: {record.reveal}\n")
    print("What `lab break --undo` does:")
    for step in reversed(record.steps):
        print(f"  - {describe(step) if step.get('op') in OPS else step}")
    return 0


def cmd_undo(lab_factory, wait: bool = True) -> int:
    path = record_path()
    record = Journal.load(path)
    if record is None:
        print("lab: no break-and-fix exercise is active: nothing to undo.")
        return 0
    lab: Lab = lab_factory()
    print(f"lab: undoing the exercise on {record.check} (fault {record.fault})", flush=True)
    waits = [float(s["timeout"]) for s in record.steps if s.get("op") == "wait_healthy"]
    errors = undo(lab, record, wait=False, log=lambda line: print(f"  {line}", flush=True))
    if errors:
        for error in errors:
            print(f"  FAILED: {error}", file=sys.stderr)
        print(f"lab: the fault is not entirely undone; its record stays ({path}). Run `lab break --undo` again once "
              "the machines answer (`lab status`), or `make repair`.", file=sys.stderr)
        return 1
    print("lab: the fault is undone; the exercise is over.")
    if not wait:
        return 0
    timeout = max([UNDO_TIMEOUT, *waits])
    print(f"lab: waiting (at most {scaled(timeout):.0f} s) for every node to be Ready and every component's unit "
          "active ...", flush=True)
    try:
        lab.wait_healthy(timeout=timeout)
    except CheckFailed as exc:
        print(f"lab: the cluster is not healthy yet: {exc}. `lab status` shows what is down; `make repair` re-runs "
              "the playbooks.", file=sys.stderr)
        return 1
    print("lab: the cluster is healthy again.")
    return 0


def cmd_break(lab_factory, target: str | None, pick_random: bool) -> int:
    path = record_path()
    if active_record() is not None:
        raise LabError(already_active(path))
    choice = candidates(target, pick_random)
    lab: Lab = lab_factory()
    lab.ping()
    fit = [f for f in choice if not f.unfit(lab)]
    if not fit:
        reasons = "; ".join(f"{f.id}: {f.unfit(lab)}" for f in choice)
        raise LabError(f"no exercise of {target or 'the catalogue'} fits this cluster ({reasons}).")
    fault = secrets.choice(fit)
    try:
        lab.wait_healthy(timeout=READY_TIMEOUT)
    except CheckFailed as exc:
        raise LabError(f"the cluster is not healthy ({exc}): a fault put in now could not be told from what is "
                       "already wrong. `lab status` shows what is down, `make repair` repairs it.") from exc
    journal = Journal.begin(path, fault.id, fault.check, fault.symptom, fault.reveal_for(lab))
    print(f"lab: breaking something for {fault.check} (recorded in {path}) ...", flush=True)
    try:
        fault.apply(lab, journal)
        journal.finish()
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, what went in comes out again
        errors = undo(lab, journal)
        left = (f"; undoing it failed too ({'; '.join(errors)}): `lab break --undo` again, or `make repair`"
                if errors else "; what went in was taken out again")
        raise LabError(f"could not put the fault in for {fault.check}: {type(exc).__name__}: {exc}{left}") from exc
    print(f"\nBreak-and-fix exercise on {fault.check}.\n\n  Symptom: {fault.symptom}\n")
    print(f"Run `lab check {fault.check}` to see it fail; fix it yourself, or `lab break --undo`.")
    return 0


def main_break(args: argparse.Namespace) -> int:
    """`lab break` with its parsed arguments."""
    from labs.lab import Lab

    def lab_factory() -> Lab:
        return Lab(args.kubeconfig, args.inventory)

    modes = [m for m in ("list", "reveal", "undo") if getattr(args, m)]
    if len(modes) > 1 or (modes and (args.target or args.random)):
        raise LabError("`lab break` does one thing at a time: CNN|FAULT, --random, --list, --reveal or --undo.")
    if args.no_wait and not args.undo:
        raise LabError("--no-wait goes with --undo.")
    if args.list:
        return cmd_list()
    if args.reveal:
        return cmd_reveal()
    try:
        if args.undo:
            return cmd_undo(lab_factory, wait=not args.no_wait)
        return cmd_break(lab_factory, args.target, args.random)
    except KeyboardInterrupt:  # the record stays as it is: written ahead, it covers whatever was done
        left = (f"a fault is recorded ({record_path()}): `lab break --undo` takes out whatever of it is there"
                if record_path().exists() else "nothing is recorded")
        print(f"\nlab: interrupted; {left}.", file=sys.stderr)
        return 130


def add_parser(sub, parents: list | None = None) -> None:
    brk = sub.add_parser(
        "break", parents=parents or [],
        help="break-and-fix exercise: put a real fault into the cluster, see a check fail, repair it",
        description="Puts a real fault into the cluster and tells you only its symptom; `lab check CNN` grades "
                    "your repair. One exercise at a time, recorded in the lab's state folder until `lab break "
                    "--undo` (or `make repair`) takes it out.")
    brk.add_argument("target", nargs="?", metavar="CNN|FAULT",
                     help="a check (one of its exercises is picked) or an exercise of --list (e.g. C04-member)")
    brk.add_argument("--random", action="store_true", help="any exercise that fits this cluster")
    brk.add_argument("--list", action="store_true", help="the exercises and their symptoms (nothing revealed)")
    brk.add_argument("--reveal", action="store_true", help="what the active exercise broke")
    brk.add_argument("--undo", action="store_true",
                     help="take the active exercise's fault out, then wait until the cluster is healthy")
    brk.add_argument("--no-wait", action="store_true", help="with --undo: do not wait for the cluster's health")
    brk.add_argument("--kubeconfig", type=Path, help="admin kubeconfig (default: as for check)")
    brk.add_argument("--inventory", type=Path, help="Ansible inventory (default: the repository's inventory/)")
