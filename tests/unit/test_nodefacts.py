"""The parsers the checks rely on (labs/nodefacts.py), on outputs recorded from the lab's nodes, and the request
timeout every API call of the lab gets (labs.kube.bound_requests)."""

from __future__ import annotations

import json

import pytest

from labs import nodefacts as F

SS = """\
0      0      192.168.56.11:36518   192.168.56.11:2379   users:(("kube-apiserver",pid=1234,fd=9))
0      0      127.0.0.1:2379        127.0.0.1:40112      users:(("etcd",pid=900,fd=31))
0      0      192.168.56.11:41000   192.168.56.11:2379   users:(("rogue-client",pid=4321,fd=3))
0      0      [::ffff:192.168.56.21]:10250 [::ffff:192.168.56.11]:45678 users:(("kubelet",pid=55,fd=20))
0 0 192.168.56.11:52000 192.168.56.10:8443 users:(("kube-controller",pid=777,fd=7),("kube-controller",pid=778,fd=7))
0      0      192.168.56.11:22      192.168.56.1:50000
"""

PROCS = """\
1|/usr/lib/systemd/systemd|/init.scope
900|/usr/local/bin/etcd|/system.slice/etcd.service
1234|/usr/local/bin/kube-apiserver|/system.slice/kube-apiserver.service
4321|/usr/local/sbin/rogue-client|/system.slice/lab-falsify-rogue.service
777|/usr/local/bin/kube-controller-manager|/system.slice/kube-controller-manager.service
778|/usr/local/bin/kube-controller-manager (deleted)|/user.slice/user-0.slice/session-3.scope
55|/usr/local/bin/kubelet|1:name=systemd:/system.slice/kubelet.service
66|/usr/local/bin/etcdctl|/system.slice/lab-admin-1a2b3c4d.scope
"""

UNITS = """\
etcd|900|active
kube-apiserver|1234|active
kube-controller-manager|777|active
kube-scheduler|0|inactive
kubelet|55|active
kube-proxy||
containerd|88|active
"""


def snapshot() -> F.Snapshot:
    return F.Snapshot.parse(f"{SS}--- procs\n{PROCS}--- units\n{UNITS}")


def test_ss_lines_with_processes_and_addresses():
    conns = F.parse_ss(SS)
    assert len(conns) == 6
    api = conns[0]
    assert (api.local_ip, api.peer_ip, api.peer_port, api.process, api.pids) == (
        "192.168.56.11", "192.168.56.11", 2379, "kube-apiserver", (1234,))
    mapped = conns[3]
    assert (mapped.local_port, mapped.peer_ip) == (10250, "192.168.56.11")  # IPv4-mapped IPv6 as plain IPv4
    assert conns[4].pids == (777, 778)  # a socket shared by two processes
    assert (conns[5].process, conns[5].pids) == ("", ())  # no process visible
    assert F.parse_ss("Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n") == []


def test_processes_and_their_units():
    procs = F.parse_procs(PROCS)
    assert procs[778].exe == "/usr/local/bin/kube-controller-manager"  # " (deleted)" removed
    assert procs[778].unit == "session-3.scope"
    assert procs[55].unit == "kubelet.service"  # cgroup v1's name=systemd line
    assert procs[66].unit.startswith("lab-admin-")
    assert procs[1].unit == "init.scope" and procs[1].binary == "systemd"
    assert F.unit_of_cgroup("/") == ""


def test_units_with_and_without_a_main_process():
    units = F.parse_units(UNITS)
    assert units["kube-scheduler"].main_pid == 0 and units["kube-scheduler"].state == "inactive"
    assert units["kube-proxy"].main_pid == 0 and units["kube-proxy"].state == "unknown"


def test_identity_is_decided_by_pid_and_binary_not_by_name():
    snap = snapshot()
    rogue = next(c for c in snap.conns if c.local.endswith(":41000"))
    assert [snap.component_of(p) for p in snap.owners(rogue)] == [None]
    api = snap.conns[0]
    assert [snap.component_of(p) for p in snap.owners(api)] == ["kube-apiserver"]
    # A process named like a component, running the component's binary, but not its unit's main process.
    assert snap.component_of(snap.procs[778]) is None
    assert [c.peer for c in snap.conns_of("kube-controller-manager")] == ["192.168.56.10:8443"]
    assert snap.conns_of("kube-scheduler") == []  # no main process
    assert [p.pid for p in snap.running(F.CONTROL_PLANE)] == [777, 778, 900, 1234]



def look(ss: str) -> F.Snapshot:
    return F.Snapshot.parse(f"{ss}--- procs\n{PROCS}--- units\n{UNITS}")


API = "0 0 192.168.56.11:36518 192.168.56.13:2379 users:((\"kube-apiserver\",pid=1234,fd=9))\n"
RACED = "0 0 192.168.56.11:50100 192.168.56.13:2379\n"  # opened after ss read /proc: no process
EXITED = "0 0 192.168.56.11:50200 192.168.56.13:2379 users:((\"etcdctl\",pid=999,fd=3))\n"  # pid gone from /proc


def test_a_look_without_unowned_connections_is_taken_once():
    looks = iter([look(API)])
    snap = F.settled(lambda: next(looks))  # a second call would raise StopIteration
    assert (len(snap.conns), snap.unowned(), snap.short_lived) == (1, [], [])


