"""The lab's checks on a live ha cluster: every check passes; each check fails
while its claim is made false (falsification); the disruptive checks leave the
cluster as healthy as they found it, even run twice in a row."""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import uuid

import pytest
import yaml
from conftest import lab_check
from kubernetes.client.rest import ApiException

from labs.cli import run_check
from labs.core import LAB_LABEL, Lab, load_checks, wait_for

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


def test_every_check_passes_and_disruptive_checks_twice_leave_the_cluster_healthy(lab, tmp_path):
    """`lab check --all` (the disruptive checks once), then the disruptive checks once more, in a row; then the
    cluster is as healthy as before: all nodes Ready, every component running, no namespace left behind."""
    report = tmp_path / "report.json"
    rc, out = lab_check("--all", "--json", str(report), "--junit", str(tmp_path / "r.xml"),
                        "--markdown", str(tmp_path / "r.md"))
    results = json.loads(report.read_text())
    bad = {r["id"]: r["message"] for r in results if r["status"] != "passed"}
    assert not bad, bad
    assert rc == 0
    assert len(results) == len(load_checks())

    disruptive = [c.id for c in load_checks().values() if c.disruptive]
    again = tmp_path / "again.json"
    rc, out = lab_check(*disruptive, "--json", str(again))
    bad = {r["id"]: r["message"] for r in json.loads(again.read_text()) if r["status"] != "passed"}
    assert not bad and rc == 0, (bad, out[-3000:])
    assert lab.ready_nodes() == sorted(lab.nodes)
    for node in lab.control_plane:
        for unit in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    for node in lab.nodes:
        for unit in ("kubelet", "kube-proxy", "containerd"):
            assert lab.host(node).service(unit).is_running, f"{unit} on {node}"
    assert not lab_namespaces(lab)


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
def transient_unit(lab: Lab, node: str, unit: str):
    """A process calling itself a control-plane component, on a worker."""
    lab.sh(node, f"systemd-run --unit={unit} --collect sleep 600")
    try:
        yield
    finally:
        lab.sh(node, f"systemctl stop {unit}", check=False)


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
        lab.sh(node, f"systemctl restart {unit}")
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


def falsifiers(lab: Lab) -> dict:
    worker, cp = lab.workers[0], lab.control_plane[0]
    etcd = lab.groups.get("etcd") or lab.control_plane
    return {
        # a worker runs a process that calls itself kube-scheduler
        "C01": lambda: transient_unit(lab, worker, "kube-scheduler"),
        # the control-plane taint removed: ordinary pods may land there
        "C02": lambda: untainted(lab, cp),
        # kube-proxy not running on a worker
        "C03": lambda: stopped(lab, [worker], "kube-proxy"),
        # a program other than the API server talks to etcd
        "C04": lambda: rogue_etcd_client(lab, cp),
        # authorization lets every ServiceAccount read pods
        "C05": lambda: grant(lab, "lab-falsify-c05", {"kind": "Group", "name": "system:serviceaccounts",
                                                      "apiGroup": "rbac.authorization.k8s.io"}, role="view"),
        # new Secrets written to etcd in plain text
        "C06": lambda: edited(lab, lab.control_plane, "/etc/kubernetes/encryption-config.yaml",
                              yaml_edit(identity_first), "kube-apiserver"),
        # kube-proxy nowhere: no component watches Services and EndpointSlices
        "C07": lambda: stopped(lab, lab.nodes, "kube-proxy"),
        # `systemctl stop etcd` leaves etcd serving
        "C08": lambda: unstoppable(lab, etcd, "etcd"),
        # etcd members that do not stop: writes go on with "two of three down"
        "C09": lambda: unstoppable(lab, etcd, "etcd"),
        "C10": lambda: unstoppable(lab, lab.control_plane, "kube-scheduler"),
        # the scheduler ignores resource requests
        "C11": lambda: edited(lab, lab.control_plane, "/etc/kubernetes/kube-scheduler.yaml",
                              yaml_edit(scheduler_ignores_requests), "kube-scheduler"),
        # once the Deployment runs, the controllers stop: a deleted pod is not replaced
        "C12": lambda: after_call(check_module("C12"), "run_deployment",
                                  lambda _pods: stopped(lab, lab.control_plane, "kube-controller-manager")),
        "C13": lambda: unstoppable(lab, lab.control_plane, "kube-controller-manager"),
        "C14": lambda: unstoppable(lab, [lab.workers[-1]], "kubelet"),
        # the API refuses the controller's writes: nothing gets reconciled
        "C15": lambda: deny_greetings(lab),
        "C16": lambda: stopped(lab, [worker], "kubelet"),
        # the target worker's kubelet is not running: nobody starts the bound pod
        "C17": lambda: stopped(lab, [worker], "kubelet"),
        # once the pod runs, its node's kubelet stops: a killed container is not restarted
        "C18": lambda: after_call(check_module("C18"), "run_pod",
                                  lambda pod: stopped(lab, [pod.spec.node_name], "kubelet")),
        # a worker's kubelet stops renewing its Lease
        "C19": lambda: stopped(lab, [lab.workers[-1]], "kubelet"),
        # the nodes' group may read every Secret (the pre-Node-authorizer binding)
        "C20": lambda: grant(lab, "lab-falsify-c20", {"kind": "Group", "name": "system:nodes",
                                                      "apiGroup": "rbac.authorization.k8s.io"},
                             rules=[{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
        # kubelets that let anonymous callers in and authorize everything
        "C21": lambda: edited(lab, lab.workers, "/var/lib/kubelet/config.yaml", yaml_edit(kubelet_open), "kubelet"),
        # no container runtime on the workers
        "C22": lambda: stopped(lab, lab.workers, "containerd"),
        # kube-proxy not running on one worker: no rules there for a new Service
        "C23": lambda: stopped(lab, [lab.workers[-1]], "kube-proxy"),
        # a worker without its routes to the other nodes' pod ranges
        "C24": lambda: stopped(lab, [worker], "pod-network"),
        "C25": lambda: unstoppable(lab, [lab.workers[-1]], "kube-proxy"),
        "C26": lambda: stopped(lab, [worker], "pod-network"),
        "C27": lambda: unstoppable(lab, lab.control_plane, "etcd", "kube-apiserver"),
        "C28": lambda: stopped(lab, [n for n in lab.control_plane if n != vip_holder(lab)], "kube-apiserver"),
    }


@pytest.mark.parametrize("check_id", [f"C{i:02d}" for i in range(1, 29)])
def test_check_fails_while_its_claim_is_false(lab, check_id):
    chk = load_checks()[check_id]
    # the falsifier keeps the claim false (and so the cluster unhealthy) until it exits; it waits for the
    # cluster to be healthy again itself, so the check's own health wait would only time out here
    with falsifiers(lab)[check_id]():
        result = run_check(lab, chk, tty=False, wait_healthy=False)
    print("\n".join(result.evidence), "\n→", result.message)
    assert result.status == "failed", f"{check_id} did not fail while its claim was false: {result.status}"
    assert not lab_namespaces(lab)
