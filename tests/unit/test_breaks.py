"""Break-and-fix exercises and the fault catalogue, as pure logic: the record in the state folder (written ahead of
each change, loaded by another process), the undo steps (idempotent) on a model of an ha cluster's machines and
API, the `lab break` arguments, and the catalogue's consistency with the checks. (The faults themselves are put
into a real cluster by tests/e2e/test_labs.py.)"""

from __future__ import annotations

import base64
import datetime
import json
import re
import shlex
from types import SimpleNamespace

import pytest
import yaml
from kubernetes.client.rest import ApiException

from labs import exercises
from labs.cli import main
from labs.faults import CATALOGUE, FAULTS, TEST_ONLY, Fault, broken, fill, targets
from labs.i18n import set_language, tr
from labs.journal import OPS, RECORD, Journal, describe, record_path, undo
from labs.registry import CheckFailed, LabError, load_checks, message_of

# --------------------------------------------------------------------------
# A model of an ha cluster (cp1..cp3 with stacked etcd, w1, w2): files, drop-ins, stopped units, processes and
# the API objects the faults touch; every change is logged, in order with the undo steps recorded.

CONFIGS = {
    "/etc/systemd/system/etcd.service": "ExecStart=/usr/local/bin/etcd \\\n  --client-cert-auth=true \\\n"
                                        "  --trusted-ca-file=/etc/etcd/pki/ca.crt \\\n"
                                        "  --peer-client-cert-auth=true \\\n"
                                        "  --peer-trusted-ca-file=/etc/etcd/pki/ca.crt\n",
    "/etc/systemd/system/kube-apiserver.service": "ExecStart=/usr/local/bin/kube-apiserver "
                                                  "--authorization-mode=Node,RBAC --secure-port=6443\n",
    "/etc/kubernetes/encryption-config.yaml": yaml.safe_dump({"resources": [
        {"resources": ["secrets"], "providers": [{"aescbc": {"keys": []}}, {"identity": {}}]}]}),
    "/etc/kubernetes/kube-scheduler.yaml": yaml.safe_dump({"profiles": [{"schedulerName": "default-scheduler"}]}),
    "/var/lib/kubelet/config.yaml": yaml.safe_dump({"authentication": {"anonymous": {"enabled": False}},
                                                    "authorization": {"mode": "Webhook"}}),
    "/etc/systemd/system/kube-controller-manager.service": "ExecStart=kcm --leader-elect=true\n",
}
PATHS = {"bin_dir": "/usr/local/bin", "config_dir": "/etc/kubernetes", "etcd_config_dir": "/etc/etcd",
         "pki_dir": "/etc/kubernetes/pki"}
VIP = "192.168.56.10"
NOW = datetime.datetime(2026, 12, 3, 17, 0, tzinfo=datetime.UTC)  # the model API server's clock


class Api:
    """The API objects of the model: created, deleted (404 when absent), a node's taints."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def __getattr__(self, name: str):
        verb, _, kind = name.partition("_")
        if verb not in ("create", "delete"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            cluster = self.cluster
            if verb == "create":
                body = args[-1]
                key = (kind, body["metadata"]["name"] if isinstance(body, dict) else "?")
                if kind == "namespaced_config_map":  # the admission policy of C15 refuses greetings
                    raise ApiException(status=403)
                cluster.event("api", f"create {key[0]} {key[1]}")
                cluster.objects.add(key)
            else:
                if cluster.api_down:
                    raise ApiException(status=503)
                key = (kind, args[0])
                if key not in cluster.objects:
                    raise ApiException(status=404)
                cluster.event("api", f"delete {key[0]} {key[1]}")
                cluster.objects.discard(key)
        return call

    def read_node(self, name: str):
        taints = [SimpleNamespace(key=k, effect=e, to_dict=lambda k=k, e=e: {"key": k, "effect": e})
                  for k, e in self.cluster.taints[name]]
        return SimpleNamespace(spec=SimpleNamespace(taints=taints))

    def read_namespaced_lease(self, name: str, namespace: str, _request_timeout=None):
        """A leader-elected component's Lease: renewed after NOW by the leader among its restarted processes."""
        holder = self.cluster.restarted.get(name)
        renewed = NOW + datetime.timedelta(seconds=2 if holder else -30)
        return SimpleNamespace(spec=SimpleNamespace(holder_identity=f"{holder or 'cp1'}_1", renew_time=renewed))

    def patch_node(self, name: str, body: dict) -> None:
        self.cluster.event("api", f"patch node {name}")
        self.cluster.taints[name] = [(t["key"], t["effect"]) for t in body["spec"]["taints"]]


