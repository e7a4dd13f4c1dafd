"""Restart survival on ha: machines stopped and started again (`make stop`, `make start`: vagrant halt, vagrant up
--no-provision) come back healthy with no playbook run: etcd's quorum re-forms, every node is Ready and every
component active, the workload made before runs again, its Service answers on every node's address from this host
(kube-proxy's rules and the pod routes are back), and each node routes every other node's pod range. In turn: every
machine at once, one worker, one control-plane node; then a provision changes nothing. Each time to healthy is
printed.

`make test-restart` runs it (K8S_LAB_RESTART=1); not part of `make test`."""

from __future__ import annotations

import os
import re
import time

import pytest
from conftest import make
from test_cluster import recap

from labs.checks.c30_service_from_outside import ask as answer  # one GET from this host, never through a proxy
from labs.kube import ECHO_ANSWER, node_ips, run_deployment, wait_ready_pods
from labs.lab import Lab
from labs.timing import wait_for

pytestmark = [
    pytest.mark.e2e, pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("K8S_LAB_RESTART"),
                       reason="the restart tests run with `make test-restart` (K8S_LAB_RESTART=1)"),
]
PROFILE = "ha"


@pytest.fixture(scope="module")
def lab(cluster_up):
    return cluster_up.lab(PROFILE)


@pytest.fixture(scope="module")
def workload(lab):
    """A Deployment spread over the workers and a NodePort Service, made before any restart."""
    with lab.namespace("restart") as ns:
        run_deployment(lab, ns, "web", len(lab.workers), spread=True)
        svc = lab.core.create_namespaced_service(ns, {"metadata": {"name": "web"}, "spec": {
            "type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        yield ns, svc.spec.ports[0].node_port
    lab.delete_namespace(ns)


def healthy(lab: Lab, ns: str, port: int) -> list[str]:
    """Wait (bounded) for everything the cluster had before the restart; what was seen, line by line."""
    seen = []
    lab.wait_healthy(timeout=600)
    seen.append(f"nodes Ready: {', '.join(lab.ready_nodes())}; every component's unit active")
    members = lab.etcd_members
    health = wait_for(lambda: (out := lab.etcdctl("endpoint health --cluster")).count("is healthy") == len(members)
                      and out, 180, f"{len(members)} healthy etcd members", 2)
    seen.append(f"etcd: {health.count('is healthy')} healthy members")
    pods = wait_ready_pods(lab, ns, "web", len(lab.workers), timeout=300)
    seen.append("workload: " + ", ".join(f"{p.metadata.name}@{p.spec.node_name}" for p in pods))
    ips = node_ips(lab)
    for node in lab.nodes:
        url = f"http://{ips[node]}:{port}/"
        got = wait_for(lambda u=url: ECHO_ANSWER.search(answer(u)), 120, f"an answer from {url} ({node})", 1)
        seen.append(f"Service web at {url}: answered by {got.group(1)}")
    cidrs = {n.metadata.name: n.spec.pod_cidr for n in lab.core.list_node().items}
    for node in lab.nodes:
        routes = lab.sh(node, "ip -4 route show")
        missing = [f"{other} {cidr}" for other, cidr in cidrs.items() if other != node and cidr not in routes]
        assert not missing, f"{node} has no route to {missing}:\n{routes}"
    seen.append("pod routes: every node routes every other node's pod range")
    # Docker picks new ports for its DNS server at each start of a container: k8s-node-dns (common role) must have
    # copied them again at boot, or CoreDNS gets no answer for names outside the cluster.
    for node in lab.nodes:
        nat = lab.sh(node, "grep -q '^nameserver 127.0.0.11' /etc/resolv.conf && iptables-save -t nat || true")
        if nat:
            docker = sorted(re.findall(r"-A DOCKER_OUTPUT .*--to-destination (\S+)", nat))
            ours = sorted(re.findall(r"-A K8S_NODE_DNS .*--to-destination (\S+)", nat))
            assert docker and ours == docker, f"{node}: Docker's DNS server at {docker}, k8s-node-dns sends to {ours}"
            seen.append(f"{node}: k8s-node-dns sends to Docker's DNS server at {', '.join(ours)}")
    return seen


@pytest.mark.parametrize("which", ["every machine", "one worker", "one control-plane node"])
def test_the_cluster_comes_back_after_its_machines_restart(lab, workload, which):
    ns, port = workload
    machines = {"every machine": [], "one worker": [lab.workers[-1]],
                "one control-plane node": [lab.control_plane[-1]]}[which]
    nodes = " ".join(machines)
    for target in ("stop", "start"):
        env_nodes = {"NODES": nodes} if nodes else {}
        os.environ.update(env_nodes)
        try:
            make(target, PROFILE, timeout=900)
        finally:
            for name in env_nodes:
                os.environ.pop(name, None)
    started = time.monotonic()
    seen = healthy(lab, ns, port)
    elapsed = time.monotonic() - started
    print(f"{which} restarted: healthy {elapsed:.0f} s after `make start` returned\n  " + "\n  ".join(seen))


def test_a_provision_after_the_restarts_changes_nothing(lab, workload):
    again = make("provision", PROFILE, timeout=900)
    result = recap(again.stdout)
    assert result, again.stdout[-3000:]
    changed = {host: r["changed"] for host, r in result.items() if r["changed"]}
    assert not changed, f"the provision after the restarts changed something: {changed}\n{again.stdout[-6000:]}"
