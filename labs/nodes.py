"""Access to the cluster's machines, the mixin Lab is built on: the Ansible inventory (groups, settings, hostvars),
testinfra hosts over SSH, shell commands and what they read on a node, and stopping/starting units with their
guaranteed restart."""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from labs.i18n import _
from labs.nodefacts import SNAPSHOT, Snapshot, open_watches, settled
from labs.paths import ROOT
from labs.registry import CheckFailed, Evidence, LabError
from labs.restore import RESTORER

CONTROL_PATH_DIR = Path("~/.ansible/cp")  # testinfra's (and Ansible's) default for the SSH control sockets


def venv_on_path() -> None:
    """Put the directory of lab's own Python first on PATH: Ansible's commands (ansible-inventory, used here and
    by testinfra) live beside it when `.venv/bin/lab` runs without the virtualenv activated. Also the checkout's
    own .venv/bin (after it), for a module run by another Python (`python3 -m tools.benchmark`)."""
    path = os.environ.get("PATH", "").split(os.pathsep)
    checkout = ROOT / ".venv" / "bin"
    if checkout.is_dir() and str(checkout) not in path:
        path.insert(0, str(checkout))
    bindir = str(Path(sys.executable).parent)
    if bindir not in path:
        path.insert(0, bindir)
    os.environ["PATH"] = os.pathsep.join(path)


def read_inventory(inventory: Path) -> dict:
    """`ansible-inventory --list` of an inventory: groups, and each host's variables under _meta.hostvars."""
    venv_on_path()
    env = dict(os.environ)
    env.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    try:
        out = subprocess.run(["ansible-inventory", "-i", str(inventory), "--list"],
                             capture_output=True, text=True, timeout=60, check=False, env=env)
    except FileNotFoundError as exc:
        raise LabError(_("ansible-inventory is not installed: run `make deps` (it installs Ansible into .venv) and "
                         "use .venv/bin/lab.")) from exc
    if out.returncode != 0:
        raise LabError(_("cannot read the inventory {inventory}: {error}").format(
            inventory=inventory, error=out.stderr.strip()[-500:]))
    return json.loads(out.stdout)


def published_settings(inventory: Path) -> dict:
    """The resolved lab settings an inventory hands to the playbooks (``lab_settings``); {} when it has none."""
    for hostvars in read_inventory(inventory).get("_meta", {}).get("hostvars", {}).values():
        if isinstance(hostvars.get("lab_settings"), dict):
            return hostvars["lab_settings"]
    return {}


@functools.cache
def _backend_class():
    from testinfra.backend.ansible import AnsibleBackend

    class Backend(AnsibleBackend):
        """testinfra's Ansible backend on a given inventory runner, not its per-process one (NodeAccess._runner)."""

        def __init__(self, runner, *args, **kwargs) -> None:
            self._lab_runner = runner
            super().__init__(*args, **kwargs)

        @property
        def ansible_runner(self):
            return self._lab_runner

    return Backend  # made on first use: testinfra is imported only when a check reaches a node


