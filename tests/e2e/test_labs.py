"""The lab's checks on a live ha cluster: every check passes; each check fails
while its claim is made false (falsification); the disruptive checks leave the
cluster as healthy as they found it, even run twice in a row."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import sys
import tempfile
import uuid

import pytest
import yaml
from conftest import lab_check
from kubernetes.client.rest import ApiException

from labs.kube import test_image
from labs.lab import LAB_LABEL, Lab
from labs.registry import load_checks
from labs.runner import run_check
from labs.timing import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.labs]


@pytest.fixture(scope="module")
def lab(cluster_up):
    cluster_up("ha")
    lab = Lab()
    lab.ping()
    return lab


def lab_namespaces(lab: Lab) -> list[str]:
    return [n.metadata.name for n in lab.core.list_namespace(label_selector=LAB_LABEL).items
            if n.status.phase != "Terminating"]


def assert_healthy(lab: Lab) -> None:
    """All nodes Ready, every component running, no namespace of a check left behind."""
    assert lab.ready_nodes() == sorted(lab.nodes)
    for node in lab.machines:
        for unit in lab.control_plane_components(node):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    for node in lab.nodes:
        for unit in ("kubelet", "kube-proxy", "containerd"):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    assert not lab_namespaces(lab)


def test_every_check_passes_and_leaves_the_cluster_healthy(lab, tmp_path):
    """`lab check --all` (the disruptive checks once), then the cluster is as healthy as before: all nodes Ready,
    every component running, no namespace left behind. With `make test-labs` (K8S_LAB_LABS_FULL=1), the disruptive
    checks once more in a row first; `make test` instead ends with test_after_every_falsification_the_checks_pass,
    after the falsification tests have broken and restored the cluster 33 more times."""
    report = tmp_path / "report.json"
    rc, out = lab_check("--all", "--json", str(report), "--junit", str(tmp_path / "r.xml"),
                        "--markdown", str(tmp_path / "r.md"))
    results = json.loads(report.read_text())
    # ha has every topology but an external etcd's (C31: skipped, with its reason)
    skipped = {r["id"]: r["message"] for r in results if r["status"] == "skipped"}
    assert sorted(skipped) == sorted(CASES_ELSEWHERE) and all(skipped.values()), skipped
    bad = {r["id"]: r["message"] for r in results if r["status"] not in ("passed", "skipped")}
    assert not bad, bad
    assert rc == 0
    assert len(results) == len(load_checks())

    if os.environ.get("K8S_LAB_LABS_FULL") == "1":
        disruptive = [c.id for c in load_checks().values() if c.disruptive]
        again = tmp_path / "again.json"
        rc, out = lab_check(*disruptive, "--json", str(again))
        bad = {r["id"]: r["message"] for r in json.loads(again.read_text()) if r["status"] != "passed"}
        assert not bad and rc == 0, (bad, out[-3000:])
    assert_healthy(lab)


# --- falsification: make each claim false, see its check fail, restore ------------------


@contextlib.contextmanager
def unstoppable(lab: Lab, nodes: list[str], *units: str):
    """`systemctl stop` leaves the components running: the claim that they stopped is false."""
    for node in nodes:
        for unit in units:
            dropin = f"/etc/systemd/system/{unit}.service.d/zz-lab-falsify.conf"
            lab.sh(node, f"mkdir -p $(dirname {dropin}) && printf '[Service]\\nKillMode=none\\nExecStop=/bin/true\\n'"
                         f" > {dropin} && systemctl daemon-reload")
    try:
        yield
    finally:
        for node in nodes:
            for unit in units:
                dropin = f"/etc/systemd/system/{unit}.service.d/zz-lab-falsify.conf"
                lab.sh(node, f"rm -f {dropin} && systemctl daemon-reload && pkill -x {unit[:15]} ; sleep 1; "
                             f"systemctl reset-failed {unit} ; "
                             f"systemctl restart --no-block {unit}", check=False)
        lab.wait_healthy(timeout=240)


def active_services(lab: Lab, node: str) -> list[str]:
    return lab.sh(node, "systemctl list-units --type=service --state=active --no-legend --plain | "
                        "awk '{print $1}'").split()


@contextlib.contextmanager
def stopped(lab: Lab, nodes: list[str], unit: str):
    """A unit stopped; afterwards it is started again, with every service that systemd stopped along with it
    (kubelet requires containerd)."""
    before = {node: active_services(lab, node) for node in nodes}
    for node in nodes:
        lab.sh(node, f"systemctl stop {unit}")
    try:
        yield
    finally:
        for node in nodes:
            lab.sh(node, f"systemctl start --no-block {unit} {' '.join(before[node])}", check=False)
        lab.wait_healthy(timeout=240)


@contextlib.contextmanager
def stray_etcd(lab: Lab, node: str):
    """A real control-plane component, etcd, running on a machine outside any unit of its own (started from a shell,
    as someone trying things out would): the binary of an etcd member, serving on loopback only."""
    with tempfile.TemporaryDirectory() as tmp:
        lab.host(lab.etcd_members[0]).ansible("fetch", f"src=/usr/local/bin/etcd dest={tmp}/etcd flat=yes",
                                              check=False)
        lab.sh(node, "mkdir -p /usr/local/sbin/lab-stray")
        put = lab.host(node).ansible("copy", f"src={tmp}/etcd dest=/usr/local/sbin/lab-stray/etcd mode=0755",
                                     check=False)
    assert lab.sh(node, "test -x /usr/local/sbin/lab-stray/etcd && echo yes", check=False) == "yes", put
    # No `cd dir &&` before the `&`: the whole list would run in a subshell that waits for etcd and keeps
    # the ssh session open.
    lab.sh(node, "setsid nohup /usr/local/sbin/lab-stray/etcd --data-dir /tmp/lab-stray-etcd "
                 "--listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 "
                 "--listen-peer-urls http://127.0.0.1:23800 --listen-metrics-urls http://127.0.0.1:23810 "
                 ">/tmp/lab-stray-etcd.log 2>&1 < /dev/null &")
    wait_for(lambda: lab.sh(node, "ss -Hltn 'sport = :23790'", check=False), 30, "the stray etcd to listen")
    try:
        yield
    finally:
        lab.sh(node, "pkill -f '/usr/local/sbin/lab-stra[y]/etcd'; sleep 1; "
                     "rm -rf /usr/local/sbin/lab-stray /tmp/lab-stray-etcd /tmp/lab-stray-etcd.log", check=False)


@contextlib.contextmanager
def masquerade(lab: Lab, node: str, unit: str):
    """The unit is active, but what it runs is not the component: its ExecStart replaced by a sleep."""
    dropin = f"/etc/systemd/system/{unit}.service.d/zz-lab-falsify.conf"
    before = active_services(lab, node)
    lab.sh(node, f"mkdir -p $(dirname {dropin}) && printf '[Service]\\nExecStart=\\nExecStart=/bin/sleep infinity\\n"
                 f"Type=simple\\n' > {dropin} && systemctl daemon-reload && systemctl restart {unit}")
    try:
        yield
    finally:
        lab.sh(node, f"rm -f {dropin} && systemctl daemon-reload && systemctl restart {unit}; "
                     f"systemctl start --no-block {' '.join(before)}", check=False)
        lab.wait_healthy(timeout=240)


@contextlib.contextmanager
def image_removed(lab: Lab, node: str, image: str):
    """The runtime no longer holds the image of a running container (removed from containerd's k8s.io
    namespace); put back afterwards from the archive the containerd role imported it from."""
    lab.sh(node, f"ctr -n k8s.io images rm {image}")
    try:
        yield
    finally:
        archive = f"/var/lib/k8s-arch-lab/images/{image.rsplit('/', 1)[-1].split(':')[0]}.tar"
        lab.sh(node, f"ctr -n k8s.io images ls -q | grep -qx '{image}' || "
                     f"ctr -n k8s.io images import --local {archive}", check=False)


@contextlib.contextmanager
def untainted(lab: Lab, node: str):
    taint = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    body = lab.core.read_node(node)
    lab.core.patch_node(node, {"spec": {"taints": [t.to_dict() for t in body.spec.taints or []
                                                   if t.key != taint["key"]]}})
    try:
        yield
    finally:
        current = [t.to_dict() for t in lab.core.read_node(node).spec.taints or []]
        lab.core.patch_node(node, {"spec": {"taints": current + [taint]}})


def vip_holder(lab: Lab) -> str:
    vip = lab.server.split("//")[1].rsplit(":", 1)[0]
    return next(n for n in lab.control_plane if vip in lab.sh(n, "ip -4 -o addr show", check=False))


def api_ready(lab: Lab, node: str, port: str) -> bool:
    """The node's own API server answers /readyz (as an authenticated caller: anonymous requests are refused)."""
    pki = "/etc/kubernetes/pki"
    out = lab.sh(node, f"curl -s --max-time 5 --cacert {pki}/ca.crt --cert {pki}/apiserver-kubelet-client.crt "
                       f"--key {pki}/apiserver-kubelet-client.key https://127.0.0.1:{port}/readyz", check=False)
    return out == "ok"


