"""The `lab` command: list, show and run the checks of the lab's claims (running them is labs.runner's part:
here are the arguments, the file reports and the summary). What people read is in the language of --lang or the
locale (labs.i18n); the JSON and JUnit reports, read by programs, stay in English."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from labs import __version__
from labs.course import LANGUAGE_NAMES, Quote, passages
from labs.exercises import active_note, active_record
from labs.i18n import LANGUAGES, _, language, set_language, tr
from labs.lab import Lab
from labs.nodes import published_settings, read_inventory
from labs.paths import DEFAULT_INVENTORY
from labs.registry import Check, LabError, Result, load_checks, message_of, plain, render_see, see_line
from labs.restore import install_signal_handlers
from labs.runner import STATUS, run_checks, summary
from labs.timing import Timing


def write_reports(results: list[Result], args, mermaid: str = "", svg: str = "", cluster: str = "",
                  settings: dict | None = None) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=2) + "\n")
    if args.junit:
        suite = ET.Element("testsuite", name="k8s-arch-lab", tests=str(len(results)),
                           failures=str(sum(r.status == "failed" for r in results)),
                           errors=str(sum(r.status == "error" for r in results)),
                           skipped=str(sum(r.status == "skipped" for r in results)))
        for r in results:
            case = ET.SubElement(suite, "testcase", classname="lab", name=f"{r.id} {r.title}", time=str(r.seconds))
            if r.status in ("failed", "error"):
                ET.SubElement(case, "failure" if r.status == "failed" else "error", message=r.message).text = \
                    "\n".join(r.evidence)
            elif r.status == "skipped":
                ET.SubElement(case, "skipped", message=r.message)
            ET.SubElement(case, "system-out").text = "\n".join(r.evidence)
        ET.ElementTree(suite).write(args.junit, encoding="unicode", xml_declaration=True)
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, mermaid))
    if args.html:
        from labs.html import page

        Path(args.html).write_text(page(results, svg, cluster, settings))


def markdown(results: list[Result], mermaid: str = "") -> str:
    """The Markdown report, in the chosen language: the diagram, a table of the results, then each check with the
    course's words for its claim, its evidence and what went wrong."""
    title, claim, result, took = (tr(t) for t in (_("k8s-arch-lab check report"), _("claim"), _("result"), _("time")))
    lines = [f"# {title}", ""]
    if mermaid:  # the cluster the checks ran on, as its machines showed it right after (lab diagram)
        lines += ["```mermaid", mermaid.rstrip(), "```", ""]
    lines += [f"| ID | {claim} | {result} | {took} |", "|---|---|---|---|"]
    lines += [f"| {r.id} | {tr(r.title)} | {tr(STATUS[r.status])} | {r.seconds:.1f}s |" for r in results]
    for r in results:
        lines += ["", f"## {r.id} {tr(r.title)}: {tr(STATUS[r.status])}", ""]
        for text, q in quotes(r.id):  # each its own quote block; the gloss unless the quote is in the language shown
            lines += [f"> {text}: «{q.original}»" + (f" — *{tr(q.gloss)}*" if q.language != language() else ""), ""]
        lines += [f"- {tr(line)}" for line in r.evidence]
        if r.message and r.status != "passed":
            lines += ["", f"**{tr(r.message)}**"]
    return "\n".join(lines) + "\n"


def quotes(ident: str) -> list[tuple[str, Quote]]:
    """The course's sentences for a check, each with the name of its text: "000 (Russian)"."""
    return [(f"{text} ({tr(LANGUAGE_NAMES[q.language])})", q) for text, qs in passages(ident) for q in qs]


def kind(chk: Check) -> str:
    return tr(_("disrupt") if chk.disruptive else _("observe"))


def cmd_list(checks) -> int:
    width = max(8, *(len(kind(chk)) for chk in checks.values()))
    kind_head, title = tr(_("kind")), tr(_("title"))
    print(f"{'ID':4} {kind_head:{width}} {title}")
    for chk in checks.values():
        print(f"{chk.id:4} {kind(chk):{width}} {tr(chk.title)}")
    return 0


def cmd_hint(checks, ident: str) -> int:
    chk = checks[ident]
    try:  # the hints name this cluster's addresses, ports and paths
        settings = published_settings(Path(os.environ.get("K8S_LAB_INVENTORY") or DEFAULT_INVENTORY))
    except LabError:
        settings = {}
    print(f"{chk.id}: {tr(chk.title)}\n")
    print(tr(_("When it fails:")))
    for hint in chk.hints:
        print(f"  - {plain(render_see(tr(hint), settings))}")
    return 0


