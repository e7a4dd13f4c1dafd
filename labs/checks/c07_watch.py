import re
import threading
import time
from collections import Counter

import urllib3
from kubernetes import client, watch

from labs.core import Evidence, Lab, check, established, node_ips

COMPONENTS = ("kube-scheduler", "kube-controller", "kubelet", "kube-proxy")  # ss cuts names at 15 characters
WINDOW = 10  # seconds between the two looks at the components' connections
WATCH_METRIC = re.compile(r'^apiserver_longrunning_requests\{.*resource="([^"]+)".*verb="WATCH".*\} (\d+)', re.M)


def component_conns(lab: Lab) -> set[tuple[str, str, str, str]]:
    """(node, process, local, peer) of the components' connections to the API server (6443 or the VIP's 8443)."""
    return {(node, c.process, c.local, c.peer) for node in lab.nodes for c in established(lab, node)
            if c.process in COMPONENTS and c.peer_port in (6443, 8443)}


def open_watches(lab: Lab) -> Counter:
    """The WATCH requests each API server holds open right now, summed over all of them, by resource."""
    cfg = lab.api_client.configuration
    http = urllib3.PoolManager(ca_certs=cfg.ssl_ca_cert, cert_file=cfg.cert_file, key_file=cfg.key_file)
    total, ips = Counter(), node_ips(lab)
    for node in lab.control_plane:
        port = lab.unit_arg(node, "kube-apiserver", "secure-port") or "6443"
        try:
            text = http.request("GET", f"https://{ips[node]}:{port}/metrics", timeout=10, retries=False).data.decode()
        except urllib3.exceptions.HTTPError:
            continue  # this API server is down: its clients have moved to the others
        total["(API servers)"] += 1
        for resource, count in WATCH_METRIC.findall(text):
            total[resource] += int(count)
    return total


@check(
    "C07", "The API server broadcasts changes to the clients that watch",
    claim="The API server broadcasts changes: other components watch it and react (or re-read periodically).",
    texts=["000", "004"],
    see=["kubectl get configmaps -w --output-watch-events   # in one terminal; create/edit/delete in another",
         "kubectl get --raw /metrics | grep 'apiserver_longrunning_requests.*WATCH'",
         "ssh w1 ss -tnp state established '( dport = :8443 )'   # kubelet, kube-proxy: long-lived connections"],
    does="Opens a watch on ConfigMaps with its own client while the lab's client creates, changes and deletes one: "
         "the watch must receive ADDED, MODIFIED, DELETED. Then shows the components' long-lived connections to "
         "the API server (the same sockets before and after) and the WATCH requests every API server holds open "
         "(at least one per kubelet on pods, per kube-proxy on services and endpointslices).",
)
def run(lab: Lab, ev: Evidence) -> None:
    started, before = time.monotonic(), component_conns(lab)
    with lab.namespace("C07") as ns:
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
        ev.expect(types == ["ADDED", "MODIFIED", "DELETED"], f"the watcher received: {'; '.join(seen)}",
                  f"the watcher received {seen}, expected ADDED, MODIFIED, DELETED")

    time.sleep(max(0.0, started + WINDOW - time.monotonic()))
    kept = before & component_conns(lab)
    for comp in COMPONENTS:
        mine = sorted((node, f"{local}->{peer}") for node, proc, local, peer in kept if proc == comp)
        ev.expect(bool(mine), f"{comp}: {len(mine)} connections open throughout {WINDOW}s, on "
                  f"{', '.join(sorted({n for n, _ in mine}))} (e.g. {' '.join(mine[-1]) if mine else ''})",
                  f"{comp}: no connection to the API server stayed open")
    watches = open_watches(lab)
    ev.add(f"open WATCH requests on the {watches.pop('(API servers)', 0)} answering API servers: "
           + ", ".join(f"{r} {n}" for r, n in watches.most_common(12)))
    for resource in ("pods", "services", "endpointslices"):
        ev.expect(watches[resource] >= len(lab.nodes), f"{watches[resource]} watches on {resource} "
                  f"(>= {len(lab.nodes)} nodes)", f"only {watches[resource]} watches on {resource}")