class NodeAccess:
    """The machines of the inventory, as Lab reaches them (Lab sets the attributes below in its __init__)."""

    inventory: Path
    _groups: dict[str, list[str]] | None
    _hosts: dict
    _hostvars: dict
    _testinfra_runner = None

    # ---- nodes -----------------------------------------------------------

    @property
    def groups(self) -> dict[str, list[str]]:
        if self._groups is None:
            data = read_inventory(self.inventory)
            self._groups = {g: v.get("hosts", []) for g, v in data.items() if isinstance(v, dict)}
            self._groups["k8s_cluster"] = sorted(set(self._groups.get("control_plane", []))
                                                | set(self._groups.get("workers", [])))
            self._hostvars = data.get("_meta", {}).get("hostvars", {})
        return self._groups

    def settings(self) -> dict:
        """The resolved lab settings the inventory publishes (``lab_settings``; {} for an inventory without)."""
        self.groups  # noqa: B018 - loads the inventory
        return next((v["lab_settings"] for v in self._hostvars.values() if isinstance(v.get("lab_settings"), dict)),
                    {})

    def setting(self, name: str, default=None):
        """A value of the resolved lab settings the inventory hands to the playbooks (``lab_settings``); the
        default for an inventory of other machines, which has none."""
        return self.settings().get(name, default)

    def path(self, name: str) -> str:
        """Where the roles put something on the nodes (the settings' paths: pki_dir, etcd_pki_dir, ...)."""
        paths = self.setting("paths")
        if not isinstance(paths, dict) or name not in paths:
            raise LabError(_("the inventory {inventory} publishes no lab_settings.paths.{name}: use the lab's "
                             "inventory (inventory/lab.py), which takes it from tools/settings.py").format(
                inventory=self.inventory, name=name))
        return paths[name]

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
    def control_plane_workloads(self) -> bool:
        """Whether the control-plane nodes take workloads (no control-plane taint: the single profile), as the
        settings say; an inventory of other machines: when it has no worker."""
        return bool(self.setting("control_plane_workloads", not self.workers))

    @property
    def workload_nodes(self) -> list[str]:
        """The nodes ordinary pods may land on: the workers, then the control-plane nodes where they take workloads
        too (on the single profile, the one machine)."""
        return self.workers + (self.control_plane if self.control_plane_workloads else [])

    @property
    def nodes(self) -> list[str]:
        """The Kubernetes nodes: control plane and workers."""
        return self.groups["k8s_cluster"]

    @property
    def etcd_members(self) -> list[str]:
        """The machines that run an etcd member: the control-plane nodes, or machines of their own (external)."""
        return self.groups.get("etcd") or self.control_plane

    @property
    def machines(self) -> list[str]:
        """Every machine of the cluster: the nodes and the machines of an external etcd (which are no nodes)."""
        return sorted(set(self.nodes) | set(self.etcd_members))

    @property
    def external_etcd(self) -> list[str]:
        """The etcd members that are not control-plane nodes (empty where etcd is stacked on the control plane)."""
        return [m for m in self.etcd_members if m not in self.control_plane]

    def control_plane_components(self, machine: str) -> list[str]:
        """The control-plane components the machine runs by design: etcd on its members, the API server, the
        scheduler and the controller-manager on the control-plane nodes."""
        return ((["etcd"] if machine in self.etcd_members else [])
                + (["kube-apiserver", "kube-scheduler", "kube-controller-manager"]
                   if machine in self.control_plane else []))

    # ---- container runtimes -------------------------------------------------

    def runtime(self, node: str) -> str:
        """The node's container runtime as its settings give it (containerd, crio or docker; the inventory's
        lab_runtime): what a check expects, never what the node says of itself."""
        return self.hostvar(node, "lab_runtime") or "containerd"

    def cri_socket(self, node: str) -> str:
        """The node's CRI socket, as the settings compiler produced it (the inventory's lab_cri_socket)."""
        return self.hostvar(node, "lab_cri_socket") or self.path("containerd_socket")

    def runtime_units(self, node: str) -> dict[str, str]:
        """The systemd units of the node's runtime -> the program each runs (containerd: containerd; docker:
        cri-docker -> cri-dockerd, docker -> dockerd)."""
        known = (self.setting("runtimes") or {}).get(self.runtime(node), {}).get("units")
        if isinstance(known, dict):
            return dict(known)
        return {u: u for u in self.hostvar(node, "lab_runtime_units") or ["containerd"]}

    def cri_name(self, node: str) -> str:
        """What the node's runtime calls itself over CRI (a Node's containerRuntimeVersion is "<name>://...")."""
        known = (self.setting("runtimes") or {}).get(self.runtime(node), {}).get("cri_name")
        return known or self.runtime(node)

    def artifact_origin(self, component: str) -> str | None:
        """Where the cache's files of a component came from, as the cache's manifest recorded it: the release
        downloaded, or the source tree and commit it was built from (None where the manifest does not say)."""
        plan = next((v["lab_artifacts"] for v in (self._hostvars or {}).values()
                     if isinstance(v.get("lab_artifacts"), dict)), {})
        try:
            entries = json.loads((Path(plan["cache_dir"]) / "manifest.json").read_text())["files"]
        except (KeyError, OSError, ValueError, TypeError):
            return None
        for entry in entries.values():
            if entry.get("component") != component:
                continue
            built = entry.get("built_from")
            if built:
                return _("{version} built from {repository} at {ref} (commit {commit})").format(
                    version=entry.get("version"), repository=built.get("repository") or built.get("tree"),
                    ref=built.get("ref"), commit=str(built.get("commit"))[:12])
            return _("{version} {source} ({url})").format(version=entry.get("version"), source=entry.get("source"),
                                                         url=entry.get("url"))
        return None

    def crictl(self, node: str, args: str, check: bool = True) -> str:
        """crictl on a node, through the node's own CRI socket (not whatever /etc/crictl.yaml says)."""
        sock = f"unix://{self.cri_socket(node)}"
        return self.sh(node, f"crictl --runtime-endpoint {sock} --image-endpoint {sock} {args}", check=check)

    def machine_ip(self, machine: str) -> str:
        """A machine's address on the node network, as the inventory gives it (nodes and etcd machines alike)."""
        return self.hostvar(machine, "lab_node_ip") or self.hostvar(machine, "ansible_host") or machine

    def host(self, name: str):
        """A testinfra host for an inventory machine (SSH, as the playbooks reach it)."""
        if name not in self._hosts:
            from testinfra.host import Host

            os.environ.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
            # testinfra multiplexes SSH (ansible.cfg: control_path) only when this directory exists (Ansible makes
            # it on its first run; lab may run before, with another HOME).
            CONTROL_PATH_DIR.expanduser().mkdir(mode=0o700, parents=True, exist_ok=True)
            backend = _backend_class()(self._runner(), name, ansible_inventory=str(self.inventory))
            self._hosts[name] = Host(backend)
            backend.set_host(self._hosts[name])
        return self._hosts[name]

    def _runner(self):
        """This Lab's own reading of the inventory for testinfra. testinfra's get_host keeps, for the life of the
        process, the first inventory it read under a path (a runner per path, a host per name): a process that
        outlives a cluster (the end-to-end tests bring up the default profile, then ha, under the same inventory)
        would look for the second cluster's machines in the first one's inventory (CI: `ssh: Could not resolve
        hostname cp2`, cp2 being no machine of the default profile). A Lab reads the inventory once, when made."""
        if self._testinfra_runner is None:
            from testinfra.utils.ansible_runner import AnsibleRunner

            venv_on_path()  # it runs ansible-inventory
            self._testinfra_runner = AnsibleRunner(str(self.inventory))
        return self._testinfra_runner

    def sh(self, node: str, command: str, check: bool = True) -> str:
        """Run a shell command as root on a node; its stdout (stripped)."""
        result = self.host(node).run(command)
        if check and result.rc != 0:
            raise CheckFailed(_("{node}: `{command}` exited {rc}: {stderr}").format(
                node=node, command=command, rc=result.rc, stderr=result.stderr.strip()[-300:]))
        return result.stdout.strip()

    def etcdctl(self, args: str, node: str | None = None) -> str:
        """etcdctl on an etcd member, as the lab's own administrative client: in a transient scope of its own
        (lab-admin-*.scope), so that C04, which decides by process who talks to etcd, knows it for what it is."""
        node = node or self.etcd_members[0]
        scope = f"lab-admin-{uuid.uuid4().hex[:8]}"
        script = shlex.quote(f". {self.path('etcd_config_dir')}/etcdctl.env && exec etcdctl {args}")
        return self.sh(node, f"systemd-run --quiet --scope --unit={scope} --collect -- sh -c {script}")

    def etcd_get(self, key: str, node: str | None = None) -> dict | None:
        """The key-value record of ``key`` in etcd, read on ``node`` (None when absent); value decoded to bytes."""
        out = json.loads(self.etcdctl(f"get {key} -w json", node=node))
        if not out.get("kvs"):
            return None
        kv = out["kvs"][0]
        return {**kv, "value": base64.b64decode(kv["value"])}

    def open_watches(self, node: str) -> dict[str, dict[str, int]]:
        """The watches the API server on ``node`` holds open now, per user and resource, from its audit log
        (labs.nodefacts.open_watches, run on the node over the current and the previous log file)."""
        import inspect

        path = self.unit_arg(node, "kube-apiserver", "audit-log-path")
        if not path:
            raise CheckFailed(_("{node}: the API server writes no audit log (--audit-log-path): re-run the "
                                "playbooks").format(node=node))
        script = "\n".join([
            "import glob, json, os, sys", inspect.getsource(open_watches),
            "files = sorted(glob.glob(sys.argv[1].rsplit('.', 1)[0] + '*'), key=os.path.getmtime)[-2:]",
            "print(json.dumps(open_watches(''.join(open(f, errors='replace').read() for f in files), "
            "float(sys.argv[2]))))"])
        # Since the API server's process started, not since its unit became active: the unit is active only once
        # its ExecStartPost finds the API answering (seconds later), and the watches clients reopen at once after a
        # restart (C27 restarts it) would be left out for their whole life (5-10 min) otherwise.
        since = self.sh(node, "systemctl show -P ExecMainStartTimestamp --timestamp=unix kube-apiserver").lstrip("@")
        return json.loads(self.sh(node, f"python3 -c {shlex.quote(script)} {path} {since or 0}"))

    def snapshot(self, node: str) -> Snapshot:
        """A look at a node's connections, processes and component units (see labs.nodefacts): a second look when
        the first saw a connection without its process (nodefacts.settled)."""
        return settled(lambda: Snapshot.parse(self.sh(node, SNAPSHOT)))

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
        RESTORER.push(_("start {unit} on {node}").format(unit=unit, node=node),
                      lambda: self.sh(node, f"systemctl start --no-block {unit}"))
        self.sh(node, f"systemctl stop {unit}")
        ev.step(_("stopped {unit} on {node}").format(unit=unit, node=node))

    def on_each(self, nodes: list[str], fn: Callable[[str], object]) -> dict:
        """``fn(node)`` on every node at once (one thread per node): node -> its result."""
        from concurrent.futures import ThreadPoolExecutor

        for node in nodes:
            self.host(node)  # created here: testinfra hosts are not built thread-safely
        with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
            return dict(zip(nodes, pool.map(fn, nodes), strict=True))

    def stop_units(self, nodes: list[str], units: list[str], ev: Evidence) -> None:
        """Stop units on several nodes at once (an API server drains its requests in flight and its watches first:
        seconds), each with its guaranteed restart."""
        for node in nodes:
            for unit in units:
                RESTORER.push(_("start {unit} on {node}").format(unit=unit, node=node),
                              lambda n=node, u=unit: self.sh(n, f"systemctl start --no-block {u}"))
        self.on_each(nodes, lambda n: self.sh(n, f"systemctl stop {' '.join(units)}"))
        ev.step(_("stopped {units} on {nodes}").format(units=", ".join(units), nodes=", ".join(nodes)))

    def start_units(self, nodes: list[str], units: list[str], ev: Evidence) -> None:
        """Start units (in reverse order of stopping) and drop their pending restore."""
        for node in nodes:
            for unit in reversed(units):
                self.sh(node, f"systemctl start --no-block {unit}")
                RESTORER.discard(_("start {unit} on {node}").format(unit=unit, node=node))
            ev.step(_("started {units} on {node}").format(units=", ".join(reversed(units)), node=node))