class Cluster:
    """The parts of Lab the faults and their undo steps use, over the model."""

    control_plane = ["cp1", "cp2", "cp3"]
    workers = ["w1", "w2"]
    server = f"https://{VIP}:8443"

    control_plane_workloads = False

    def __init__(self, control_plane: list[str] | None = None, workers: list[str] | None = None,
                 workloads: bool = False, runtimes: dict[str, str] | None = None) -> None:
        self.runtimes = runtimes or {}  # node -> its container runtime (containerd where not named)
        if control_plane:
            self.control_plane = control_plane
        if workers is not None:
            self.workers = workers
        self.control_plane_workloads = workloads  # the single profile: the control plane takes workloads, untainted
        self.files = {n: dict(CONFIGS) for n in self.nodes}
        self.stopped: set[tuple[str, str]] = set()
        self.processes: set[tuple[str, str]] = set()
        self.taints = {n: [("node-role.kubernetes.io/control-plane", "NoSchedule")]
                       if n in self.control_plane and not workloads else [] for n in self.nodes}
        self.objects: set[tuple[str, str]] = set()
        self.log: list[tuple] = []
        self.unreachable: set[str] = set()
        self.api_down = False
        self.healthy_waits: list[float] = []
        self.restarted: dict[str, str] = {}  # unit: the first node it was restarted on
        self.core = self.rbac = self.admission = self.coordination = Api(self)

    # topology
    @property
    def nodes(self) -> list[str]:
        return sorted(self.control_plane + self.workers)

    etcd_members = property(lambda self: self.control_plane)
    external_etcd: list[str] = []

    def setting(self, name, default=None):
        return {"ports": {"api_server": 6443, "etcd_client": 2379}}.get(name, default)

    def runtime(self, node: str) -> str:
        return self.runtimes.get(node, "containerd")

    def path(self, name: str) -> str:
        return PATHS[name]

    def unit_arg(self, node, unit, flag):
        return "6443"

    def wait_healthy(self, timeout: float, ev=None) -> None:
        self.healthy_waits.append(timeout)

    def ping(self) -> str:
        return "v1.37.2"

    def server_now(self) -> datetime.datetime:
        return NOW

    def wait_controllers_act(self, timeout: float) -> None:
        self.event("wait", "controllers act")

    def host(self, node: str):
        cluster = self

        def ansible(module, args, check=False):
            if module == "copy":
                dest = re.search(r"dest=(\S+)", args).group(1)
                cluster.event("sh", node, f"copy {dest}")
                cluster.files[node][dest] = "etcd binary"
            return {}
        return SimpleNamespace(ansible=ansible)

    def event(self, *what) -> None:
        self.log.append(what)

    def state(self) -> tuple:
        return (json.dumps(self.files, sort_keys=True), sorted(self.stopped), sorted(self.processes),
                json.dumps(self.taints, sort_keys=True), sorted(self.objects))

    def sh(self, node: str, command: str, check: bool = True) -> str:
        if node in self.unreachable:
            raise CheckFailed(f"{node}: `{command}` exited 255: ssh: connect to host {node}: No route to host")
        files = self.files[node]
        if command.startswith("cat "):
            return files[command.split()[1]]
        if "list-units" in command:
            return "containerd.service\nkubelet.service\nssh.service"
        if command.startswith("ss -Hltn"):
            return "LISTEN 0 4096 127.0.0.1:23790" if (node, "stray-etcd") in self.processes else ""
        if command.startswith("ss -Htnp"):
            return 'users:(("rogue-client",pid=1,fd=3))' if (node, "rogue") in self.processes else ""
        if command.startswith("test -x"):
            return "yes" if command.split()[2] in files else ""
        if command.startswith("ip -4 -o addr show"):
            return f"inet {VIP}/24" if node == "cp1" else ""
        if command.startswith("curl"):
            return "ok"
        if match := re.fullmatch(r"if \[ -e (\S+) \]; then mv -f (\S+) (\S+); fi", command):
            backup, path = match.group(2), match.group(3)
            if backup in files:
                self.event("sh", node, f"restore {path}")
                files[path] = files.pop(backup)
            return ""
        self.event("sh", node, command)
        if match := re.fullmatch(r"cp -a (\S+) (\S+)", command):
            files[match.group(2)] = files[match.group(1)]
        elif match := re.fullmatch(r"echo (\S+) \| base64 -d > (\S+)", command):
            files[match.group(2)] = base64.b64decode(match.group(1)).decode()
        elif match := re.match(r"mkdir -p \$\(dirname (\S+)\) && printf", command):
            files[match.group(1)] = "drop-in"
        elif match := re.fullmatch(r"systemctl stop (\S+)", command):
            self.stopped.add((node, match.group(1)))
        elif match := re.fullmatch(r"systemctl daemon-reload && systemctl restart (\S+)", command):
            self.restarted.setdefault(match.group(1), node)
        elif command.startswith("systemctl start --no-block"):
            for unit in command.removesuffix(" || true").split()[3:]:
                self.stopped.discard((node, unit))
        elif match := re.match(r"install -m 0755 .* (\S+)$", command):
            files[match.group(1)] = "etcdctl"
        elif command.startswith("systemd-run --unit=lab-falsify-rogue"):
            self.processes.add((node, "rogue"))
        elif command.startswith("systemctl stop lab-falsify-rogue"):
            self.processes.discard((node, "rogue"))
        elif command.startswith("setsid nohup"):
            self.processes.add((node, "stray-etcd"))
        elif command.startswith("pkill -f"):
            self.processes.discard((node, "stray-etcd"))
        elif command.startswith(("rm -f ", "rm -rf ")):
            for path in shlex.split(command.split("&&")[0])[2:]:
                for name in [f for f in files if f == path or f.startswith(path + "/")]:
                    del files[name]
        return ""


