"""The record of a fault put into the cluster on purpose (a break-and-fix exercise, `lab break`, or a falsification
test): in the lab's state folder (break.json), which fault, since when, what the learner is told (the symptom) and
what was broken (the reveal), and the steps that undo it.

Write-ahead: each undo step is on disk before the change it undoes is made, so that whatever stops `lab break`
half way (an error, Ctrl-C, a killed process, a reboot of the control host) the record still says how to take back
everything that may have been done. The steps are data, carried out later by another process (`lab break --undo`,
`make repair`, the falsification test's cleanup), newest first. Every step is idempotent: undoing what is already
undone, or was never done, changes nothing (at most a component is restarted once more). A shell step exits 0
once what it undoes is gone and is run checked, so that an unreachable machine (ssh exits 255) fails the step and
keeps the record instead of passing for done."""

from __future__ import annotations

import inspect
import json
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from labs.i18n import _, join
from labs.paths import state_dir
from labs.registry import LabError, message_of
from labs.timing import wait_for

if TYPE_CHECKING:
    from labs.lab import Lab

RECORD = "break.json"  # in the state folder; `make down` forgets it with the cluster (tools/settings.py)
FORMAT = 1


def record_path() -> Path:
    return state_dir() / RECORD


# --------------------------------------------------------------------------
# Undo steps: an operation name and its arguments (JSON), each an idempotent function of the Lab


@dataclass(frozen=True)
class Op:
    run: Callable[..., None]
    describe: Callable[..., str]
    args: tuple[str, ...]


OPS: dict[str, Op] = {}


def op(name: str, describe: Callable[..., str]):
    """Register an undo operation ``fn(lab, **args)``; ``describe(**args)`` says what it does, for the learner (a
    message of the catalogs: the step's data, its arguments, stay as they are)."""
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        OPS[name] = Op(fn, describe, tuple(inspect.signature(fn).parameters)[1:])
        return fn

    return register


def describe(step: dict) -> str:
    return OPS[step["op"]].describe(**{k: v for k, v in step.items() if k != "op"})


def listed(items: list[str], most: int = 4) -> str:
    if len(items) <= most:
        return ", ".join(items)
    return _("{items} and {n} more").format(items=", ".join(items[:most]), n=len(items) - most)


@op("restore_file", lambda node, path, backup: _("{node}: {path} put back from its copy {backup}").format(
    node=node, path=path, backup=backup))
def restore_file(lab: Lab, node: str, path: str, backup: str) -> None:
    """The original file (``cp -a``: bytes, mode and times) back in place, when its copy is still there."""
    b, p = shlex.quote(backup), shlex.quote(path)
    lab.sh(node, f"if [ -e {b} ]; then mv -f {b} {p}; fi")


def api_ready(lab: Lab, node: str, port: str) -> bool:
    """The node's own API server answers /readyz (as an authenticated caller: anonymous requests are refused)."""
    pki = lab.path("pki_dir")
    out = lab.sh(node, f"curl -s --max-time 5 --cacert {pki}/ca.crt --cert {pki}/apiserver-kubelet-client.crt "
                       f"--key {pki}/apiserver-kubelet-client.key https://127.0.0.1:{port}/readyz", check=False)
    return out == "ok"


def restart(lab: Lab, nodes: list[str], unit: str, keep_going: bool = False) -> None:
    """Restart a unit node by node; an API server must answer again before the next one goes. A failure stops the
    round (a changed configuration is not rolled out further), unless ``keep_going`` (an undo: every node gets its
    original configuration back all the same), which raises once all were tried."""
    errors = []
    for node in nodes:
        try:
            lab.sh(node, f"systemctl daemon-reload && systemctl restart {shlex.quote(unit)}")
            if unit == "kube-apiserver":
                port = (lab.unit_arg(node, "kube-apiserver", "secure-port")
                        or (lab.setting("ports") or {}).get("api_server"))
                wait_for(lambda n=node, p=port: api_ready(lab, n, p), 120,
                         _("the API server on {node}").format(node=node))
        except Exception as exc:
            if not keep_going:
                raise
            errors.append(str(exc))
    if errors:
        raise LabError("; ".join(errors))


@op("restart_units", lambda nodes, unit: _("{nodes}: {unit} restarted, one node after the other").format(
    nodes=", ".join(nodes), unit=unit))
def restart_units(lab: Lab, nodes: list[str], unit: str) -> None:
    restart(lab, nodes, unit, keep_going=True)


@op("start_units", lambda node, units: _("{node}: started {units}").format(node=node, units=listed(units)))
def start_units(lab: Lab, node: str, units: list[str]) -> None:
    """Start units (without waiting: an etcd member waits for its peers); one that no longer exists is no error."""
    lab.sh(node, f"systemctl start --no-block {' '.join(map(shlex.quote, units))} || true")


