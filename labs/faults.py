"""The catalogue of faults: for each way of making a check's claim false on the live cluster, the check it breaks,
what a learner sees (the symptom, no spoiler), what was broken (the reveal), the reason the check then gives (a
pattern of its failure message), and how to put the fault in.

One catalogue for two uses: `lab break` (labs/exercises.py) puts a fault into the learner's cluster as a
break-and-fix exercise, and the falsification tests (tests/e2e/test_labs.py, test_topologies.py) put each one in,
run its check, expect the failure with that reason, and take the fault out again. Putting a fault in writes its
undo steps to the record in the state folder before each change (labs/journal.py), so that another process can
take it out later: `lab break --undo`, `make repair`, or the test's own cleanup.

Where a check looks at each of several instances (etcd members, API servers, kubelets, control-plane nodes,
workers), a fault breaks only one of them (mostly the last: the last etcd member, cp3, w2); where the claim is
about a component as a whole, the fault changes it on every node that runs it.

Four checks have no fault here (TEST_ONLY): their claim can only be made false in the middle of the check, once
its workload runs (or, C34, between its change and its restore), which the tests do by wrapping a function of the
check (tests/e2e/conftest.py, after_call)."""

from __future__ import annotations

import base64
import contextlib
import datetime
import re
import string
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from labs.i18n import Text, _
from labs.journal import Journal, record_path, restart, undo
from labs.journal import taint as taint_op
from labs.lab import LEADER_LEASES
from labs.registry import LabError
from labs.timing import wait_for

if TYPE_CHECKING:
    from labs.lab import Lab

BACKUP = ".before-lab-break"  # a changed file's original, beside it, while the fault is in place
DROPIN = "zz-lab-falsify.conf"  # a unit's drop-in that changes what the unit does
LEADER_TAKEOVER = 90  # seconds (real hardware): a restarted leader-elected component leads (its lease 15 s, retries)
SETTLE = 240  # seconds (real hardware) a fault that changed units gives the cluster to be healthy after its undo
CP_TAINT = "node-role.kubernetes.io/control-plane"
STRAY = "/usr/local/sbin/lab-stray"  # where a stray etcd's binary goes on a machine
ROGUE_UNIT, ROGUE = "lab-falsify-rogue", "/usr/local/sbin/rogue-client"


@dataclass(frozen=True)
class Fault:
    """One way of making a check's claim false. ``reveal`` and ``reason`` name the machines through the
    ``{placeholders}`` of targets() (the reveal also the paths and units of CONSTANTS); ``needs`` says why a
    cluster cannot have the fault (None: it can). ``symptom`` and ``reveal`` are messages of the catalogs (``_()``),
    shown in the learner's language; ``reason`` is a pattern of the English failure message and stays English."""

    id: str
    check: str
    apply: Callable[[Lab, Journal], None]
    symptom: str = ""
    reveal: str = ""
    reason: str = ""
    needs: Callable[[Lab], str | None] | None = None
    # whether the fault breaks something on a worker (a cluster without workers, the single profile, cannot have it)
    needs_workers: bool = True

    def reveal_for(self, lab: Lab) -> str:
        """The reveal on this cluster: a Text, English as a str (the record, the tests), shown translated."""
        return filled(self.reveal, targets(lab))

    def names(self, lab: Lab) -> dict[str, str]:
        """The machines the reveal names on this cluster (kept in the record, to show the reveal in any language)."""
        wanted = fields(self.reveal)
        return {name: value for name, value in targets(lab).items() if name in wanted}

    def reason_for(self, lab: Lab) -> str:
        return fill(self.reason, targets(lab))

    def unfit(self, lab: Lab) -> str | None:
        """Why this cluster cannot have the fault (its check would skip, or there is no instance to break)."""
        if self.needs_workers and not lab.workers:
            return _("the cluster has no worker")
        return self.needs(lab) if self.needs else None


def targets(lab: Lab) -> dict[str, str]:
    """The machines a fault's texts name: the first and last control-plane node, worker and etcd member."""
    cps, workers, etcd = lab.control_plane, lab.workers, lab.etcd_members
    return {"cp": cps[0] if cps else "?", "last_cp": cps[-1] if cps else "?",
            "first_worker": workers[0] if workers else "?", "last_worker": workers[-1] if workers else "?",
            "last_worker_index": str(len(workers) - 1), "last_etcd": etcd[-1] if etcd else "?",
            "control_plane": ", ".join(cps), "etcd": ", ".join(etcd), "nodes": ", ".join(lab.nodes),
            # C32's fault stops CRI-O on the last worker that runs it (a cluster without one cannot have the fault)
            "crio_worker": (crio_workers(lab) or workers or ["?"])[-1]}


