"""`lab break`: break-and-fix exercises. A real fault of the catalogue (labs/faults.py) put into the cluster and
recorded in the state folder (labs/journal.py); the learner is told only the symptom, `lab check` grades the
repair, `lab break --reveal` says what was broken, `lab break --undo` takes the fault out (from any shell, after a
reboot of the control host too) and waits until the cluster is healthy again.

    lab break C16 | C04-member | --random    put a fault in (one at a time)
    lab break --list                         the exercises and their symptoms
    lab break --reveal                       what was broken, and what --undo will do
    lab break --undo [--no-wait]             take it out (make repair does it too)

What it prints is in the language of --lang or the locale (labs.i18n), the symptoms and reveals of the catalogue
too; the record in the state folder keeps them in English.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from labs.faults import CATALOGUE, FAULTS, REQUIREMENTS, TEST_ONLY, Fault, faults_of, filled
from labs.i18n import _, join, tr
from labs.journal import OPS, Journal, already_active, describe, record_path, undo
from labs.registry import CheckFailed, LabError, load_checks, message_of
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
            raise LabError(_("`lab break --random` picks among every exercise: name no check with it."))
        return list(CATALOGUE)
    if not target:
        raise LabError(_("name what to break: a check (`lab break C16`), a fault of `lab break --list`, or "
                         "`lab break --random`."))
    wanted = target.upper()
    by_id = {i.upper(): f for i, f in FAULTS.items()}
    if wanted in by_id and "-" in wanted:
        return [by_id[wanted]]
    checks = load_checks()
    if wanted in checks:
        if wanted in TEST_ONLY:
            raise LabError(_("{check} has no break-and-fix exercise: {reason}.").format(check=wanted,
                                                                                      reason=TEST_ONLY[wanted]))
        return faults_of(wanted)
    raise LabError(_("no check or exercise {target!r}: `lab break --list` shows the exercises, `lab list` the "
                     "checks.").format(target=target))


def needs_text(fault: Fault) -> str:
    """What a fault asks of the cluster, as --list shows it after the symptom ("" for most)."""
    if not fault.needs:
        return ""
    what = REQUIREMENTS.get(fault.needs) or (fault.needs.__doc__ or "").strip()
    return " " + tr(_("(needs {what})").format(what=what)) if what else ""


def cmd_list() -> int:
    head, symptom = tr(_("exercise")), tr(_("symptom"))
    width = max(14, len(head))
    print(f"{head:{width}} {symptom}")
    for fault in CATALOGUE:
        print(f"{fault.id:{width}} {tr(fault.symptom)}{needs_text(fault)}")
    print("\n" + tr(_("No exercise for {checks}: their claim can only be made false in the middle of the check (the "
                      "tests do it). `lab break CNN` picks one of a check's exercises; `lab break --random` "
                      "any.").format(checks=", ".join(TEST_ONLY))))
    return 0


def active_record() -> Journal | None:
    """The recorded exercise, if any (an unreadable record counts as one: it is reported when used)."""
    try:
        return Journal.load(record_path())
    except LabError:
        return Journal(record_path(), "?", "?", started="?")


def active_note() -> str | None:
    """One line for `lab check` and `lab status` while an exercise is active (a Text: English, shown translated)."""
    record = active_record()
    if record is None:
        return None
    return _("a break-and-fix exercise is active on {check} (since {started}): `lab break --reveal` says what was "
             "broken, `lab break --undo` ends it").format(check=record.check, started=record.started)


def recorded(record: Journal) -> tuple[str, str]:
    """The record's symptom and reveal, to be shown in the learner's language. The record keeps them in English,
    the reveal filled with the names of the cluster's machines; the catalogue's messages, filled with the names the
    record kept, stand in for them as long as they read the same in English (a record written by another version
    of the lab is shown as it is)."""
    symptom, reveal = record.symptom, record.reveal
    fault = FAULTS.get(record.fault)
    if fault is None:
        return symptom, reveal
    if fault.symptom == symptom:
        symptom = fault.symptom
    try:
        again = filled(fault.reveal, record.names)
    except KeyError:  # a name the record does not have
        again = None
    return symptom, again if again == reveal else reveal


def cmd_reveal() -> int:
    record = Journal.load(record_path())
    if record is None:
        raise LabError(_("no break-and-fix exercise is active (no record {path}): nothing to reveal.").format(
            path=record_path()))
    if record.complete:
        head = _("Exercise on {check}, fault {fault}, since {started}.")
    else:
        head = _("Exercise on {check}, fault {fault}, since {started} (interrupted while the fault was being put in: "
                 "part of it may be there).")
    symptom, reveal = recorded(record)
    print(tr(head.format(check=record.check, fault=record.fault, started=record.started)) + "\n")
    print(tr(_("Symptom: {symptom}").format(symptom=symptom)) + "\n")
    print(tr(_("What was broken: {reveal}").format(reveal=reveal)) + "\n")
    print(tr(_("What `lab break --undo` does:")))
    for step in reversed(record.steps):
        print(f"  - {tr(describe(step)) if step.get('op') in OPS else step}")
    return 0


def cmd_undo(lab_factory, wait: bool = True) -> int:
    path = record_path()
    record = Journal.load(path)
    if record is None:
        print("lab: " + tr(_("no break-and-fix exercise is active: nothing to undo.")))
        return 0
    lab: Lab = lab_factory()
    print("lab: " + tr(_("undoing the exercise on {check} (fault {fault})").format(check=record.check,
                                                                                   fault=record.fault)), flush=True)
    waits = [float(s["timeout"]) for s in record.steps if s.get("op") == "wait_healthy"]
    errors = undo(lab, record, wait=False, log=lambda line: print(f"  {tr(line)}", flush=True))
    if errors:
        for error in errors:
            print("  " + tr(_("FAILED: {error}").format(error=error)), file=sys.stderr)
        print("lab: " + tr(_("the fault is not entirely undone; its record stays ({path}). Run `lab break --undo` "
                             "again once the machines answer (`lab status`), or `make repair`.").format(path=path)),
              file=sys.stderr)
        return 1
    print("lab: " + tr(_("the fault is undone; the exercise is over.")))
    if not wait:
        return 0
    timeout = max([UNDO_TIMEOUT, *waits])
    print("lab: " + tr(_("waiting (at most {seconds:.0f} s) for every node to be Ready and every component's unit "
                         "active ...").format(seconds=scaled(timeout))), flush=True)
    try:
        lab.wait_healthy(timeout=timeout)
    except CheckFailed as exc:
        print("lab: " + tr(_("the cluster is not healthy yet: {error}. `lab status` shows what is down; `make repair` "
                             "re-runs the playbooks.").format(error=message_of(exc))), file=sys.stderr)
        return 1
    print("lab: " + tr(_("the cluster is healthy again.")))
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
        reasons = join("; ", [join(": ", [f.id, f.unfit(lab)]) for f in choice])
        if target:
            raise LabError(_("no exercise of {target} fits this cluster ({reasons}).").format(target=target,
                                                                                             reasons=reasons))
        raise LabError(_("no exercise of the catalogue fits this cluster ({reasons}).").format(reasons=reasons))
    fault = secrets.choice(fit)
    try:
        lab.wait_healthy(timeout=READY_TIMEOUT)
    except CheckFailed as exc:
        raise LabError(_("the cluster is not healthy ({error}): a fault put in now could not be told from what is "
                         "already wrong. `lab status` shows what is down, `make repair` repairs it.").format(
            error=message_of(exc))) from exc
    journal = Journal.begin(path, fault.id, fault.check, fault.symptom, fault.reveal_for(lab), fault.names(lab))
    print("lab: " + tr(_("breaking something for {check} (recorded in {path}) ...").format(check=fault.check,
                                                                                           path=path)), flush=True)
    try:
        fault.apply(lab, journal)
        journal.finish()
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, what went in comes out again
        errors = undo(lab, journal)
        error = join(": ", [type(exc).__name__, message_of(exc)])
        if errors:
            message = _("could not put the fault in for {check}: {error}; undoing it failed too ({errors}): `lab "
                        "break --undo` again, or `make repair`").format(check=fault.check, error=error,
                                                                        errors=join("; ", errors))
        else:
            message = _("could not put the fault in for {check}: {error}; what went in was taken out again").format(
                check=fault.check, error=error)
        raise LabError(message) from exc
    print("\n" + tr(_("Break-and-fix exercise on {check}.").format(check=fault.check)) + "\n")
    print("  " + tr(_("Symptom: {symptom}").format(symptom=fault.symptom)) + "\n")
    print(tr(_("Run `lab check {check}` to see it fail; fix it yourself, or `lab break --undo`.").format(
        check=fault.check)))
    return 0


def main_break(args: argparse.Namespace) -> int:
    """`lab break` with its parsed arguments."""
    from labs.lab import Lab

    def lab_factory() -> Lab:
        return Lab(args.kubeconfig, args.inventory)

    modes = [m for m in ("list", "reveal", "undo") if getattr(args, m)]
    if len(modes) > 1 or (modes and (args.target or args.random)):
        raise LabError(_("`lab break` does one thing at a time: CNN|FAULT, --random, --list, --reveal or --undo."))
    if args.no_wait and not args.undo:
        raise LabError(_("--no-wait goes with --undo."))
    if args.list:
        return cmd_list()
    if args.reveal:
        return cmd_reveal()
    try:
        if args.undo:
            return cmd_undo(lab_factory, wait=not args.no_wait)
        return cmd_break(lab_factory, args.target, args.random)
    except KeyboardInterrupt:  # the record stays as it is: written ahead, it covers whatever was done
        if record_path().exists():
            left = _("interrupted; a fault is recorded ({path}): `lab break --undo` takes out whatever of it is "
                     "there.").format(path=record_path())
        else:
            left = _("interrupted; nothing is recorded.")
        print("\nlab: " + tr(left), file=sys.stderr)
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
