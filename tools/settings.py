"""Lab settings: load settings.yml, validate it and resolve it into what the
Vagrantfile, the Ansible inventory and the playbooks use (nodes, addresses,
API endpoint, versions), so that a bad setting fails before anything is built.

    python3 -m tools.settings check|resolve [--profile P] [--provider X] [--file F]

Validation is a JSON Schema (settings.schema.json: types, enums, required and
unknown keys) followed by the checks that relate fields to each other. Every
problem is collected and reported at once, one per line, naming the field.
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import itertools
import json
import os
import platform
import shutil
import sys
from collections.abc import Callable, Hashable
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import yaml

from tools import hypervisor
from tools.arch import lab_arch
from tools.locations import state_dir  # noqa: F401 - the lab's state folder, part of what settings resolve

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_FILE = ROOT / "settings.yml"
VERSIONS_FILE = ROOT / "versions.yml"
SCHEMA_FILE = Path(__file__).with_name("settings.schema.json")
RECORD = "cluster.json"  # in the state dir: the profile and provider of the cluster that is up
# What a cluster leaves in the state folder (removed by `make down`; the SSH key and benchmark reports stay).
# break.json: the record of a fault put in on purpose (labs/journal.py), gone with the machines it was put into
CLUSTER_STATE = ("pki", "kubeconfigs", "admin.kubeconfig", "super-admin.kubeconfig", "encryption-key",
                 "encryption-keys.json", "vrrp-password", RECORD, "break.json")

PROVIDERS = ("auto", "virtualbox", "libvirt", "docker")
VM_PROVIDERS = ("virtualbox", "libvirt")
CONTROLLERS = ("auto", "host", "lab")
CONTROLLER_ENV = "K8S_LAB_CONTROLLER"  # wins over settings.yml controller for one run
CONTROLLER_HOST = 5  # the controller machine's address in the node network (controller: lab)
COMPONENTS = ("kubernetes", "etcd", "containerd", "runc", "cni_plugins", "crictl", "coredns")
IMAGES = ("pause", "coredns", "echo")
MIN_MEMORY_MB = 1536
MIN_VM_CPUS = 2
LAB_BOX = "k8s-arch-lab/debian12"  # the lab's own box (tools/box, `make box`): libvirt, amd64
EMULATION_TIMEOUT_SCALE = 8  # timeout_scale "auto" for VMs under software emulation
MIRROR_ENV = "K8S_LAB_MIRROR"  # the artifact mirror; wins over settings.yml artifacts.mirror
# VirtualBox 7 creates host-only networks only in these ranges unless /etc/vbox/networks.conf allows others.
VBOX_NETWORKS_CONF = Path("/etc/vbox/networks.conf")
VBOX_DEFAULT_RANGES = ("192.168.56.0/21",)
# Where the roles put things on every node: published by the inventory (lab_settings.paths, mapped to k8s_* in
# inventory/group_vars/all/cluster.yml), read by the role defaults and the lab checks.
NODE_PATHS = {
    "bin_dir": "/usr/local/bin",  # every component's binary
    "config_dir": "/etc/kubernetes",  # component configurations and kubeconfigs
    "pki_dir": "/etc/kubernetes/pki",  # the cluster CA, component certificates and keys
    "etcd_config_dir": "/etc/etcd",
    "etcd_pki_dir": "/etc/etcd/pki",  # etcd's own CA, server, peer and client certificates
    "etcd_data_dir": "/var/lib/etcd",
    "containerd_socket": "/run/containerd/containerd.sock",  # the CRI endpoint of kubelet and crictl
    "cni_bin_dir": "/opt/cni/bin",
    "cni_conf_dir": "/etc/cni/net.d",
    "image_dir": "/var/lib/k8s-arch-lab/images",  # image archives imported into containerd
}
# The container runtimes a node may run (profiles.<p>.runtimes; default containerd): the CRI socket that the
# kubelet, crictl and the lab checks use (the node's one endpoint, published per node by the inventory), the name
# the runtime gives itself over CRI (a Node's containerRuntimeVersion is "<name>://<version>"), its systemd units
# and the program each runs (the kubelet's unit requires them), and the versions.yml component whose files it
# needs beside the lab's own (None: in every cache). Control-plane nodes run containerd: the roles support nothing
# else there.
RUNTIMES = {
    "containerd": {"socket": "/run/containerd/containerd.sock", "cri_name": "containerd",
                   "units": {"containerd": "containerd"}, "component": None},
    "crio": {"socket": "/run/crio/crio.sock", "cri_name": "cri-o", "units": {"crio": "crio"}, "component": "crio"},
    "docker": {"socket": "/run/cri-dockerd.sock", "cri_name": "docker",
               "units": {"cri-docker": "cri-dockerd", "docker": "dockerd"}, "component": "cri_dockerd"},
}
DEFAULT_RUNTIME = "containerd"
CONTROL_PLANE_RUNTIMES = ("containerd",)
PORTS = ("api_server_port", "api_lb_port", "etcd_client_port", "etcd_peer_port")  # network.*: all distinct
# Host numbers in node_cidr: .10 the API address of a multi-control-plane profile,
# .11-.19 the control plane, .21-.89 the workers, .91-.99 the machines of an external etcd.
VIP_HOST, CP_FIRST, CP_MAX, WORKER_FIRST, WORKER_MAX, ETCD_FIRST, ETCD_MAX = 10, 11, 9, 21, 69, 91, 9


class SettingsError(Exception):
    """One or more problems with the settings, one per line; shown without a traceback."""

    def __init__(self, problems: list[str]):
        self.problems = list(dict.fromkeys(problems))
        super().__init__("\n".join(self.problems))


# --------------------------------------------------------------------------
# Reading


class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects a repeated key, which PyYAML would silently let win."""


