"""The plumbing every check shares: cluster access (the official client with
the admin kubeconfig), node access (testinfra over the same Ansible inventory
the playbooks use), bounded waiting, evidence, and restoring the cluster.

A check module stays about its claim:

    @check("C16", "kubelet runs on every node and registers it", claim=..., texts=[...], ...)
    def run(lab: Lab, ev: Evidence) -> None:
        ...observe...
        ev.expect(condition, "what was seen")      # fails the check when False
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from labs.nodefacts import SNAPSHOT, Conn, Snapshot, open_watches, parse_ss, rules_mentioning

__all__ = ["Conn", "Snapshot"]  # re-exported for the checks

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_KUBECONFIG = ROOT / ".lab/admin.kubeconfig"
DEFAULT_INVENTORY = ROOT / "inventory"
LAB_LABEL = "k8s-arch-lab/check"
# The systemd units the playbooks install (each node has those of its roles).
CLUSTER_UNITS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet",
                 "kube-proxy", "pod-network")
# A unit counts as up once active this long (a component that cannot start exits within a few seconds).
UNIT_STEADY_SECONDS = 10
LB_UNITS = ("haproxy", "keepalived")  # on the control-plane nodes of a cluster with several (the node image has
# them everywhere, enabled by their packages but unconfigured on the other machines)


class LabError(Exception):
    """Bad input or an unusable cluster: reported as one paragraph, exit 2."""


class CheckFailed(Exception):
    """The claim does not hold on this cluster."""


class CheckSkipped(Exception):
    """The cluster lacks the topology the claim needs."""


# --------------------------------------------------------------------------
# Checks and their registry


@dataclass
class Check:
    id: str
    title: str
    claim: str
    texts: list[str]
    disruptive: bool
    see: list[str]
    does: str
    func: Callable


REGISTRY: dict[str, Check] = {}


def check(id: str, title: str, *, claim: str, texts: list[str], see: list[str], does: str,
          disruptive: bool = False):
    """Register a check function ``func(lab, ev)``."""

    def register(func: Callable) -> Callable:
        REGISTRY[id] = Check(id, title, claim, texts, disruptive, see, does, func)
        return func

    return register


def load_checks() -> dict[str, Check]:
    import importlib
    import pkgutil

    from labs import checks

    for mod in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"labs.checks.{mod.name}")
    return dict(sorted(REGISTRY.items()))


@dataclass
class Evidence:
    """What a check looked at and saw; printed as the learner's notes."""

    lines: list[str] = field(default_factory=list)
    progress: Callable[[str], None] | None = None

    def add(self, line: str) -> None:
        self.lines.append(line)

    def step(self, line: str) -> None:
        """Progress of a long check (shown while it runs, kept as evidence)."""
        self.add(line)
        if self.progress:
            self.progress(line)

    def expect(self, condition: bool, seen: str, failure: str | None = None) -> None:
        if condition:
            self.add(f"ok: {seen}")
            return
        self.add(f"NOT: {failure or seen}")
        raise CheckFailed(failure or seen)


@dataclass
class Result:
    id: str
    title: str
    status: str  # passed | failed | skipped | error
    evidence: list[str]
    message: str
    seconds: float
    disruptive: bool


# --------------------------------------------------------------------------
# Restoring what checks change, even on failure or Ctrl-C