def test_a_connection_seen_without_its_process_once_is_short_lived_not_a_stranger():
    """ss reads /proc before it lists the sockets: a connection opened in between has no process (the live
    diagram once drew two such connections to etcd as strangers on a healthy cluster)."""
    calls = []
    looks = iter([look(API + RACED + EXITED), look(API)])
    snap = F.settled(lambda: calls.append(1) or next(looks))
    assert len(calls) == 2
    assert [c.local for c in snap.conns] == ["192.168.56.11:36518"]
    assert sorted(c.local for c in snap.short_lived) == ["192.168.56.11:50100", "192.168.56.11:50200"]


def test_a_connection_without_a_process_in_two_looks_stays_and_one_new_in_the_second_is_set_aside():
    later = "0 0 192.168.56.11:50300 192.168.56.13:2379\n"
    looks = iter([look(API + RACED), look(API + RACED + later)])
    snap = F.settled(lambda: next(looks))
    assert [c.local for c in snap.unowned()] == ["192.168.56.11:50100"]  # hidden twice: a stranger
    assert [c.local for c in snap.short_lived] == ["192.168.56.11:50300"]


def test_the_second_look_names_a_process_the_first_missed():
    owned = RACED.rstrip("\n") + ' users:(("kube-apiserver",pid=1234,fd=12))\n'
    looks = iter([look(RACED), look(owned)])
    snap = F.settled(lambda: next(looks))
    assert [snap.component_of(p) for c in snap.conns for p in snap.owners(c)] == ["kube-apiserver"]
    assert snap.short_lived == []

IPTABLES = """\
-A KUBE-SERVICES -d 10.96.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -j KUBE-SVC-TCOU
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -j KUBE-SVC-NPX4
-A KUBE-SVC-X -d 10.96.0.100/32 -j KUBE-MARK-MASQ
"""
NFT = """\
table ip kube-proxy {
	map service-ips {
		elements = { 10.96.0.1 . tcp . 443 : goto service-2QRHZV4L-default/kubernetes/tcp/https,
			10.96.0.10 . udp . 53 : goto service-FY5PMXPG-kube-system/kube-dns/udp/dns }
	}
}
"""


@pytest.mark.parametrize(("dump", "address", "count"), [
    (IPTABLES, "10.96.0.1", 1), (IPTABLES, "10.96.0.10", 1), (IPTABLES, "10.96.0.100", 1), (IPTABLES, "10.96.0.2", 0),
    (NFT, "10.96.0.1", 1), (NFT, "10.96.0.10", 1),
])
def test_rules_match_whole_addresses_only(dump, address, count):
    assert len(F.rules_mentioning(dump, address)) == count


def test_journal_json_lines():
    lines = "\n".join([
        json.dumps({"__REALTIME_TIMESTAMP": "1796140800000000", "MESSAGE": 'E1201 Get "https://192.168.56.10:8443/'
                    'api/v1/nodes/w1": dial tcp 192.168.56.10:8443: connect: connection refused'}),
        json.dumps({"__REALTIME_TIMESTAMP": "1796140801000000", "MESSAGE": list(b"bytes \xff message")}),
        "not json",
        json.dumps({"MESSAGE": "no timestamp"}),
    ])
    parsed = F.parse_journal_json(lines)
    assert len(parsed) == 2
    assert "192.168.56.10:8443" in parsed[0].text and parsed[0].when.timestamp() == 1796140800
    assert parsed[1].text.startswith("bytes ")


def audit(stage: str, audit_id: str, user: str, resource: str, when: str, group: str = "") -> str:
    ref = {"resource": resource, **({"apiGroup": group} if group else {})}
    return json.dumps({"kind": "Event", "level": "Metadata", "auditID": audit_id, "stage": stage, "verb": "watch",
                       "user": {"username": user}, "objectRef": ref, "stageTimestamp": when})


def test_open_watches_from_audit_lines():
    lines = "\n".join([
        audit("ResponseStarted", "a", "system:kube-scheduler", "pods", "2026-12-01T10:00:00.000001Z"),
        audit("ResponseStarted", "b", "system:kube-scheduler", "nodes", "2026-12-01T10:00:01Z"),
        audit("ResponseComplete", "b", "system:kube-scheduler", "nodes", "2026-12-01T10:05:01Z"),
        audit("ResponseStarted", "c", "system:kube-proxy", "endpointslices", "2026-12-01T10:00:02Z",
              "discovery.k8s.io"),
        audit("ResponseStarted", "d", "system:node:w1", "pods", "2026-12-01T09:00:00Z"),  # before the restart
        json.dumps({"verb": "get", "stage": "ResponseComplete", "auditID": "e"}),
        "garbage",
    ])
    since = 1796119200.0  # 2026-12-01T09:20:00Z: the API server's start
    assert F.open_watches(lines, since) == {"system:kube-scheduler": {"pods": 1},
                                            "system:kube-proxy": {"endpointslices.discovery.k8s.io": 1}}
    assert "system:node:w1" in F.open_watches(lines)


def test_every_api_request_gets_a_timeout_unless_it_has_its_own(monkeypatch):
    from kubernetes.client import rest

    from labs import kube

    seen = []

    def original(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        seen.append(_request_timeout)

    original.lab_bounded = False
    monkeypatch.setattr(rest.RESTClientObject, "request", original)
    kube.bound_requests()
    client = object.__new__(rest.RESTClientObject)
    client.request("GET", "https://x/api")
    client.request("GET", "https://x/api", _request_timeout=5)
    assert seen == [kube.REQUEST_TIMEOUT, 5]
    wrapped = rest.RESTClientObject.request
    kube.bound_requests()  # once only
    assert rest.RESTClientObject.request is wrapped