def _unique_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, Hashable):
            if key in seen:
                raise yaml.MarkedYAMLError("while reading a mapping", node.start_mark,
                                           f"found the key {key!r} twice", key_node.start_mark)
            seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _read_mapping(path: Path, where: str, problems: list[str]) -> dict | None:
    """The YAML mapping in ``path``, or None after adding the reason to ``problems``."""
    try:
        data = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{where}: cannot read the file: {getattr(exc, 'strerror', None) or exc}")
        return None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problems.append(f"{where}: line {mark.line + 1}, column {mark.column + 1}: invalid YAML: "
                        f"{exc.problem or exc.context}")
        return None
    except yaml.YAMLError as exc:
        problems.append(f"{where}: invalid YAML: {exc}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{where}: expected a mapping of settings, found {type(data).__name__}")
        return None
    return data


# --------------------------------------------------------------------------
# Validation


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    base = jsonschema.Draft202012Validator
    # JSON Schema counts 2.0 as an integer; the counts feed range() and address arithmetic.
    checker = base.TYPE_CHECKER.redefine("integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool))
    return jsonschema.validators.extend(base, type_checker=checker)(json.loads(SCHEMA_FILE.read_text()))


def _field(*parts) -> str:
    return ".".join(str(p) for p in parts if p != "")


def _schema_problems(doc: dict, where: str, problems: list[str]) -> set[str]:
    """Add the schema violations to ``problems``; return the top-level keys they concern,
    whose semantic checks are then skipped (their values may not even have the right type)."""
    bad: set[str] = set()
    for err in sorted(_validator().iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path]):
        path = list(err.absolute_path)
        if err.validator == "required":
            missing = [k for k in err.validator_value if k not in err.instance]
            problems += [f"{where}: {_field(*path, k)} is missing" for k in missing]
            bad.update([path[0]] if path else missing)
            continue
        bad.add(path[0] if path else "")
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})), key=str)
            problems += [f"{where}: {_field(*path, k)}: unknown setting" for k in extra]
        elif err.validator == "enum":
            problems.append(f"{where}: {_field(*path)}: {err.instance!r} is not one of "
                            f"{', '.join(map(str, err.validator_value))}")
        else:
            problems.append(f"{where}: {_field(*path) or '(top level)'}: {err.message}")
    return bad


def control_plane_workloads(counts: dict) -> bool:
    """Whether a profile's control plane takes workloads (no NoSchedule taint): as it says, and by default when it
    has no workers: the course's small installation, where "control-plane nodes can also be worker nodes"."""
    return counts.get("control_plane_workloads", counts.get("workers") == 0)