class Restorer:
    """Stacks of undo actions, one per thread (checks may run side by side), each run at the end of its check;
    all of them at exit and on SIGINT/SIGTERM. Once closed (interrupted), an action pushed by a check that is
    still running is carried out at once: nothing is created that nobody would delete."""

    def __init__(self) -> None:
        self._stacks: dict[int, list[tuple[str, Callable[[], None]]]] = {}
        self._lock = threading.Lock()
        self.closed = False
        atexit.register(self.run_everything)

    @property
    def actions(self) -> list[tuple[str, Callable[[], None]]]:
        with self._lock:
            return self._stacks.setdefault(threading.get_ident(), [])

    def push(self, what: str, action: Callable[[], None]) -> None:
        if self.closed:
            action()
            return
        self.actions.append((what, action))

    def discard(self, what: str) -> None:
        """Forget an undo action that the check already carried out itself."""
        actions = self.actions
        for i in range(len(actions) - 1, -1, -1):
            if actions[i][0] == what:
                del actions[i]
                return

    def run_all(self, log: Callable[[str], None] | None = None) -> list[str]:
        """Carry out this thread's undo actions, newest first."""
        return self._run(self.actions, log)

    def run_everything(self) -> None:
        """Carry out every thread's undo actions (exit, interrupt)."""
        self.closed = True
        with self._lock:
            stacks = list(self._stacks.values())
        for actions in stacks:
            self._run(actions, None)

    @staticmethod
    def _run(actions: list, log: Callable[[str], None] | None) -> list[str]:
        errors = []
        while actions:
            try:
                what, action = actions.pop()
            except IndexError:  # another thread emptied it meanwhile
                break
            try:
                action()
                if log:
                    log(f"restored: {what}")
            except Exception as exc:  # noqa: BLE001 - every undo must get its chance
                errors.append(f"{what}: {exc}")
        return errors


RESTORER = Restorer()


def _on_signal(signum, _frame):
    RESTORER.run_everything()
    raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


def install_signal_handlers() -> None:
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


# --------------------------------------------------------------------------
# The lab: cluster and nodes


class Timing:
    """How much longer than on real hardware things may take on this cluster's machines: the settings'
    timeout_scale (1, or more for VMs under software emulation), read from the inventory by Lab."""

    scale: float = 1.0


