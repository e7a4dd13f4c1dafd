"""End to end: the whole cluster on the docker provider from the offline
artifact cache: every node Ready, every kube-system pod Running, the smoke
playbook passes, and a second provision changes nothing.

`make test` (CI) runs the single profile (one machine, the small
installation; with its settings moved, conftest.MOVED) and ha (three
control-plane nodes, two workers). The default profile (one control-plane
node and two workers) lies between the two: what it has, one of them has too,
and `make test-vm` runs it end to end on VMs; `make test-labs`
(K8S_LAB_LABS_FULL=1) adds it here, with its settings moved as well.

One cluster per profile, shared by every test of that profile."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import MOVED, MOVED_PROFILES, lab_check, make

from labs.registry import load_checks
from tools import artifacts as A
from tools.locations import state_dir

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def recap(output: str) -> dict[str, dict[str, int]]:
    return {m[0]: {"ok": int(m[1]), "changed": int(m[2]), "unreachable": int(m[3]), "failed": int(m[4])}
            for m in RECAP.findall(output)}


def kubectl(*args: str) -> str:
    kubeconfig = ROOT / ".lab/admin.kubeconfig"
    kubectl_art = next(a for a in A.plan(A.load_versions(), A.host_arch()) if a.id == "kubectl")
    kubectl_bin = A.default_cache() / kubectl_art.relpath
    return subprocess.run([str(kubectl_bin), f"--kubeconfig={kubeconfig}", *args], capture_output=True,
                          text=True, check=True, timeout=60).stdout


PROFILES = ["single", "ha"] + (["default"] if os.environ.get("K8S_LAB_LABS_FULL") == "1" else [])
NODES = {"single": ["cp1"], "default": ["cp1", "w1", "w2"], "ha": ["cp1", "cp2", "cp3", "w1", "w2"]}


@pytest.fixture(scope="module", params=PROFILES)
def cluster(request, cluster_up):
    return request.param, cluster_up(request.param)


def test_all_nodes_ready_and_system_pods_running(cluster):
    profile, up = cluster
    if up is not None:  # None: a cluster already running (K8S_LAB_E2E_REUSE), brought up by someone else
        assert not [h for h, r in recap(up.stdout).items() if r["failed"] or r["unreachable"]], up.stdout[-4000:]
    nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    names = sorted(n["metadata"]["name"] for n in nodes)
    assert names == NODES[profile]
    for node in nodes:
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True", f"{node['metadata']['name']} not Ready"
    pods = json.loads(kubectl("get", "pods", "-n", "kube-system", "-o", "json"))["items"]
    assert pods, "no kube-system pods"
    assert all(p["status"]["phase"] == "Running" for p in pods), [p["metadata"]["name"] for p in pods]
    print(kubectl("get", "nodes", "-o", "wide"))


def test_a_moved_profile_runs_where_its_settings_moved_it(cluster):
    """The single and default profiles are up with another API server port and Service range than settings.yml's
    (conftest.MOVED): every layer took them from the settings, and every other test of the profile (smoke,
    idempotence, the lab checks) runs on that moved cluster."""
    profile, up = cluster
    if profile not in MOVED_PROFILES or up is None:
        pytest.skip("only the single and default profiles are moved (and not a reused cluster)")
    config = json.loads(kubectl("config", "view", "--raw", "-o", "json"))
    assert config["clusters"][0]["cluster"]["server"] == f"https://192.168.56.11:{MOVED['api_server_port']}"
    service = json.loads(kubectl("get", "service", "kubernetes", "-o", "json"))
    assert service["spec"]["clusterIP"] == str(ipaddress.ip_network(MOVED["service_cidr"]).network_address + 1)
    dns = json.loads(kubectl("get", "service", "-n", "kube-system", "kube-dns", "-o", "json"))
    assert dns["spec"]["clusterIP"] == str(ipaddress.ip_network(MOVED["service_cidr"]).network_address + 10)


def _vm_run_covers(profile: str) -> bool:
    """Does make test's VM run (K8S_LAB_TEST_VM=single) repeat this profile? It brings the single profile up on a
    libvirt VM and runs the smoke playbook, a second provision and the non-disruptive checks there (not with
    K8S_LAB_LABS_FULL, which wants everything here too)."""
    return (profile == "single" and os.environ.get("K8S_LAB_TEST_VM") == "single"
            and os.environ.get("K8S_LAB_LABS_FULL") != "1")


def _the_vm_run_repeats_it(profile: str) -> None:
    """The docker single profile leaves to the VM run what it repeats (default and ha run them on containers too)."""
    if _vm_run_covers(profile):
        pytest.skip("single: the VM run of make test (tests/vm, the same profile on a libvirt VM) runs it")


def test_smoke_playbook_passes(cluster):
    profile, _ = cluster
    _the_vm_run_repeats_it(profile)
    smoke = make("smoke", profile, timeout=600)
    assert recap(smoke.stdout)["localhost"]["failed"] == 0


def test_pods_reach_the_nodes_name_server(cluster):
    """CoreDNS forwards a name outside the cluster to the node's name server, and gets its answer. A docker node's
    is Docker's DNS server at 127.0.0.11, which is every pod's own loopback: without the common role's
    k8s-node-dns, CoreDNS forwarded to itself until its 1000 concurrent queries were used up, and answered
    SERVFAIL. Docker's server knows the node containers by name: a pod must find them, through CoreDNS."""
    from labs.kube import test_image
    from labs.nodes import published_settings

    profile, _ = cluster
    cluster_name = published_settings(ROOT / "inventory")["cluster_name"]  # the node containers are named after it
    pod = "dns-outside"
    kubectl("run", pod, f"--image={test_image()}", "--restart=Never", "--command", "--", "sleep", "300")
    try:
        kubectl("wait", "--for=condition=Ready", f"pod/{pod}", "--timeout=90s")
        for node in sorted({NODES[profile][0], NODES[profile][-1]}):
            name = f"{cluster_name}-{node}."
            node_ip = kubectl("get", "node", node, "-o",
                              "jsonpath={.status.addresses[?(@.type=='InternalIP')].address}")
            answer = kubectl("exec", pod, "--", "nslookup", name)
            assert node_ip in answer, answer
        logs = kubectl("logs", "-n", "kube-system", "-l", "k8s-app=kube-dns", "--tail=-1")
        assert "concurrent queries exceeded" not in logs, logs[-2000:]
    finally:
        kubectl("delete", "pod", pod, "--now", "--ignore-not-found")