def restart(lab: Lab, nodes: list[str], unit: str) -> None:
    """Restart a unit node by node; an API server must answer again before the next one goes."""
    for node in nodes:
        lab.sh(node, f"systemctl daemon-reload && systemctl restart {unit}")
        if unit == "kube-apiserver":
            port = lab.unit_arg(node, "kube-apiserver", "secure-port") or "6443"
            wait_for(lambda n=node, p=port: api_ready(lab, n, p), 120, f"the API server on {node}")


@contextlib.contextmanager
def edited(lab: Lab, nodes: list[str], path: str, edit, unit: str):
    """A component's configuration file changed (``edit``: text -> text) and the component restarted; the
    original file (a byte-for-byte copy, mode and times kept) put back and the component restarted after."""
    backup = f"{path}.lab-falsify"
    changed = []
    try:
        for node in nodes:
            text = edit(lab.sh(node, f"cat {path}"))
            lab.sh(node, f"cp -a {path} {backup}")
            changed.append(node)
            data = base64.b64encode(text.encode()).decode()
            lab.sh(node, f"echo {data} | base64 -d > {path}")
        restart(lab, nodes, unit)
        yield
    finally:
        for node in changed:
            lab.sh(node, f"mv -f {backup} {path}", check=False)
        restart(lab, changed, unit)
        lab.wait_healthy(timeout=240)