class Recording(Journal):
    """A journal that also logs each step, in order with the model's changes."""

    cluster: Cluster | None = None

    def step(self, op_name: str, **args) -> None:
        super().step(op_name, **args)
        Recording.cluster.event("step", self.steps[-1])


# what undoes each kind of change: a change is written ahead when such a step was recorded before it
def undoes(change: tuple, step: dict) -> bool:
    kind, *rest = change
    if kind == "api":
        verb, *what = rest[0].split()
        if verb == "patch":
            return step["op"] in ("taint", "untaint") and step["node"] == what[-1]
        names = {"cluster_role": "ClusterRole", "cluster_role_binding": "ClusterRoleBinding", "namespace": "Namespace",
                 "validating_admission_policy": "ValidatingAdmissionPolicy",
                 "validating_admission_policy_binding": "ValidatingAdmissionPolicyBinding"}
        return step == {"op": "delete_object", "kind": names[what[0]], "name": what[1]}
    node, command = rest
    if step.get("node") not in (node, None) or (step.get("nodes") and node not in step["nodes"]):
        return False
    if match := re.fullmatch(r"systemctl stop (\S+)", command):
        return step["op"] == "start_units" and match.group(1) in step["units"]
    if match := re.fullmatch(r"cp -a (\S+) \S+|echo \S+ \| base64 -d > (\S+)", command):
        return step["op"] == "restore_file" and step["path"] in match.groups()
    if match := re.match(r"mkdir -p \$\(dirname (\S+)\) && printf", command):
        return step["op"] in ("release_unstoppable", "remove_dropin") and step["dropin"] == match.group(1)
    if command.startswith(("mkdir -p /usr/local/sbin/lab-stray", "copy ", "install -m")):
        return step["op"] == "remove_paths" and any(command.split()[-1].startswith(p) for p in step["paths"])
    if command.startswith("setsid nohup"):
        return step["op"] == "kill_processes" and re.search(step["pattern"], command)
    if command.startswith("systemd-run"):
        return step["op"] == "stop_unit"
    if command.startswith("systemctl daemon-reload && systemctl restart"):
        return step["op"] == "restart_units"
    raise AssertionError(f"a change the test does not know: {change}")


