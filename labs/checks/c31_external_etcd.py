import json
import uuid
from urllib.parse import urlsplit

from labs.i18n import _
from labs.lab import Lab
from labs.nodefacts import CONTROL_PLANE
from labs.registry import CheckSkipped, Evidence, check
from labs.timing import wait_for


def hosts(urls: list[str]) -> set[str]:
    return {urlsplit(u).hostname for u in urls}


@check(
    "C31", _("etcd runs on the control-plane nodes or as a cluster of its own"),
    claim=_("etcd can run on the control-plane nodes or as a separate cluster on its own servers."),
    texts=["000"],
    see=["make up PROFILE=external-etcd   # etcd on e1, e2, e3; API servers on cp1, cp2",
         "kubectl get nodes   # e1..e3 are no Kubernetes nodes",
         "lab ssh e1 -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl member list -w table'",
         "lab ssh cp1 -- ps -o pid,args -C etcd   # nothing: no etcd on the control plane",
         "lab ssh cp1 -- 'systemctl cat kube-apiserver | grep etcd-servers'",
         "lab ssh cp1 -- \"ss -tnp state established '( dport = :@ports.etcd_client@ )'\"   # kube-apiserver -> "
         "e1..e3"],
    does=_("Where the profile gives etcd machines of its own: etcd's member list names exactly those machines; on "
           "each of them etcd runs as the main process of etcd.service and nothing else of the control plane or of a "
           "node runs, and none is a Kubernetes Node; on every control-plane node no process executes etcd; each API "
           "server's --etcd-servers names only those machines and its main process holds connections to them; a "
           "ConfigMap written through the API is then read back from every etcd machine with etcdctl. Skipped where "
           "etcd is stacked on the control-plane nodes (the default and ha profiles)."),
    hints=[
        _("*CPn (control plane) runs etcd*: a process executes an etcd binary on a control-plane node (`lab ssh cp1 -- "
          "ps -o pid,args -C etcd`): someone started one by hand, or the node was provisioned with a stacked profile "
          "before."),
        _("*etcd's members are at …, not the etcd machines*: a member was added or left (`etcdctl member list`)."),
        _("*kube-apiserver --etcd-servers names …*: the API server's unit was written for another inventory; re-run "
          "`make provision`."),
        _("*kube-apiserver's connections to etcd go to no etcd machine*: the API server has not connected yet (it "
          "just restarted) or cannot reach etcd (`journalctl -u kube-apiserver | grep etcd`)."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    external, profile = lab.external_etcd, lab.setting("profile", "?")
    if not external:
        raise CheckSkipped(_("etcd is stacked on the control-plane nodes ({members}): profile {profile} has no "
                             "etcd machines of its own (settings.yml profiles.{profile}.etcd); bring the lab up with "
                             "PROFILE=external-etcd").format(members=", ".join(lab.etcd_members), profile=profile))
    ips = {m: lab.machine_ip(m) for m in lab.machines}
    want = {ips[m] for m in external}
    stacked = [m for m in lab.etcd_members if m in lab.control_plane]
    ev.expect(not stacked,
              _("etcd machines of their own: {machines}").format(machines=", ".join(f"{m} {ips[m]}" for m in external)),
              _("etcd members on control-plane nodes too: {stacked}").format(stacked=", ".join(stacked)))

    members = json.loads(lab.etcdctl("member list -w json", node=external[0])).get("members", [])
    peers = set().union(*(hosts(m.get("peerURLs", [])) for m in members)) if members else set()
    names = ", ".join(sorted(m.get("name", "?") for m in members))
    ev.expect(peers == want,
              _("etcd's members ({count}): {names} at {peers}").format(
                  count=len(members), names=names, peers=", ".join(sorted(peers))),
              _("etcd's members are at {peers}, not the etcd machines {want}").format(
                  peers=sorted(peers), want=sorted(want)))
    nodes = {n.metadata.name for n in lab.core.list_node().items}
    ev.expect(not nodes & set(external),
              _("{machines}: no Kubernetes Node").format(machines=", ".join(external)),
              _("etcd machines registered as Nodes: {machines}").format(machines=sorted(nodes & set(external))))
    others = [*CONTROL_PLANE[1:], "kubelet", "kube-proxy", "containerd"]
    for machine in external:
        snap = lab.snapshot(machine)
        etcd = [p for p in snap.running(["etcd"]) if snap.component_of(p) == "etcd"]
        ev.expect(bool(etcd),
                  _("{machine}: etcd runs as the main process of etcd.service: {process}").format(
                      machine=machine, process=etcd[0] if etcd else ""),
                  _("{machine}: etcd does not run as the main process of etcd.service").format(machine=machine))
        extra = snap.running(others)
        ev.expect(not extra,
                  _("{machine}: nothing else of the cluster runs ({others}: none)").format(
                      machine=machine, others=", ".join(others)),
                  _("{machine} runs more than etcd: {processes}").format(
                      machine=machine, processes=", ".join(map(str, extra))))

    port = (lab.setting("ports") or {}).get("etcd_client")
    for cp in lab.control_plane:
        snap = lab.snapshot(cp)
        running = snap.running(["etcd"])
        ev.expect(not running,
                  _("{cp} (control plane): no process executes etcd").format(cp=cp),
                  _("{cp} (control plane) runs etcd: {processes}").format(
                      cp=cp, processes=", ".join(map(str, running))))
        servers = (lab.unit_arg(cp, "kube-apiserver", "etcd-servers") or "").split(",")
        named = hosts([s for s in servers if s])
        ev.expect(named and named <= want,
                  _("{cp}: kube-apiserver --etcd-servers={servers}").format(cp=cp, servers=",".join(servers)),
                  _("{cp}: kube-apiserver --etcd-servers names {names}, not the etcd machines").format(
                      cp=cp, names=sorted(named - want) or _("nothing")))
        ports = {urlsplit(s).port for s in servers if s} or {port}
        to_etcd = {c.peer_ip for c in snap.conns_of("kube-apiserver") if c.peer_port in ports}
        unit = snap.units.get("kube-apiserver")
        ev.expect(bool(to_etcd) and to_etcd <= want,
                  _("{cp}: kube-apiserver (pid {pid}) -> etcd at {peers}").format(
                      cp=cp, pid=unit.main_pid if unit else "?", peers=", ".join(sorted(to_etcd))),
                  _("{cp}: kube-apiserver's connections to etcd go to {peers}").format(
                      cp=cp, peers=sorted(to_etcd - want) or _("no etcd machine")))

    with lab.namespace("C31", pods=False) as ns:
        value = uuid.uuid4().hex
        from kubernetes import client

        lab.core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="where"), data={"value": value}))
        prefix = lab.unit_arg(lab.control_plane[0], "kube-apiserver", "etcd-prefix") or "/registry"
        key = f"{prefix}/configmaps/{ns}/where"
        for machine in external:
            found = wait_for(lambda m=machine: (kv := lab.etcd_get(key, m)) and value.encode() in kv["value"] and kv,
                             30, _("{key} on {machine}").format(key=key, machine=machine), 1)
            ev.expect(bool(found),
                      _("written through the API, read on {machine} with etcdctl: {key} (revision {revision}) holds "
                        "the value").format(machine=machine, key=key, revision=found["mod_revision"]))
