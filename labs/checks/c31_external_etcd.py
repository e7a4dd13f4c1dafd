import json
import uuid
from urllib.parse import urlsplit

from labs.lab import Lab
from labs.nodefacts import CONTROL_PLANE
from labs.registry import CheckSkipped, Evidence, check
from labs.timing import wait_for


def hosts(urls: list[str]) -> set[str]:
    return {urlsplit(u).hostname for u in urls}


@check(
    "C31", "etcd runs on the control-plane nodes or as a cluster of its own",
    claim="etcd can run on the control-plane nodes or as a separate cluster on its own servers.",
    texts=["000"],
    see=["make up PROFILE=external-etcd   # etcd on e1, e2, e3; API servers on cp1, cp2",
         "kubectl get nodes                # e1..e3 are no Kubernetes nodes",
         "ssh e1 '. @paths.etcd_config_dir@/etcdctl.env; etcdctl member list -w table'",
         "ssh cp1 'ps -o pid,args -C etcd'   # nothing: no etcd on the control plane",
         "ssh cp1 systemctl cat kube-apiserver | grep etcd-servers",
         "ssh cp1 ss -tnp state established '( dport = :@ports.etcd_client@ )'   # kube-apiserver -> e1..e3"],
    does="Where the profile gives etcd machines of its own: etcd's member list names exactly those machines; on each "
         "of them etcd runs as the main process of etcd.service and nothing else of the control plane or of a node "
         "runs, and none is a Kubernetes Node; on every control-plane node no process executes etcd; each API "
         "server's --etcd-servers names only those machines and its main process holds connections to them; a "
         "ConfigMap written through the API is then read back from every etcd machine with etcdctl. Skipped where "
         "etcd is stacked on the control-plane nodes (the default and ha profiles).",
    hints=[
        "*CPn (control plane) runs etcd*: a process executes an etcd binary on a control-plane node (`ssh cp1 ps -o "
         "pid,args -C etcd`): someone started one by hand, or the node was provisioned with a stacked profile before.",
        "*etcd's members are at …, not the etcd machines*: a member was added or left (`etcdctl member list`).",
        "*kube-apiserver --etcd-servers names …*: the API server's unit was written for another inventory; re-run "
         "`make provision`.",
        "*kube-apiserver's connections to etcd go to no etcd machine*: the API server has not connected yet (it just "
         "restarted) or cannot reach etcd (`journalctl -u kube-apiserver | grep etcd`).",
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    external, profile = lab.external_etcd, lab.setting("profile", "?")
    if not external:
        raise CheckSkipped(f"etcd is stacked on the control-plane nodes ({', '.join(lab.etcd_members)}): profile "
                           f"{profile} has no etcd machines of its own (settings.yml profiles.{profile}.etcd); bring "
                           "the lab up with PROFILE=external-etcd")
    ips = {m: lab.machine_ip(m) for m in lab.machines}
    want = {ips[m] for m in external}
    stacked = [m for m in lab.etcd_members if m in lab.control_plane]
    ev.expect(not stacked, f"etcd machines of their own: {', '.join(f'{m} {ips[m]}' for m in external)}",
              f"etcd members on control-plane nodes too: {', '.join(stacked)}")

    members = json.loads(lab.etcdctl("member list -w json", node=external[0])).get("members", [])
    peers = set().union(*(hosts(m.get("peerURLs", [])) for m in members)) if members else set()
    names = ", ".join(sorted(m.get("name", "?") for m in members))
    ev.expect(peers == want, f"etcd's members ({len(members)}): {names} at {', '.join(sorted(peers))}",
              f"etcd's members are at {sorted(peers)}, not the etcd machines {sorted(want)}")
    nodes = {n.metadata.name for n in lab.core.list_node().items}
    ev.expect(not nodes & set(external), f"{', '.join(external)}: no Kubernetes Node",
              f"etcd machines registered as Nodes: {sorted(nodes & set(external))}")
    others = [*CONTROL_PLANE[1:], "kubelet", "kube-proxy", "containerd"]
    for machine in external:
        snap = lab.snapshot(machine)
        etcd = [p for p in snap.running(["etcd"]) if snap.component_of(p) == "etcd"]
        ev.expect(bool(etcd), f"{machine}: etcd runs as the main process of etcd.service: {etcd[0] if etcd else ''}",
                  f"{machine}: etcd does not run as the main process of etcd.service")
        extra = snap.running(others)
        ev.expect(not extra, f"{machine}: nothing else of the cluster runs ({', '.join(others)}: none)",
                  f"{machine} runs more than etcd: {', '.join(map(str, extra))}")

    port = (lab.setting("ports") or {}).get("etcd_client")
    for cp in lab.control_plane:
        snap = lab.snapshot(cp)
        running = snap.running(["etcd"])
        ev.expect(not running, f"{cp} (control plane): no process executes etcd",
                  f"{cp} (control plane) runs etcd: {', '.join(map(str, running))}")
        servers = (lab.unit_arg(cp, "kube-apiserver", "etcd-servers") or "").split(",")
        named = hosts([s for s in servers if s])
        ev.expect(named and named <= want, f"{cp}: kube-apiserver --etcd-servers={','.join(servers)}",
                  f"{cp}: kube-apiserver --etcd-servers names {sorted(named - want) or 'nothing'}, not the etcd "
                  "machines")
        ports = {urlsplit(s).port for s in servers if s} or {port}
        to_etcd = {c.peer_ip for c in snap.conns_of("kube-apiserver") if c.peer_port in ports}
        unit = snap.units.get("kube-apiserver")
        ev.expect(bool(to_etcd) and to_etcd <= want,
                  f"{cp}: kube-apiserver (pid {unit.main_pid if unit else '?'}) -> etcd at "
                  f"{', '.join(sorted(to_etcd))}",
                  f"{cp}: kube-apiserver's connections to etcd go to {sorted(to_etcd - want) or 'no etcd machine'}")

    with lab.namespace("C31") as ns:
        value = uuid.uuid4().hex
        from kubernetes import client

        lab.core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="where"), data={"value": value}))
        prefix = lab.unit_arg(lab.control_plane[0], "kube-apiserver", "etcd-prefix") or "/registry"
        key = f"{prefix}/configmaps/{ns}/where"
        for machine in external:
            found = wait_for(lambda m=machine: (kv := lab.etcd_get(key, m)) and value.encode() in kv["value"] and kv,
                             30, f"{key} on {machine}", 1)
            ev.expect(bool(found), f"written through the API, read on {machine} with etcdctl: {key} "
                      f"(revision {found['mod_revision']}) holds the value")