def fill(template: str, values: dict[str, str]) -> str:
    """``{name}`` replaced by its value (only the names of ``values``: a regex keeps its other braces)."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def fields(text: str) -> set[str]:
    """The names of a text's ``{placeholders}``: as ``format`` reads a message of the catalogs, as ``fill`` any other
    text."""
    if isinstance(text, Text):
        return {name for _text, name, _spec, _conv in string.Formatter().parse(text.msgid) if name}
    return set(re.findall(r"\{(\w+)\}", text))


def filled(text: str, names: dict[str, str]) -> str:
    """A symptom or reveal with its ``{placeholders}`` filled: the machines' ``names`` (targets()) and CONSTANTS. A
    message of the catalogs (a Text) stays one: its str value is the English text, and ``tr`` shows the translation
    filled with the same names. Any other text (a test's own fault) is filled as ``fill`` does."""
    values = {**CONSTANTS, **names}
    if isinstance(text, Text):
        return text.format(**{name: values[name] for name in fields(text)})
    return fill(text, values)


# --------------------------------------------------------------------------
# Putting faults in: each records its undo steps (journal.step) before the change they undo


def active_services(lab: Lab, node: str) -> list[str]:
    return lab.sh(node, "systemctl list-units --type=service --state=active --no-legend --plain | "
                        "awk '{print $1}'").split()


def stop(lab: Lab, journal: Journal, nodes: list[str], unit: str) -> None:
    """A unit stopped; undone: started again, with every service that systemd stopped along with it (kubelet
    requires containerd), then the cluster healthy again."""
    before = {node: active_services(lab, node) for node in nodes}
    journal.step("wait_healthy", timeout=SETTLE)
    for node in nodes:
        journal.step("start_units", node=node, units=[unit, *before[node]])
    for node in nodes:
        lab.sh(node, f"systemctl stop {unit}")


def unstoppable(lab: Lab, journal: Journal, nodes: list[str], *units: str) -> None:
    """`systemctl stop` leaves the components running (a drop-in with KillMode=none, ExecStop=/bin/true): the claim
    that they stopped is false."""
    journal.step("wait_healthy", timeout=SETTLE)
    for node in nodes:
        for unit in units:
            dropin = f"/etc/systemd/system/{unit}.service.d/{DROPIN}"
            journal.step("release_unstoppable", node=node, unit=unit, dropin=dropin)
            lab.sh(node, f"mkdir -p $(dirname {dropin}) && printf '[Service]\\nKillMode=none\\nExecStop=/bin/true\\n'"
                         f" > {dropin} && systemctl daemon-reload")


def masquerade(lab: Lab, journal: Journal, node: str, unit: str) -> None:
    """The unit is active, but what it runs is not the component: its ExecStart replaced by a sleep."""
    dropin = f"/etc/systemd/system/{unit}.service.d/{DROPIN}"
    before = active_services(lab, node)
    journal.step("wait_healthy", timeout=SETTLE)
    journal.step("start_units", node=node, units=before)
    journal.step("remove_dropin", node=node, unit=unit, dropin=dropin)
    lab.sh(node, f"mkdir -p $(dirname {dropin}) && printf '[Service]\\nExecStart=\\nExecStart=/bin/sleep infinity\\n"
                 f"Type=simple\\n' > {dropin} && systemctl daemon-reload && systemctl restart {unit}")


def stray_etcd(lab: Lab, journal: Journal, node: str) -> None:
    """A real control-plane component, etcd, running on a machine outside any unit of its own (started from a
    shell, as someone trying things out would): the binary of an etcd member, serving on loopback only."""
    journal.step("remove_paths", node=node, paths=[STRAY, "/tmp/lab-stray-etcd", "/tmp/lab-stray-etcd.log"])
    journal.step("kill_processes", node=node, pattern=f"{STRAY[:-1]}[{STRAY[-1]}]/etcd")
    bin_dir = lab.path("bin_dir")
    with tempfile.TemporaryDirectory() as tmp:
        lab.host(lab.etcd_members[0]).ansible("fetch", f"src={bin_dir}/etcd dest={tmp}/etcd flat=yes", check=False)
        lab.sh(node, f"mkdir -p {STRAY}")
        put = lab.host(node).ansible("copy", f"src={tmp}/etcd dest={STRAY}/etcd mode=0755", check=False)
    if lab.sh(node, f"test -x {STRAY}/etcd && echo yes", check=False) != "yes":
        raise LabError(_("{node}: could not copy etcd's binary to {path}: {output}").format(
            node=node, path=f"{STRAY}/etcd", output=put))
    # No `cd dir &&` before the `&`: the whole list would run in a subshell that waits for etcd and keeps
    # the ssh session open.
    lab.sh(node, f"setsid nohup {STRAY}/etcd --data-dir /tmp/lab-stray-etcd "
                 "--listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 "
                 "--listen-peer-urls http://127.0.0.1:23800 --listen-metrics-urls http://127.0.0.1:23810 "
                 ">/tmp/lab-stray-etcd.log 2>&1 < /dev/null &")
    wait_for(lambda: lab.sh(node, "ss -Hltn 'sport = :23790'", check=False), 30, _("the stray etcd to listen"))


def taint_workload_node(lab: Lab, journal: Journal, node: str) -> None:
    """The control-plane taint put on a control-plane node that takes workloads (the single profile)."""
    journal.step("untaint", node=node, key=CP_TAINT, effect="NoSchedule")
    taint_op(lab, node, CP_TAINT, "NoSchedule")


def untaint(lab: Lab, journal: Journal, node: str) -> None:
    """The control-plane taint removed from a node."""
    journal.step("taint", node=node, key=CP_TAINT, effect="NoSchedule")
    body = lab.core.read_node(node)
    lab.core.patch_node(node, {"spec": {"taints": [t.to_dict() for t in body.spec.taints or []
                                                   if t.key != CP_TAINT]}})


def edit_file(lab: Lab, journal: Journal, nodes: list[str], path: str, edit: Callable[[str], str], unit: str) -> None:
    """A component's configuration file changed (``edit``: text -> text) and the component restarted; undone: the
    original file (a byte-for-byte copy, mode and times kept) put back, the component restarted, the cluster
    healthy again."""
    backup = f"{path}{BACKUP}"
    journal.step("wait_healthy", timeout=SETTLE)
    journal.step("restart_units", nodes=list(nodes), unit=unit)
    for node in nodes:
        text = edit(lab.sh(node, f"cat {path}"))
        journal.step("restore_file", node=node, path=path, backup=backup)
        lab.sh(node, f"cp -a {path} {backup}")
        data = base64.b64encode(text.encode()).decode()
        lab.sh(node, f"echo {data} | base64 -d > {path}")
    restart(lab, list(nodes), unit)
    if unit in LEADER_LEASES:
        leading_again(lab, unit)


def leading_again(lab: Lab, unit: str) -> None:
    """A leader-elected component's change is in effect once one of its restarted processes leads: its Lease
    renewed after every restart was done, which no process from before can do (after the old leader's lease has run
    out: 15 s), and, for the controller manager, once its controllers act. Otherwise a check would meet a cluster
    that starts no pod for a while, and fail for that instead of for the fault."""
    done = lab.server_now() + datetime.timedelta(seconds=1)  # the Date header counts whole seconds

    def leads() -> bool:
        spec = lab.coordination.read_namespaced_lease(unit, "kube-system", _request_timeout=10).spec
        return bool(spec.holder_identity and spec.renew_time and spec.renew_time > done)

    wait_for(leads, LEADER_TAKEOVER, _("a restarted {unit} to lead").format(unit=unit), 1)
    if unit == "kube-controller-manager":
        lab.wait_controllers_act(LEADER_TAKEOVER)


def rogue_etcd_client(lab: Lab, journal: Journal, node: str) -> None:
    """Another program than the API server holding a watch on etcd (etcdctl's binary under another name)."""
    journal.step("remove_paths", node=node, paths=[ROGUE])
    journal.step("stop_unit", node=node, unit=ROGUE_UNIT)
    lab.sh(node, f"install -m 0755 $(command -v etcdctl) {ROGUE}")
    lab.sh(node, f"systemd-run --unit={ROGUE_UNIT} --collect /bin/sh -c "
                 f"'. {lab.path('etcd_config_dir')}/etcdctl.env && exec {ROGUE} watch /lab-falsify'")
    port = (lab.setting("ports") or {}).get("etcd_client")
    wait_for(lambda: "rogue-client" in lab.sh(node, f"ss -Htnp state established '( dport = :{port} )'"), 30,
             _("the rogue client's connection to etcd"))


def grant(lab: Lab, journal: Journal, name: str, subject: dict, rules: list[dict] | None = None,
          role: str | None = None) -> None:
    """RBAC rights for a subject: a ClusterRole (``rules``) or an existing ``role``, bound to it."""
    if rules is not None:
        journal.step("delete_object", kind="ClusterRole", name=name)
    journal.step("delete_object", kind="ClusterRoleBinding", name=name)
    if rules is not None:
        lab.rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    lab.rbac.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [subject], "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role or name}})


def deny_greetings(lab: Lab, journal: Journal) -> None:
    """A ValidatingAdmissionPolicy that refuses the lab controller's writes (ConfigMaps named *-greeting) in the
    C15 namespaces: the controller runs but cannot reconcile."""
    from kubernetes.client.rest import ApiException

    from labs.lab import LAB_LABEL

    name = "lab-falsify-c15"
    journal.step("delete_object", kind="ValidatingAdmissionPolicy", name=name)
    journal.step("delete_object", kind="ValidatingAdmissionPolicyBinding", name=name)
    lab.admission.create_validating_admission_policy({"metadata": {"name": name}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE", "UPDATE"],
                                                "resources": ["configmaps"]}]},
        "validations": [{"expression": "!object.metadata.name.endsWith('-greeting')",
                         "message": "greetings are refused (lab falsification)"}]}})
    lab.admission.create_validating_admission_policy_binding({"metadata": {"name": name}, "spec": {
        "policyName": name, "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {LAB_LABEL: "C15"}}}}})
    # The policy takes effect once the API servers have loaded it: probe until a greeting is refused.
    probe = f"lab-c15-probe-{uuid.uuid4().hex[:5]}"
    journal.step("delete_object", kind="Namespace", name=probe)
    lab.core.create_namespace({"metadata": {"name": probe, "labels": {LAB_LABEL: "C15"}}})
    try:
        def refused():
            try:
                lab.core.create_namespaced_config_map(probe, {"metadata": {"name": f"p{uuid.uuid4().hex[:4]}"
                                                                                  "-greeting"}})
            except ApiException as exc:
                return exc.status in (400, 403, 422)
            return False
        wait_for(refused, 60, _("the admission policy to refuse greetings"), 1)
    finally:
        lab.core.delete_namespace(probe)


def vip_holder(lab: Lab) -> str:
    vip = lab.server.split("//")[1].rsplit(":", 1)[0]
    return next(n for n in lab.control_plane if vip in lab.sh(n, "ip -4 -o addr show", check=False))


# the edits of configuration files


def yaml_edit(change: Callable[[dict], None]) -> Callable[[str], str]:
    """An ``edit`` for edit_file that changes the parsed YAML document in place."""
    def edit(text: str) -> str:
        doc = yaml.safe_load(text)
        change(doc)
        return yaml.safe_dump(doc, sort_keys=False)
    return edit


def identity_first(doc: dict) -> None:
    """Encryption config: store new data as plain text (the identity provider writes)."""
    for res in doc["resources"]:
        res["providers"].sort(key=lambda p: "identity" not in p)


def kubelet_open(doc: dict) -> None:
    """kubelet config: anonymous requests allowed, everything authorized."""
    doc["authentication"]["anonymous"]["enabled"] = True
    doc["authorization"] = {"mode": "AlwaysAllow"}


def scheduler_ignores_requests(doc: dict) -> None:
    """Scheduler config: the filter that compares requests with free resources switched off."""
    doc["profiles"] = [{"schedulerName": "default-scheduler",
                        "plugins": {"filter": {"disabled": [{"name": "NodeResourcesFit"}]}}}]


def scheduler_ignores_cordons(doc: dict) -> None:
    """Scheduler config: the filters that keep pods off cordoned nodes switched off: NodeUnschedulable, and
    TaintToleration (a cordoned node also gets the node.kubernetes.io/unschedulable:NoSchedule taint)."""
    doc["profiles"] = [{"schedulerName": "default-scheduler",
                        "plugins": {"filter": {"disabled": [{"name": "NodeUnschedulable"},
                                                            {"name": "TaintToleration"}]}}}]


def etcd_open_to_all(text: str) -> str:
    """etcd unit: clients need no certificate from etcd's CA (the peers' flags stay)."""
    text = re.sub(r"(\s)--client-cert-auth=true", r"\1--client-cert-auth=false", text)
    return re.sub(r"^\s*--trusted-ca-file=\S+ \\\n", "", text, flags=re.M)


def authorize_everything(text: str) -> str:
    """kube-apiserver unit: every authenticated request is allowed."""
    return re.sub(r"--authorization-mode=\S+", "--authorization-mode=AlwaysAllow", text)


def no_taint_eviction(unit: str) -> str:
    """kube-controller-manager's unit: every controller but the one that evicts pods from NoExecute-tainted nodes."""
    return unit.replace("--leader-elect=true", "--leader-elect=true --controllers=*,-taint-eviction-controller", 1)


# what a cluster needs for some faults (the same as their checks need, which skip otherwise)


def three_etcd_members(lab: Lab) -> str | None:
    """three etcd members (PROFILE=ha)"""
    n = len(lab.etcd_members)
    return None if n >= 3 else _("it needs three etcd members; this cluster has {n} (PROFILE=ha has three)").format(n=n)


def several_control_plane_nodes(lab: Lab) -> str | None:
    """several control-plane nodes (PROFILE=ha)"""
    n = len(lab.control_plane)
    return None if n >= 2 else _("it needs several control-plane nodes; this cluster has {n} (PROFILE=ha has "
                                 "three)").format(n=n)


def control_plane_takes_workloads(lab: Lab) -> str | None:
    """a control plane that takes workloads (PROFILE=single)"""
    return None if lab.control_plane_workloads else _("it needs a control plane that takes workloads; this "
                                                      "cluster's carries the control-plane taint (PROFILE=single "
                                                      "takes workloads)")


def control_plane_tainted(lab: Lab) -> str | None:
    """a control plane that keeps workloads off (every profile but single)"""
    return None if not lab.control_plane_workloads else _("it needs a control plane that keeps workloads off; this "
                                                          "cluster's takes workloads (PROFILE=default keeps them "
                                                          "off)")


def crio_worker(lab: Lab) -> str | None:
    """a worker on CRI-O beside nodes on another runtime (PROFILE=runtimes)"""
    several = len({lab.runtime(n) for n in lab.nodes}) > 1
    return None if several and crio_workers(lab) else _("it needs a worker on CRI-O beside nodes on another runtime "
                                                         "(PROFILE=runtimes)")


def crio_workers(lab: Lab) -> list[str]:
    return [w for w in lab.workers if lab.runtime(w) == "crio"]


def external_etcd(lab: Lab) -> str | None:
    """etcd on machines of its own (PROFILE=external-etcd)"""
    return None if lab.external_etcd else _("it needs etcd on machines of its own; this cluster stacks etcd on the "
                                            "control-plane nodes (PROFILE=external-etcd has them)")


# what each of them asks of the cluster, as `lab break --list` says it
REQUIREMENTS = {three_etcd_members: _("three etcd members (PROFILE=ha)"),
                several_control_plane_nodes: _("several control-plane nodes (PROFILE=ha)"),
                external_etcd: _("etcd on machines of its own (PROFILE=external-etcd)"),
                control_plane_takes_workloads: _("a control plane that takes workloads (PROFILE=single)"),
                control_plane_tainted: _("a control plane that keeps workloads off (every profile but single)"),
                crio_worker: _("a worker on CRI-O beside nodes on another runtime (PROFILE=runtimes)")}


# --------------------------------------------------------------------------
# The catalogue

UNDO_PUTS_BACK = _("`lab break --undo` puts the original back and restarts the component.")
# What the reveals name besides the machines: paths and units of the faults, the same on every cluster.
CONSTANTS = {"backup": BACKUP, "dropin": DROPIN, "stray": STRAY, "rogue": ROGUE, "rogue_unit": ROGUE_UNIT,
             "cp_taint": CP_TAINT, "undo": UNDO_PUTS_BACK}


def config(lab: Lab, name: str) -> str:
    return f"{lab.path('config_dir')}/{name}"


CATALOGUE = [
    Fault("C01", "C01", lambda lab, j: stray_etcd(lab, j, lab.workers[-1]),
          symptom=_("One of the machines runs more than its role says it should."),
          reveal=_("A real etcd was started by hand on {last_worker}, a worker, in no unit of its own: the binary of "
                   "an etcd member copied to {stray}/etcd, started from a shell (setsid nohup, data in "
                   "/tmp/lab-stray-etcd, listening on 127.0.0.1:23790 only). Find it with `ps`; kill it and remove "
                   "its files."),
          reason=r"{last_worker} \(worker\) runs control-plane components: pid \d+ /usr/local/sbin/lab-stray/etcd"),
    Fault("C02", "C02", lambda lab, j: untaint(lab, j, lab.control_plane[-1]),
          symptom=_("Ordinary pods might now be placed on a machine they are meant to stay off."),
          reveal=_("The {cp_taint}:NoSchedule taint was removed from {last_cp} (`kubectl describe node {last_cp}"
                   "`). `kubectl taint` puts it back."),
          reason=r"{last_cp} lacks the NoSchedule taint", needs=control_plane_tainted),
    Fault("C02-single", "C02", lambda lab, j: taint_workload_node(lab, j, lab.control_plane[-1]),
          symptom=_("Ordinary pods might now be kept off the one machine that is meant to run them."),
          reveal=_("{last_cp} takes workloads, yet now carries the {cp_taint}:NoSchedule taint (`kubectl describe "
                   "node {last_cp}`). `kubectl taint node {last_cp} {cp_taint}:NoSchedule-` takes it off."),
          reason=r"{last_cp} takes workloads, yet carries the taint", needs=control_plane_takes_workloads,
          needs_workers=False),
    Fault("C03", "C03", lambda lab, j: masquerade(lab, j, lab.workers[-1], "kube-proxy"),
          symptom=_("`systemctl` says every component runs, yet on one node a component is not what it says it is."),
          reveal=_("On {last_worker}, kube-proxy.service is active but runs `/bin/sleep infinity`: a drop-in "
                   "(/etc/systemd/system/kube-proxy.service.d/{dropin}) replaced its ExecStart. Remove the drop-in, "
                   "`systemctl daemon-reload`, restart kube-proxy."),
          reason=r"{last_worker}: kube-proxy.service is active, its main process pid \d+ /\S*sleep"),
    Fault("C04", "C04", lambda lab, j: rogue_etcd_client(lab, j, lab.control_plane[0]),
          symptom=_("Something besides the usual components talks to the cluster's database."),
          reveal=_("On {cp}, etcdctl's binary installed as {rogue} runs in a unit of its own ({rogue_unit}, "
                   "systemd-run) with the healthcheck client certificate, holding a watch on etcd. Stop the unit, "
                   "remove the binary."),
          reason=r"{cp}: .* -> etcd .* is held by pid \d+ /usr/local/sbin/rogue-client"),
    Fault("C04-member", "C04",
          lambda lab, j: edit_file(lab, j, [lab.etcd_members[-1]], "/etc/systemd/system/etcd.service",
                                   etcd_open_to_all, "etcd"),
          symptom=_("The cluster's database may accept connections that it should refuse."),
          reveal=_("The etcd member on {last_etcd} accepts clients without a certificate: --client-cert-auth=false "
                   "and no --trusted-ca-file in its unit, /etc/systemd/system/etcd.service (the original is beside "
                   "it, *{backup}). {undo}"),
          reason=r"etcd {last_etcd} answered a client without a certificate"),
    Fault("C05", "C05",
          lambda lab, j: edit_file(lab, j, [lab.control_plane[-1]], "/etc/systemd/system/kube-apiserver.service",
                                   authorize_everything, "kube-apiserver"),
          symptom=_("Depending on which API server answers, a caller may do things it was never granted."),
          reveal=_("The API server on {last_cp} runs with --authorization-mode=AlwaysAllow (its unit file "
                   "/etc/systemd/system/kube-apiserver.service; the original beside it, *{backup}). {undo}"),
          reason=r"{last_cp} \(https://\S+\): ServiceAccount without rights: status allowed!"),
    Fault("C06", "C06",
          lambda lab, j: edit_file(lab, j, [lab.control_plane[-1]], config(lab, "encryption-config.yaml"),
                                   yaml_edit(identity_first), "kube-apiserver"),
          symptom=_("Depending on which API server stored them, new Secrets may be readable by anyone who can read the "
                    "database."),
          reveal=_("The API server on {last_cp} writes new Secrets in plain text: its encryption-config.yaml lists the "
                   "identity provider first (the original beside it, *{backup}). {undo}"),
          reason=r"Secret written through {last_cp}'s API server .* is not stored encrypted"),
    Fault("C07", "C07", lambda lab, j: stop(lab, j, lab.nodes, "kube-proxy"),
          symptom=_("A kind of client no longer follows the cluster's changes: new Services are acted upon nowhere."),
          reveal=_("kube-proxy was stopped on every node ({nodes}): nobody watches Services and EndpointSlices."),
          reason=r"kube-proxy \(system:kube-proxy\) holds no open watch"),
    Fault("C07-scheduler", "C07", lambda lab, j: stop(lab, j, lab.control_plane, "kube-scheduler"),
          symptom=_("New pods stay Pending."),
          reveal=_("kube-scheduler was stopped on every control-plane node ({control_plane}): its watches are gone."),
          reason=r"kube-scheduler \(system:kube-scheduler\) holds no open watch"),
    Fault("C08", "C08", lambda lab, j: unstoppable(lab, j, lab.etcd_members, "etcd"),
          symptom=_("Stopping the cluster's database for maintenance no longer seems to take it down."),
          reveal=_("etcd cannot be stopped on {etcd}: a drop-in ({dropin}: KillMode=none, ExecStop=/bin/true) makes "
                   "`systemctl stop etcd` leave etcd serving."),
          reason=r"waiting for API writes to fail without etcd"),
    Fault("C09", "C09", lambda lab, j: unstoppable(lab, j, lab.etcd_members, "etcd"), needs=three_etcd_members,
          symptom=_("Writes go on even with two of the three database members stopped."),
          reveal=_("etcd cannot be stopped on {etcd}: a drop-in ({dropin}: KillMode=none, ExecStop=/bin/true) makes "
                   "`systemctl stop etcd` leave each member serving."),
          reason=r"waiting for writes to fail with two members down"),
    Fault("C10", "C10", lambda lab, j: unstoppable(lab, j, lab.control_plane, "kube-scheduler"),
          symptom=_("Pods are still placed while the scheduler is stopped."),
          reveal=_("kube-scheduler cannot be stopped on {control_plane}: a drop-in ({dropin}: KillMode=none, "
                   "ExecStop=/bin/true) makes `systemctl stop kube-scheduler` leave it running."),
          reason=r"the pod got node '\S+' without a scheduler"),
    Fault("C11", "C11",
          lambda lab, j: edit_file(lab, j, lab.control_plane, config(lab, "kube-scheduler.yaml"),
                                   yaml_edit(scheduler_ignores_requests), "kube-scheduler"),
          symptom=_("A pod that asks for more than any node has is placed anyway."),
          reveal=_("The scheduler ignores resource requests: kube-scheduler.yaml on {control_plane} disables the "
                   "NodeResourcesFit filter (the original beside it, *{backup}). {undo}"),
          reason=r"FailedScheduling for the big pod|pod asking \d+ CPUs: node \S+"),
    Fault("C11-cordon", "C11",
          lambda lab, j: edit_file(lab, j, lab.control_plane, config(lab, "kube-scheduler.yaml"),
                                   yaml_edit(scheduler_ignores_cordons), "kube-scheduler"),
          symptom=_("Pods land on nodes that were taken out of service."),
          reveal=_("The scheduler places pods on cordoned nodes: kube-scheduler.yaml on {control_plane} disables the "
                   "NodeUnschedulable and TaintToleration filters (the original beside it, *{backup}). "
                   "{undo}"),
          reason=r"new replica \S+: on \S+ \(cordoned node: {first_worker}\)"),
    Fault("C13", "C13", lambda lab, j: unstoppable(lab, j, lab.control_plane, "kube-controller-manager"),
          symptom=_("The controllers go on working while kube-controller-manager is stopped."),
          reveal=_("kube-controller-manager cannot be stopped on {control_plane}: a drop-in ({dropin}: "
                   "KillMode=none, ExecStop=/bin/true) makes `systemctl stop` leave it running."),
          reason=r"pods appeared without the controller manager"),
    Fault("C14", "C14", lambda lab, j: unstoppable(lab, j, [lab.workers[-1]], "kubelet"),
          symptom=_("A worker whose kubelet is stopped still looks fine to the cluster."),
          reveal=_("kubelet cannot be stopped on {last_worker}: a drop-in ({dropin}: KillMode=none, "
                   "ExecStop=/bin/true) makes `systemctl stop kubelet` leave it running and reporting."),
          reason=r"waiting for {last_worker} to be marked not Ready"),
    Fault("C15", "C15", deny_greetings,
          symptom=_("The lab's own controller runs, but its work never shows up."),
          reveal=_("A ValidatingAdmissionPolicy (and its binding), lab-falsify-c15, refuses every ConfigMap named "
                   "*-greeting in the C15 namespaces: the controller cannot write what it derives. `kubectl get "
                   "validatingadmissionpolicies,validatingadmissionpolicybindings`."),
          reason=r"waiting for the controller to create team-greeting"),
    Fault("C16", "C16", lambda lab, j: stop(lab, j, [lab.workers[-1]], "kubelet"),
          symptom=_("One node went quiet."),
          reveal=_("kubelet was stopped on {last_worker} (`systemctl stop kubelet`)."),
          reason=r"{last_worker}: kubelet.service is (inactive|failed|deactivating)"),
    Fault("C17", "C17", lambda lab, j: stop(lab, j, [lab.workers[-1]], "kubelet"),
          symptom=_("Pods bound to one of the workers never start."),
          reveal=_("kubelet was stopped on {last_worker} (`systemctl stop kubelet`): nobody starts the pods bound to "
                   "it."),
          reason=r"waiting for pod lab-c17-\w+/bound-{last_worker_index} to run"),
    Fault("C19", "C19", lambda lab, j: stop(lab, j, [lab.workers[-1]], "kubelet"),
          symptom=_("One node stopped reporting in."),
          reveal=_("kubelet was stopped on {last_worker} (`systemctl stop kubelet`): its Lease is no longer renewed."),
          reason=r"waiting for every node's Lease to be renewed twice"),
    Fault("C20", "C20",
          lambda lab, j: grant(lab, j, "lab-falsify-c20", {"kind": "Group", "name": "system:nodes",
                                                           "apiGroup": "rbac.authorization.k8s.io"},
                               rules=[{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
          symptom=_("Nodes may read more than they need."),
          reveal=_("The group system:nodes may get every Secret: ClusterRole and ClusterRoleBinding lab-falsify-c20 "
                   "(the binding clusters had before the Node authorizer)."),
          reason=r"GET Secret other -> 200, expected 403"),
    Fault("C21", "C21",
          lambda lab, j: edit_file(lab, j, [lab.workers[-1]], "/var/lib/kubelet/config.yaml",
                                   yaml_edit(kubelet_open), "kubelet"),
          symptom=_("One node's kubelet answers callers that it should turn away."),
          reveal=_("The kubelet on {last_worker} allows anonymous requests and authorizes everything (anonymous "
                   "enabled, authorization AlwaysAllow in /var/lib/kubelet/config.yaml; the original beside it, "
                   "*{backup}). {undo}"),
          reason=r"{last_worker}'s kubelet: anonymous GET \S+ -> 200 \(want 401\)"),
    Fault("C23", "C23", lambda lab, j: stop(lab, j, [lab.workers[-1]], "kube-proxy"),
          symptom=_("A new Service gets no network rules on one of the workers."),
          reveal=_("kube-proxy was stopped on {last_worker} (`systemctl stop kube-proxy`)."),
          reason=r"waiting for rules for \S+ on {last_worker}"),
    Fault("C24", "C24", lambda lab, j: stop(lab, j, [lab.workers[0]], "pod-network"),
          symptom=_("A Service does not answer from everywhere."),
          reveal=_("pod-network.service was stopped on {first_worker}: its routes to the other nodes' pod ranges "
                   "are gone (`ip route`)."),
          reason=r"waiting for \d+ answers from \S+ on {first_worker}"),
    Fault("C25", "C25", lambda lab, j: unstoppable(lab, j, [lab.workers[-1]], "kube-proxy"),
          symptom=_("A node whose kube-proxy is stopped still learns new Services."),
          reveal=_("kube-proxy cannot be stopped on {last_worker}: a drop-in ({dropin}: KillMode=none, "
                   "ExecStop=/bin/true) makes `systemctl stop kube-proxy` leave it running."),
          reason=r"{last_worker} has rules for \S+ without kube-proxy"),
    Fault("C26", "C26", lambda lab, j: stop(lab, j, [lab.workers[0]], "pod-network"),
          symptom=_("Pods on one worker cannot reach the pods on other nodes."),
          reveal=_("pod-network.service was stopped on {first_worker}: its routes to the other nodes' pod ranges "
                   "are gone (`ip route`)."),
          reason=r"on-{first_worker} -> \S+: |in \S+/on-{first_worker}: |{first_worker} does not route"),
    Fault("C27", "C27", lambda lab, j: unstoppable(lab, j, lab.control_plane, "etcd", "kube-apiserver"),
          symptom=_("Shutting the control plane down for maintenance no longer takes it down."),
          reveal=_("etcd and kube-apiserver cannot be stopped on {control_plane}: a drop-in ({dropin}: "
                   "KillMode=none, ExecStop=/bin/true) makes `systemctl stop` leave them serving."),
          reason=r"the API still answers writes"),
    Fault("C28", "C28",
          lambda lab, j: stop(lab, j, [n for n in lab.control_plane if n != vip_holder(lab)], "kube-apiserver"),
          needs=several_control_plane_nodes,
          symptom=_("Some control-plane machines no longer serve the API."),
          reveal=_("kube-apiserver was stopped on every control-plane node but the one holding the API address: one "
                   "more lost machine and the API is gone."),
          reason=r"waiting for a write through \S+ with \S+ down"),
    Fault("C29", "C29",
          lambda lab, j: edit_file(lab, j, lab.control_plane, "/etc/systemd/system/kube-controller-manager.service",
                                   no_taint_eviction, "kube-controller-manager"),
          symptom=_("When a worker is lost, its pods are not started anywhere else."),
          reveal=_("kube-controller-manager runs without its taint-eviction controller (--controllers=*,-taint-"
                   "eviction-controller in its unit on {control_plane}; the original beside it, "
                   "*{backup}). {undo}"),
          reason=r"waiting for the pods on {last_worker} to be evicted"),
    Fault("C30", "C30", lambda lab, j: stop(lab, j, [lab.workers[-1]], "kube-proxy"),
          symptom=_("A NodePort Service does not answer on one worker's address."),
          reveal=_("kube-proxy was stopped on {last_worker} (`systemctl stop kube-proxy`)."),
          reason=r"waiting for \d+ answers from http://\S+ \({last_worker}\) on this host"),
    Fault("C31", "C31", lambda lab, j: stray_etcd(lab, j, lab.control_plane[-1]), needs=external_etcd,
          symptom=_("A control-plane node runs something that belongs on the etcd machines only."),
          reveal=_("A real etcd was started by hand on {last_cp}, a control-plane node, in no unit of its own: the "
                   "binary of an etcd member copied to {stray}/etcd, started from a shell (data in "
                   "/tmp/lab-stray-etcd, listening on 127.0.0.1:23790 only)."),
          reason=r"{last_cp} \(control plane\) runs etcd: pid \d+ /usr/local/sbin/lab-stray/etcd"),
    Fault("C32", "C32", lambda lab, j: stop(lab, j, crio_workers(lab)[-1:], "crio"), needs=crio_worker,
          symptom=_("One worker's pods stop being looked after, though the others' are fine."),
          reveal=_("CRI-O was stopped on {crio_worker} (`systemctl stop crio`), and with it the kubelet that requires "
                   "it: nothing answers on its CRI socket. `systemctl start crio kubelet` brings both back."),
          reason=r"{crio_worker}: crictl on unix://\S+/crio\.sock: "),
]
FAULTS: dict[str, Fault] = {f.id: f for f in CATALOGUE}

# Checks without a fault in the catalogue, and why: their falsification stays in the tests.
TEST_ONLY = {
    "C12": _("its claim (a deleted pod is replaced) is made false only once the check's Deployment runs: the "
             "controllers must be there to start it and gone when its pod is deleted, which only a test wrapping the "
             "check's run_deployment can time (tests/e2e/test_labs.py, after_call)"),
    "C18": _("its claim (the kubelet restarts a killed container) is made false only once the check's pod runs on a "
             "node: that node's kubelet must start the pod and be stopped before the kill, which only a test "
             "wrapping the check's run_pod can time"),
    "C22": _("its claim (the runtime holds the running pod's image) is made false only once the check's pod runs: "
             "the image must be there to start it and removed from that node's runtime after, which only a test "
             "wrapping the check's run_pod can time"),
    "C34": _("its claim (a restored snapshot brings the cluster back to the snapshot's moment) is made false only "
             "between the check's later change and its restore: a snapshot taken after that change must take the "
             "place of the check's own, which only a test wrapping the check's later_change can time "
             "(tests/e2e/test_drills.py)"),
}


def faults_of(check_id: str) -> list[Fault]:
    return [f for f in CATALOGUE if f.check == check_id]


@contextlib.contextmanager
def broken(lab: Lab, fault: Fault, path: Path | None = None) -> Iterator[Journal]:
    """The fault in place for the body of the ``with``: recorded (the state folder's record, refused while another
    fault is recorded), put in, and in any case taken out again at the end, the record removed once it is undone.
    Undo problems are raised after every step had its chance."""
    journal = Journal.begin(path or record_path(), fault.id, fault.check, fault.symptom, fault.reveal_for(lab),
                            fault.names(lab))
    try:
        fault.apply(lab, journal)
        journal.finish()
        yield journal
    finally:
        errors = undo(lab, journal)
        if errors:
            raise LabError(f"could not undo fault {fault.id}: {'; '.join(errors)}")
