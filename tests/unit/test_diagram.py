"""`lab diagram`: the edges are the connections the machines show (recorded outputs), and the drawings say them."""

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from labs import diagram as D
from labs.nodefacts import Snapshot

# Recorded on cp1 (tests/unit/test_nodefacts.py): the API server and a rogue client to etcd, a kubelet's server
# side, the controller-manager to the load-balanced API address, an ssh session.
SS = """\
0      0      192.168.56.11:36518   192.168.56.11:2379   users:(("kube-apiserver",pid=1234,fd=9))
0      0      127.0.0.1:2379        127.0.0.1:40112      users:(("etcd",pid=900,fd=31))
0      0      192.168.56.11:41000   192.168.56.11:2379   users:(("rogue-client",pid=4321,fd=3))
0      0      [::ffff:192.168.56.11]:10250 [::ffff:192.168.56.12]:45678 users:(("kubelet",pid=55,fd=20))
0 0 192.168.56.11:52000 192.168.56.10:8443 users:(("kube-controller",pid=777,fd=7),("kube-controller",pid=778,fd=7))
0      0      192.168.56.11:22      192.168.56.1:50000
"""
W1 = """\
0      0      192.168.56.21:40000   192.168.56.10:8443   users:(("kubelet",pid=55,fd=9))
0      0      192.168.56.21:40002   192.168.56.10:8443   users:(("kube-proxy",pid=66,fd=9))
--- procs
55|/usr/local/bin/kubelet|/system.slice/kubelet.service
66|/usr/local/bin/kube-proxy|/system.slice/kube-proxy.service
--- units
kubelet|55|active
kube-proxy|66|active
"""
PROCS = """\
900|/usr/local/bin/etcd|/system.slice/etcd.service
1234|/usr/local/bin/kube-apiserver|/system.slice/kube-apiserver.service
4321|/usr/local/sbin/rogue-client|/system.slice/lab-falsify-rogue.service
777|/usr/local/bin/kube-controller-manager|/system.slice/kube-controller-manager.service
55|/usr/local/bin/kubelet|/system.slice/kubelet.service
"""
UNITS = "etcd|900|active\nkube-apiserver|1234|active\nkube-controller-manager|777|active\nkubelet|55|active\n"
PORTS = {"etcd_client": 2379, "etcd_peer": 2380, "api_server": 6443, "api_lb": 8443}
IPS = {"cp1": "192.168.56.11", "w1": "192.168.56.21"}


def graph() -> D.Graph:
    snaps = {"cp1": Snapshot.parse(f"{SS}--- procs\n{PROCS}--- units\n{UNITS}"), "w1": Snapshot.parse(W1)}
    edges = D.edges_of(snaps, IPS, PORTS, vip="192.168.56.10")
    machines = [D.Machine("cp1", ["control plane", "etcd"], IPS["cp1"], True, "10.244.0.0/24",
                          {"etcd": "3.7.2", "kube-apiserver": "v1.37.2", "kube-scheduler": "DOWN"}),
                D.Machine("w1", ["worker"], IPS["w1"], False, "10.244.1.0/24", {"kubelet": "v1.37.2",
                                                                                "kube-proxy": "v1.37.2"})]
    return D.Graph(machines, edges, "192.168.56.10:8443", "10.96.0.0/16")


def test_the_edges_are_the_connections_observed():
    assert graph().edges == Counter({
        D.Edge(("cp1", "kube-apiserver"), ("cp1", "etcd"), True): 1,
        D.Edge(("cp1", "rogue-client"), ("cp1", "etcd"), False): 1,
        D.Edge(("cp1", "kube-controller-manager"), (D.API, D.API), True): 1,
        D.Edge(("w1", "kubelet"), (D.API, D.API), True): 1,
        D.Edge(("w1", "kube-proxy"), (D.API, D.API), True): 1,
    })


def test_dot_draws_the_broken_parts_in_red():
    dot = D.to_dot(graph())
    assert "cp1_rogue_client -> cp1_etcd [label=\"x1\", color=red" in dot
    assert "cp1_kube_apiserver -> cp1_etcd [label=\"x1\"];" in dot
    assert 'cp1_kube_scheduler [label="kube-scheduler\\nNOT RUNNING", style="rounded,dashed", color=red' in dot
    assert "w1 (worker) NOT READY" in dot and 'color="red"' in dot
    assert "api [label=\"API address\\n192.168.56.10:8443\"" in dot
    assert "w1_kube_proxy -> services" in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graphviz_lays_out_a_graph_its_classic_ranking_failed_on(tmp_path):
    """A graph `lab diagram` drew on ha with C04's rogue etcd client, which dot 2.43's classic ranking cannot lay
    out ("trouble in init_rank"); with the header to_dot writes now, it can."""
    recorded = (Path(__file__).parent / "data" / "diagram-init-rank.dot").read_text().splitlines()
    header = D.to_dot(graph()).splitlines()[:2]
    assert "newrank=true" in header[1]
    source = tmp_path / "diagram.dot"
    source.write_text("\n".join(header + recorded[2:]) + "\n")
    subprocess.run(["dot", "-Tsvg", str(source), "-o", str(tmp_path / "diagram.svg")], check=True, timeout=60)


def test_mermaid_has_the_same_edges_and_marks_the_forbidden_one():
    mmd = D.to_mermaid(graph())
    arrows = [line for line in mmd.splitlines() if "-->" in line]
    assert len(arrows) == len(graph().edges)
    assert "  cp1_rogue_client -->|x1| cp1_etcd" in mmd
    red = [i for i, line in enumerate(arrows) if "rogue" in line]
    assert f"linkStyle {red[0]} stroke:red" in mmd


def test_versions_as_binaries_report_them():
    assert D.short_version("Kubernetes v1.37.2") == "v1.37.2"
    assert D.short_version("etcd Version: 3.7.2") == "3.7.2"
    assert D.short_version("containerd github.com/containerd/containerd/v2 v2.3.6 abc") == "v2.3.6"
    assert D.short_version("") == ""


def test_the_html_page_holds_everything_and_escapes_it():
    from labs.html import page
    from labs.registry import Result, load_checks

    load_checks()
    results = [Result("C09", "etcd needs a majority", "failed", ["stopped etcd on cp3", "<b>x</b>"],
                      "timed out after 30s waiting for writes to fail with two members down", 61.0, True),
               Result("C01", "nodes", "passed", ["ok"], "", 2.0, False)]
    text = page(results, D.to_svg(graph()) or "<svg></svg>", "cluster https://192.168.56.11:6443 (v1.37.2)")
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "<script" not in text
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "1 passed, 1 failed, 0 skipped" in text
    assert 'class="hint">hint: timed out after 30s waiting for writes to fail' in text
    assert "http" not in text.replace("https://192.168.56.11:6443", "").replace("http://www.w3.org", "")


def test_the_picture_speaks_the_chosen_language():
    from labs.i18n import set_language

    try:
        set_language("ru")
        dot, mmd = D.to_dot(graph()), D.to_mermaid(graph())
    finally:
        set_language(None)
    assert "w1 (рабочая нода) НЕ READY" in dot and "cp1 (управляющий слой, etcd) Ready" in dot
    assert 'kube-scheduler\\nНЕ ЗАПУЩЕН"' in dot and 'api [label="адрес API\\n192.168.56.10:8443"' in dot
    assert 'label="правила"' in dot and "Сервисы" in dot
    assert "rogue-client: не из роли этой машины" in mmd
    assert "kube-apiserver v1.37.2" in mmd  # names and versions as they are