def is_change(event: tuple) -> bool:
    return event[0] == "api" or (event[0] == "sh" and not event[2].startswith(
        ("pkill", "rm -f", "rm -rf", "systemctl start --no-block", "systemctl stop lab-falsify-rogue", "restore ")))


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("K8S_LAB_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


# --------------------------------------------------------------------------
# The record


def test_the_record_lives_in_the_state_folder(state):
    assert record_path() == state / RECORD


def test_a_record_is_on_disk_from_the_start_and_after_each_step(state):
    journal = Journal.begin(record_path(), "C16", "C16", "One node went quiet.", "kubelet was stopped on w2")
    on_disk = Journal.load()
    assert (on_disk.fault, on_disk.check, on_disk.complete, on_disk.steps) == ("C16", "C16", False, [])
    journal.step("start_units", node="w2", units=["kubelet", "containerd"])
    assert Journal.load().steps == [{"op": "start_units", "node": "w2", "units": ["kubelet", "containerd"]}]
    journal.finish()
    again = Journal.load()
    assert again.complete and again.reveal == "kubelet was stopped on w2" and again.started
    assert json.loads(record_path().read_text())["format"] == 1
    journal.remove()
    assert Journal.load() is None


def test_one_fault_at_a_time(state):
    Journal.begin(record_path(), "C04-member", "C04")
    with pytest.raises(LabError, match=r"already active on C04, since .*`lab break --undo`"):
        Journal.begin(record_path(), "C16", "C16")
    assert Journal.load().fault == "C04-member"


def test_a_step_is_data_of_a_known_kind(state):
    journal = Journal.begin(record_path(), "C16", "C16")
    with pytest.raises(ValueError, match="undo step reboot"):
        journal.step("reboot", node="w2")
    with pytest.raises(ValueError, match="undo step start_units"):
        journal.step("start_units", node="w2")  # units missing
    assert Journal.load().steps == []


def test_an_unreadable_record_is_reported_not_ignored(state):
    state.mkdir(parents=True)
    record_path().write_text("{not json")
    with pytest.raises(LabError, match="unreadable"):
        Journal.load()
    with pytest.raises(LabError, match="unreadable"):
        Journal.begin(record_path(), "C16", "C16")


def test_every_undo_step_says_what_it_does():
    for name, spec in OPS.items():
        text = describe({"op": name, **{a: ["x"] if a.endswith("s") else 1 if a == "timeout" else "x"
                                        for a in spec.args}})
        assert text and "{" not in text, name


# --------------------------------------------------------------------------
# Every fault of the catalogue on the model: written ahead, undone, undone again


@pytest.mark.parametrize("fault", CATALOGUE, ids=lambda f: f.id)
def test_each_change_is_recorded_before_it_is_made_and_undone_twice_is_undone_once(state, fault):
    cluster = Cluster()
    if fault.unfit(cluster):
        cluster.external_etcd = ["e1"]  # C31: the model's control plane as if etcd ran elsewhere
    if fault.unfit(cluster):
        cluster = Cluster(["cp1"], workers=[], workloads=True)  # C02-single: one machine, the whole cluster
    if fault.unfit(cluster):
        cluster = Cluster(runtimes={"w2": "crio"})  # C32: a worker on CRI-O (the runtimes profile)
    assert not fault.unfit(cluster), fault.id
    before = cluster.state()
    Recording.cluster = cluster
    journal = Recording.begin(record_path(), fault.id, fault.check, fault.symptom, fault.reveal_for(cluster))
    fault.apply(cluster, journal)
    journal.finish()
    changes = [e for e in cluster.log if e[0] != "step"]
    assert [e for e in changes if is_change(e)], f"{fault.id} changed nothing"
    recorded: list[dict] = []
    for event in cluster.log:
        if event[0] == "step":
            recorded.append(event[1])
        elif is_change(event):
            assert any(undoes(event, s) for s in recorded), f"{fault.id}: {event} made before its undo step"
    assert cluster.state() != before

    steps = Journal.load().steps
    assert undo(cluster, Journal.load()) == []
    assert cluster.state() == before, f"{fault.id} left something behind"
    assert Journal.load() is None
    # a second undo (an interrupted one run again, make repair after lab break --undo) changes nothing more
    again = Journal.begin(record_path(), fault.id, fault.check)
    again.steps = steps
    assert undo(cluster, again) == []
    assert cluster.state() == before
    waits = [s["timeout"] for s in steps if s["op"] == "wait_healthy"]
    assert cluster.healthy_waits == waits * 2


def test_an_interrupted_break_is_undone_from_its_record(state):
    """lab break stopped half way (here: the second node unreachable while an edit goes to every control-plane
    node): the record has what was done, and another process undoes exactly that."""
    cluster = Cluster()
    before = cluster.state()
    fault = FAULTS["C11"]
    journal = Journal.begin(record_path(), fault.id, fault.check)
    cluster.unreachable = {"cp2"}
    with pytest.raises(CheckFailed, match="exited 255"):
        fault.apply(cluster, journal)
    assert cluster.files["cp1"]["/etc/kubernetes/kube-scheduler.yaml"] != CONFIGS["/etc/kubernetes/kube-scheduler.yaml"]
    record = Journal.load()  # as `lab break --undo` finds it, in another process
    assert not record.complete
    cluster.unreachable = set()
    assert undo(cluster, record) == []
    assert cluster.state() == before and Journal.load() is None


def test_a_step_that_cannot_be_done_keeps_the_record(state):
    cluster = Cluster()
    before = cluster.state()
    undone = pytest.raises(LabError, match=r"could not undo fault C20: ClusterRoleBinding lab-falsify-c20 deleted: ")
    with undone, broken(cluster, FAULTS["C20"]):
        cluster.api_down = True
    assert Journal.load().fault == "C20"  # still recorded: lab break --undo or make repair later
    cluster.api_down = False
    assert undo(cluster, Journal.load()) == []
    assert cluster.state() == before and Journal.load() is None


def test_an_unreachable_machine_is_no_undone_step(state):
    cluster = Cluster()
    with pytest.raises(LabError, match="could not undo fault C16: w2: started kubelet.*exited 255"), \
            broken(cluster, FAULTS["C16"]):
        cluster.unreachable = {"w2"}
    assert Journal.load().fault == "C16"


def test_a_wait_for_health_that_fails_does_not_keep_the_record(state):
    cluster = Cluster()

    def unhealthy(timeout, ev=None):
        raise CheckFailed("timed out after 240s waiting for all nodes Ready")

    cluster.wait_healthy = unhealthy
    with pytest.raises(LabError, match="the cluster healthy again .*timed out"), broken(cluster, FAULTS["C16"]):
        pass
    assert Journal.load() is None  # everything the fault changed is undone; health is lab status's business


@pytest.mark.parametrize(("fault", "unit", "acts"), [("C29", "kube-controller-manager", True),
                                                    ("C11", "kube-scheduler", False)])
def test_a_changed_leader_elected_component_leads_before_the_check_runs(state, monkeypatch, fault, unit, acts):
    """A fault that restarts the controller manager or the scheduler is in once a restarted process leads (its
    Lease renewed after the restarts) and, for the controller manager, its controllers act."""
    cluster = Cluster()
    reads = []
    lease = Api.read_namespaced_lease

    def read(api, name, namespace, _request_timeout=None):
        reads.append((name, [e[1] for e in cluster.log if e[0] == "sh" and e[2].endswith(f"restart {unit}")]))
        return lease(api, name, namespace, _request_timeout)

    monkeypatch.setattr(Api, "read_namespaced_lease", read)
    FAULTS[fault].apply(cluster, Journal.begin(record_path(), fault, FAULTS[fault].check))
    # the Lease is read once every control-plane node runs the changed component
    assert reads and all(name == unit and restarted == ["cp1", "cp2", "cp3"] for name, restarted in reads)
    assert [e[1] for e in cluster.log if e[0] == "wait"] == (["controllers act"] if acts else [])
    assert cluster.log[-1] == (("wait", "controllers act") if acts else
                               ("sh", "cp3", f"systemctl daemon-reload && systemctl restart {unit}"))


# --------------------------------------------------------------------------
# lab break: the arguments, and the exercise on the model


def run_lab(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["break", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_break_refuses_a_second_fault_and_points_to_undo(state, capsys):
    Journal.begin(record_path(), "C16", "C16", "One node went quiet.", "kubelet was stopped on w2")
    rc, _, err = run_lab(capsys, "C21")
    assert rc == 2 and "already active on C16" in err and "lab break --undo" in err
    assert "kubelet" not in err  # no spoiler


def test_reveal_and_undo_without_a_record(state, capsys):
    rc, _, err = run_lab(capsys, "--reveal")
    assert rc == 2 and "no break-and-fix exercise is active" in err
    rc, out, _ = run_lab(capsys, "--undo")
    assert rc == 0 and "nothing to undo" in out


@pytest.mark.parametrize(("argv", "message"), [
    ((), "name what to break"),
    (("C12",), "C12 has no break-and-fix exercise: its claim"),
    (("C99",), "no check or exercise 'C99'"),
    (("C04", "--random"), "name no check with it"),
    (("--undo", "--reveal"), "one thing at a time"),
    (("C16", "--list"), "one thing at a time"),
    (("--no-wait",), "--no-wait goes with --undo"),
])
def test_break_arguments(state, capsys, argv, message):
    rc, _, err = run_lab(capsys, *argv)
    assert rc == 2 and message in err


def test_a_check_picks_among_its_faults_a_fault_id_is_that_one():
    assert [f.id for f in exercises.candidates("c04", False)] == ["C04", "C04-member"]
    assert [f.id for f in exercises.candidates("c04-member", False)] == ["C04-member"]
    assert exercises.candidates(None, True) == CATALOGUE


def test_list_shows_symptoms_never_reveals(state, capsys):
    rc, out, _ = run_lab(capsys, "--list")
    assert rc == 0
    for fault in CATALOGUE:
        assert f"{fault.id} " in out and fault.symptom in out
        assert fault.reveal_for(Cluster()) not in out
    assert "C12, C18, C22, C34" in out


def test_an_exercise_from_break_to_reveal_to_undo(state, capsys):
    cluster = Cluster()
    assert exercises.cmd_break(lambda: cluster, "C16", False) == 0
    out = capsys.readouterr().out
    assert "Symptom: One node went quiet." in out and "`lab check C16`" in out and "`lab break --undo`" in out
    assert "w2" not in out and "kubelet" not in out  # only the symptom
    assert ("w2", "kubelet") in cluster.stopped
    assert exercises.active_note().startswith("a break-and-fix exercise is active on C16")

    rc, out, _ = run_lab(capsys, "--reveal")
    assert rc == 0 and "kubelet was stopped on w2" in out and "w2: started kubelet, containerd" in out

    assert exercises.cmd_undo(lambda: cluster) == 0
    out = capsys.readouterr().out
    assert "undone: w2: started kubelet" in out and "healthy again" in out
    assert not cluster.stopped and Journal.load() is None and exercises.active_note() is None
    assert cluster.healthy_waits[-1] == exercises.UNDO_TIMEOUT


def test_a_fault_the_cluster_cannot_have_is_refused(state):
    default = Cluster(control_plane=["cp1"])
    with pytest.raises(LabError, match="C28: it needs several control-plane nodes; this cluster has 1"):
        exercises.cmd_break(lambda: default, "C28", False)
    with pytest.raises(LabError, match="C09: it needs three etcd members"):
        exercises.cmd_break(lambda: default, "C09", False)
    assert Journal.load() is None
    fitting = {f.id for f in exercises.candidates(None, True) if not f.unfit(default)}  # what --random picks from
    assert fitting == set(FAULTS) - {"C09", "C28", "C31", "C02-single", "C32"}
    single = Cluster(["cp1"], workers=[], workloads=True)
    with pytest.raises(LabError, match="C16: the cluster has no worker"):
        exercises.cmd_break(lambda: single, "C16", False)
    assert {f.id for f in exercises.candidates(None, True) if not f.unfit(single)} == {"C02-single"}


def test_a_break_that_fails_half_way_is_taken_out_again(state):
    cluster = Cluster()
    before = cluster.state()
    real = cluster.sh

    def flaky(node, command, check=True):
        if command.startswith("echo") and node == "cp3":
            raise CheckFailed("cp3: disk full")
        return real(node, command, check)

    cluster.sh = flaky
    with pytest.raises(LabError, match="could not put the fault in for C11: CheckFailed: cp3: disk full; what went "
                                       "in was taken out again"):
        exercises.cmd_break(lambda: cluster, "C11-cordon", False)
    assert cluster.state() == before and Journal.load() is None


def test_break_refuses_an_unhealthy_cluster(state):
    cluster = Cluster()

    def unhealthy(timeout, ev=None):
        raise CheckFailed("timed out after 30s waiting for all nodes Ready")

    cluster.wait_healthy = unhealthy
    with pytest.raises(LabError, match="not healthy .*make repair"):
        exercises.cmd_break(lambda: cluster, "C16", False)
    assert Journal.load() is None


def test_lab_check_does_not_wait_for_health_while_an_exercise_is_active():
    from labs.registry import Check
    from labs.runner import run_checks

    waits = []
    lab = SimpleNamespace(wait_healthy=lambda timeout, ev=None: waits.append(timeout), settings=lambda: {})
    chk = Check("C99", "a claim", "claim", [], True, [], "does", lambda lab, ev: ev.expect(False, "broken"))
    assert run_checks(lab, [chk], 1, tty=False, wait_healthy=False)[0].status == "failed"
    assert waits == []
    run_checks(lab, [chk], 1, tty=False)
    assert len(waits) == 1


# --------------------------------------------------------------------------
# In the learner's language: what `lab break` and the notes print is translated, names and commands kept; the record
# stays English


class Renamed(Cluster):
    """A cluster whose machines have other names than the examples of the catalogs."""

    control_plane = ["alpha", "beta", "gamma"]
    workers = ["north", "south"]


@pytest.fixture
def english_afterwards():
    yield
    set_language(None)


def test_list_in_russian(state, capsys, english_afterwards):
    rc, out, _ = run_lab(capsys, "--list", "--lang", "ru")
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["упражнение", "симптом"]
    assert "C16            Одна нода затихла." in lines
    assert "C09            Запись продолжается, даже когда два из трёх членов базы данных остановлены. (нужно: три " \
           "члена etcd (PROFILE=ha))" in lines
    assert "Нет упражнений для C12, C18, C22, C34: их утверждение можно сделать ложным только посреди проверки" in out
    assert "`lab break CNN`" in out and "symptom" not in out


def test_break_and_reveal_in_norwegian_name_the_real_machines(state, capsys, english_afterwards):
    cluster = Renamed()
    set_language("nb")
    assert exercises.cmd_break(lambda: cluster, "C16", False) == 0
    out = capsys.readouterr().out
    assert "Ødelegg-og-fiks-øvelse på C16." in out and "  Symptom: Én node ble stille.\n" in out
    assert "Kjør `lab check C16` for å se den feile" in out and "south" not in out
    record = json.loads(record_path().read_text())  # the record stays English, with the names the reveal uses
    assert record["symptom"] == "One node went quiet." and record["names"] == {"last_worker": "south"}
    assert record["reveal"] == "kubelet was stopped on south (`systemctl stop kubelet`)."

    rc, out, _ = run_lab(capsys, "--reveal", "--lang", "nb")
    assert rc == 0 and out.startswith("Øvelse på C16, feil C16, siden ")
    assert "Symptom: Én node ble stille.\n" in out
    assert "Hva som ble ødelagt: kubelet ble stoppet på south (`systemctl stop kubelet`).\n" in out
    assert "Hva `lab break --undo` gjør:\n  - south: startet kubelet, containerd.service, kubelet.service, " \
           "ssh.service\n  - klyngen frisk igjen (høyst 240 s)\n" in out
    many = describe({"op": "start_units", "node": "south", "units": ["a", "b", "c", "d", "e", "f"]})
    assert (many, tr(many)) == ("south: started a, b, c, d and 2 more", "south: startet a, b, c, d og 2 til")

    assert exercises.cmd_undo(lambda: cluster) == 0
    out = capsys.readouterr().out
    assert "lab: angrer øvelsen på C16 (feil C16)\n  angret: south: startet kubelet" in out
    assert "lab: klyngen er frisk igjen." in out


def test_a_reveal_with_placeholders_reads_in_every_language_with_the_machines_filled_in(state):
    cluster = Renamed()
    for fault in CATALOGUE:
        english = fault.reveal_for(cluster)
        for lang in ("ru", "nb", "es"):
            shown = tr(english, lang)
            assert shown != english and "{" not in shown, (fault.id, lang)
            for name in set(re.findall(r"\w+", english)) & set(cluster.nodes):
                assert name in shown, (fault.id, lang, name)
            for path in ("/usr/local/sbin/lab-stray/etcd", ".before-lab-break", "zz-lab-falsify.conf"):
                assert (path in english) == (path in shown), (fault.id, lang, path)
            assert tr(fault.symptom, lang) != fault.symptom, (fault.id, lang)
    assert tr(FAULTS["C02"].reveal_for(cluster), "es") == (
        "Se quitó el taint node-role.kubernetes.io/control-plane:NoSchedule de gamma (`kubectl describe node gamma`). "
        "`kubectl taint` lo vuelve a poner.")


def test_a_record_the_catalogue_no_longer_matches_is_revealed_as_it_is(state, capsys, english_afterwards):
    Journal.begin(record_path(), "C16", "C16", "A symptom of another version.", "Something else was broken.")
    rc, out, _ = run_lab(capsys, "--reveal", "--lang", "es")
    assert rc == 0 and "Síntoma: A symptom of another version.\n" in out
    assert "Qué se rompió: Something else was broken.\n" in out


def test_refusals_are_translated(state, capsys, english_afterwards):
    rc, _, err = run_lab(capsys, "C12", "--lang", "es")
    assert rc == 2 and err.startswith("lab: C12 no tiene ejercicio de romper y arreglar: su afirmación (un pod borrado")
    one = Cluster(control_plane=["cp1"])
    set_language("ru")
    with pytest.raises(LabError) as refused:
        exercises.cmd_break(lambda: one, "C28", False)
    assert str(refused.value).startswith("no exercise of C28 fits this cluster (C28: it needs several")  # English
    assert tr(message_of(refused.value)) == ("ни одно упражнение C28 не подходит для этого кластера (C28: нужно "
                                             "несколько управляющих нод; в этом кластере их 1 (в PROFILE=ha их три)).")


def test_status_speaks_of_the_exercise_in_one_language(state, capsys, monkeypatch, english_afterwards):
    from labs import status

    monkeypatch.setattr(status, "status", lambda lab: status.Report(["machines"], ["w2: kubelet inactive"]))
    Journal.begin(record_path(), "C16", "C16", "One node went quiet.", "kubelet was stopped on w2")
    set_language("ru")
    assert status.main_status(SimpleNamespace()) == 1
    out = capsys.readouterr().out
    assert "\nупражнение\n  активно упражнение «сломай и почини» для C16 (с " in out
    assert out.endswith("lab: НЕ здорова (проблем: 1); `make repair` убирает неисправность упражнения и перезапускает "
                        "плейбуки\n")
    set_language("en")
    status.main_status(SimpleNamespace())
    out = capsys.readouterr().out
    assert "\nexercise\n  a break-and-fix exercise is active on C16 (since " in out
    assert out.endswith("lab: NOT healthy (1 problem(s)); `make repair` takes the exercise's fault out and re-runs "
                        "the playbooks\n")


# --------------------------------------------------------------------------
# The catalogue


def test_every_check_has_an_exercise_or_a_reason_why_not():
    checks = load_checks()
    assert {f.check for f in CATALOGUE} <= set(checks)
    for ident in checks:
        assert bool(FAULTS.get(ident) or [f for f in CATALOGUE if f.check == ident]) != (ident in TEST_ONLY), ident
    assert all(len(reason) > 40 for reason in TEST_ONLY.values())


def test_every_fault_is_described_without_spoilers():
    ha = Cluster()
    names = set(ha.nodes)
    assert len(FAULTS) == len(CATALOGUE)
    for fault in CATALOGUE:
        assert fault.id == fault.check or fault.id.startswith(f"{fault.check}-"), fault.id
        assert fault.symptom and fault.reveal and fault.reason, fault.id
        assert not names & set(re.findall(r"\w+", fault.symptom)), f"{fault.id}: its symptom names a machine"
        assert "{" not in fault.reveal_for(ha), fault.id
        re.compile(fault.reason_for(ha))


def test_fill_leaves_other_braces_alone():
    assert fill(r"{last_worker} x{2} {unknown}", {"last_worker": "w2"}) == r"w2 x{2} {unknown}"
    assert targets(Cluster())["last_worker_index"] == "1"


# The failure patterns the falsification tests asserted before the catalogue, on the ha cluster (cp, last_cp,
# last_worker, etcd[-1], workers[0] = cp1, cp3, w2, cp3, w1): the catalogue must not weaken any of them.
HA_REASONS = {
    "C01": r"w2 \(worker\) runs control-plane components: pid \d+ /usr/local/sbin/lab-stray/etcd",
    "C02": r"cp3 lacks the NoSchedule taint",
    "C02-single": r"cp3 takes workloads, yet carries the taint",
    "C03": r"w2: kube-proxy.service is active, its main process pid \d+ /\S*sleep",
    "C04": r"cp1: .* -> etcd .* is held by pid \d+ /usr/local/sbin/rogue-client",
    "C04-member": r"etcd cp3 answered a client without a certificate",
    "C05": r"cp3 \(https://\S+\): ServiceAccount without rights: status allowed!",
    "C06": r"Secret written through cp3's API server .* is not stored encrypted",
    "C07": r"kube-proxy \(system:kube-proxy\) holds no open watch",
    "C07-scheduler": r"kube-scheduler \(system:kube-scheduler\) holds no open watch",
    "C08": r"waiting for API writes to fail without etcd",
    "C09": r"waiting for writes to fail with two members down",
    "C10": r"the pod got node '\S+' without a scheduler",
    "C11": r"FailedScheduling for the big pod|pod asking \d+ CPUs: node \S+",
    "C11-cordon": r"new replica \S+: on \S+ \(cordoned node: w1\)",
    "C13": r"pods appeared without the controller manager",
    "C14": r"waiting for w2 to be marked not Ready",
    "C15": r"waiting for the controller to create team-greeting",
    "C16": r"w2: kubelet.service is (inactive|failed|deactivating)",
    "C17": r"waiting for pod lab-c17-\w+/bound-1 to run",
    "C19": r"waiting for every node's Lease to be renewed twice",
    "C20": r"GET Secret other -> 200, expected 403",
    "C21": r"w2's kubelet: anonymous GET \S+ -> 200 \(want 401\)",
    "C23": r"waiting for rules for \S+ on w2",
    "C24": r"waiting for \d+ answers from \S+ on w1",
    "C25": r"w2 has rules for \S+ without kube-proxy",
    "C26": r"on-w1 -> \S+: |in \S+/on-w1: |w1 does not route",
    "C27": r"the API still answers writes",
    "C28": r"waiting for a write through \S+ with \S+ down",
    "C29": r"waiting for the pods on w2 to be evicted",
    "C30": r"waiting for \d+ answers from http://\S+ \(w2\) on this host",
    "C31": r"cp3 \(control plane\) runs etcd: pid \d+ /usr/local/sbin/lab-stray/etcd",
    "C32": r"w2: crictl on unix://\S+/crio\.sock: ",
}


def test_the_faults_keep_the_reasons_the_tests_asserted():
    ha = Cluster()
    assert {f.id: f.reason_for(ha) for f in CATALOGUE} == HA_REASONS


def test_a_test_only_fault_is_recorded_and_undone_like_the_others(state):
    cluster = Cluster()
    from labs.faults import stop

    with broken(cluster, Fault("C18-kubelet-stopped", "C18", lambda lab, j: stop(lab, j, ["w1"], "kubelet"))):
        assert Journal.load().check == "C18" and ("w1", "kubelet") in cluster.stopped
    assert not cluster.stopped and Journal.load() is None


def test_a_namespace_already_being_deleted_is_deleted():
    from labs.journal import delete_object

    def conflict(name, **kwargs):
        raise ApiException(status=409, reason="Conflict")

    api = SimpleNamespace(delete_namespace=conflict, delete_cluster_role=conflict)
    lab = SimpleNamespace(core=api, rbac=api)
    delete_object(lab, "Namespace", "lab-c15-probe-abcde")
    with pytest.raises(ApiException):
        delete_object(lab, "ClusterRole", "lab-falsify-c20")


def test_every_page_says_whether_its_check_has_an_exercise():
    from pathlib import Path

    pages = Path(__file__).resolve().parents[2] / "docs" / "labs"
    for ident in load_checks():
        text = (pages / f"{ident}.md").read_text()
        want = "**No exercise.**" if ident in TEST_ONLY else f"`lab break {ident}`"
        assert want in text.split("## Make it false")[-1], ident


def test_a_changed_configuration_is_not_rolled_out_past_a_failure_but_the_original_is(state):
    cluster = Cluster()
    before = cluster.state()
    real, restarted = cluster.sh, []

    def sh(node, command, check=True):
        if "systemctl restart kube-scheduler" in command:
            restarted.append(node)
            if node == "cp1" and len(restarted) == 1:
                raise CheckFailed("cp1: kube-scheduler did not start")
        return real(node, command, check)

    cluster.sh = sh
    with pytest.raises(CheckFailed, match="did not start"), broken(cluster, FAULTS["C11"]):
        pass
    assert restarted == ["cp1", "cp1", "cp2", "cp3"]  # the round stopped at cp1; the undo restarted them all
    assert cluster.state() == before and Journal.load() is None
