import threading
import time

from kubernetes import client, watch

from labs.i18n import _
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import scaled

COMPONENTS = {"kube-scheduler": "control_plane", "kube-controller-manager": "control_plane",
              "kubelet": "nodes", "kube-proxy": "nodes"}
USERS = {"kube-scheduler": "system:kube-scheduler", "kube-controller-manager": "system:kube-controller-manager",
         "kube-proxy": "system:kube-proxy"}  # kubelets: system:node:<name>
WINDOW = 10  # seconds between the two looks at the components' connections
SETTLE = 10  # seconds (times timeout_scale) to look again at the open watches while one seems missing
PROXY_RESOURCES = ("services", "endpointslices.discovery.k8s.io")  # kube-proxy watches both, on every node


def component_conns(lab: Lab, api_ports: set[int]) -> tuple[set[tuple[str, str, str, str]], dict[tuple, int]]:
    """(node, component, local, peer) of the connections that each component's main process (its unit's MainPID)
    holds to an API server, and that main PID per (node, component)."""
    found, pids = set(), {}
    snaps = lab.on_each(lab.nodes, lab.snapshot)
    for node, snap in snaps.items():
        for comp, where in COMPONENTS.items():
            if node in getattr(lab, where):
                found |= {(node, comp, c.local, c.peer) for c in snap.conns_of(comp) if c.peer_port in api_ports}
                unit = snap.units.get(comp)
                pids[(node, comp)] = unit.main_pid if unit else 0
    return found, pids