@op("release_unstoppable", lambda node, unit, dropin: _("{node}: {dropin} removed, {unit}'s processes ended and "
                                                        "the unit restarted").format(node=node, dropin=dropin,
                                                                                     unit=unit))
def release_unstoppable(lab: Lab, node: str, unit: str, dropin: str) -> None:
    """A unit that `systemctl stop` could not stop (KillMode=none) stoppable again: its drop-in removed, whatever
    still runs of it ended (a copy left running by a stop that only looked like one), the unit restarted."""
    d, u = shlex.quote(dropin), shlex.quote(unit)
    lab.sh(node, f"rm -f {d} && {rmdir(dropin)} && systemctl daemon-reload && pkill -x {shlex.quote(unit[:15])} ; "
                 f"sleep 1; systemctl reset-failed {u} ; systemctl restart --no-block {u}; test ! -e {d}")


def rmdir(dropin: str) -> str:
    """The shell command that removes a drop-in's folder when the fault's drop-in was all it held."""
    return f"{{ rmdir --ignore-fail-on-non-empty {shlex.quote(str(Path(dropin).parent))} 2>/dev/null || true; }}"


@op("remove_dropin", lambda node, unit, dropin: _("{node}: {dropin} removed, {unit} restarted").format(
    node=node, dropin=dropin, unit=unit))
def remove_dropin(lab: Lab, node: str, unit: str, dropin: str) -> None:
    d = shlex.quote(dropin)
    lab.sh(node, f"rm -f {d} && {rmdir(dropin)} && systemctl daemon-reload && "
                 f"{{ systemctl restart {shlex.quote(unit)} || true; }}; test ! -e {d}")


@op("kill_processes", lambda node, pattern: _("{node}: processes matching {pattern} ended").format(
    node=node, pattern=pattern))
def kill_processes(lab: Lab, node: str, pattern: str) -> None:
    """End the processes whose command line matches ``pattern`` (pkill -f; ``[x]`` in it keeps the shell running
    the command from matching itself); SIGKILL for those still there 5 s later."""
    p = shlex.quote(pattern)
    lab.sh(node, f"pkill -f {p}; sleep 1; if pgrep -f {p} >/dev/null; then sleep 4; pkill -9 -f {p}; sleep 1; fi; "
                 f"! pgrep -f {p} >/dev/null")


@op("remove_paths", lambda node, paths: _("{node}: removed {paths}").format(node=node, paths=", ".join(paths)))
def remove_paths(lab: Lab, node: str, paths: list[str]) -> None:
    lab.sh(node, f"rm -rf {' '.join(map(shlex.quote, paths))}")


@op("stop_unit", lambda node, unit: _("{node}: {unit} stopped").format(node=node, unit=unit))
def stop_unit(lab: Lab, node: str, unit: str) -> None:
    """Stop a unit (a transient one the fault started); gone or inactive already is fine."""
    u = shlex.quote(unit)
    lab.sh(node, f"systemctl stop {u} 2>/dev/null || true; ! systemctl is-active -q {u}")


@op("taint", lambda node, key, effect: _("{node}: taint {key}:{effect} put back").format(node=node, key=key,
                                                                                           effect=effect))
def taint(lab: Lab, node: str, key: str, effect: str) -> None:
    """Add a taint to a node unless it has it (a node may not have the same key and effect twice)."""
    current = [t.to_dict() for t in lab.core.read_node(node).spec.taints or []]
    if any(t.get("key") == key and t.get("effect") == effect for t in current):
        return
    lab.core.patch_node(node, {"spec": {"taints": current + [{"key": key, "effect": effect}]}})


@op("untaint", lambda node, key, effect: _("{node}: taint {key}:{effect} taken off").format(node=node, key=key,
                                                                                             effect=effect))
def untaint(lab: Lab, node: str, key: str, effect: str) -> None:
    """Take a taint off a node (one it does not carry is fine)."""
    current = [t.to_dict() for t in lab.core.read_node(node).spec.taints or []]
    kept = [t for t in current if not (t.get("key") == key and t.get("effect") == effect)]
    if kept != current:
        lab.core.patch_node(node, {"spec": {"taints": kept}})


DELETERS = {
    "ClusterRole": ("rbac", "delete_cluster_role"),
    "ClusterRoleBinding": ("rbac", "delete_cluster_role_binding"),
    "ValidatingAdmissionPolicy": ("admission", "delete_validating_admission_policy"),
    "ValidatingAdmissionPolicyBinding": ("admission", "delete_validating_admission_policy_binding"),
    "Namespace": ("core", "delete_namespace"),
}


@op("delete_object", lambda kind, name: _("{kind} {name} deleted").format(kind=kind, name=name))
def delete_object(lab: Lab, kind: str, name: str) -> None:
    """Delete a cluster-scoped object; one that is not there (404), or a namespace already being deleted (409:
    "the system is ensuring all content is removed"), is no error."""
    from kubernetes.client.rest import ApiException

    api, method = DELETERS[kind]
    try:
        getattr(getattr(lab, api), method)(name, _request_timeout=30)
    except ApiException as exc:
        if exc.status != 404 and not (exc.status == 409 and kind == "Namespace"):
            raise