def cmd_show(checks, ident: str, inventory: Path | None = None) -> int:
    chk = checks[ident]
    try:  # the commands are shown with this cluster's addresses, ports and paths
        settings = published_settings(inventory or Path(os.environ.get("K8S_LAB_INVENTORY") or DEFAULT_INVENTORY))
    except LabError:
        settings = {}
    print(f"{chk.id}: {tr(chk.title)}\n")
    print(tr(_("Claim: {claim}").format(claim=chk.claim)))
    print(tr(_("In the course texts:")))
    for text, quote in quotes(chk.id):
        print(f"  {text}: «{quote.original}»")
        if quote.language != language():  # the gloss, unless the quote is in the language shown
            print(f"      — {tr(quote.gloss)}")
    nature = _("disruptive (stops something, then restores it)") if chk.disruptive else _("observation only")
    print(tr(_("Kind: {kind}").format(kind=nature)) + "\n")
    print(tr(_("See it yourself:")))
    for line in chk.see:
        print(f"  $ {render_see(see_line(line), settings)}")
    print("\n" + tr(_("What the check does: {does}").format(does=chk.does)))
    page = Path(__file__).resolve().parent.parent / "docs/labs" / f"{chk.id}.md"
    if page.exists():
        print("\n" + tr(_("More: {page}").format(page=page)))
    return 0


def ssh_command(inventory: dict, machine: str, command: list[str]) -> list[str]:
    """The ssh command line that reaches an inventory machine as the playbooks do (address, user, port, key)."""
    hostvars = inventory.get("_meta", {}).get("hostvars", {})
    if machine not in hostvars:
        known = ", ".join(sorted(hostvars)) or _("none")
        raise LabError(_("no machine {machine!r} in the inventory; the machines: {known}").format(
            machine=machine, known=known))
    vars_ = hostvars[machine]
    argv = ["ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
    if vars_.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(vars_["ansible_ssh_private_key_file"])]
    if vars_.get("ansible_port"):
        argv += ["-p", str(vars_["ansible_port"])]
    if not command:
        argv.append("-t")
    user = vars_.get("ansible_user", "root")
    return [*argv, f"{user}@{vars_.get('ansible_host', machine)}", *command]


def cmd_ssh(args) -> int:
    inventory = read_inventory(args.inventory or Path(os.environ.get("K8S_LAB_INVENTORY") or DEFAULT_INVENTORY))
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    argv = ssh_command(inventory, args.machine, command)
    os.execvp(argv[0], argv)  # noqa: S606 - ssh itself, with the inventory's arguments
    return 0  # not reached


JOBS = 6  # observing checks side by side on real hardware or containers
SLOW_JOBS = 2  # under software emulation: six at a time starve the VMs (SSH banners time out, kubelets renew late)


def default_jobs() -> int:
    """How many observing checks run side by side when --jobs is not given: fewer on slow machines."""
    return JOBS if Timing.scale <= 1 else SLOW_JOBS


def cmd_check(checks, args) -> int:
    selected = list(checks) if args.all or (args.no_disruptive and not args.ids) else args.ids
    if not selected:
        raise LabError(_("name the checks to run (e.g. `lab check C01 C16`) or use --all; `lab list` shows them."))
    if args.no_disruptive:
        selected = [i for i in selected if not checks[i].disruptive]
    lab = Lab(args.kubeconfig, args.inventory)
    version = lab.ping()
    terminal = sys.stdout.isatty()
    tty = terminal and not os.environ.get("NO_COLOR")  # colours: a terminal, unless NO_COLOR (no-color.org) is set
    install_signal_handlers()
    print(tr(_("cluster {server} ({version}), {count} nodes: {nodes}").format(
        server=lab.server, version=version, count=len(lab.nodes), nodes=", ".join(lab.nodes))) + "\n")
    exercise = active_record()
    if exercise:  # the fault stays in on purpose: no wait for health after a disruptive check
        print(tr(_("note: {note}; disruptive checks do not wait for the cluster to be healthy afterwards").format(
            note=active_note())) + "\n")
    started = time.monotonic()
    results = run_checks(lab, [checks[i] for i in selected], args.jobs or default_jobs(), tty, progress=terminal,
                         wait_healthy=exercise is None)
    mermaid = svg = ""
    if args.markdown or args.html:
        from labs.diagram import observe, to_mermaid, to_svg

        try:
            graph = observe(lab)
            mermaid, svg = to_mermaid(graph), to_svg(graph) if args.html else ""
        except Exception as exc:  # noqa: BLE001 - the report goes out without its picture rather than not at all
            print("lab: " + tr(_("no diagram in the report: {error}").format(error=exc)), file=sys.stderr)
    cluster = tr(_("cluster {server} ({version})").format(server=lab.server, version=version))
    write_reports(results, args, mermaid, svg, cluster, lab.settings())
    print(tr(summary(results, time.monotonic() - started)))
    if exercise and any(r.id == exercise.check and r.status == "passed" for r in results):
        print("\n" + tr(_("{check} passes: the exercise is solved. `lab break --undo` ends it (and takes out whatever "
                           "of the fault is left).").format(check=exercise.check)))
    return 1 if any(r.status in ("failed", "error") for r in results) else 0



