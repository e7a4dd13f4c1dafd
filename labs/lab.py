"""The Lab every check is given: the cluster through the official client with the admin kubeconfig, its machines
through the inventory (labs.nodes), a scratch namespace per check, and whether the cluster is healthy."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from labs.i18n import _
from labs.kube import bound_requests, node_ips, pod_manifest, test_image
from labs.nodes import NodeAccess, venv_on_path
from labs.paths import DEFAULT_INVENTORY
from labs.registry import Evidence, LabError
from labs.restore import RESTORER
from labs.timing import Timing, parse_duration, scaled, wait_for

LAB_LABEL = "k8s-arch-lab/check"
# The systemd units the playbooks install (each node has those of its roles).
CLUSTER_UNITS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "crio",
                 "docker", "cri-docker", "kubelet", "kube-proxy", "pod-network")
# A unit counts as up once active this long (times timeout_scale): a component that cannot start exits within a
# few seconds (kube-controller-manager started before its API server was ready exited 3.1-3.2 s after its start, in
# the journal of an ha run), and systemd shows it as not active until its restart.
UNIT_STEADY_SECONDS = 5
# Seconds a new namespace may wait for its default ServiceAccount: the controller manager's informers retry a
# refused request after a backoff of up to 30 s doubled by jitter (client-go's reflector), so after its local API
# server restarts (a fault of C05 or C06, C27's stop) the controllers can act on nothing for a minute.
SERVICE_ACCOUNT_WAIT = 120
# The components that run one active instance at a time, each holding a Lease of this name in kube-system.
LEADER_LEASES = ("kube-controller-manager", "kube-scheduler")
# A write through the API counts as failed when it has no answer within this (the client's read timeout) or an error.
API_WRITE_TIMEOUT = 8.0
# Three write attempts, with the pauses between them (times timeout_scale): the bound for a write to fail once its
# storage is gone (etcd stopped, or no quorum; seen on ha: the first attempt fails, after 7-8 s), and for a write to
# succeed again once the API address has moved to another control-plane node (keepalived's advert_int 1 s, haproxy's
# inter 2s fall 2: some 8 s; seen on ha: the first attempt succeeds, the stop itself takes longer).
THREE_WRITE_ATTEMPTS = 3 * API_WRITE_TIMEOUT + 6
LB_UNITS = ("haproxy", "keepalived")  # on the control-plane nodes of a cluster with several (the node image has
# them everywhere, enabled by their packages but unconfigured on the other machines)


class Lab(NodeAccess):
    """Access to the cluster (API) and to its machines (inventory: NodeAccess, in labs.nodes)."""

    def __init__(self, kubeconfig: Path | None = None, inventory: Path | None = None) -> None:
        self.inventory = Path(inventory or os.environ.get("K8S_LAB_INVENTORY") or DEFAULT_INVENTORY)
        if not self.inventory.exists():
            raise LabError(_(
                "no Ansible inventory at {inventory}. Run `lab` from the k8s-arch-lab checkout, or pass --inventory "
                "(or K8S_LAB_INVENTORY) with the inventory the playbooks used.").format(inventory=self.inventory))
        venv_on_path()
        self._groups: dict[str, list[str]] | None = None
        self._hosts: dict = {}
        # The admin kubeconfig `make up` writes into the lab's state folder, which the inventory publishes.
        state = self.setting("state_dir")
        published = Path(state) / "admin.kubeconfig" if state else None
        self.kubeconfig = Path(kubeconfig or os.environ.get("KUBECONFIG") or published or "admin.kubeconfig")
        if not self.kubeconfig.is_file():
            raise LabError(_(
                "no kubeconfig at {kubeconfig}. Bring the lab up first (`make up`, which writes the admin kubeconfig "
                "into the lab's state folder), or point --kubeconfig / KUBECONFIG at the admin kubeconfig of your "
                "cluster.").format(kubeconfig=self.kubeconfig))
        from kubernetes import client, config

        try:
            self.api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
        except Exception as exc:  # noqa: BLE001 - any parse problem is the user's input
            raise LabError(_("cannot use the kubeconfig {kubeconfig}: {error}").format(
                kubeconfig=self.kubeconfig, error=exc)) from exc
        bound_requests()
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.rbac = client.RbacAuthorizationV1Api(self.api_client)
        self.admission = client.AdmissionregistrationV1Api(self.api_client)
        self.server = self.api_client.configuration.host
        Timing.scale = float(self.setting("timeout_scale", 1) or 1)

    # ---- reachability ----------------------------------------------------

    def ping(self, timeout: float = 5.0) -> str:
        from kubernetes import client

        try:
            info = client.VersionApi(self.api_client).get_code(_request_timeout=timeout)
        except Exception as exc:  # noqa: BLE001
            raise LabError(_(
                "the API server at {server} does not answer ({error}). Is the cluster up? `make up` brings it up; "
                "`vagrant status` shows the machines; with the cluster running, check that this host reaches the node "
                "network.").format(server=self.server, error=type(exc).__name__)) from exc
        return info.git_version

    # ---- API servers ---------------------------------------------------------

    def api_servers(self) -> dict[str, str]:
        """Each API server at its own address (not the load-balanced one): node -> https://ip:port."""
        ips = node_ips(self)
        default = (self.setting("ports") or {}).get("api_server")
        return {n: f"https://{ips[n]}:{self.unit_arg(n, 'kube-apiserver', 'secure-port') or default}"
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

    def api_writes(self, ns: str, name: str, timeout: float = API_WRITE_TIMEOUT) -> str | None:
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
    def namespace(self, check_id: str, pods: bool = True) -> Iterator[str]:
        """A namespace for the check's objects, deleted at the end (pass, fail or Ctrl-C). ``pods`` False: the check
        starts no pod there, so it does not wait for the default ServiceAccount, which only a working controller
        manager makes: such a check does not depend on a component whose claim it does not test."""
        name = self.scratch_namespace(check_id)
        # Pods need the namespace's default ServiceAccount, which a controller creates shortly after; up to a
        # minute and more after the controller manager's local API server restarted (wait_controllers_act).
        if pods:
            self.wait_default_service_account(name, SERVICE_ACCOUNT_WAIT,
                                              _("the default ServiceAccount of {name}").format(name=name))
        try:
            yield name
        finally:
            pass  # deleted by the restorer at the end of the check

    def scratch_namespace(self, check_id: str) -> str:
        """A namespace of the check's (labelled with its id), deleted by the restorer at the end of the check; for
        one made in the middle of a check, where no ``with`` block fits (C34's namespace made after its snapshot)."""
        from kubernetes import client

        name = f"lab-{check_id.lower()}-{uuid.uuid4().hex[:5]}"
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
            name=name, labels={LAB_LABEL: check_id})))
        RESTORER.push(_("delete namespace {name}").format(name=name), lambda: self.delete_namespace(name))
        return name

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

        wait_for(delete, timeout, _("the API server to delete namespace {name}").format(name=name), 1)

    # ---- cluster health ------------------------------------------------------------

    def ready_nodes(self) -> list[str]:
        ready = []
        for node in self.core.list_node().items:
            conditions = {c.type: c.status for c in node.status.conditions or []}
            if conditions.get("Ready") == "True":
                ready.append(node.metadata.name)
        return sorted(ready)

    def units_down(self, steady: float | None = None) -> dict[str, list[str]]:
        """Per machine, the cluster's units that are enabled there but not active, or active for less than ``steady``
        seconds: a component that exited (e.g. on losing its leader election while the API was away) and waits for
        systemd to restart it, or one just started that may still exit (kube-controller-manager exits when it
        starts before the API server's RBAC caches are filled, and systemd starts it again 5 s later)."""
        steady = round(scaled(UNIT_STEADY_SECONDS) if steady is None else steady)

        def on(node: str) -> list[str]:
            units = CLUSTER_UNITS + (LB_UNITS if node in self.control_plane and len(self.control_plane) > 1 else ())
            return self.sh(node, f"now=$(date +%s); for u in {' '.join(units)}; do "
                                 "systemctl is-enabled -q $u 2>/dev/null || continue; "
                                 "if systemctl is-active -q $u; then "
                                 "t=$(systemctl show -P ActiveEnterTimestamp --timestamp=unix $u); t=${t#@}; "
                                 f"[ $((now - ${{t:-0}})) -ge {steady} ] || echo $u; "
                                 "else echo $u; fi; done; true", check=False).split()

        found = self.on_each(self.machines, on)  # every machine at once: one ssh round trip per poll
        return {node: units for node, units in found.items() if units}

    def wait_healthy(self, timeout: float, ev: Evidence | None = None) -> None:
        """Every inventory node Ready, the API answering and every cluster unit active on every machine (the nodes
        and an external etcd's), and steadily so (bounded)."""
        want = sorted(self.nodes)
        deadline = time.monotonic() + scaled(timeout)
        wait_for(lambda: self.ready_nodes() == want, timeout, _("all nodes Ready ({nodes})").format(
            nodes=", ".join(want)), 1)
        left = max(scaled(10.0), deadline - time.monotonic())
        wait_for(lambda: not self.units_down(), left / Timing.scale,
                 _("every component's unit to be active again (for {seconds} s)").format(
                     seconds=round(scaled(UNIT_STEADY_SECONDS))), 1)
        left = max(scaled(10.0), deadline - time.monotonic())
        wait_for(lambda: all(held for _holder, held in self.leaders().values()), left / Timing.scale,
                 _("kube-controller-manager and kube-scheduler to have a leader again"), 1)
        self.wait_controllers_act(max(scaled(10.0), deadline - time.monotonic()) / Timing.scale)
        if ev:
            ev.step(_("cluster healthy again: {nodes} Ready, every component's unit active, the controllers acting")
                    .format(nodes=", ".join(want)))

    def wait_controllers_act(self, timeout: float) -> None:
        """The control loops act on a new object again: a probe namespace gets its default ServiceAccount (the
        controller manager), then a probe pod that no node may take is refused (the scheduler), then both go. A leader
        can hold its lease and still act on nothing for a minute: after its local API server restarts, that server
        refuses requests (403, its RBAC caches not filled yet) until it is ready, and each of the leader's informers
        that met a refusal retries only after a backoff of up to 30 s, doubled by jitter. A check that starts then
        meets a scheduler that neither binds nor refuses its pods, and fails for that instead of for its claim."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        name = f"lab-health-{uuid.uuid4().hex[:5]}"
        deadline = time.monotonic() + scaled(timeout)

        def left() -> float:
            return max(scaled(10.0), deadline - time.monotonic()) / Timing.scale

        def create(make, what: str) -> None:
            def attempt() -> bool:
                try:
                    make()
                except ApiException as exc:
                    if exc.status != 409:  # 409: made by an attempt whose answer was lost
                        raise
                return True

            wait_for(attempt, 30, what, 1)

        create(lambda: self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
            name=name, labels={LAB_LABEL: "health"})), _request_timeout=10),
            _("the API server to create namespace {name}").format(name=name))
        try:
            self.wait_default_service_account(name, left(), _(
                "the controllers to act again (the default ServiceAccount of {name})").format(name=name))
            probe = "scheduler-probe"
            create(lambda: self.core.create_namespaced_pod(name, pod_manifest(
                probe, test_image(), nodeSelector={"k8s-arch-lab/nowhere": "true"}), _request_timeout=10),
                _("the API server to create pod {name}/{probe}").format(name=name, probe=probe))

            def refused() -> bool:
                pod = self.core.read_namespaced_pod(probe, name, _request_timeout=10)
                return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                           for c in pod.status.conditions or [])

            wait_for(refused, left(), _("the scheduler to act again (to refuse pod {name}/{probe}, which no node "
                                        "may take)").format(name=name, probe=probe), 0.5)
        finally:
            self.delete_namespace(name, timeout=60)

    def wait_default_service_account(self, namespace: str, timeout: float, what: str) -> None:
        """Until the controller manager has made the namespace's default ServiceAccount (bounded)."""
        wait_for(lambda: self.core.list_namespaced_service_account(
            namespace, field_selector="metadata.name=default", _request_timeout=10).items, timeout, what, 0.5)

    def leaders(self) -> dict[str, tuple[str, bool]]:
        """Per leader-elected component, who holds its Lease and whether a live leader holds it: renewed within half
        its duration by the API server's clock (a leader renews it every retry period, 2 s here). A unit can be
        active while its component has no leader: kube-controller-manager exits when it cannot renew (its local API
        server restarted), and the next one takes over only once the lease has expired; until then no controller
        runs (a new namespace gets no default ServiceAccount)."""
        from kubernetes.client.rest import ApiException

        now = self.server_now()
        found = {}
        for name in LEADER_LEASES:
            try:
                spec = self.coordination.read_namespaced_lease(name, "kube-system", _request_timeout=10).spec
            except ApiException as exc:
                if exc.status != 404:
                    raise
                found[name] = ("", False)
                continue
            holder = (spec.holder_identity or "").split("_")[0]
            age = (now - spec.renew_time).total_seconds() if spec.renew_time else float("inf")
            found[name] = (holder, bool(holder) and age <= (spec.lease_duration_seconds or 15) / 2)
        return found

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