def _check_profiles(profiles: dict, where: str) -> list[str]:
    out = []
    for name, counts in profiles.items():
        cp, workers, field = counts["control_plane"], counts["workers"], f"profiles.{name}"
        etcd = counts.get("etcd", 0)
        if etcd < 0:
            out.append(f"{where}: {field}.etcd: {etcd}: a count of etcd machines (0: etcd on the control-plane nodes)")
        elif etcd % 2 == 0 and etcd:
            # n=2k members tolerate no more failures than 2k-1.
            out.append(f"{where}: {field}.etcd: {etcd} is an even etcd member count; use an odd number")
        elif etcd > ETCD_MAX:
            out.append(f"{where}: {field}.etcd: {etcd} machines do not fit in "
                       f".{ETCD_FIRST}-.{ETCD_FIRST + ETCD_MAX - 1} of network.node_cidr (at most {ETCD_MAX})")
        if cp < 1:
            out.append(f"{where}: {field}.control_plane: {cp}: at least one control-plane node is needed")
        elif cp % 2 == 0 and not etcd:
            # Each control-plane node runs an etcd member: n=2k tolerates no more failures than 2k-1.
            out.append(f"{where}: {field}.control_plane: {cp} is an even etcd member count "
                       f"(every control-plane node runs an etcd member unless {field}.etcd gives etcd machines of "
                       "its own); use an odd number")
        elif cp > CP_MAX:
            out.append(f"{where}: {field}.control_plane: {cp} nodes do not fit in .{CP_FIRST}-.{CP_FIRST + CP_MAX - 1} "
                       f"of network.node_cidr (at most {CP_MAX})")
        workloads = control_plane_workloads(counts)
        if workers < 0:
            out.append(f"{where}: {field}.workers: {workers}: a count of worker nodes (0: the control plane takes "
                       "the workloads)")
        elif workers == 0 and not workloads:
            out.append(f"{where}: {field}.workers: 0 with {field}.control_plane_workloads false: no node would run "
                       "workloads; add workers, or let the control plane take them (control_plane_workloads: true)")
        elif workers > WORKER_MAX:
            out.append(f"{where}: {field}.workers: {workers} nodes do not fit in "
                       f".{WORKER_FIRST}-.{WORKER_FIRST + WORKER_MAX - 1} of network.node_cidr (at most {WORKER_MAX})")
        out += _check_runtimes(counts, f"{where}: {field}")
    return out


def node_names(counts: dict) -> dict[str, str]:
    """A profile's node names -> role, in the order the nodes are made."""
    return {f"{short}{i + 1}": role
            for role, short, count in (("control_plane", "cp", counts["control_plane"]),
                                       ("worker", "w", counts["workers"]), ("etcd", "e", counts.get("etcd", 0)))
            for i in range(max(count, 0))}


def _check_runtimes(counts: dict, field: str) -> list[str]:
    out, names = [], node_names(counts)
    for node, runtime in (counts.get("runtimes") or {}).items():
        role = names.get(node)
        if role is None:
            out.append(f"{field}.runtimes.{node}: the profile has no node {node} (its nodes: {', '.join(names)})")
        elif role == "etcd" and runtime != DEFAULT_RUNTIME:
            out.append(f"{field}.runtimes.{node}: {runtime}: {node} runs only etcd, no kubelet and no container "
                       "runtime")
        elif role == "control_plane" and runtime not in CONTROL_PLANE_RUNTIMES:
            out.append(f"{field}.runtimes.{node}: {runtime}: the roles run control-plane nodes on "
                       f"{' or '.join(CONTROL_PLANE_RUNTIMES)} only; put a worker on {runtime} (w1, w2, ...)")
    return out


def runtimes_of(counts: dict) -> dict[str, str]:
    """Every Kubernetes node of a profile -> its container runtime (etcd machines have none)."""
    given = counts.get("runtimes") or {}
    return {n: given.get(n, DEFAULT_RUNTIME) for n, role in node_names(counts).items() if role != "etcd"}


def runtime_components(counts: dict) -> list[str]:
    """The versions.yml components a profile's runtimes need beyond every cache's (crio, cri_dockerd)."""
    return sorted({RUNTIMES[r]["component"] for r in runtimes_of(counts).values() if RUNTIMES[r]["component"]})


def runtime_sets(counts: dict, versions: dict) -> list[str]:
    """The opt-in sets of versions.yml that hold those components' files (runtimes)."""
    comps = versions.get("components", {})
    return sorted({spec["set"] for c in runtime_components(counts) for spec in comps.get(c, {}).get("files", {})
                   .values() if spec.get("set")})


