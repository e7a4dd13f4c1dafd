"""`lab diagram`: the cluster's architecture drawn from what its machines show, not from the inventory alone: the
machines and their roles, the components running on each (from the processes, with the version each binary
reports), the connections actually established between them (who talks to etcd, which API address the kubelets
reach, the API server's calls to kubelets), the load-balanced API address, each node's pod range and the Service
path through kube-proxy. A broken cluster shows in the picture: a component that does not run is drawn dashed and
red, a node that is not Ready is red, and a connection to etcd from anything but an API server is a red edge.

Output: Graphviz DOT (and SVG and PNG where Graphviz's `dot` is installed: `make deps`) and a Mermaid block that
Markdown reports embed. Building the graph is pure (tests on recorded node outputs); only `observe` looks at the
cluster."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from labs.i18n import _, tr
from labs.nodefacts import COMPONENTS, Snapshot

KUBELET_PORT = 10250
API = "API address"  # the load-balanced address of several API servers (a box of its own)
OUTSIDE = "outside"  # a peer that is no machine of the lab (the host, say)
LOAD_BALANCER = "API load balancer"  # the "version" of haproxy in the picture: its job
# What the picture says, in the chosen language (--lang); component names, versions and addresses stay as they are.
ROLE_LABELS = {"control plane": _("control plane"), "etcd": "etcd", "worker": _("worker")}


def words() -> dict[str, str]:
    return {"ready": tr(_("Ready")), "not_ready": tr(_("NOT READY")), "pods": tr(_("pods")),
            "down": tr(_("NOT RUNNING")), "stranger": tr(_("not of this machine's role")),
            "api": tr(_("API address")), "outside": tr(_("outside the lab")), "services": tr(_("Services")),
            "rules": tr(_("rules")), "lb": tr(_("API load balancer"))}


def machine_label(m: Machine, w: dict[str, str], sep: str) -> str:
    state = "" if m.ready is None else (" " + (w["ready"] if m.ready else w["not_ready"]))
    roles = ", ".join(tr(ROLE_LABELS.get(r, r)) for r in m.roles)
    return f"{m.name} ({roles}){state}{sep}{m.ip}" + (f"{sep}{w['pods']} {m.pod_cidr}" if m.pod_cidr else "")


def component_text(version: str, w: dict[str, str]) -> str:
    return w["down"] if version == "DOWN" else (w["lb"] if version == LOAD_BALANCER else version)


ROLE_COMPONENTS = {"control plane": ["kube-apiserver", "kube-scheduler", "kube-controller-manager"],
                   "node": ["kubelet", "kube-proxy"], "etcd": ["etcd"]}  # nodes: and their runtime's units


@dataclass
class Machine:
    name: str
    roles: list[str]  # "control plane", "etcd", "worker"
    ip: str
    ready: bool | None = None  # the Node's Ready condition; None for a machine that is no node
    pod_cidr: str | None = None
    components: dict[str, str] = field(default_factory=dict)  # component -> version ("" unknown), "DOWN" if absent


@dataclass(frozen=True)
class Edge:
    src: tuple[str, str]  # (machine, component or the process's binary)
    dst: tuple[str, str]  # (machine, API or OUTSIDE, component)
    ok: bool = True  # False: a connection the architecture forbids (to etcd from anything but an API server)


@dataclass
class Graph:
    machines: list[Machine]
    edges: Counter  # Edge -> how many connections
    api: str | None = None  # the load-balanced API address, when there is one
    service_cidr: str | None = None


def targets(ports: dict) -> dict[int, str]:
    """Service port -> the component that listens there."""
    out = {int(ports["etcd_client"]): "etcd", int(ports["etcd_peer"]): "etcd", int(ports["api_server"]):
           "kube-apiserver", KUBELET_PORT: "kubelet"}
    out.setdefault(int(ports["api_lb"]), "kube-apiserver")
    return out


def edges_of(snapshots: dict[str, Snapshot], ips: dict[str, str], ports: dict, vip: str | None = None) -> Counter:
    """The connections each machine's processes hold to a component's port, client side only, as edges: from the
    component whose unit's main process holds it (else the process's binary, else the name ss shows) to the
    component listening on the peer's port, on the peer's machine (the API address for the load-balanced one)."""
    machine_at = {ip: name for name, ip in ips.items()}
    listening = targets(ports)
    edges: Counter = Counter()
    for machine, snap in snapshots.items():
        for conn in snap.conns:
            target = listening.get(conn.peer_port)
            if target is None:
                continue  # not a call to a component's port (or the server's side of one)
            owners = snap.owners(conn)
            named = [c for c in (snap.component_of(p) for p in owners) if c]
            who = named[0] if named else (owners[0].binary if owners else conn.process or "?")
            if conn.peer_ip in ("127.0.0.1", "::1"):
                where = machine
            elif vip and conn.peer_ip == vip:
                where, target = API, API
            else:
                where = machine_at.get(conn.peer_ip, OUTSIDE)
            ok = target != "etcd" or who in ("kube-apiserver", "etcd")
            edges[Edge((machine, who), (where, target), ok)] += 1
    return edges


def node_id(machine: str, component: str) -> str:
    return f"{machine}_{component}".replace("-", "_").replace(" ", "_").replace(".", "_")


def strangers(graph: Graph, machine: Machine) -> list[str]:
    """The processes on ``machine`` that hold connections but are none of the components its roles run."""
    return sorted({who for (where, who) in (e.src for e in graph.edges) if where == machine.name}
                  - set(machine.components))


def _box(graph: Graph, end: tuple[str, str]) -> str:
    return "api" if end[0] == API else ("outside" if end[0] == OUTSIDE else node_id(*end))


def to_dot(graph: Graph) -> str:
    # newrank: Graphviz's other ranking, which lays out every graph of the lab; the classic one fails on some
    # (dot 2.43: "trouble in init_rank", seen with C04's rogue etcd client on ha; tests/unit/data).
    lines = ["digraph lab {", '  rankdir=LR; compound=true; newrank=true; fontname="Helvetica";',
             '  node [shape=box, style="rounded,filled", fillcolor="#eef4ff", fontname="Helvetica", fontsize=11];',
             '  edge [fontname="Helvetica", fontsize=9];']
    w = words()
    for m in graph.machines:
        label = machine_label(m, w, "\\n")
        color = "red" if m.ready is False else "#7a8aa0"
        lines += [f"  subgraph cluster_{node_id(m.name, '')} {{", f'    label="{label}"; color="{color}";']
        for comp, version in m.components.items():
            down = version == "DOWN"
            text = f"{comp}\\n{component_text(version, w)}".rstrip("\\n")
            style = ', style="rounded,dashed", color=red, fontcolor=red, fillcolor=white' if down else ""
            lines.append(f'    {node_id(m.name, comp)} [label="{text}"{style}];')
        for who in strangers(graph, m):  # a process holding connections that is no component of this machine's
            lines.append(f'    {node_id(m.name, who)} [label="{who}\\n({w["stranger"]})", color=red, '
                         'fontcolor=red, fillcolor="#ffecec"];')
        lines.append("  }")
    if graph.api:
        lines.append(f'  api [label="{w["api"]}\\n{graph.api}", shape=ellipse, fillcolor="#fff5d6"];')
    if any(e.dst[0] == OUTSIDE for e in graph.edges):
        lines.append(f'  outside [label="{w["outside"]}", shape=ellipse, fillcolor=white];')
    if graph.service_cidr:
        lines.append(f'  services [label="{w["services"]}\\n{graph.service_cidr}", shape=ellipse, '
                     'fillcolor="#eaffea"];')
        for m in graph.machines:
            if "kube-proxy" in m.components and m.components["kube-proxy"] != "DOWN":
                lines.append(f'  {node_id(m.name, "kube-proxy")} -> services [style=dotted, label="{w["rules"]}"];')
    for edge, count in sorted(graph.edges.items(), key=lambda kv: (kv[0].src, kv[0].dst)):
        attrs = f'label="x{count}"'
        if not edge.ok:
            attrs += ", color=red, fontcolor=red, penwidth=2"
        lines.append(f"  {_box(graph, edge.src)} -> {_box(graph, edge.dst)} [{attrs}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(graph: Graph) -> str:
    lines = ["flowchart LR"]
    w = words()
    for m in graph.machines:
        lines.append(f'  subgraph {node_id(m.name, "")}["{machine_label(m, w, " ")}"]')
        for comp, version in m.components.items():
            text = f"{comp} {component_text(version, w)}".strip()
            lines.append(f'    {node_id(m.name, comp)}["{text}"]')
        for who in strangers(graph, m):
            lines.append(f'    {node_id(m.name, who)}["{who}: {w["stranger"]}"]')
        lines.append("  end")
    if graph.api:
        lines.append(f'  api(["{w["api"]} {graph.api}"])')
    if any(e.dst[0] == OUTSIDE for e in graph.edges):
        lines.append(f'  outside(["{w["outside"]}"])')
    red = []
    for i, (edge, count) in enumerate(sorted(graph.edges.items(), key=lambda kv: (kv[0].src, kv[0].dst))):
        lines.append(f"  {_box(graph, edge.src)} -->|x{count}| {_box(graph, edge.dst)}")
        if not edge.ok:
            red.append(str(i))
    if red:
        lines.append(f"  linkStyle {','.join(red)} stroke:red,stroke-width:3px")
    return "\n".join(lines) + "\n"


def to_svg(graph: Graph) -> str:
    """The diagram as SVG text (Graphviz); "" where `dot` is not installed."""
    if not shutil.which("dot"):
        return ""
    return subprocess.run(["dot", "-Tsvg"], input=to_dot(graph), capture_output=True, text=True, check=True,
                          timeout=60).stdout


def render(graph: Graph, out: Path) -> list[Path]:
    """diagram.dot and diagram.mmd in ``out``, and diagram.svg and diagram.png where Graphviz is installed."""
    out.mkdir(parents=True, exist_ok=True)
    dot = out / "diagram.dot"
    dot.write_text(to_dot(graph))
    (out / "diagram.mmd").write_text(to_mermaid(graph))
    written = [dot, out / "diagram.mmd"]
    if shutil.which("dot"):
        for fmt in ("svg", "png"):
            target = out / f"diagram.{fmt}"
            extra = ["-Gdpi=110"] if fmt == "png" else []
            subprocess.run(["dot", f"-T{fmt}", *extra, str(dot), "-o", str(target)], check=True, timeout=60)
            written.append(target)
    return written


def observe(lab) -> Graph:
    """The graph of the running cluster: one look at every machine (processes, units, connections, versions)."""
    ips = {m: lab.machine_ip(m) for m in lab.machines}
    snapshots = lab.on_each(lab.machines, lab.snapshot)
    listed = lab.core.list_node().items
    ready = {n.metadata.name: {c.type: c.status for c in n.status.conditions or []}.get("Ready") == "True"
             for n in listed}
    cidrs = {n.metadata.name: n.spec.pod_cidr for n in listed}
    machines = []
    for name in lab.machines:
        snap = snapshots[name]
        roles = (["control plane"] if name in lab.control_plane else []) + \
                (["etcd"] if name in lab.etcd_members else []) + (["worker"] if name in lab.workers else [])
        programs = lab.runtime_units(name) if name in lab.nodes else {}
        wanted = lab.control_plane_components(name) + (ROLE_COMPONENTS["node"] + list(programs)
                                                       if name in lab.nodes else [])
        running = {c: u.main_pid for c, u in snap.units.items() if c in COMPONENTS and u.main_pid and
                   snap.procs.get(u.main_pid) and snap.procs[u.main_pid].binary == programs.get(c, c)}
        versions = lab.sh(name, "; ".join(f"echo \"{c}|$(/proc/{pid}/exe --version 2>&1 | head -1)\""
                                          for c, pid in running.items()) or "true", check=False)
        seen = dict(line.split("|", 1) for line in versions.splitlines() if "|" in line)
        comps = {c: (short_version(seen.get(c, "")) if c in running else "DOWN") for c in wanted}
        if name in lab.control_plane and len(lab.control_plane) > 1:
            comps["haproxy"] = LOAD_BALANCER  # forwards the API address to every API server
        machines.append(Machine(name, roles, ips[name], ready.get(name) if name in lab.nodes else None,
                                cidrs.get(name), comps))
    api = lab.setting("api") or {}
    ports = lab.setting("ports") or {}
    vip = api.get("vip")
    edges = edges_of(snapshots, ips, ports, vip) if ports else Counter()
    return Graph(machines, edges, f"{vip}:{api.get('port')}" if vip else None,
                 (lab.setting("network") or {}).get("service_cidr"))


def short_version(text: str) -> str:
    """The version a binary reports ("Kubernetes v1.37.2", "etcd Version: 3.7.2", "containerd ... v2.3.6 ...")."""
    words = [w for w in text.replace(",", " ").split() if w[:1] == "v" and w[1:2].isdigit() or w[:1].isdigit()]
    return words[0] if words else ""