def scaled(seconds: float) -> float:
    """A bound on how long something takes on real hardware, for this cluster's machines."""
    return seconds * Timing.scale


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 1.0):
    """Poll ``predicate`` until it returns something truthy; bounded by ``timeout`` (seconds on real hardware,
    scaled for the cluster's machines: see Timing)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - the cluster may be recovering
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc})" if last_exc else ""
            raise CheckFailed(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


class Lab:
    """Access to the cluster (API) and to its machines (inventory)."""

    def __init__(self, kubeconfig: Path | None = None, inventory: Path | None = None) -> None:
        self.kubeconfig = Path(kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG)
        self.inventory = Path(inventory or os.environ.get("K8S_LAB_INVENTORY") or DEFAULT_INVENTORY)
        if not self.kubeconfig.is_file():
            raise LabError(
                f"no kubeconfig at {self.kubeconfig}. Bring the lab up first (`make up`, which writes "
                ".lab/admin.kubeconfig), or point --kubeconfig / KUBECONFIG at the admin kubeconfig of your cluster."
            )
        if not self.inventory.exists():
            raise LabError(
                f"no Ansible inventory at {self.inventory}. Run `lab` from the k8s-arch-lab checkout, or pass "
                "--inventory (or K8S_LAB_INVENTORY) with the inventory the playbooks used."
            )
        # Ansible's commands (ansible-inventory, used here and by testinfra) live beside the lab's own Python
        # when it runs from the virtualenv without the virtualenv being activated.
        bindir = str(Path(sys.executable).parent)
        if bindir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
        from kubernetes import client, config

        try:
            self.api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
        except Exception as exc:  # noqa: BLE001 - any parse problem is the user's input
            raise LabError(f"cannot use the kubeconfig {self.kubeconfig}: {exc}") from exc
        bound_requests()
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.rbac = client.RbacAuthorizationV1Api(self.api_client)
        self.server = self.api_client.configuration.host
        self._groups: dict[str, list[str]] | None = None
        self._hosts: dict = {}
        Timing.scale = float(self.setting("timeout_scale", 1) or 1)

    # ---- reachability ----------------------------------------------------

    def ping(self, timeout: float = 5.0) -> str:
        from kubernetes import client

        try:
            info = client.VersionApi(self.api_client).get_code(_request_timeout=timeout)
        except Exception as exc:  # noqa: BLE001
            raise LabError(
                f"the API server at {self.server} does not answer ({type(exc).__name__}). Is the cluster up? "
                "`make up` brings it up; `vagrant status` shows the machines; with the cluster running, check "
                "that this host reaches the node network."
            ) from exc
        return info.git_version

    # ---- nodes -----------------------------------------------------------

    @property
    def groups(self) -> dict[str, list[str]]:
        if self._groups is None:
            try:
                out = subprocess.run(["ansible-inventory", "-i", str(self.inventory), "--list"],
                                     capture_output=True, text=True, timeout=60, check=False, env=self._ansible_env())
            except FileNotFoundError as exc:
                raise LabError("ansible-inventory is not installed: run `make deps` (it installs Ansible into .venv) "
                               "and use .venv/bin/lab.") from exc
            if out.returncode != 0:
                raise LabError(f"cannot read the inventory {self.inventory}: {out.stderr.strip()[-500:]}")
            data = json.loads(out.stdout)
            self._groups = {g: v.get("hosts", []) for g, v in data.items() if isinstance(v, dict)}
            self._groups["k8s_cluster"] = sorted(set(self._groups.get("control_plane", []))
                                                | set(self._groups.get("workers", [])))
            self._hostvars = data.get("_meta", {}).get("hostvars", {})
        return self._groups

    def setting(self, name: str, default=None):
        """A value of the resolved lab settings the inventory hands to the playbooks (``lab_settings``); the
        default for an inventory of other machines, which has none."""
        self.groups  # noqa: B018 - loads the inventory
        for hostvars in self._hostvars.values():
            settings = hostvars.get("lab_settings")
            if isinstance(settings, dict) and name in settings:
                return settings[name]
        return default

    def hostvar(self, host: str, name: str, default=None):
        self.groups  # noqa: B018 - loads the inventory
        return self._hostvars.get(host, {}).get(name, default)

    @property
    def control_plane(self) -> list[str]:
        return self.groups.get("control_plane", [])

    @property
    def workers(self) -> list[str]:
        return self.groups.get("workers", [])

    @property
    def nodes(self) -> list[str]:
        return self.groups["k8s_cluster"]

    def _ansible_env(self) -> dict:
        env = dict(os.environ)
        env.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
        return env

    def host(self, name: str):
        """A testinfra host for an inventory machine (SSH, as the playbooks reach it)."""
        if name not in self._hosts:
            import testinfra

            os.environ.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
            self._hosts[name] = testinfra.get_host(f"ansible://{name}", ansible_inventory=str(self.inventory))
        return self._hosts[name]

    def sh(self, node: str, command: str, check: bool = True) -> str:
        """Run a shell command as root on a node; its stdout (stripped)."""
        result = self.host(node).run(command)
        if check and result.rc != 0:
            raise CheckFailed(f"{node}: `{command}` exited {result.rc}: {result.stderr.strip()[-300:]}")
        return result.stdout.strip()

    def etcdctl(self, args: str, node: str | None = None) -> str:
        """etcdctl on an etcd member, as the lab's own administrative client: in a transient scope of its own
        (lab-admin-*.scope), so that C04, which decides by process who talks to etcd, knows it for what it is."""
        node = node or (self.groups.get("etcd") or self.control_plane)[0]
        scope = f"lab-admin-{uuid.uuid4().hex[:8]}"
        script = shlex.quote(f". /etc/etcd/etcdctl.env && exec etcdctl {args}")
        return self.sh(node, f"systemd-run --quiet --scope --unit={scope} --collect -- sh -c {script}")

    def open_watches(self, node: str) -> dict[str, dict[str, int]]:
        """The watches the API server on ``node`` holds open now, per user and resource, from its audit log
        (labs.nodefacts.open_watches, run on the node over the current and the previous log file)."""
        import inspect

        path = self.unit_arg(node, "kube-apiserver", "audit-log-path")
        if not path:
            raise CheckFailed(f"{node}: the API server writes no audit log (--audit-log-path): re-run the playbooks")
        script = "\n".join([
            "import glob, json, os, sys", inspect.getsource(open_watches),
            "files = sorted(glob.glob(sys.argv[1].rsplit('.', 1)[0] + '*'), key=os.path.getmtime)[-2:]",
            "print(json.dumps(open_watches(''.join(open(f, errors='replace').read() for f in files), "
            "float(sys.argv[2]))))"])
        since = self.sh(node, "systemctl show -P ActiveEnterTimestamp --timestamp=unix kube-apiserver").lstrip("@")
        return json.loads(self.sh(node, f"python3 -c {shlex.quote(script)} {path} {since or 0}"))

    def snapshot(self, node: str) -> Snapshot:
        """One look at a node's connections, processes and component units (see labs.nodefacts)."""
        return Snapshot.parse(self.sh(node, SNAPSHOT))

    def api_servers(self) -> dict[str, str]:
        """Each API server at its own address (not the load-balanced one): node -> https://ip:port."""
        ips = node_ips(self)
        return {n: f"https://{ips[n]}:{self.unit_arg(n, 'kube-apiserver', 'secure-port') or 6443}"
                for n in self.control_plane}

    def api_client_for(self, server: str):
        """An API client with the admin credentials, talking to one given API server."""
        from kubernetes import client

        cfg = client.Configuration()
        src = self.api_client.configuration
        for attr in ("ssl_ca_cert", "cert_file", "key_file", "api_key", "api_key_prefix", "verify_ssl"):
            setattr(cfg, attr, getattr(src, attr))
        cfg.host = server
        return client.ApiClient(cfg)

    def unit_arg(self, node: str, unit: str, flag: str) -> str | None:
        """The value of ``--flag`` in a systemd unit's command line."""
        text = self.sh(node, f"systemctl cat {unit} 2>/dev/null || true", check=False)
        match = re.search(rf"--{re.escape(flag)}=(\S+)", text)
        return match.group(1) if match else None

    # ---- disruption with guaranteed restore ---------------------------------

    def stop_unit(self, node: str, unit: str, ev: Evidence) -> None:
        """Stop a unit and make sure it is started again, whatever happens.

        Starts are --no-block: an etcd member waits for its peers, so the
        members of a stopped cluster must all be started before any is up."""
        RESTORER.push(f"start {unit} on {node}", lambda: self.sh(node, f"systemctl start --no-block {unit}"))
        self.sh(node, f"systemctl stop {unit}")
        ev.step(f"stopped {unit} on {node}")

    def on_each(self, nodes: list[str], fn: Callable[[str], object]) -> dict:
        """``fn(node)`` on every node at once (one thread per node): node -> its result."""
        from concurrent.futures import ThreadPoolExecutor

        for node in nodes:
            self.host(node)  # created here: testinfra hosts are not built thread-safely
        with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
            return dict(zip(nodes, pool.map(fn, nodes), strict=True))

    def stop_units(self, nodes: list[str], units: list[str], ev: Evidence) -> None:
        """Stop units on several nodes at once (an API server may take up to its
        request timeout to drain), each with its guaranteed restart."""
        for node in nodes:
            for unit in units:
                RESTORER.push(f"start {unit} on {node}",
                              lambda n=node, u=unit: self.sh(n, f"systemctl start --no-block {u}"))
        self.on_each(nodes, lambda n: self.sh(n, f"systemctl stop {' '.join(units)}"))
        ev.step(f"stopped {', '.join(units)} on {', '.join(nodes)}")

    def start_units(self, nodes: list[str], units: list[str], ev: Evidence) -> None:
        """Start units (in reverse order of stopping) and drop their pending restore."""
        for node in nodes:
            for unit in reversed(units):
                self.sh(node, f"systemctl start --no-block {unit}")
                RESTORER.discard(f"start {unit} on {node}")
            ev.step(f"started {', '.join(reversed(units))} on {node}")

    def api_writes(self, ns: str, name: str, timeout: float = 8.0) -> str | None:
        """Try to create a ConfigMap; None when it worked, else the error."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        try:
            self.core.create_namespaced_config_map(
                ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"written": "yes"}),
                _request_timeout=timeout)
            return None
        except ApiException as exc:
            if exc.status == 409:  # written by an earlier attempt: the storage answers
                return None
            return f"ApiException: ({exc.status}) {exc.reason}"
        except Exception as exc:  # noqa: BLE001 - any failure is the observation
            return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"

    # ---- scratch namespace -------------------------------------------------------

    @contextlib.contextmanager
    def namespace(self, check_id: str) -> Iterator[str]:
        """A namespace for the check's objects, deleted at the end (pass, fail or Ctrl-C)."""
        from kubernetes import client

        name = f"lab-{check_id.lower()}-{uuid.uuid4().hex[:5]}"
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
            name=name, labels={LAB_LABEL: check_id})))
        RESTORER.push(f"delete namespace {name}", lambda: self.delete_namespace(name))
        # Pods need the namespace's default ServiceAccount, which a controller creates shortly after.
        wait_for(lambda: self.core.list_namespaced_service_account(
            name, field_selector="metadata.name=default").items, 60, f"the default ServiceAccount of {name}", 0.5)
        try:
            yield name
        finally:
            pass  # deleted by the restorer at the end of the check

    def delete_namespace(self, name: str, timeout: float = 180) -> None:
        """Delete a namespace; waits (bounded) for an API server that is still coming back."""
        from kubernetes.client.rest import ApiException

        def delete() -> bool:
            try:
                self.core.delete_namespace(name, grace_period_seconds=0, _request_timeout=10)
            except ApiException as exc:
                if exc.status != 404:
                    raise
            return True

        wait_for(delete, timeout, f"the API server to delete namespace {name}", 1)

    # ---- cluster health ------------------------------------------------------------

    def ready_nodes(self) -> list[str]:
        ready = []
        for node in self.core.list_node().items:
            conditions = {c.type: c.status for c in node.status.conditions or []}
            if conditions.get("Ready") == "True":
                ready.append(node.metadata.name)
        return sorted(ready)

    def units_down(self, steady: int = UNIT_STEADY_SECONDS) -> dict[str, list[str]]:
        """Per node, the cluster's units that are enabled there but not active, or active for less than ``steady``
        seconds: a component that exited (e.g. on losing its leader election while the API was away) and waits for
        systemd to restart it, or one just started that may still exit (kube-controller-manager exits when it
        starts before the API server's RBAC caches are filled, and systemd starts it again 5 s later)."""
        def on(node: str) -> list[str]:
            units = CLUSTER_UNITS + (LB_UNITS if node in self.control_plane and len(self.control_plane) > 1 else ())
            return self.sh(node, f"now=$(date +%s); for u in {' '.join(units)}; do "
                                 "systemctl is-enabled -q $u 2>/dev/null || continue; "
                                 "if systemctl is-active -q $u; then "
                                 "t=$(systemctl show -P ActiveEnterTimestamp --timestamp=unix $u); t=${t#@}; "
                                 f"[ $((now - ${{t:-0}})) -ge {steady} ] || echo $u; "
                                 "else echo $u; fi; done; true", check=False).split()

        found = self.on_each(self.nodes, on)  # every node at once: one ssh round trip per poll
        return {node: units for node, units in found.items() if units}

    def wait_healthy(self, timeout: float, ev: Evidence | None = None) -> None:
        """Every inventory node Ready, the API answering and every cluster unit active, and steadily so (bounded)."""
        want = sorted(self.nodes)
        deadline = time.monotonic() + scaled(timeout)
        wait_for(lambda: self.ready_nodes() == want, timeout, f"all nodes Ready ({', '.join(want)})", 1)
        left = max(scaled(10.0), deadline - time.monotonic())
        wait_for(lambda: not self.units_down(), left / Timing.scale,
                 f"every component's unit to be active again (for {UNIT_STEADY_SECONDS} s)", 1)
        if ev:
            ev.step(f"cluster healthy again: {', '.join(want)} Ready, every component's unit active")

    def server_now(self):
        """The API server's clock (its Date header), to age timestamps the cluster wrote without trusting this
        host's clock (a VM's clock may drift from the host's)."""
        from email.utils import parsedate_to_datetime

        from kubernetes import client

        _, _, headers = client.VersionApi(self.api_client).get_code_with_http_info(_request_timeout=10)
        return parsedate_to_datetime(headers["Date"])

    def node_monitor_grace(self) -> float:
        """Seconds the node controller waits before marking a silent node (controller-manager flag)."""
        value = self.unit_arg(self.control_plane[0], "kube-controller-manager", "node-monitor-grace-period") or "50s"
        return parse_duration(value)