def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lab", description="Check, claim by claim, how Kubernetes is built.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    lang_help = (f"the language of what `lab` prints and of the Markdown and HTML reports: {', '.join(LANGUAGES)} "
                 "(default: from the locale, LANGUAGE, LC_ALL, LC_MESSAGES, LANG; else en)")
    parser.add_argument("--lang", choices=LANGUAGES, help=lang_help)
    # --lang is also taken after the subcommand (`lab check --lang ru C01`); there it overrides only when given.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--lang", choices=LANGUAGES, default=argparse.SUPPRESS, help=lang_help)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    command("list", help="the checks: ID, kind (observe/disrupt), title")
    show = command("show", help="a check's claim, the course's words for it, how to see it yourself")
    show.add_argument("id")
    hint = command("hint", help="what a check's failure usually means, and where to look")
    hint.add_argument("id")
    run = command("check", help="run checks against the live cluster")
    run.add_argument("ids", nargs="*", metavar="ID")
    run.add_argument("--all", action="store_true", help="every check")
    run.add_argument("--no-disruptive", action="store_true",
                     help="leave out the disruptive checks, those that stop components or change where pods may go "
                          "(alone: every other check)")
    run.add_argument("--kubeconfig", type=Path,
                     help="admin kubeconfig (default: $KUBECONFIG, else admin.kubeconfig in the lab's state folder)")
    run.add_argument("--inventory", type=Path, help="Ansible inventory (default: the repository's inventory/)")
    run.add_argument("--jobs", "-j", type=int, metavar="N",
                     help=f"observing checks run N at a time (default {JOBS}, {SLOW_JOBS} on machines slower than real "
                          "hardware: timeout_scale); disruptive ones always one by one")
    run.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    run.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    run.add_argument("--markdown", metavar="FILE", help="also write a Markdown report (with the live diagram)")
    run.add_argument("--html", metavar="FILE", help="also write one self-contained HTML page: diagram, results, "
                                                    "evidence, hints")
    dg = command("diagram", help="draw the live architecture (DOT, SVG, PNG, Mermaid) from what the "
                                        "machines show")
    dg.add_argument("--out", type=Path, help="folder for diagram.{dot,svg,png,mmd} (default: the state folder's "
                                             "diagram/)")
    dg.add_argument("--kubeconfig", type=Path, help="admin kubeconfig (default: as for check)")
    dg.add_argument("--inventory", type=Path, help="Ansible inventory (default: the repository's inventory/)")
    st = command("status", help="is the lab healthy? machines, API, nodes, every component's unit")
    st.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                    help="look again until healthy, at most this long (make repair)")
    st.add_argument("--kubeconfig", type=Path, help="admin kubeconfig (default: as for check)")
    st.add_argument("--inventory", type=Path, help="Ansible inventory (default: the repository's inventory/)")
    certs = command("certs", help="every certificate of every machine and kubeconfig: identity, issuer, expiry, "
                                  "sorted by expiry; those within 30 days flagged (exit 1 if one has expired)")
    certs.add_argument("--json", metavar="FILE", help="also write them as JSON")
    certs.add_argument("--inventory", type=Path, help="Ansible inventory (default: the repository's inventory/)")
    from labs.exercises import add_parser

    add_parser(sub, parents=[common])
    ssh = command("ssh", help="a shell, or one command, as root on a machine of the lab (any provider)",
                         description="lab ssh NODE [-- COMMAND ...]: what the playbooks use to reach NODE (address, "
                                     "user, key from the inventory)")
    ssh.add_argument("machine", metavar="NODE")
    ssh.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND")
    ssh.add_argument("--inventory", type=Path, help="Ansible inventory (default: the repository's inventory/)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    set_language(args.lang)
    checks = load_checks()
    try:
        wanted = [args.id] if args.command in ("show", "hint") else (args.ids if args.command == "check" else [])
        unknown = [i for i in wanted if i.upper() not in checks]
        if unknown:
            raise LabError(_("unknown check {unknown}: `lab list` shows the {count} checks ({checks}).").format(
                unknown=", ".join(unknown), count=len(checks), checks=", ".join(checks)))
        if args.command == "ssh":
            return cmd_ssh(args)
        if args.command == "break":
            from labs.exercises import main_break

            return main_break(args)
        if args.command == "diagram":
            from labs.diagram import observe, render

            lab = Lab(args.kubeconfig, args.inventory)
            lab.ping()
            out = args.out or Path(lab.setting("state_dir") or ".") / "diagram"
            for path in render(observe(lab), out):
                print(path)
            return 0
        if args.command == "certs":
            from labs.certs import main_certs

            return main_certs(Lab(None, args.inventory), args.json)
        if args.command == "status":
            from labs.status import main_status

            return main_status(Lab(args.kubeconfig, args.inventory), args.wait)
        if args.command == "list":
            return cmd_list(checks)
        if args.command == "show":
            return cmd_show(checks, args.id.upper())
        if args.command == "hint":
            return cmd_hint(checks, args.id.upper())
        args.ids = [i.upper() for i in args.ids]
        return cmd_check(checks, args)
    except BrokenPipeError:  # `lab … | head`: the reader has gone; no traceback, and no error at exit either
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except LabError as exc:
        print(f"lab: {tr(message_of(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nlab: " + tr(_("interrupted; what the checks changed has been restored.")), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