@op("wait_healthy", lambda timeout: _("the cluster healthy again (at most {timeout:.0f} s)").format(timeout=timeout))
def wait_healthy(lab: Lab, timeout: float) -> None:
    """Every node Ready and every component's unit active (Lab.wait_healthy), bounded."""
    lab.wait_healthy(timeout=timeout)


# --------------------------------------------------------------------------
# The record


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class Journal:
    """A fault's record: written at once when begun (so that a second fault is refused), then after each step."""

    path: Path
    fault: str
    check: str
    symptom: str = ""
    reveal: str = ""
    started: str = ""
    complete: bool = False  # False while the fault is being put in (or when that was interrupted)
    steps: list[dict] = field(default_factory=list)
    # The machines the reveal names ({"last_worker": "w2"}, Fault.names): symptom and reveal are kept in English,
    # `lab break --reveal` shows them in the learner's language from the catalogue, filled with these names.
    names: dict[str, str] = field(default_factory=dict)

    @classmethod
    def begin(cls, path: Path, fault: str, check: str, symptom: str = "", reveal: str = "",
              names: dict[str, str] | None = None) -> Journal:
        """A new record; refused (LabError) while another one exists: one fault at a time."""
        journal = cls(Path(path), fault, check, str(symptom), str(reveal), now(), names=dict(names or {}))
        journal.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(journal.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise LabError(already_active(journal.path)) from None
        with os.fdopen(fd, "w") as out:
            out.write(journal.text())
            out.flush()
            os.fsync(out.fileno())
        return journal

    @classmethod
    def load(cls, path: Path | None = None) -> Journal | None:
        """The record at ``path`` (default: the state folder's), None when there is none."""
        path = Path(path or record_path())
        try:
            data = json.loads(path.read_text())
            return cls(path, **{k: v for k, v in data.items() if k != "format"})
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise LabError(_("the fault record {path} is unreadable ({error}). Look at it: it lists what undoes the "
                             "fault. Once the cluster is repaired by hand (`make repair` re-runs the playbooks, but "
                             "does not remove what a fault added), remove the file.").format(path=path, error=exc)) \
                from exc

    def text(self) -> str:
        data = {"format": FORMAT, **asdict(self)}
        del data["path"]
        return json.dumps(data, indent=2) + "\n"

    def save(self) -> None:
        """Replace the record on disk at once (a new file, synced, renamed over the old one)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as out:
            out.write(self.text())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        dirfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)

    def step(self, op_name: str, **args) -> None:
        """Record an undo step; call it BEFORE making the change it undoes."""
        spec = OPS.get(op_name)
        if spec is None or set(args) != set(spec.args):
            known = "; ".join(f"{n}({', '.join(o.args)})" for n, o in OPS.items())
            raise ValueError(f"undo step {op_name}({', '.join(args)}): the undo steps are {known}")
        json.dumps(args)  # data only: a step must be carried out by another process
        self.steps.append({"op": op_name, **args})
        self.save()

    def finish(self) -> None:
        """The fault is in place."""
        self.complete = True
        self.save()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def already_active(path: Path) -> str:
    try:
        other = Journal.load(path)
    except LabError:
        other = None
    if other:
        return _("a break-and-fix exercise is already active on {check}, since {started}: one fault at a time. Fix it "
                 "and end it with `lab break --undo` (which also restores whatever you did not fix), then break the "
                 "next one.").format(check=other.check, started=other.started)
    return _("a break-and-fix exercise is already active (its record {path} is unreadable): one fault at a time. Fix "
             "it and end it with `lab break --undo` (which also restores whatever you did not fix), then break the "
             "next one.").format(path=path)


def undo(lab: Lab, journal: Journal, wait: bool = True, log: Callable[[str], None] | None = None) -> list[str]:
    """Carry out the recorded undo steps, newest first, each whatever became of the others (``wait``: the waits for
    health too). The record is removed once every step that changes the cluster succeeded; otherwise it stays, to be
    undone again. The errors, one line per failed step (``log`` and the errors are Texts: English, shown translated)."""
    errors, kept = [], False
    for step in reversed(journal.steps):
        if step["op"] == "wait_healthy" and not wait:
            continue
        try:
            OPS[step["op"]].run(lab, **{k: v for k, v in step.items() if k != "op"})
            if log:
                log(_("undone: {step}").format(step=describe(step)))
        except Exception as exc:  # noqa: BLE001 - every step gets its chance
            errors.append(join(": ", [describe(step), message_of(exc)]))
            kept = kept or step["op"] != "wait_healthy"
    if not kept:
        journal.remove()
    return errors