def no_taint_eviction(unit: str) -> str:
    """kube-controller-manager's unit: every controller but the one that evicts pods from NoExecute-tainted nodes."""
    return unit.replace("--leader-elect=true", "--leader-elect=true --controllers=*,-taint-eviction-controller", 1)


def yaml_edit(change):
    """An ``edit`` for ``edited`` that changes the parsed YAML document in place."""
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


@contextlib.contextmanager
def rogue_etcd_client(lab: Lab, node: str):
    """Another program than the API server holding a watch on etcd (etcdctl's binary under another name)."""
    unit = "lab-falsify-rogue"
    lab.sh(node, "install -m 0755 $(command -v etcdctl) /usr/local/sbin/rogue-client")
    lab.sh(node, f"systemd-run --unit={unit} --collect /bin/sh -c "
                 "'. /etc/etcd/etcdctl.env && exec /usr/local/sbin/rogue-client watch /lab-falsify'")
    wait_for(lambda: "rogue-client" in lab.sh(node, "ss -Htnp state established '( dport = :2379 )'"), 30,
             "the rogue client's connection to etcd")
    try:
        yield
    finally:
        lab.sh(node, f"systemctl stop {unit}; rm -f /usr/local/sbin/rogue-client", check=False)


@contextlib.contextmanager
def cluster_object(lab: Lab, create, delete):
    """A cluster-scoped object (a binding, a policy) that exists while the claim is false."""
    create()
    try:
        yield
    finally:
        delete()


def grant(lab: Lab, name: str, subject: dict, rules: list[dict] | None = None, role: str | None = None):
    """RBAC rights for a subject, while the claim is false: a ClusterRole (``rules``) or an existing ``role``."""
    rbac = lab.rbac

    def create():
        if rules is not None:
            rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
        rbac.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [subject], "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role or name}})

    def delete():
        rbac.delete_cluster_role_binding(name)
        if rules is not None:
            rbac.delete_cluster_role(name)

    return cluster_object(lab, create, delete)