def _check_runtime_cache(counts: dict, profile: str, versions: dict, artifacts: dict, arch: str | None,
                         where: str) -> list[str]:
    """A runtime whose files the artifact cache lacks, where the nodes take them from the cache (artifacts.source
    auto or cache): named with the way to get them. A cheap look (manifest entry, version, size): the artifacts
    role verifies every checksum."""
    if artifacts["source"] not in ("auto", "cache") or arch is None:
        return []
    from tools import artifacts as art  # noqa: PLC0415 - tools.artifacts reads the settings in its CLI only

    cache = art.default_cache()
    entries = art.Manifest(cache).entries
    out = []
    comps = runtime_components(counts)
    for item in art.plan(versions, arch, runtime_sets(counts, versions)):
        if item.kind != "file" or item.component not in comps:
            continue
        entry, path = entries.get(item.relpath) or {}, cache / item.relpath
        if entry.get("version") == item.version and path.is_file() and path.stat().st_size == entry.get("size"):
            continue
        users = sorted(n for n, r in runtimes_of(counts).items() if RUNTIMES[r]["component"] == item.component)
        out.append(f"{where}: profiles.{profile}.runtimes: {', '.join(users)} {'runs' if len(users) == 1 else 'run'} "
                   f"{versions['components'][item.component].get('runtime', item.component)}, but the artifact cache "
                   f"{cache} lacks {item.id} {item.version} ({arch}): run `make artifacts-runtimes` (downloads it, "
                   f"or builds it from a source tree you point to: {item.component.upper()}_TREE=/path to a checkout "
                   f"of {item.build.get('repository', item.component)}), or set artifacts.mirror to a mirror that "
                   "holds it")
    return out


def _parse_cidr(value: str, field: str, where: str, out: list[str]) -> ipaddress.IPv4Network | None:
    try:
        if "/" not in value:
            raise ValueError
        net = ipaddress.ip_network(value)
    except ValueError:
        try:
            fixed = ipaddress.ip_network(value, strict=False)
        except ValueError:
            fixed = None
        if fixed is None or "/" not in value:
            out.append(f"{where}: {field}: {value!r} is not a CIDR like 10.96.0.0/16")
        else:
            out.append(f"{where}: {field}: {value} has host bits set (the network is {fixed})")
        return None
    if net.version != 4:
        out.append(f"{where}: {field}: {value} is not IPv4 (the lab is IPv4 only)")
        return None
    return net


def _check_network(net: dict, profiles: dict | None, where: str) -> list[str]:
    out: list[str] = []
    nets = {k: _parse_cidr(net[k], f"network.{k}", where, out) for k in ("node_cidr", "pod_cidr", "service_cidr")}
    nets = {k: n for k, n in nets.items() if n is not None}
    for a, b in itertools.combinations(nets, 2):
        if nets[a].overlaps(nets[b]):
            out.append(f"{where}: network.{a}: {nets[a]} overlaps network.{b} {nets[b]}")
    ports = [net[p] for p in PORTS]
    if len(set(ports)) < len(ports):
        out.append(f"{where}: network: {', '.join(f'{p} {net[p]}' for p in PORTS)}: each port must differ "
                   "(the load balancer, the API servers and etcd listen side by side on the control-plane nodes)")
    if "node_cidr" in nets and nets["node_cidr"].prefixlen > 24:
        out.append(f"{where}: network.node_cidr: {nets['node_cidr']} is too small: nodes use host numbers "
                   f".{VIP_HOST}-.{ETCD_FIRST + ETCD_MAX - 1}, so the prefix must be /24 or shorter")
    if "service_cidr" in nets and not 12 <= nets["service_cidr"].prefixlen <= 24:
        out.append(f"{where}: network.service_cidr: {nets['service_cidr']}: the prefix must be between /12 "
                   "(the largest range kube-apiserver accepts) and /24")
    if "pod_cidr" in nets:
        pods, per_node = nets["pod_cidr"], net["pod_cidr_node_prefix"]
        if per_node <= pods.prefixlen:
            out.append(f"{where}: network.pod_cidr_node_prefix: /{per_node} must be longer than the prefix of "
                       f"network.pod_cidr {pods} (each node gets a part of it)")
        else:
            room = 2 ** (per_node - pods.prefixlen)
            for name, counts in (profiles or {}).items():
                if (total := counts["control_plane"] + counts["workers"]) > room:
                    out.append(f"{where}: network.pod_cidr_node_prefix: {pods} holds {room} /{per_node} subnets, "
                               f"too few for the {total} nodes of profiles.{name}")
    return out


