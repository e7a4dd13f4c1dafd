from collections import Counter

from labs.core import Evidence, Lab, check, established, node_ips

ETCD_PORT = 2379
API_PORTS = {6443, 8443}  # each API server's port, and the load-balanced virtual IP in front of them
COMPONENTS = {"kube-scheduler": "control_plane", "kube-controller": "control_plane",  # ss cuts names at 15
              "kubelet": "nodes", "kube-proxy": "nodes"}


@check(
    "C04", "Only the API server talks to etcd; everything else talks to the API server",
    claim="Everything goes through the API server, and only the API server talks to etcd.",
    texts=["000", "001", "004"],
    see=["ssh cp1 ss -tnp state established '( dport = :2379 )'   # the clients of etcd: kube-apiserver only",
         "ssh w1 ss -tnp state established                         # kubelet, kube-proxy -> :8443 (API)",
         "ssh cp1 curl --cacert /etc/etcd/pki/ca.crt https://192.168.56.12:2379/health   # refused",
         "ssh cp2 journalctl -u etcd | grep 'rejected connection'"],
    does="Lists on every node the established TCP connections with their processes: the client side of every "
         "connection to etcd's port 2379 must belong to kube-apiserver, the server side must come from API-server "
         "machines, and scheduler, controller-manager, kubelet and kube-proxy must hold connections to the API "
         "server and none to etcd. Then calls etcd without a client certificate (refused) and with a certificate "
         "of the cluster CA instead of etcd's CA (refused), next to a call with etcd's healthcheck certificate "
         "(answers).",
)
def run(lab: Lab, ev: Evidence) -> None:
    ips = node_ips(lab)
    apiserver_ips = {ips[n] for n in lab.control_plane}
    for node in lab.nodes:
        conns = established(lab, node)
        clients = Counter(c.process for c in conns if c.peer_port == ETCD_PORT)
        # etcdctl is the administrator's tool (other checks use it), not a cluster component
        ev.expect(set(clients) <= {"kube-apiserver", "etcdctl"},
                  f"{node}: etcd clients: {dict(clients) or 'none'}", f"{node}: etcd clients {dict(clients)}")
        peers = {c.peer_ip for c in conns if c.local_port == ETCD_PORT}
        if node in lab.groups.get("etcd", lab.control_plane):
            ev.expect(peers <= apiserver_ips, f"{node}: its etcd member is called from {sorted(peers)} (API servers)",
                      f"{node}: etcd called from {sorted(peers - apiserver_ips)}, machines without an API server")
        for comp, where in COMPONENTS.items():
            if node not in getattr(lab, where):
                continue
            mine = [c for c in conns if c.process == comp]
            api = sorted({c.peer for c in mine if c.peer_port in API_PORTS})
            etcd = [c.peer for c in mine if c.peer_port == ETCD_PORT]
            ev.expect(api and not etcd, f"{node}: {comp} -> API server {', '.join(api)}; none to etcd",
                      f"{node}: {comp} connections to the API {api}, to etcd {etcd}"
                      + ("" if mine else f" (no {comp} connection at all: is it running?)"))

    node, target = lab.control_plane[0], ips[lab.control_plane[-1]]
    curl = f"curl -sS --max-time 5 --tls-max 1.2 --cacert /etc/etcd/pki/ca.crt https://{target}:{ETCD_PORT}/health"
    bare = lab.sh(node, f"{curl} 2>&1; echo rc=$?", check=False)
    ev.expect("rc=0" not in bare, f"{node} -> etcd {target} without a client certificate: {' '.join(bare.split())}",
              f"etcd at {target} answered a client without a certificate: {bare}")
    wrong = lab.sh(node, f"{curl} --cert /etc/kubernetes/pki/apiserver-kubelet-client.crt "
                         "--key /etc/kubernetes/pki/apiserver-kubelet-client.key 2>&1; echo rc=$?", check=False)
    ev.expect("rc=0" not in wrong, f"with a certificate of the cluster CA (not etcd's): {' '.join(wrong.split())}",
              f"etcd at {target} answered a certificate that its CA did not sign: {wrong}")
    good = lab.sh(node, f"{curl} --cert /etc/etcd/pki/healthcheck-client.crt "
                        "--key /etc/etcd/pki/healthcheck-client.key 2>&1", check=False)
    ev.expect('"health":"true"' in good, f"with etcd's healthcheck client certificate: {good}",
              f"etcd at {target} does not answer even a valid client certificate: {good}")
    log = lab.sh(lab.control_plane[-1], "journalctl -u etcd --since -1min --no-pager -o cat | "
                                        "grep 'rejected connection on client endpoint' | tail -1", check=False)
    if log:
        ev.add(f"etcd's own log on {lab.control_plane[-1]}: {log}")