REQUEST_TIMEOUT = (10, 90)  # seconds: connect; read (the API server's own request timeout is 60 s)


def bound_requests() -> None:
    """Give every API request of this process (every client, watches included) a timeout unless it has its own.
    The official client blocks forever by default: a connection cut silently (the API address moved to another
    node) would hang the check."""
    from kubernetes.client import rest

    if getattr(rest.RESTClientObject.request, "lab_bounded", False):
        return
    unbounded = rest.RESTClientObject.request

    def request(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        return unbounded(self, method, url, headers=headers, body=body, post_params=post_params,
                         _request_timeout=_request_timeout or REQUEST_TIMEOUT)

    request.lab_bounded = True
    rest.RESTClientObject.request = request


def parse_duration(text: str) -> float:
    total = 0.0
    for number, unit in re.findall(r"([\d.]+)(ms|s|m|h)", text):
        total += float(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def pod_manifest(name: str, image: str, **spec) -> dict:
    """A small pod of the lab's test image."""
    container = {"name": "main", "image": image, "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}
    container.update(spec.pop("container", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 0, **spec}}


def test_image() -> str:
    import yaml

    images = yaml.safe_load((ROOT / "versions.yml").read_text())["images"]
    return f"{images['echo']['name']}:{images['echo']['version']}"


# --------------------------------------------------------------------------
# Helpers for the observing checks: pods, exec, sockets

POD_START_TIMEOUT = 120  # seconds: the image is already on every node, so this is scheduling + sandbox + start


def echo_env() -> list[dict]:
    """The test image's environment: it answers "pod=<POD_NAME> node=<NODE_NAME>"."""
    return [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]


def node_ips(lab: Lab) -> dict[str, str]:
    """Node name -> InternalIP, as the Node objects report them."""
    return {n.metadata.name: next(a.address for a in n.status.addresses if a.type == "InternalIP")
            for n in lab.core.list_node().items}


def wait_running(lab: Lab, ns: str, name: str, timeout: float = POD_START_TIMEOUT):
    """The pod once it is Running with all containers ready."""
    def ready():
        pod = lab.core.read_namespaced_pod(name, ns)
        statuses = pod.status.container_statuses or []
        return pod if pod.status.phase == "Running" and statuses and all(s.ready for s in statuses) else None

    return wait_for(ready, timeout, f"pod {ns}/{name} to run")


def run_pod(lab: Lab, ns: str, manifest: dict, timeout: float = POD_START_TIMEOUT):
    """Create a pod and return it once it runs."""
    lab.core.create_namespaced_pod(ns, manifest)
    return wait_running(lab, ns, manifest["metadata"]["name"], timeout)


def run_deployment(lab: Lab, ns: str, name: str, replicas: int, spread: bool = False,
                   timeout: float = POD_START_TIMEOUT) -> list:
    """A Deployment of the test image (answering on 8080); its pods once all are ready.
    ``spread``: at most one replica more on one schedulable node than on another."""
    spec = pod_manifest(name, test_image(), container={"env": echo_env(), "ports": [{"containerPort": 8080}],
                                                       "readinessProbe": {"httpGet": {"path": "/healthz",
                                                                                      "port": 8080},
                                                                          "periodSeconds": 2}})["spec"]
    if spread:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                              "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
                                              "labelSelector": {"matchLabels": {"app": name}}}]
    lab.apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
    return wait_ready_pods(lab, ns, name, replicas, timeout)


def wait_ready_pods(lab: Lab, ns: str, app: str, count: int, timeout: float = POD_START_TIMEOUT) -> list:
    """The pods labelled app=<app>, once exactly ``count`` of them exist and all are ready."""
    def ready():
        pods = [p for p in lab.core.list_namespaced_pod(ns, label_selector=f"app={app}").items
                if not p.metadata.deletion_timestamp]
        ok = [p for p in pods if p.status.phase == "Running"
              and all(s.ready for s in p.status.container_statuses or [])]
        return ok if len(pods) == len(ok) == count else None

    return wait_for(ready, timeout, f"{count} ready pods app={app} in {ns}")


def pod_exec(lab: Lab, ns: str, pod: str, command: list[str], timeout: float = 60, check: bool = True) -> str:
    """Run a command in a pod through the API server (exec); its stdout. A command that cannot start or exits
    non-zero fails the check (unless ``check=False``). A separate API client: the websocket call must not divert
    the lab's other requests."""
    from kubernetes import client
    from kubernetes.stream import stream
    from kubernetes.stream.ws_client import ERROR_CHANNEL, STDERR_CHANNEL, STDOUT_CHANNEL

    api = client.CoreV1Api(client.ApiClient(lab.api_client.configuration))
    ws = stream(api.connect_get_namespaced_pod_exec, pod, ns, command=command, stderr=True, stdin=False,
                stdout=True, tty=False, _preload_content=False)
    try:
        ws.run_forever(timeout=timeout)
        out, err, status = (ws.read_channel(c) for c in (STDOUT_CHANNEL, STDERR_CHANNEL, ERROR_CHANNEL))
    finally:
        ws.close()
    result = json.loads(status) if status else {}
    if check and result.get("status") != "Success":
        raise CheckFailed(f"exec {' '.join(command)} in {ns}/{pod}: {result.get('message') or 'no exit status'}"
                          f"{': ' + err.strip()[-200:] if err.strip() else ''}")
    return out


def pod_events(lab: Lab, ns: str, name: str) -> list:
    """The events about one object of the namespace, oldest first."""
    items = lab.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return sorted(items, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)


def established(lab: Lab, node: str, selector: str = "") -> list[Conn]:
    """The node's established TCP connections (``ss -tnp state established <selector>``), with their processes."""
    return parse_ss(lab.sh(node, f"ss -Htnp state established {selector}"))


def crictl_container(lab: Lab, node: str, ns: str, pod: str, name: str = "main") -> str:
    """The id of a pod's running container in a node's containerd ("" when there is none)."""
    return lab.sh(node, f"crictl ps -q --name '^{name}$' --label io.kubernetes.pod.namespace={ns} "
                        f"--label io.kubernetes.pod.name={pod}")


def event_source(event) -> tuple[str, str]:
    """(component, host) that reported a core/v1 Event, whichever of its fields carry them."""
    source = event.source
    return (event.reporting_component or (source.component if source else "") or "",
            event.reporting_instance or (source.host if source else "") or "")


def proxy_config(lab: Lab, node: str) -> dict:
    """kube-proxy's configuration file on a node (the unit's --config), as a dict."""
    import yaml

    path = lab.unit_arg(node, "kube-proxy", "config") or "/var/lib/kube-proxy/config.yaml"
    return yaml.safe_load(lab.sh(node, f"cat {path}")) or {}


def proxy_rules(lab: Lab, node: str, address: str, mode: str | None = None) -> list[str]:
    """The lines of a node's kube-proxy rules that mention ``address``: iptables-save in iptables mode,
    the kube-proxy nftables tables in nftables mode."""
    mode = mode or proxy_config(lab, node).get("mode") or "iptables"
    dump = "iptables-save" if mode == "iptables" else "nft list table ip kube-proxy"
    return rules_mentioning(lab.sh(node, f"{dump} 2>/dev/null || true"), address)


def proxy_sync_period(config: dict) -> float:
    """kube-proxy's full resync period in seconds (its config's <mode>.syncPeriod; 30s by default)."""
    mode = config.get("mode") or "iptables"
    return parse_duration(str((config.get(mode) or {}).get("syncPeriod") or "30s"))
