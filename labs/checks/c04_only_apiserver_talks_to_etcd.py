from collections import Counter
from urllib.parse import urlsplit

from labs.i18n import _, join
from labs.kube import node_ips
from labs.lab import Lab
from labs.registry import Evidence, check

COMPONENTS = {"kube-scheduler": "control_plane", "kube-controller-manager": "control_plane",
              "kubelet": "nodes", "kube-proxy": "nodes"}
LAB_ADMIN = "lab-admin-"  # the scopes the lab runs its own etcdctl reads in (Lab.etcdctl)


@check(
    "C04", _("Only the API server talks to etcd; everything else talks to the API server"),
    claim=_("Everything goes through the API server, and only the API server talks to etcd."),
    texts=["000", "001", "004"],
    see=["lab ssh cp1 -- \"ss -tnp state established '( dport = :@ports.etcd_client@ )'\"   # etcd's clients: "
         "kube-apiserver only",
         "lab ssh cp1 -- systemctl show -P MainPID kube-apiserver   # the PID ss shows for them",
         "lab ssh w1 -- ss -tnp state established   # kubelet, kube-proxy -> the API address",
         "lab ssh cp1 -- curl -sS --cacert @paths.etcd_pki_dir@/ca.crt https://@ip.cp1@:@ports.etcd_client@/health   "
         "# refused",
         "lab ssh cp1 -- \"journalctl -u etcd | grep 'rejected connection' | tail -3\""],
    does=_("On every machine (the nodes, and an external etcd's), takes the established TCP connections with the "
           "processes holding them, every process's executable and cgroup, and the main PID of each component's unit. "
           "A connection to etcd's client port must be held by the main process of kube-apiserver.service (PID and "
           "executable; the name a process gives itself counts for nothing); the lab's own etcdctl reads run in "
           "lab-admin-* scopes and are shown as such. On every etcd member, calls from other machines come only from "
           "API-server machines. The main processes of kube-scheduler, kube-controller-manager, kubelet and "
           "kube-proxy hold connections to an API server and none to etcd. Then every etcd member is called without a "
           "client certificate (refused) and with a certificate of the cluster CA instead of etcd's (refused), next "
           "to a call with the API server's etcd client certificate (answers)."),
    hints=[
        _("*cp1: … -> etcd …:@ports.etcd_client@ is held by pid … /usr/local/bin/… (…), not by the API server's main "
          "process*: another program talks to etcd — a component pointed at etcd, a tool left running, or an "
          "`etcdctl` you run by hand on that machine at the same time (only the lab's own runs in `lab-admin-*` "
          "scopes are set apart). The parentheses name the unit or session scope that holds the process."),
        _("*… is held by a process no look can see (ss names it '…')*: `ss` saw the connection in two looks in a row, "
          "both times without a process it could find in /proc: a process of another PID namespace on that machine "
          "(a container's) holds it. A connection seen without its process only once is counted as short-lived."),
        _("*cp2: etcd called from […], machines without an API server*: a client outside the control plane (a worker, "
          "the host) holds a connection to etcd."),
        _("*cp1: kube-scheduler (main pid 0, inactive) holds connections to the API [], to etcd []*: the unit is "
          "stopped — a disruptive check running at the same time does this; `systemctl status kube-scheduler`. With a "
          "list after *to etcd*, the component itself was pointed at etcd."),
        _("*etcd cp2 answered a client without a certificate*: that member runs without `--client-cert-auth=true`, "
          "or its `--trusted-ca-file` is missing (`systemctl cat etcd`)."),
        _("*etcd cp2 answered a certificate that its CA did not sign*: that member trusts the cluster CA instead of "
          "etcd's."),
        _("*etcd cp2 does not answer even a valid client certificate*: etcd is down on that member."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    ips = {**{m: lab.machine_ip(m) for m in lab.machines}, **node_ips(lab)}  # the nodes as they report themselves
    apiserver_ips = {ips[n] for n in lab.control_plane}
    members = lab.etcd_members
    # etcd's client port, as the API server is told to reach it (--etcd-servers)
    etcd_port = urlsplit(lab.unit_arg(lab.control_plane[0], "kube-apiserver", "etcd-servers").split(",")[0]).port
    api_ports = {int(s.rsplit(":", 1)[1]) for s in lab.api_servers().values()} | {int(lab.server.rsplit(":", 1)[1])}
    for node in lab.machines:
        snap = lab.snapshot(node)
        clients: Counter = Counter()
        for conn in (c for c in snap.conns if c.peer_port == etcd_port):
            owners = snap.owners(conn)
            names = {snap.component_of(p) for p in owners}
            if names == {"kube-apiserver"}:
                clients[_("kube-apiserver (pid {pid}, main process of kube-apiserver.service)").format(
                    pid=owners[0].pid)] += 1
            elif owners and all(p.unit.startswith(LAB_ADMIN) for p in owners):
                clients[_("the lab's own etcdctl ({unit})").format(unit=owners[0].unit)] += 1
            else:  # a stranger, or no process in two looks in a row (Lab.snapshot looks again): hidden, not a race
                who = ", ".join(map(str, owners)) or _("a process no look can see (ss names it {process!r})").format(
                    process=conn.process)
                ev.expect(False, "",
                          _("{node}: {local} -> etcd {peer} is held by {who}, not by the API server's main "
                            "process").format(node=node, local=conn.local, peer=conn.peer, who=who))
        short = sum(c.peer_port == etcd_port for c in snap.short_lived)
        if short:
            clients[_("a short-lived connection, gone before its process could be seen")] += short
        seen = join(", ", (_("{client} x{count}").format(client=k, count=v) for k, v in sorted(clients.items())))
        ev.expect(True, _("{node}: etcd clients: {clients}").format(node=node, clients=seen or _("none")))
        if node in members:
            mine = {ips[node], "127.0.0.1", "::1"}
            remote = {c.peer_ip for c in snap.conns if c.local_port == etcd_port and c.peer_ip not in mine}
            ev.expect(remote <= apiserver_ips,
                      _("{node}: its etcd member is called from {remote} (API servers)").format(
                          node=node, remote=sorted(remote) or _("no other machine")),
                      _("{node}: etcd called from {remote}, machines without an API server").format(
                          node=node, remote=sorted(remote - apiserver_ips)))
        for comp, where in COMPONENTS.items():
            if node not in getattr(lab, where):
                continue
            unit = snap.units.get(comp)
            conns = snap.conns_of(comp)
            api = sorted({c.peer for c in conns if c.peer_port in api_ports})
            etcd = [c.peer for c in conns if c.peer_port == etcd_port]
            ev.expect(bool(api) and not etcd,
                      _("{node}: {comp} (pid {main_pid}) -> API server {api}; none to etcd").format(
                          node=node, comp=comp, main_pid=unit.main_pid, api=", ".join(api)),
                      _("{node}: {comp} (main pid {main_pid}, {state}) holds connections to the API {api}, to etcd "
                        "{etcd}").format(node=node, comp=comp, main_pid=unit.main_pid if unit else "?",
                                         state=unit.state if unit else _("no unit"), api=api, etcd=etcd))

    # From a control-plane node, which holds etcd's CA and the API server's etcd client certificate whether etcd
    # runs there or on machines of its own.
    prober, pki = lab.control_plane[0], lab.path("pki_dir")
    for member in members:
        target = ips[member]
        curl = (f"curl -sS --max-time 5 --tls-max 1.2 --cacert {pki}/etcd/ca.crt "
                f"https://{target}:{etcd_port}/health")
        bare = lab.sh(prober, f"{curl} 2>&1; echo rc=$?", check=False)
        ev.expect("rc=0" not in bare,
                  _("{prober} -> etcd {member} without a client certificate: {answer}").format(
                      prober=prober, member=member, answer=" ".join(bare.split())[-90:]),
                  _("etcd {member} answered a client without a certificate: {answer}").format(
                      member=member, answer=bare))
        wrong = lab.sh(prober, f"{curl} --cert {pki}/apiserver-kubelet-client.crt "
                               f"--key {pki}/apiserver-kubelet-client.key 2>&1; echo rc=$?", check=False)
        ev.expect("rc=0" not in wrong,
                  _("{prober} -> etcd {member} with a certificate of the cluster CA (not etcd's): {answer}").format(
                      prober=prober, member=member, answer=" ".join(wrong.split())[-90:]),
                  _("etcd {member} answered a certificate that its CA did not sign: {answer}").format(
                      member=member, answer=wrong))
        good = lab.sh(prober, f"{curl} --cert {pki}/apiserver-etcd-client.crt "
                              f"--key {pki}/apiserver-etcd-client.key 2>&1", check=False)
        ev.expect('"health":"true"' in good,
                  _("{prober} -> etcd {member} with the API server's etcd client certificate: {answer}").format(
                      prober=prober, member=member, answer=good),
                  _("etcd {member} does not answer even a valid client certificate: {answer}").format(
                      member=member, answer=good))
    log = lab.sh(members[-1], "journalctl -u etcd --since -1min --no-pager -o cat | "
                              "grep 'rejected connection on client endpoint' | tail -1", check=False)
    if log:
        ev.add(_("etcd's own log on {member}: {log}").format(member=members[-1], log=log))