def test_an_address_of_the_service_range_no_service_serves_is_refused_on_the_node(cluster):
    """A connection to an address and port of the Service range that kube-proxy did not translate (here the API's
    Service address on a port it does not serve) is refused on the node, from a pod and from the node itself
    (the cni role's pod-network unit), instead of leaving by the node's default route: upstream's conformance
    test "Services should serve endpoints on same port and different protocols" found such a connection answered
    by something outside the cluster."""
    from labs.kube import test_image
    from labs.lab import Lab

    ip = json.loads(kubectl("get", "service", "kubernetes", "-o", "json"))["spec"]["clusterIP"]
    pod = "unserved-service"
    kubectl("run", pod, f"--image={test_image()}", "--restart=Never", "--command", "--", "sleep", "300")
    try:
        kubectl("wait", "--for=condition=Ready", f"pod/{pod}", "--timeout=90s")
        seen = kubectl("exec", pod, "--", "sh", "-c", f"nc -w 3 {ip} 81 </dev/null 2>&1; echo rc=$?")
        assert "Connection refused" in seen and "rc=0" not in seen, seen
    finally:
        kubectl("delete", "pod", pod, "--now", "--ignore-not-found")
    lab = Lab()
    for node in lab.nodes:
        seen = lab.sh(node, f"curl -sS --max-time 3 -o /dev/null http://{ip}:81/ 2>&1; echo rc=$?", check=False)
        assert "rc=7" in seen, (node, seen)  # curl: could not connect (refused), not a timeout (28) or an answer