@check(
    "C07", _("The API server broadcasts changes to the clients that watch"),
    claim=_("The API server broadcasts changes: other components watch it and react (or re-read periodically)."),
    texts=["000", "004"],
    see=["kubectl get configmaps -w --output-watch-events   # in another terminal: ADDED, MODIFIED, DELETED",
         "kubectl create configmap watched --from-literal=n=1; kubectl patch configmap watched -p "
         "'{\"data\":{\"n\":\"2\"}}'; kubectl delete configmap watched",
         "lab ssh cp1 -- \"grep '\\\"verb\\\":\\\"watch\\\"' /var/log/kubernetes/audit.log | grep kube-scheduler | "
         "tail -3\"",
         "lab ssh w1 -- ss -tnp state established   # kubelet, kube-proxy: long-lived connections to the API address"],
    does=_("Opens a watch on ConfigMaps with its own client while the lab's client creates, changes and deletes one: "
           "the watch must receive ADDED, MODIFIED, DELETED. Then shows each component's own watches: the API "
           "servers' audit logs record every watch when it starts and when it ends, so the open ones are known per "
           "caller — the scheduler, the controller-manager, every kubelet and kube-proxy each hold watches (kubelets "
           "on pods, kube-proxy on services and endpointslices). And the connections behind them: each component's "
           "main process keeps the same sockets to an API server open over {window}s.").format(window=WINDOW),
    hints=[
        _("*the watcher received [...]* with an event missing: the watch ended early (an API server restarted during "
          "the check): re-run."),
        _("*cp1: the API server writes no audit log (--audit-log-path): re-run the playbooks*: the cluster was "
          "brought up before the audit log was part of the lab (`make provision`)."),
        _("*kube-scheduler (system:kube-scheduler) holds no open watch on any API server*: the component is stopped "
          "on every control-plane node, or cannot reach an API server (`systemctl status kube-scheduler`)."),
        _("*kube-proxy: 1 watches on services for 3 nodes*: kube-proxy is stopped, or cannot reach the API, on some "
          "nodes."),
        _("*kubelet of w1 (system:node:w1) holds no watch on pods: …*: that node's kubelet is stopped or cannot reach "
          "an API server."),
        _("*w1: no connection of kube-proxy's main process to the API server stayed open for 10s*: the component is "
          "stopped or restarting (a disruptive check may be running), or it reconnects all the time (`journalctl -u "
          "kube-proxy`)."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    api_ports = {int(s.rsplit(":", 1)[1]) for s in lab.api_servers().values()} | {int(lab.server.rsplit(":", 1)[1])}
    started, (before, pids_before) = time.monotonic(), component_conns(lab, api_ports)
    with lab.namespace("C07", pods=False) as ns:
        seen: list[str] = []
        watcher = client.CoreV1Api(client.ApiClient(lab.api_client.configuration))  # another client
        rv = lab.core.list_namespaced_config_map(ns).metadata.resource_version

        def watch_it():
            for event in watch.Watch().stream(watcher.list_namespaced_config_map, ns, resource_version=rv,
                                              field_selector="metadata.name=note", timeout_seconds=30):
                seen.append(f"{event['type']} (data={event['object'].data})")
                if event["type"] == "DELETED":
                    return

        thread = threading.Thread(target=watch_it, daemon=True)
        thread.start()
        lab.core.create_namespaced_config_map(ns, {"metadata": {"name": "note"}, "data": {"v": "1"}})
        lab.core.patch_namespaced_config_map("note", ns, {"data": {"v": "2"}})
        lab.core.delete_namespaced_config_map("note", ns)
        thread.join(30)
        types = [s.split()[0] for s in seen]
        ev.expect(types == ["ADDED", "MODIFIED", "DELETED"],
                  _("the watcher received: {seen}").format(seen="; ".join(seen)),
                  _("the watcher received {seen}, expected ADDED, MODIFIED, DELETED").format(seen=seen))

    def observe() -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        for node in lab.control_plane:
            for user, resources in lab.open_watches(node).items():
                mine = found.setdefault(user, {})
                for resource, count in resources.items():
                    mine[resource] = mine.get(resource, 0) + count
        return found

    def complete(found: dict[str, dict[str, int]]) -> bool:
        proxy = found.get(USERS["kube-proxy"], {})
        return (all(found.get(user) for user in USERS.values())
                and all(proxy.get(resource, 0) >= len(lab.nodes) for resource in PROXY_RESOURCES)
                and all(found.get(f"system:node:{node}", {}).get("pods", 0) >= 1 for node in lab.nodes))

    # Clients end and reopen each watch every few minutes (client-go: 5-10 min); one look at the log can fall between
    # the end of one and the start of the next. Look again, for at most SETTLE seconds, before judging the last look.
    watches = observe()
    deadline = time.monotonic() + scaled(SETTLE)
    while not complete(watches) and time.monotonic() < deadline:
        time.sleep(1)
        watches = observe()

    def shown(user: str) -> str:
        res = watches.get(user, {})
        return ", ".join(f"{r} {n}" for r, n in sorted(res.items(), key=lambda x: -x[1])[:8]) or _("none")

    for comp, user in USERS.items():
        ev.expect(bool(watches.get(user)),
                  _("{comp} ({user}) holds open watches on: {watches}").format(
                      comp=comp, user=user, watches=shown(user)),
                  _("{comp} ({user}) holds no open watch on any API server").format(comp=comp, user=user))
    proxy = watches.get(USERS["kube-proxy"], {})
    for resource in PROXY_RESOURCES:
        ev.expect(proxy.get(resource, 0) >= len(lab.nodes),
                  _("kube-proxy: {count} watches on {resource} (one per node at least, {nodes} nodes)").format(
                      count=proxy.get(resource, 0), resource=resource, nodes=len(lab.nodes)),
                  _("kube-proxy: {count} watches on {resource} for {nodes} nodes").format(
                      count=proxy.get(resource, 0), resource=resource, nodes=len(lab.nodes)))
    for node in lab.nodes:
        user = f"system:node:{node}"
        ev.expect(watches.get(user, {}).get("pods", 0) >= 1,
                  _("kubelet of {node} ({user}) watches: {watches}").format(node=node, user=user, watches=shown(user)),
                  _("kubelet of {node} ({user}) holds no watch on pods: {watches}").format(
                      node=node, user=user, watches=shown(user)))

    time.sleep(max(0.0, started + WINDOW - time.monotonic()))
    after, pids_after = component_conns(lab, api_ports)
    kept = before & after
    for comp, where in COMPONENTS.items():
        for node in getattr(lab, where):
            mine = sorted(f"{local}->{peer}" for n, c, local, peer in kept if (n, c) == (node, comp))
            was, now = pids_before.get((node, comp), 0), pids_after.get((node, comp), 0)
            why = _(": its main process changed during the look (PID {was} -> {now}), the unit restarted (ssh {node} "
                    "journalctl -u {comp} -n 50)").format(was=was, now=now, node=node, comp=comp) if was != now else ""
            ev.expect(bool(mine),
                      _("{node}: {comp}'s main process kept {count} connection(s) to the API open throughout "
                        "{window}s (e.g. {connection})").format(
                          node=node, comp=comp, count=len(mine), window=WINDOW, connection=mine[-1] if mine else ""),
                      _("{node}: no connection of {comp}'s main process to the API server stayed open for "
                        "{window}s{why}").format(node=node, comp=comp, window=WINDOW, why=why))
