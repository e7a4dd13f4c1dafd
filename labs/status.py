"""`lab status`: one screen that says whether the lab is healthy: each machine with its Vagrant state and provider,
the API endpoint, each node's Ready condition, each component's unit on each machine; for a unit that is down, its
last journal lines and the command that shows more; a break-and-fix exercise when one is active (`lab break`).
Healthy only when everything is."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field

from labs.exercises import active_note
from labs.i18n import _, tr
from labs.lab import LB_UNITS, Lab
from labs.paths import ROOT
from labs.registry import LabError, message_of

NODE_UNITS = ("kubelet", "kube-proxy", "pod-network")  # after the units of the node's container runtime
JOURNAL_LINES = 5
OK, DOWN = _("ok"), _("DOWN")  # each line's mark


@dataclass
class Report:
    """The lines to print, in the chosen language, and the problems found."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def head(self, line: str) -> None:
        self.lines.append(tr(line))

    def ok(self, line: str) -> None:
        self.lines.append(f"  {tr(OK):5} {tr(line)}")

    def bad(self, line: str, *details: str) -> None:
        self.lines.append(f"  {tr(DOWN):5} {tr(line)}")
        self.lines += [f"          {tr(d)}" for d in details]
        self.problems.append(tr(line))


def expected_units(lab: Lab, machine: str) -> list[str]:
    """The units the playbooks install on a machine, by its roles."""
    units = list(lab.control_plane_components(machine))
    if machine in lab.nodes:
        units += [*lab.runtime_units(machine), *NODE_UNITS]
    if machine in lab.control_plane and len(lab.control_plane) > 1:
        units += LB_UNITS
    return units


def vagrant_machines() -> dict[str, tuple[str, str]]:
    """Machine -> (state, provider) as `vagrant status` reports them; {} where Vagrant cannot say."""
    try:
        import vagrant

        return {s.name: (s.state, s.provider or "?") for s in vagrant.Vagrant(str(ROOT), quiet_stderr=True).status()}
    except Exception:  # noqa: BLE001 - another inventory's machines, or no Vagrant: nothing to report
        return {}


def units_on(lab: Lab, machine: str, units: list[str]) -> dict[str, str]:
    """Unit -> its ActiveState on the machine ("unreachable" for every unit when the machine does not answer)."""
    script = "; ".join(f"echo {u} $(systemctl show -P ActiveState {u} 2>/dev/null || echo unknown)" for u in units)
    try:
        out = lab.sh(machine, script)
    except Exception:  # noqa: BLE001 - a machine that is off or unreachable
        return dict.fromkeys(units, "unreachable")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def status(lab: Lab) -> Report:
    report = Report()
    report.head(f"API {lab.server}")
    try:
        report.ok(_("API server answers ({version})").format(version=lab.ping()))
        api = True
    except LabError as exc:
        report.bad(_("API server does not answer"), tr(message_of(exc)).split(". ")[0])
        api = False
    machines = vagrant_machines()
    report.head(_("machines"))
    for machine in lab.machines:
        state, provider = machines.get(machine, (_("(not a Vagrant machine of this checkout)"), "-"))
        line = f"{machine:4} {tr(state)} ({provider}), {lab.machine_ip(machine)}"
        if machines and state != "running":
            report.bad(line, _("start it: make start NODES={machine}").format(machine=machine))
        else:
            report.ok(line)
    if api:
        report.head(_("nodes"))
        try:
            ready = set(lab.ready_nodes())
        except Exception as exc:  # noqa: BLE001 - an API server going away between two looks is a finding
            report.bad(_("API server does not answer"), str(exc).splitlines()[0][:160])
        else:
            for node in lab.nodes:
                if node in ready:
                    report.ok(_("{node} Ready").format(node=node))
                else:
                    report.bad(_("{node} not Ready").format(node=node), f"kubectl describe node {node}")
        report.head(_("leaders"))
        try:
            leaders = lab.leaders()
        except Exception as exc:  # noqa: BLE001 - an API server going away between two looks is a finding
            report.bad(_("API server does not answer"), str(exc).splitlines()[0][:160])
            leaders = {}
        for name, (holder, held) in leaders.items():
            if held:
                report.ok(_("{component}: led by {node}").format(component=name, node=holder))
            else:
                report.bad(_("{component}: no live leader (its Lease is not being renewed)").format(component=name),
                           f"kubectl -n kube-system get lease {name} -o yaml")
    report.head(_("components"))
    found = lab.on_each(lab.machines, lambda m: units_on(lab, m, expected_units(lab, m)))
    for machine in lab.machines:
        for unit, state in found[machine].items():
            if state == "active":
                report.ok(f"{machine}: {unit}")
                continue
            details = []
            if state != "unreachable":
                journal = lab.sh(machine, f"journalctl -u {shlex.quote(unit)} -n {JOURNAL_LINES} --no-pager -o cat",
                                 check=False)
                details = [line[:160] for line in journal.splitlines()[-JOURNAL_LINES:]]
            details.append(_("more: lab ssh {machine} -- journalctl -u {unit} -n 50 --no-pager").format(
                machine=machine, unit=unit))
            report.bad(f"{machine}: {unit} {state}", *details)
    return report


def certificates(lab: Lab, report: Report) -> None:
    """The certificates that have expired (a problem) or expire within lab certs' warning window (a warning), read
    once per `lab status`, not at every look of --wait."""
    from labs import certs as C

    report.head(_("certificates"))
    try:
        found = C.collect(lab)
    except Exception as exc:  # noqa: BLE001 - a machine that cannot be read is reported above already
        report.lines.append("  " + tr(_("not read: {error}").format(error=str(exc).splitlines()[0][:160])))
        return
    for cert in found:
        where = f"{C.where(cert)} ({cert.subject})"
        if cert.state == "expired":
            report.bad(_("{where} expired on {date}").format(where=where, date=cert.not_after[:10]),
                       "lab certs; make renew-certificates")
        elif cert.state == "soon":
            report.lines.append(f"  {tr(_('WARN')):5} " + tr(_("{where} expires on {date}, in {days:.0f} days").format(
                where=where, date=cert.not_after[:10], days=cert.days_left)))
    if not any(c.state != "ok" for c in found):
        report.ok(_("{count} certificates, none expires within {days} days (lab certs)").format(
            count=len(found), days=C.WARN_DAYS))


def main_status(lab: Lab, wait: float = 0) -> int:
    """Print the status; with ``wait``, look again (every 10 s, at most ``wait`` seconds) until it is healthy."""
    deadline = time.monotonic() + wait
    report = status(lab)
    while report.problems and time.monotonic() < deadline:
        print("lab: " + tr(_("waiting for {count} problem(s) to clear: {problems}").format(
            count=len(report.problems), problems=", ".join(report.problems[:4]))), flush=True)
        time.sleep(10)
        report = status(lab)
    certificates(lab, report)
    print("\n".join(report.lines))
    note = active_note()
    if note:
        print(tr(_("exercise")) + "\n  " + tr(note))
    if report.problems:
        count = len(report.problems)
        if note:
            verdict = _("NOT healthy ({count} problem(s)); `make repair` takes the exercise's fault out and re-runs "
                        "the playbooks").format(count=count)
        else:
            verdict = _("NOT healthy ({count} problem(s)); `make repair` re-runs the playbooks").format(count=count)
        print("\nlab: " + tr(verdict))
        return 1
    print("\nlab: " + tr(_("healthy")))
    return 0