def _mirror(artifacts: dict, where: str) -> tuple[str, str]:
    """The mirror the lab uses and, for messages, where it is set: K8S_LAB_MIRROR, else artifacts.mirror."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV], MIRROR_ENV
    return artifacts.get("mirror") or "", f"{where}: artifacts.mirror"


def _check_artifacts(artifacts: dict, where: str) -> list[str]:
    mirror, field = _mirror(artifacts, where)
    parts = urlsplit(mirror)
    if mirror and not (parts.scheme in ("http", "https") and parts.netloc):
        return [f"{field}: {mirror!r} is not an http(s) URL"]
    if not mirror and artifacts["source"] == "mirror":
        return [f"{where}: artifacts.mirror: must be an http(s) URL when artifacts.source is mirror (it is empty; "
                f"{MIRROR_ENV} may set it too)"]
    return []


def _resolve_artifacts(artifacts: dict, where: str) -> dict:
    return {"source": artifacts["source"], "mirror": _mirror(artifacts, where)[0]}


def artifact_settings(path: str | Path | None = None) -> dict:
    """Only the ``artifacts`` part of the resolved settings, {"source", "mirror"}, checked as load() checks it
    but without reading the rest (no provider probe), and ``sets``, the opt-in sets of versions.yml the selected
    profile's nodes need (runtimes, for CRI-O or Docker Engine workers): what tools/artifacts.py takes as its
    defaults."""
    path = Path(path or os.environ.get("K8S_LAB_SETTINGS") or SETTINGS_FILE)
    where, problems = _display(path), []
    doc = _read_mapping(path, where, problems)
    if doc is not None:
        found: list[str] = []
        bad = _schema_problems(doc, where, found)
        problems += [p for p in found if p.startswith(f"{where}: artifacts")]
        if not problems and "artifacts" not in bad:
            problems += _check_artifacts(doc["artifacts"], where)
    if problems:
        raise SettingsError(problems)
    sets: list[str] = []
    if "profiles" not in bad:
        profile = _choose(None, "K8S_LAB_PROFILE", recorded().get("profile"), doc.get("profile"))[0]
        if profile in doc["profiles"]:
            versions = _read_mapping(VERSIONS_FILE, _display(VERSIONS_FILE), []) or {}
            sets = runtime_sets(doc["profiles"][profile], versions)
    return {**_resolve_artifacts(doc["artifacts"], where), "sets": sets}


def vbox_allowed_ranges(conf: Path | None = None) -> list[str]:
    """The host-only ranges VirtualBox 7 allows: lines `* 10.0.0.0/8 192.168.0.0/16` of networks.conf, else its
    default 192.168.56.0/21."""
    try:
        text = (conf or VBOX_NETWORKS_CONF).read_text()
    except OSError:
        return list(VBOX_DEFAULT_RANGES)
    ranges = [r for line in text.splitlines() if line.strip().startswith("*") for r in line.split()[1:]]
    return ranges or list(VBOX_DEFAULT_RANGES)


def _check_virtualbox_network(node_cidr: str, where: str, ranges: list[str]) -> list[str]:
    try:
        net = ipaddress.ip_network(node_cidr)
        allowed = [ipaddress.ip_network(r, strict=False) for r in ranges]
    except ValueError:
        return []  # reported by the network checks
    if any(net.version == a.version and net.subnet_of(a) for a in allowed):
        return []
    return [f"{where}: network.node_cidr: {node_cidr} is outside the host-only ranges VirtualBox allows "
            f"({', '.join(ranges)}); pick a range inside them, or list it in {VBOX_NETWORKS_CONF} "
            "(a line `* 10.0.0.0/8`)"]


def _check_box(box: dict, arch: str | None, where: str) -> list[str]:
    if box["libvirt"] == LAB_BOX and arch not in (None, "amd64"):
        return [f"{where}: box.libvirt: the lab's own box {LAB_BOX} is amd64 only; name a libvirt box for "
                f"{arch} (for example generic/debian12)"]
    return []


def _check_versions(doc: dict, where: str, problems: list[str]) -> dict[str, str]:
    """Check the components and images the cluster needs; return every version (images as image_<id>)."""
    versions: dict[str, str] = {}
    for section, prefix, needed in (("components", "", COMPONENTS), ("images", "image_", IMAGES)):
        entries = doc.get(section)
        if not isinstance(entries, dict):
            problems.append(f"{where}: {section} is missing")
            continue
        for name in needed:
            version = entries[name].get("version") if isinstance(entries.get(name), dict) else None
            if version is None or version == "":
                problems.append(f"{where}: {section}.{name}.version is missing")
            elif not isinstance(version, str):
                problems.append(f"{where}: {section}.{name}.version: {version!r} must be a string (quote it)")
        versions.update({prefix + name: e["version"] for name, e in entries.items()
                         if isinstance(e, dict) and isinstance(e.get("version"), str) and e["version"]})
    return versions


# --------------------------------------------------------------------------
# Resolution


def _choose(argument: str | None, env: str, recorded: str | None, from_file) -> tuple[str, str]:
    """The effective value and, for messages, where it came from when not from the file: an argument, then the
    environment, then what `record` wrote when the running cluster was brought up, then the file."""
    if argument:
        return argument, " (override)"
    if os.environ.get(env):
        return os.environ[env], f" (from {env})"
    if recorded:
        return recorded, f" (the running cluster's, in {RECORD})"
    return from_file, ""


def recorded() -> dict:
    """The profile and provider the running cluster was brought up with ({} when none is recorded)."""
    try:
        data = json.loads((state_dir() / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(settings: dict) -> Path:
    """Remember the profile and provider of the cluster being brought up (state folder, removed by `make down`)."""
    path = Path(settings["state_dir"]) / RECORD
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(json.dumps({"profile": settings["profile"], "provider": settings["provider"]}) + "\n")
    return path


def derived(doc: dict, nodes: list[dict], node_cidr: str) -> dict:
    """The values every layer must agree on, derived once from the settings and the nodes: the API address and
    ports, the Services' first addresses, the paths on the nodes, the state folder. Also used for the machines of
    the roles' molecule scenarios (tests/molecule/lab_settings.py), which are not the lab's nodes."""
    net = doc["network"]
    control_plane = [n for n in nodes if n["role"] == "control_plane"]
    # Several API servers are reached through a load balancer on the VIP, on a port of its own;
    # a single one is reached directly.
    vip = str(ipaddress.ip_network(node_cidr).network_address + VIP_HOST) if len(control_plane) > 1 else None
    port = net["api_lb_port"] if vip else net["api_server_port"]
    services = ipaddress.ip_network(net["service_cidr"])
    return {
        "nodes": nodes,
        "api": {"vip": vip, "port": port, "endpoint": f"https://{vip or control_plane[0]['ip']}:{port}",
                "local_endpoint": f"https://127.0.0.1:{net['api_server_port']}"},
        "ports": {p.removesuffix("_port"): net[p] for p in PORTS},
        "paths": dict(NODE_PATHS),
        "service_ip": str(services.network_address + 1),
        "dns_ip": str(services.network_address + 10),
        "state_dir": str(state_dir()),
    }


def lab_virtualenv() -> bool:
    """Does this Python run from a virtualenv (the lab's .venv, made by `make deps`)?"""
    return sys.prefix != sys.base_prefix or (ROOT / ".venv" / "bin" / "python").exists()


def controller_of(setting: str, choice: hypervisor.Choice, venv: bool) -> str:
    """Where Ansible and `lab` run (host or lab) for a controller setting (auto, host, lab): auto is lab for VMs
    with hardware acceleration, or where the host has no lab virtualenv; host for containers, and for VMs under
    emulation on a host that can run Ansible itself (a controller VM's Python would run 18-30 times slower)."""
    if setting != "auto":
        return setting
    if choice.provider in VM_PROVIDERS and (choice.accel != "emulation" or not venv):
        return "lab"
    return "host"


def _resolve(doc: dict, profile: str, choice: hypervisor.Choice, arch: str, versions: dict[str, str],
             where: str, versions_doc: dict) -> dict:
    net, counts = doc["network"], doc["profiles"][profile]
    base = ipaddress.ip_network(net["node_cidr"]).network_address
    pod_subnets = ipaddress.ip_network(net["pod_cidr"]).subnets(new_prefix=net["pod_cidr_node_prefix"])
    # etcd runs on every control-plane node (stacked), or on machines of its own that are not Kubernetes nodes
    # (no kubelet, no pod range): role etcd, e1, e2, ...
    external_etcd = counts.get("etcd", 0)
    cp_workloads = control_plane_workloads(counts)
    runtimes = runtimes_of(counts)
    nodes = [
        {"name": f"{short}{i + 1}", "role": role, "ip": str(base + first + i),
         "etcd": role == "etcd" or (role == "control_plane" and not external_etcd),
         "workloads": role == "worker" or (role == "control_plane" and cp_workloads),
         "pod_cidr": str(next(pod_subnets)) if role != "etcd" else None,
         "runtime": runtimes.get(f"{short}{i + 1}"),
         "cri_socket": RUNTIMES[runtimes[f"{short}{i + 1}"]]["socket"] if role != "etcd" else None}
        for role, short, first, count in (("control_plane", "cp", CP_FIRST, counts["control_plane"]),
                                          ("worker", "w", WORKER_FIRST, counts["workers"]),
                                          ("etcd", "e", ETCD_FIRST, external_etcd))
        for i in range(count)
    ]
    scale = doc["timeout_scale"]
    if scale == "auto":
        scale = EMULATION_TIMEOUT_SCALE if choice.accel == "emulation" else 1
    box = doc["box"].get(choice.provider)
    return {
        **doc,
        "profile": profile,
        "control_plane_workloads": cp_workloads,
        # The container runtimes a node may run (socket, name over CRI, units), those the nodes run (each node's
        # own: nodes[].runtime, .cri_socket), and the opt-in artifact sets they need.
        "runtimes": RUNTIMES,
        "runtimes_in_use": sorted(set(runtimes.values())),
        "artifact_sets": runtime_sets(counts, versions_doc),
        "provider": choice.provider,
        # How the machines run: kvm or emulation (libvirt), hardware (virtualbox), container (docker).
        "accel": choice.accel,
        "provider_reason": choice.reason,
        "provider_warning": choice.warning,
        "timeout_scale": scale,
        # Where Ansible and `lab` run: host, or lab (the controller machine, at controller_ip).
        "controller": controller_of(os.environ.get(CONTROLLER_ENV) or doc.get("controller", "auto"), choice,
                                    lab_virtualenv()),
        "controller_ip": str(base + CONTROLLER_HOST),
        "arch": arch,
        "box": box,
        "box_is_lab": box == LAB_BOX,
        "artifacts": _resolve_artifacts(doc["artifacts"], where),
        **derived(doc, nodes, net["node_cidr"]),
        "versions": versions,
    }


def load(path: str | Path | None = None, profile: str | None = None, provider: str | None = None, *,
         versions_path: str | Path = VERSIONS_FILE,
         choose: Callable[[str], hypervisor.Choice] | None = None) -> dict:
    """The validated, resolved settings; raises SettingsError listing every problem.

    ``path`` defaults to $K8S_LAB_SETTINGS, then settings.yml at the repository root.
    ``profile``/``provider`` override the file, as do $K8S_LAB_PROFILE/$K8S_LAB_PROVIDER when the
    arguments are None, and then the profile and provider recorded when the running cluster was brought up
    (``record``; removed by `make down`), so that later commands address the machines that exist.
    ``choose`` (default tools.hypervisor.choose) decides what "auto" means on this host and how the provider's
    machines run (hardware acceleration or emulation).
    """
    path = Path(path or os.environ.get("K8S_LAB_SETTINGS") or SETTINGS_FILE)
    versions_path = Path(versions_path)
    where, problems = _display(path), []
    doc = _read_mapping(path, where, problems)
    versions_doc = _read_mapping(versions_path, _display(versions_path), problems)
    versions = _check_versions(versions_doc, _display(versions_path), problems) if versions_doc is not None else {}
    arch = lab_arch()
    if arch is None:
        problems.append(f"host: unsupported architecture {platform.machine()!r} (the lab supports amd64 and arm64)")
    if doc is None:
        raise SettingsError(problems)

    bad = _schema_problems(doc, where, problems)
    record = recorded()
    profile, profile_from = _choose(profile, "K8S_LAB_PROFILE", record.get("profile"), doc.get("profile"))
    provider, provider_from = _choose(provider, "K8S_LAB_PROVIDER", record.get("provider"), doc.get("provider"))
    profiles = doc.get("profiles") if "profiles" not in bad else None
    if profiles is not None and isinstance(profile, str) and profile not in profiles:
        problems.append(f"{where}: profile: unknown profile {profile!r}{profile_from} "
                        f"; defined: {', '.join(profiles)}")
    choice = None
    if provider not in PROVIDERS and (provider_from or "provider" not in bad):
        problems.append(f"{where}: provider: unknown provider {provider!r}{provider_from} "
                        f"; allowed: {', '.join(PROVIDERS)}")
    elif provider in PROVIDERS:
        choice = (choose or hypervisor.choose)(provider)
        if provider_from and provider != "auto":
            choice = hypervisor.Choice(choice.provider, choice.accel,
                                       choice.reason.replace("set in the settings", f"set{provider_from}"),
                                       choice.warning)
        provider = choice.provider
    if profiles is not None:
        problems += _check_profiles(profiles, where)
    if "node" not in bad:
        cpus, memory = doc["node"]["cpus"], doc["node"]["memory_mb"]
        if cpus < 1:
            problems.append(f"{where}: node.cpus: {cpus}: at least 1 is needed")
        elif cpus < MIN_VM_CPUS and provider in VM_PROVIDERS:
            problems.append(f"{where}: node.cpus: {cpus} is too few for provider {provider}: "
                            f"a control-plane VM needs at least {MIN_VM_CPUS}")
        if memory < MIN_MEMORY_MB:
            problems.append(f"{where}: node.memory_mb: {memory} is too little memory (minimum {MIN_MEMORY_MB})")
    if "network" not in bad:
        problems += _check_network(doc["network"], profiles, where)
    if "artifacts" not in bad:
        problems += _check_artifacts(doc["artifacts"], where)
    if "box" not in bad and provider == "libvirt":
        problems += _check_box(doc["box"], arch, where)
    if "network" not in bad and provider == "virtualbox":
        problems += _check_virtualbox_network(doc["network"]["node_cidr"], where, vbox_allowed_ranges())
    if os.environ.get(CONTROLLER_ENV) and os.environ[CONTROLLER_ENV] not in CONTROLLERS:
        problems.append(f"{CONTROLLER_ENV}: unknown controller {os.environ[CONTROLLER_ENV]!r}; "
                        f"allowed: {', '.join(CONTROLLERS)}")
    if problems:
        raise SettingsError(problems)
    if profiles is not None and profile in profiles and "artifacts" not in bad and versions_doc is not None:
        problems += _check_runtime_cache(profiles[profile], profile, versions_doc, _resolve_artifacts(
            doc["artifacts"], where), arch, where)
    if problems:
        raise SettingsError(problems)
    return _resolve(doc, profile, choice, arch, versions, where, versions_doc)


# --------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.settings", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("check", "resolve", "record", "kubeconfig", "forget"),
                        help="check: validate and summarise; resolve: print the resolved settings as JSON; "
                             "record: remember the profile and provider for the cluster being brought up; "
                             "kubeconfig: print the admin kubeconfig's path; forget: remove the cluster's "
                             "certificates, kubeconfigs, key and record from the state folder")
    parser.add_argument("--profile", help="override the profile (default: $K8S_LAB_PROFILE, then the file)")
    parser.add_argument("--provider", help="override the provider (default: $K8S_LAB_PROVIDER, then the file)")
    parser.add_argument("--file", type=Path, help="the settings file (default: $K8S_LAB_SETTINGS, then settings.yml)")
    args = parser.parse_args(argv)
    if args.command == "kubeconfig":  # no validation needed: where `make up` writes it
        print(state_dir() / "admin.kubeconfig")
        return 0
    if args.command == "forget":
        for name in CLUSTER_STATE:
            path = state_dir() / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        return 0
    try:
        settings = load(args.file, args.profile, args.provider)
    except SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.command == "resolve":
        print(json.dumps(settings, indent=2))
    elif args.command == "record":
        path = record(settings)
        print(f"recorded in {path}: profile {settings['profile']}, provider {settings['provider']}")
    else:
        nodes = ", ".join(f"{n['name']} {n['ip']}" for n in settings["nodes"])
        print(f"settings OK: profile {settings['profile']}, provider {settings['provider']}, "
              f"{len(settings['nodes'])} nodes ({nodes}), API {settings['api']['endpoint']}")
        print(f"provider {settings['provider']} ({settings['accel']}): {settings['provider_reason']}")
        if settings["provider_warning"]:
            print(f"WARNING: {settings['provider_warning']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