def test_lab_certs_shows_what_every_component_serves(cluster, tmp_path):
    """`lab certs`: a TLS handshake with every API server, etcd member (clients and peers) and kubelet gives the
    certificate each one serves, with the identity and issuer the PKI gave it; the files and kubeconfigs are listed
    too, and nothing is expired or near it on a new cluster (exit 0)."""
    import sys

    from labs.lab import Lab

    lab = Lab()
    report = tmp_path / "certs.json"
    proc = subprocess.run([sys.executable, "-m", "labs.cli", "certs", "--json", str(report)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    print(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    found = json.loads(report.read_text())
    assert all(c["state"] == "ok" for c in found), [c for c in found if c["state"] != "ok"]
    served = {(c["machine"], c["path"].split()[2].rsplit(":", 1)[1]): c for c in found
              if c["path"].startswith("served on ") and not c["is_ca"]}
    cluster_name = lab.setting("cluster_name")
    ports = lab.setting("ports")
    for node in lab.control_plane:
        api = served[(node, str(ports["api_server"]))]
        assert (api["subject"], api["issuer"]) == ("CN=kube-apiserver", f"CN={cluster_name}-ca"), api
    for member in lab.etcd_members:
        for port in (ports["etcd_client"], ports["etcd_peer"]):
            etcd = served[(member, str(port))]
            assert (etcd["subject"], etcd["issuer"]) == (f"CN={member}", f"CN={cluster_name}-etcd-ca"), etcd
    for node in lab.nodes:
        kubelet = served[(node, "10250")]
        assert kubelet["subject"] == f"CN=system:node:{node}, O=system:nodes", kubelet
    assert any(c["machine"] == "controller" and c["path"].endswith("admin.kubeconfig") for c in found)


def test_the_cis_benchmark_finds_no_failure(cluster):
    """`make cis` (kube-bench on every machine and the policies from the control host): no FAIL (its exit status),
    on the moved profile with one control-plane node (single in CI, default with K8S_LAB_LABS_FULL); docs/security.md
    gives the ha figures and every remaining WARN with its reason."""
    profile, _ = cluster
    if profile not in MOVED_PROFILES:
        pytest.skip("CI runs the benchmark on the single profile (`make cis` on ha: docs/security.md)")
    proc = make("cis", profile, timeout=900, check=False)
    summary = (state_dir() / "cis" / "summary.md").read_text()
    print(summary.split("\n## ")[0])
    assert proc.returncode == 0, summary[:6000]


def test_second_provision_changes_nothing(cluster):
    profile, _ = cluster
    _the_vm_run_repeats_it(profile)
    again = make("provision", profile, timeout=600)
    result = recap(again.stdout)
    assert result, again.stdout[-3000:]
    changed = {host: r["changed"] for host, r in result.items() if r["changed"]}
    assert not changed, f"second run changed something: {changed}\n" + "\n".join(changed_tasks(again.stdout))


def changed_tasks(output: str) -> list[str]:
    """Each task of a playbook's output that changed something, with its changed lines (and the diff, if shown)."""
    found, task, lines = [], "", []
    for line in output.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [", "PLAY [", "PLAY RECAP")):
            if lines:
                found += [task, *lines]
            task, lines = line, []
        elif line.startswith("changed:") or (lines and line.startswith((" ", "---", "+++", "@@", "+", "-"))):
            lines.append(line[:300])
    found += [task, *lines] if lines else []
    return found or [output[-6000:]]


# Disruptive checks whose run on the default profile repeats the ha run's step for step: those that only touch a
# worker, which both profiles have alike (w1, w2), and those that stop a component on every control-plane node and
# look at nothing else of the control plane (the scheduler: C10, C11's scheduler configuration; the controller
# manager: C13). test_labs.py runs them on ha, so the default run leaves them out unless K8S_LAB_LABS_FULL (`make
# test-labs` runs them on every profile). The default run keeps the disruptive checks that meet the single control
# plane (C08: its only etcd member; C27: its only API server). On single none is left out: there C14, C25 and C27
# stop the kubelet, kube-proxy and the control plane of the one machine that runs everything, which no other
# profile does.
SAME_ON_BOTH = ("C10", "C11", "C13", "C14", "C25", "C29")
# What skips where, each with its reason: one etcd member, one API server, etcd stacked, containerd on every node
# (C32); on single also the checks
# that need two workers (C11's cordon and taint legs, C26 across nodes, C29 a node lost and one to take its pods).
SKIPPED = {"default": ["C09", "C28", "C31", "C32"],
           "single": ["C09", "C11", "C26", "C28", "C29", "C31", "C32"]}


@pytest.mark.labs
def test_lab_checks_on_a_profile_with_one_control_plane_node(cluster, tmp_path):
    """One control-plane node (single, default): the checks that need three etcd members or several API servers
    (C09, C28), etcd on machines of its own (C31), workers on other runtimes (C32), or on single two workers,
    skip and say why; every other check passes, the disruptive ones included (on default those whose run repeats
    ha's, SAME_ON_BOTH, with `make test-labs` only). (The ha profile's run is in test_labs.py, with the
    falsification tests.)"""
    profile, _ = cluster
    if profile not in SKIPPED:
        pytest.skip("the ha profile's lab checks run in test_labs.py")
    report = tmp_path / "report.json"
    checks = load_checks()
    if _vm_run_covers(profile):
        # The VM run has every non-disruptive check on this same profile, on a real VM: here only the disruptive
        # ones (the VM run leaves them out), which saves CI about two minutes of repeats.
        selected = [c for c in checks if checks[c].disruptive]
    elif profile == "single" or os.environ.get("K8S_LAB_LABS_FULL") == "1":
        selected = list(checks)
    else:
        selected = [c for c in checks if c not in SAME_ON_BOTH]
    rc, out = lab_check(*selected, "--json", str(report))
    results = {r["id"]: r for r in json.loads(report.read_text())}
    assert sorted(results) == sorted(selected), sorted(results)
    skipped = {i: r["message"] for i, r in results.items() if r["status"] == "skipped"}
    assert sorted(skipped) == [c for c in SKIPPED[profile] if c in selected], skipped
    assert all(skipped.values()), f"a skip without its reason: {skipped}"
    bad = {i: r["message"] for i, r in results.items() if r["status"] not in ("passed", "skipped")}
    assert not bad, bad
    assert rc == 0, out[-3000:]


@pytest.mark.labs
def test_c02_fails_on_single_while_its_one_machine_carries_the_taint(cluster):
    """The small installation's claim made false: the control-plane taint on the one machine that should take the
    workloads (the C02-single fault, as `lab break C02` puts it in); C02 fails naming it, and the taint comes off
    again whatever happens."""
    profile, _ = cluster
    if profile != "single":
        pytest.skip("the single profile's own falsification (the others': test_labs.py)")
    from labs.faults import FAULTS, broken
    from labs.lab import Lab

    lab = Lab()
    fault = FAULTS["C02-single"]
    assert fault.unfit(lab) is None
    with broken(lab, fault):
        rc, out = lab_check("C02")
    assert rc != 0 and re.search(fault.reason_for(lab), out), out[-3000:]
    taints = [t.key for t in lab.core.read_node("cp1").spec.taints or []]
    assert "node-role.kubernetes.io/control-plane" not in taints, taints