def deny_greetings(lab: Lab):
    """A ValidatingAdmissionPolicy that refuses the lab controller's writes (ConfigMaps named *-greeting) in the
    C15 namespaces: the controller runs but cannot reconcile."""
    from kubernetes import client as k8s

    adm = k8s.AdmissionregistrationV1Api(lab.api_client)
    name = "lab-falsify-c15"

    def create():
        adm.create_validating_admission_policy({"metadata": {"name": name}, "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"],
                                                    "resources": ["configmaps"]}]},
            "validations": [{"expression": "!object.metadata.name.endsWith('-greeting')",
                             "message": "greetings are refused (lab falsification)"}]}})
        adm.create_validating_admission_policy_binding({"metadata": {"name": name}, "spec": {
            "policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {LAB_LABEL: "C15"}}}}})
        # The policy takes effect once the API servers have loaded it: probe until a greeting is refused.
        probe = f"lab-c15-probe-{uuid.uuid4().hex[:5]}"
        lab.core.create_namespace({"metadata": {"name": probe, "labels": {LAB_LABEL: "C15"}}})
        try:
            def refused():
                try:
                    lab.core.create_namespaced_config_map(probe, {"metadata": {"name": f"p{uuid.uuid4().hex[:4]}"
                                                                                      "-greeting"}})
                except ApiException as exc:
                    return exc.status in (400, 403, 422)
                return False
            wait_for(refused, 60, "the admission policy to refuse greetings", 1)
        finally:
            lab.core.delete_namespace(probe)

    def delete():
        adm.delete_validating_admission_policy_binding(name)
        adm.delete_validating_admission_policy(name)

    return cluster_object(lab, create, delete)


@contextlib.contextmanager
def after_call(module, function: str, disrupt):
    """Run the check as it is, but once ``module.function`` has returned (its pod or Deployment runs), make the
    claim false with ``disrupt(result)``, a context manager (e.g. ``stopped``) left at the end of the test. The
    cluster itself is changed, not the check."""
    real = getattr(module, function)
    with contextlib.ExitStack() as falsified:
        def wrapped(*args, **kwargs):
            result = real(*args, **kwargs)
            falsified.enter_context(disrupt(result))
            return result

        setattr(module, function, wrapped)
        try:
            yield
        finally:
            setattr(module, function, real)


def check_module(check_id: str):
    return sys.modules[load_checks()[check_id].func.__module__]


def etcd_open_to_all(doc: dict) -> None:
    """etcd config: clients need no certificate from etcd's CA."""
    doc["client-transport-security"]["client-cert-auth"] = False
    doc["client-transport-security"].pop("trusted-ca-file", None)


def authorize_everything(text: str) -> str:
    """kube-apiserver unit: every authenticated request is allowed."""
    return re.sub(r"--authorization-mode=\S+", "--authorization-mode=AlwaysAllow", text)


def scheduler_ignores_cordons(doc: dict) -> None:
    """Scheduler config: the filters that keep pods off cordoned nodes switched off: NodeUnschedulable, and
    TaintToleration (a cordoned node also gets the node.kubernetes.io/unschedulable:NoSchedule taint)."""
    doc["profiles"] = [{"schedulerName": "default-scheduler",
                        "plugins": {"filter": {"disabled": [{"name": "NodeUnschedulable"},
                                                            {"name": "TaintToleration"}]}}}]


def falsifiers(lab: Lab) -> dict[str, tuple]:
    """Per case: (the check, the falsifier making its claim false, a pattern the failure message must match: the
    reason the check gives is the broken claim, never an unrelated error). Where a check looks at each of several
    instances (etcd members, API servers, kubelets, control-plane nodes, workers), only one of them is broken."""
    cp, last_cp, last_worker = lab.control_plane[0], lab.control_plane[-1], lab.workers[-1]
    etcd = lab.etcd_members
    scheduler_config = "/etc/kubernetes/kube-scheduler.yaml"
    return {
        # a real etcd started by hand on a worker, outside any unit
        "C01": ("C01", lambda: stray_etcd(lab, last_worker),
                rf"{last_worker} \(worker\) runs control-plane components: pid \d+ /usr/local/sbin/lab-stray/etcd"),
        # the control-plane taint removed from one control-plane node
        "C02": ("C02", lambda: untainted(lab, last_cp), rf"{last_cp} lacks the NoSchedule taint"),
        # kube-proxy's unit active on a worker, but running something else
        "C03": ("C03", lambda: masquerade(lab, last_worker, "kube-proxy"),
                rf"{last_worker}: kube-proxy.service is active, its main process pid \d+ /\S*sleep"),
        # a program other than the API server talks to etcd (etcdctl's binary under another name)
        "C04": ("C04", lambda: rogue_etcd_client(lab, cp),
                rf"{cp}: .* -> etcd .* is held by pid \d+ /usr/local/sbin/rogue-client"),
        # one etcd member accepts clients without a certificate
        "C04-member": ("C04", lambda: edited(lab, [etcd[-1]], "/etc/etcd/etcd.conf.yml", yaml_edit(etcd_open_to_all),
                                             "etcd"),
                       rf"etcd {etcd[-1]} answered a client without a certificate"),
        # one API server authorizes everything
        "C05": ("C05", lambda: edited(lab, [last_cp], "/etc/systemd/system/kube-apiserver.service",
                                      authorize_everything, "kube-apiserver"),
                rf"{last_cp} \(https://\S+\): ServiceAccount without rights: status allowed!"),
        # one API server writes new Secrets to etcd in plain text
        "C06": ("C06", lambda: edited(lab, [last_cp], "/etc/kubernetes/encryption-config.yaml",
                                      yaml_edit(identity_first), "kube-apiserver"),
                rf"Secret written through {last_cp}'s API server .* is not stored encrypted"),
        # kube-proxy nowhere: nobody watches Services and EndpointSlices
        "C07": ("C07", lambda: stopped(lab, lab.nodes, "kube-proxy"),
                r"kube-proxy \(system:kube-proxy\) holds no open watch"),
        # no scheduler: its watches are gone
        "C07-scheduler": ("C07", lambda: stopped(lab, lab.control_plane, "kube-scheduler"),
                          r"kube-scheduler \(system:kube-scheduler\) holds no open watch"),
        # `systemctl stop etcd` leaves etcd serving
        "C08": ("C08", lambda: unstoppable(lab, etcd, "etcd"), r"waiting for API writes to fail without etcd"),
        # etcd members that do not stop: writes go on with "two of three down"
        "C09": ("C09", lambda: unstoppable(lab, etcd, "etcd"), r"waiting for writes to fail with two members down"),
        "C10": ("C10", lambda: unstoppable(lab, lab.control_plane, "kube-scheduler"),
                r"the pod got node '\S+' without a scheduler"),
        # the scheduler ignores resource requests
        "C11": ("C11", lambda: edited(lab, lab.control_plane, scheduler_config, yaml_edit(scheduler_ignores_requests),
                                      "kube-scheduler"),
                r"FailedScheduling for the big pod|pod asking \d+ CPUs: node \S+"),
        # the scheduler places pods on cordoned nodes
        "C11-cordon": ("C11", lambda: edited(lab, lab.control_plane, scheduler_config,
                                             yaml_edit(scheduler_ignores_cordons), "kube-scheduler"),
                       rf"new replica \S+: on \S+ \(cordoned node: {lab.workers[0]}\)"),
        # once the Deployment runs, the controllers stop: a deleted pod is not replaced
        "C12": ("C12", lambda: after_call(check_module("C12"), "run_deployment",
                                          lambda _pods: stopped(lab, lab.control_plane, "kube-controller-manager")),
                r"waiting for \d+ ready pods app=web"),
        "C13": ("C13", lambda: unstoppable(lab, lab.control_plane, "kube-controller-manager"),
                r"pods appeared without the controller manager"),
        "C14": ("C14", lambda: unstoppable(lab, [last_worker], "kubelet"),
                rf"waiting for {last_worker} to be marked not Ready"),
        # the API refuses the controller's writes: nothing gets reconciled
        "C15": ("C15", lambda: deny_greetings(lab), r"waiting for the controller to create team-greeting"),
        "C16": ("C16", lambda: stopped(lab, [last_worker], "kubelet"),
                rf"{last_worker}: kubelet.service is (inactive|failed|deactivating)"),
        # one worker's kubelet is not running: nobody starts the pod bound to it
        "C17": ("C17", lambda: stopped(lab, [last_worker], "kubelet"),
                rf"waiting for pod lab-c17-\w+/bound-{len(lab.workers) - 1} to run"),
        # once the pod runs, its node's kubelet stops: a killed container is not restarted
        "C18": ("C18", lambda: after_call(check_module("C18"), "run_pod",
                                          lambda pod: stopped(lab, [pod.spec.node_name], "kubelet")),
                r"waiting for the container to be restarted"),
        # a worker's kubelet stops renewing its Lease
        "C19": ("C19", lambda: stopped(lab, [last_worker], "kubelet"),
                r"waiting for every node's Lease to be renewed twice"),
        # the nodes' group may read every Secret (the pre-Node-authorizer binding)
        "C20": ("C20", lambda: grant(lab, "lab-falsify-c20", {"kind": "Group", "name": "system:nodes",
                                                             "apiGroup": "rbac.authorization.k8s.io"},
                                     rules=[{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
                r"GET Secret other -> 200, expected 403"),
        # one kubelet lets anonymous callers in and authorizes everything
        "C21": ("C21", lambda: edited(lab, [last_worker], "/var/lib/kubelet/config.yaml", yaml_edit(kubelet_open),
                                      "kubelet"),
                rf"{last_worker}'s kubelet: anonymous GET \S+ -> 200 \(want 401\)"),
        # once the pod runs, the runtime of its node no longer holds the pod's image
        "C22": ("C22", lambda: after_call(check_module("C22"), "run_pod",
                                          lambda pod: image_removed(lab, pod.spec.node_name, test_image())),
                r": \S+ not in containerd"),
        # kube-proxy not running on one worker: no rules there for a new Service
        "C23": ("C23", lambda: stopped(lab, [last_worker], "kube-proxy"),
                rf"waiting for rules for \S+ on {last_worker}"),
        # a worker without its routes to the other nodes' pod ranges
        "C24": ("C24", lambda: stopped(lab, [lab.workers[0]], "pod-network"),
                rf"waiting for \d+ answers from \S+ on {lab.workers[0]}"),
        "C25": ("C25", lambda: unstoppable(lab, [last_worker], "kube-proxy"),
                rf"{last_worker} has rules for \S+ without kube-proxy"),
        "C26": ("C26", lambda: stopped(lab, [lab.workers[0]], "pod-network"),
                rf"on-{lab.workers[0]} -> \S+: |in \S+/on-{lab.workers[0]}: |{lab.workers[0]} does not route"),
        "C27": ("C27", lambda: unstoppable(lab, lab.control_plane, "etcd", "kube-apiserver"),
                r"the API still answers writes"),
        "C28": ("C28", lambda: stopped(lab, [n for n in lab.control_plane if n != vip_holder(lab)], "kube-apiserver"),
                r"waiting for a write through \S+ with \S+ down"),
        # the controller manager runs without its taint-eviction controller: a lost node keeps its pods
        "C29": ("C29", lambda: edited(lab, lab.control_plane, "/etc/systemd/system/kube-controller-manager.service",
                                      no_taint_eviction, "kube-controller-manager"),
                rf"waiting for the pods on {last_worker} to be evicted"),
        # kube-proxy not running on one worker: its address does not answer on a new Service's node port
        "C30": ("C30", lambda: stopped(lab, [last_worker], "kube-proxy"),
                rf"waiting for \d+ answers from http://\S+ \({last_worker}\) on this host"),
    }


# Checks whose claim needs another topology than ha are falsified in the tests of that topology.
CASES_ELSEWHERE = {"C31": "test_topologies.py (external-etcd profile)"}
CASES = ["C01", "C02", "C03", "C04", "C04-member", "C05", "C06", "C07", "C07-scheduler", "C08", "C09", "C10",
         "C11", "C11-cordon", "C12", "C13", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21", "C22", "C23",
         "C24", "C25", "C26", "C27", "C28", "C29", "C30"]


def test_every_check_has_a_falsification_case():
    assert {case.split("-")[0] for case in CASES} | set(CASES_ELSEWHERE) == set(load_checks())


@pytest.mark.parametrize("case", CASES)
def test_check_fails_while_its_claim_is_false(lab, case):
    check_id, falsify, reason = falsifiers(lab)[case]
    chk = load_checks()[check_id]
    # the falsifier keeps the claim false (and so the cluster unhealthy) until it exits; it waits for the
    # cluster to be healthy again itself, so the check's own health wait would only time out here
    with falsify():
        result = run_check(lab, chk, tty=False, wait_healthy=False)
    print("\n".join(result.evidence), "\n→", result.message)
    assert result.status == "failed", f"{case} did not fail while its claim was false: {result.status}"
    assert re.search(reason, result.message), f"{case} failed for another reason than the broken claim: " \
        f"{result.message!r} does not match {reason!r}"
    assert not lab_namespaces(lab)


def test_after_every_falsification_the_checks_pass(lab, tmp_path):
    """Last of the module: the falsification tests above broke the cluster and restored it once per case; it is
    as healthy as before (nothing left behind) and every observing check passes on it."""
    assert_healthy(lab)
    report = tmp_path / "report.json"
    rc, out = lab_check("--no-disruptive", "--json", str(report))
    bad = {r["id"]: r["message"] for r in json.loads(report.read_text()) if r["status"] not in ("passed", "skipped")}
    assert not bad and rc == 0, (bad, out[-3000:])
