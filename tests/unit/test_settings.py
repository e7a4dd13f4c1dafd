"""Unit tests of the lab settings (tools/settings.py) and the inventory built from them."""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tools import artifacts
from tools import hypervisor as H
from tools import settings as S

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventory" / "lab.py"
SETTINGS = yaml.safe_load((ROOT / "settings.yml").read_text())
VERSIONS = yaml.safe_load((ROOT / "versions.yml").read_text())


def container_choice(provider: str) -> H.Choice:
    """What tools.hypervisor.choose says on a host where no VM runs with hardware acceleration."""
    return H.Choice(provider if provider != "auto" else "docker",
                    {"libvirt": "emulation", "virtualbox": "hardware"}.get(provider, "container"), "test")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """Tests must not depend on the caller's overrides, nor on this host's hypervisors."""
    for name in ("K8S_LAB_PROFILE", "K8S_LAB_PROVIDER", "K8S_LAB_SETTINGS", "K8S_LAB_MIRROR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("K8S_LAB_STATE_DIR", str(tmp_path / "state"))  # no running cluster's record
    monkeypatch.setattr(S.hypervisor, "choose", container_choice)
    monkeypatch.setattr(S.platform, "machine", lambda: "x86_64")


def write(tmp_path: Path, data, name: str = "settings.yml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def load_modified(tmp_path: Path, change=None, vchange=None, **kwargs) -> dict:
    """load() on copies of the shipped files, after ``change``/``vchange`` edited them."""
    settings, versions = copy.deepcopy(SETTINGS), copy.deepcopy(VERSIONS)
    if change:
        change(settings)
    if vchange:
        vchange(versions)
    kwargs.setdefault("choose", container_choice)
    return S.load(write(tmp_path, settings), versions_path=write(tmp_path, versions, "versions.yml"), **kwargs)


def problems(tmp_path: Path, change=None, vchange=None, **kwargs) -> str:
    with pytest.raises(S.SettingsError) as exc:
        load_modified(tmp_path, change, vchange, **kwargs)
    return str(exc.value)


# --------------------------------------------------------------------------
# The shipped settings


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(json.loads(S.SCHEMA_FILE.read_text()))


def test_default_profile_resolves(monkeypatch):
    monkeypatch.delenv("K8S_LAB_STATE_DIR")
    monkeypatch.setattr(S, "recorded", dict)  # whatever cluster this host runs
    s = S.load()
    assert (s["profile"], s["provider"], s["arch"], s["box"]) == ("default", "docker", "amd64", None)
    assert (s["accel"], s["timeout_scale"]) == ("container", 1)
    assert [(n["name"], n["role"], n["ip"], n["etcd"]) for n in s["nodes"]] == [
        ("cp1", "control_plane", "192.168.56.11", True),
        ("w1", "worker", "192.168.56.21", False),
        ("w2", "worker", "192.168.56.22", False),
    ]
    assert s["api"] == {"vip": None, "port": 6443, "endpoint": "https://192.168.56.11:6443",
                        "local_endpoint": "https://127.0.0.1:6443"}
    assert s["ports"] == {"api_server": 6443, "api_lb": 8443, "etcd_client": 2379, "etcd_peer": 2380}
    assert s["paths"]["pki_dir"] == "/etc/kubernetes/pki"
    assert (s["service_ip"], s["dns_ip"]) == ("10.96.0.1", "10.96.0.10")
    assert s["state_dir"] == str(ROOT / ".lab")
    assert s["cluster_name"] == "k8s-arch-lab" and s["network"] == SETTINGS["network"]
    json.dumps(s)


def test_ha_profile_resolves():
    s = S.load(profile="ha")
    assert [n["name"] for n in s["nodes"]] == ["cp1", "cp2", "cp3", "w1", "w2"]
    assert [n["ip"] for n in s["nodes"]] == [f"192.168.56.{h}" for h in (11, 12, 13, 21, 22)]
    assert [n["etcd"] for n in s["nodes"]] == [True, True, True, False, False]
    assert s["api"] == {"vip": "192.168.56.10", "port": 8443, "endpoint": "https://192.168.56.10:8443",
                        "local_endpoint": "https://127.0.0.1:6443"}


def test_external_etcd_profile_resolves():
    """etcd on machines of its own (e1..e3, .91+): members, but no Kubernetes nodes (no pod range); the
    control-plane nodes hold no member, and two of them are allowed (an even count is no etcd quorum question)."""
    s = S.load(profile="external-etcd")
    assert [(n["name"], n["role"], n["ip"], n["etcd"], n["pod_cidr"] is None) for n in s["nodes"]] == [
        ("cp1", "control_plane", "192.168.56.11", False, False),
        ("cp2", "control_plane", "192.168.56.12", False, False),
        ("w1", "worker", "192.168.56.21", False, False),
        ("w2", "worker", "192.168.56.22", False, False),
        ("e1", "etcd", "192.168.56.91", True, True),
        ("e2", "etcd", "192.168.56.92", True, True),
        ("e3", "etcd", "192.168.56.93", True, True),
    ]
    assert s["api"]["vip"] == "192.168.56.10"


def test_external_etcd_counts(tmp_path):
    msg = problems(tmp_path, lambda s: s["profiles"]["external-etcd"].update(etcd=2))
    assert "profiles.external-etcd.etcd: 2 is an even etcd member count" in msg
    msg = problems(tmp_path, lambda s: s["profiles"]["external-etcd"].update(etcd=11))
    assert "profiles.external-etcd.etcd: 11 machines do not fit in .91-.99" in msg
    msg = problems(tmp_path, lambda s: s["profiles"]["external-etcd"].update(etcd=-1))
    assert "profiles.external-etcd.etcd: -1" in msg
    # without machines of its own, etcd is back on the control plane, where two members are an even count
    msg = problems(tmp_path, lambda s: s["profiles"]["external-etcd"].update(etcd=0))
    assert "profiles.external-etcd.control_plane: 2 is an even etcd member count" in msg


@pytest.mark.parametrize("profile", ["default", "ha"])
def test_pod_cidrs_are_distinct_subnets_of_pod_cidr(profile):
    s = S.load(profile=profile)
    pods = ipaddress.ip_network(SETTINGS["network"]["pod_cidr"])
    subnets = [ipaddress.ip_network(n["pod_cidr"]) for n in s["nodes"]]
    assert subnets[0] == next(pods.subnets(new_prefix=24))
    assert len(set(subnets)) == len(subnets)
    assert all(n.subnet_of(pods) and n.prefixlen == SETTINGS["network"]["pod_cidr_node_prefix"] for n in subnets)


def test_versions_are_resolved_with_images():
    v = S.load()["versions"]
    assert v["etcd"] == VERSIONS["components"]["etcd"]["version"]
    assert v["image_pause"] == str(VERSIONS["images"]["pause"]["version"])
    assert v["image_echo"] == str(VERSIONS["images"]["echo"]["version"])


def test_boxes_per_provider(monkeypatch):
    s = S.load(provider="libvirt")
    assert (s["box"], s["box_is_lab"]) == ("k8s-arch-lab/debian12", True)
    s = S.load(provider="virtualbox")
    assert (s["box"], s["box_is_lab"]) == ("debian/bookworm64", False)


def test_the_labs_box_is_amd64_only(monkeypatch, tmp_path):
    monkeypatch.setattr(S.platform, "machine", lambda: "aarch64")
    msg = problems(tmp_path, provider="libvirt")
    assert "box.libvirt: the lab's own box k8s-arch-lab/debian12 is amd64 only" in msg
    own = load_modified(tmp_path, lambda s: s["box"].update(libvirt="generic/debian12"), provider="libvirt")
    assert (own["arch"], own["box"]) == ("arm64", "generic/debian12")
    assert load_modified(tmp_path, provider="docker")["arch"] == "arm64"


def test_timeout_scale_grows_under_emulation_only(tmp_path):
    assert S.load(provider="libvirt")["timeout_scale"] == S.EMULATION_TIMEOUT_SCALE
    kvm = lambda provider: H.Choice("libvirt", "kvm", "test")  # noqa: E731
    assert S.load(provider="libvirt", choose=kvm)["timeout_scale"] == 1
    assert S.load(provider="docker")["timeout_scale"] == 1
    fixed = load_modified(tmp_path, lambda s: s.update(timeout_scale=3), provider="libvirt")
    assert fixed["timeout_scale"] == 3
    assert "timeout_scale" in problems(tmp_path, lambda s: s.update(timeout_scale=0))
    assert "timeout_scale" in problems(tmp_path, lambda s: s.update(timeout_scale="slow"))


def test_virtualbox_host_only_ranges(tmp_path, monkeypatch):
    outside = lambda s: s["network"].update(node_cidr="10.10.0.0/24")  # noqa: E731
    monkeypatch.setattr(S, "VBOX_NETWORKS_CONF", tmp_path / "absent.conf")
    msg = problems(tmp_path, outside, provider="virtualbox")
    assert "network.node_cidr: 10.10.0.0/24 is outside the host-only ranges VirtualBox allows (192.168.56.0/21)" in msg
    assert load_modified(tmp_path, outside, provider="docker")["network"]["node_cidr"] == "10.10.0.0/24"
    conf = tmp_path / "networks.conf"
    conf.write_text("# allowed\n* 10.0.0.0/8 192.168.0.0/16\n")
    monkeypatch.setattr(S, "VBOX_NETWORKS_CONF", conf)
    assert load_modified(tmp_path, outside, provider="virtualbox")["network"]["node_cidr"] == "10.10.0.0/24"
    assert S.vbox_allowed_ranges(conf) == ["10.0.0.0/8", "192.168.0.0/16"]


def test_state_dir_override(monkeypatch, tmp_path):
    monkeypatch.setenv("K8S_LAB_STATE_DIR", str(tmp_path / "state"))
    assert S.load()["state_dir"] == str(tmp_path / "state")


# --------------------------------------------------------------------------
# Overrides and provider detection


def test_env_overrides_file_and_arguments_override_env(monkeypatch):
    monkeypatch.setenv("K8S_LAB_PROFILE", "ha")
    monkeypatch.setenv("K8S_LAB_PROVIDER", "libvirt")
    s = S.load()
    assert (s["profile"], s["provider"], len(s["nodes"])) == ("ha", "libvirt", 5)
    s = S.load(profile="default", provider="docker")
    assert (s["profile"], s["provider"]) == ("default", "docker")
    monkeypatch.setenv("K8S_LAB_PROFILE", "")  # empty means unset
    assert S.load()["profile"] == "default"


def test_the_running_clusters_record_comes_after_env_and_before_the_file(monkeypatch):
    proc = run(sys.executable, "-m", "tools.settings", "record", "--profile", "ha")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((Path(os.environ["K8S_LAB_STATE_DIR"]) / "cluster.json").read_text()) == {
        "profile": "ha", "provider": "docker"}
    assert S.load()["profile"] == "ha"
    monkeypatch.setenv("K8S_LAB_PROFILE", "default")
    assert S.load()["profile"] == "default"
    monkeypatch.delenv("K8S_LAB_PROFILE")
    (Path(os.environ["K8S_LAB_STATE_DIR"]) / "cluster.json").unlink()
    assert S.load()["profile"] == "default"


def test_auto_provider_uses_the_hosts_choice():
    chosen = []

    def choose(provider):
        chosen.append(provider)
        return H.Choice("virtualbox", "hardware", "auto: test")

    s = S.load(choose=choose)
    assert (s["provider"], s["provider_reason"], chosen) == ("virtualbox", "auto: test", ["auto"])
    assert S.load(provider="docker")["provider"] == "docker"


def test_emulation_is_a_warning_not_an_error():
    warned = S.load(provider="libvirt", choose=lambda p: H.Choice("libvirt", "emulation", "no KVM", "slow"))
    assert (warned["accel"], warned["provider_warning"]) == ("emulation", "slow")


# --------------------------------------------------------------------------
# Invalid settings: each names the field


def test_overlapping_cidrs(tmp_path):
    msg = problems(tmp_path, lambda s: s["network"].update(pod_cidr="10.96.0.0/12"))
    assert "network.pod_cidr: 10.96.0.0/12 overlaps network.service_cidr 10.96.0.0/16" in msg


def test_even_etcd_member_count(tmp_path):
    msg = problems(tmp_path, lambda s: s["profiles"]["ha"].update(control_plane=2))
    assert "profiles.ha.control_plane" in msg and "even etcd member count" in msg


def test_single_profile_resolves():
    """One machine: the whole control plane, etcd, and the workloads (no control-plane taint)."""
    s = S.load(profile="single")
    assert [(n["name"], n["role"], n["etcd"], n["workloads"]) for n in s["nodes"]] == [
        ("cp1", "control_plane", True, True)]
    assert s["control_plane_workloads"] is True


def test_the_control_plane_takes_workloads_only_where_asked_or_without_workers():
    assert S.load(profile="default")["control_plane_workloads"] is False
    assert [n["workloads"] for n in S.load(profile="default")["nodes"]] == [False, True, True]


def test_control_plane_workloads_beside_workers(tmp_path):
    s = load_modified(tmp_path, lambda s: s["profiles"]["default"].update(control_plane_workloads=True))
    assert s["control_plane_workloads"] is True and all(n["workloads"] for n in s["nodes"])


def test_no_node_for_the_workloads(tmp_path):
    msg = problems(tmp_path, lambda s: s["profiles"]["default"].update(workers=0, control_plane_workloads=False))
    assert "profiles.default.workers: 0 with profiles.default.control_plane_workloads false" in msg
    assert "no node would run workloads" in msg


# --------------------------------------------------------------------------
# Container runtimes per node


def fill_runtime_cache(cache: Path, missing: tuple[str, ...] = ()) -> None:
    """A cache whose manifest holds the runtimes set's files (all but ``missing``), as `make artifacts` records."""
    entries = {}
    for art in artifacts.plan(VERSIONS, "amd64", ("runtimes",)):
        if art.kind != "file" or art.spec.get("set") != "runtimes" or art.id in missing:
            continue
        path = cache / art.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 10)
        entries[art.relpath] = {"version": art.version, "size": 10, "sha256": "0" * 64}
    (cache / "manifest.json").write_text(json.dumps({"files": entries}))


def test_each_node_gets_its_runtime_and_socket_from_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("K8S_LAB_CACHE", str(tmp_path / "cache"))
    fill_runtime_cache(tmp_path / "cache")
    s = S.load(profile="runtimes")
    assert [(n["name"], n["runtime"], n["cri_socket"]) for n in s["nodes"]] == [
        ("cp1", "containerd", "/run/containerd/containerd.sock"),
        ("w1", "containerd", "/run/containerd/containerd.sock"),
        ("w2", "crio", "/run/crio/crio.sock"), ("w3", "docker", "/run/cri-dockerd.sock")]
    assert s["runtimes_in_use"] == ["containerd", "crio", "docker"] and s["artifact_sets"] == ["runtimes"]
    assert S.load(profile="default")["artifact_sets"] == []


def test_any_worker_of_any_profile_may_run_another_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("K8S_LAB_CACHE", str(tmp_path / "cache"))
    fill_runtime_cache(tmp_path / "cache")
    s = load_modified(tmp_path, lambda s: s["profiles"]["ha"].update(runtimes={"w2": "docker"}), profile="ha")
    assert {n["name"]: n["runtime"] for n in s["nodes"]} == {
        "cp1": "containerd", "cp2": "containerd", "cp3": "containerd", "w1": "containerd", "w2": "docker"}


@pytest.mark.parametrize(("runtimes", "wanted"), [
    ({"w1": "podman"}, "profiles.default.runtimes.w1: 'podman' is not one of containerd, crio, docker"),
    ({"w7": "crio"}, "profiles.default.runtimes.w7: the profile has no node w7 (its nodes: cp1, w1, w2)"),
    ({"cp1": "crio"}, "profiles.default.runtimes.cp1: crio: the roles run control-plane nodes on containerd only"),
    ({"worker1": "crio"}, "profiles.default.runtimes"),
])
def test_a_runtime_the_roles_cannot_run_there_is_refused(tmp_path, runtimes, wanted):
    assert wanted in problems(tmp_path, lambda s: s["profiles"]["default"].update(runtimes=runtimes))


def test_a_runtime_whose_artifacts_the_cache_lacks_is_refused_naming_the_way_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv("K8S_LAB_CACHE", str(tmp_path / "cache"))
    fill_runtime_cache(tmp_path / "cache", missing=("crio",))
    msg = problems(tmp_path, profile="runtimes")
    assert "profiles.runtimes.runtimes: w2 runs crio, but the artifact cache" in msg
    assert "lacks crio v1.37.0 (amd64): run `make artifacts-runtimes`" in msg and "CRIO_TREE=" in msg
    assert "cri-dockerd" not in msg
    # Where the nodes download (artifacts.source upstream or mirror), the cache is not asked.
    load_modified(tmp_path, lambda s: s["artifacts"].update(source="upstream"), profile="runtimes")


def test_a_negative_worker_count(tmp_path):
    msg = problems(tmp_path, lambda s: s["profiles"]["default"].update(workers=-1))
    assert "profiles.default.workers" in msg


def test_too_many_nodes_for_the_node_addresses(tmp_path):
    msg = problems(tmp_path, lambda s: s["profiles"]["ha"].update(control_plane=11, workers=80))
    assert "profiles.ha.control_plane: 11" in msg and "profiles.ha.workers: 80" in msg


def test_too_few_pod_subnets(tmp_path):
    msg = problems(tmp_path, lambda s: s["network"].update(pod_cidr="10.244.0.0/22"))
    assert "network.pod_cidr_node_prefix" in msg and "profiles.ha" in msg


def test_unknown_provider(tmp_path):
    assert "provider: 'hyperv' is not one of" in problems(tmp_path, lambda s: s.update(provider="hyperv"))
    assert "provider: unknown provider 'hyperv'" in problems(tmp_path, provider="hyperv")


def test_unknown_profile(tmp_path, monkeypatch):
    assert "profile: unknown profile 'big'" in problems(tmp_path, lambda s: s.update(profile="big"))
    monkeypatch.setenv("K8S_LAB_PROFILE", "huge")
    assert "profile: unknown profile 'huge' (from K8S_LAB_PROFILE)" in problems(tmp_path)


def test_too_little_memory(tmp_path):
    msg = problems(tmp_path, lambda s: s["node"].update(memory_mb=1024))
    assert "node.memory_mb: 1024 is too little memory (minimum 1536)" in msg


def test_vm_providers_need_two_cpus(tmp_path):
    one_cpu = lambda s: s["node"].update(cpus=1)  # noqa: E731
    assert load_modified(tmp_path, one_cpu, provider="docker")["node"]["cpus"] == 1
    assert "node.cpus: 1 is too few for provider libvirt" in problems(tmp_path, one_cpu, provider="libvirt")


def test_version_missing_from_versions_file(tmp_path):
    msg = problems(tmp_path, vchange=lambda v: v["components"]["etcd"].pop("version"))
    assert "versions.yml: components.etcd.version is missing" in msg
    msg = problems(tmp_path, vchange=lambda v: v["images"].pop("pause"))
    assert "versions.yml: images.pause.version is missing" in msg


def test_malformed_yaml(tmp_path):
    path = write(tmp_path, "profile: default\nprofiles: [oops\nprovider: auto\n")
    with pytest.raises(S.SettingsError, match=r"settings\.yml: line 3, column \d+: invalid YAML"):
        S.load(path)


def test_not_a_mapping_and_duplicate_keys(tmp_path):
    with pytest.raises(S.SettingsError, match="expected a mapping"):
        S.load(write(tmp_path, "- just\n- a list\n"))
    with pytest.raises(S.SettingsError, match=r"line 2, column 1: .*key 'profile' twice"):
        S.load(write(tmp_path, "profile: default\nprofile: ha\n"))


def test_host_bits_set(tmp_path):
    msg = problems(tmp_path, lambda s: s["network"].update(node_cidr="192.168.56.1/24"))
    assert "network.node_cidr: 192.168.56.1/24 has host bits set" in msg


def test_cidr_not_ipv4_or_not_a_cidr(tmp_path):
    msg = problems(tmp_path, lambda s: s["network"].update(service_cidr="fd00::/108", pod_cidr="10.244.0.0"))
    assert "network.service_cidr: fd00::/108 is not IPv4" in msg
    assert "network.pod_cidr: '10.244.0.0' is not a CIDR" in msg


def test_mirror_without_url(tmp_path):
    msg = problems(tmp_path, lambda s: s["artifacts"].update(source="mirror"))
    assert "artifacts.mirror: must be an http(s) URL when artifacts.source is mirror" in msg
    mirrored = load_modified(tmp_path, lambda s: s["artifacts"].update(source="mirror", mirror="http://cache:8080"))
    assert mirrored["artifacts"]["mirror"] == "http://cache:8080"


def test_the_mirror_variable_wins_over_the_settings_file(tmp_path, monkeypatch):
    unset = load_modified(tmp_path, lambda s: s["artifacts"].pop("mirror"))
    assert unset["artifacts"] == {"source": "auto", "mirror": ""}
    monkeypatch.setenv("K8S_LAB_MIRROR", "http://env:8000")
    mirrored = load_modified(tmp_path, lambda s: s["artifacts"].update(source="mirror", mirror="http://file:1"))
    assert mirrored["artifacts"] == {"source": "mirror", "mirror": "http://env:8000"}
    monkeypatch.setenv("K8S_LAB_MIRROR", "env:8000")
    assert "K8S_LAB_MIRROR: 'env:8000' is not an http(s) URL" in problems(tmp_path)


def test_artifact_settings_read_only_the_artifacts(tmp_path, monkeypatch):
    path = write(tmp_path, {**SETTINGS, "node": {"cpus": 0, "memory_mb": 1}})
    assert S.artifact_settings(path) == {"source": "auto", "mirror": "", "sets": []}, "other problems are load()'s"
    monkeypatch.setenv("K8S_LAB_SETTINGS", str(write(tmp_path, {**SETTINGS, "artifacts": {"source": "build"}})))
    with pytest.raises(S.SettingsError, match="artifacts.source: 'build' is not one of auto, cache, mirror, upstream"):
        S.artifact_settings()
    monkeypatch.setenv("K8S_LAB_MIRROR", "http://env:1")
    path = write(tmp_path, {**SETTINGS, "artifacts": {"source": "mirror"}})
    assert S.artifact_settings(path) == {"source": "mirror", "mirror": "http://env:1", "sets": []}


def test_schema_problems_name_the_field(tmp_path):
    def change(s):
        s["node"]["cpus"] = "two"
        s["network"]["extra"] = 1
        s["kube_proxy_mode"] = "ipvs"
        del s["box"]

    msg = problems(tmp_path, change)
    assert "node.cpus: 'two' is not of type 'integer'" in msg
    assert "network.extra: unknown setting" in msg
    assert "kube_proxy_mode: 'ipvs' is not one of iptables, nftables" in msg
    assert "box is missing" in msg


def test_all_problems_are_reported_together(tmp_path):
    def change(s):
        s["node"]["memory_mb"] = 512
        s["profiles"]["ha"]["control_plane"] = 4
        s["network"]["service_cidr"] = "10.244.0.0/16"

    lines = problems(tmp_path, change, vchange=lambda v: v["components"]["runc"].pop("version")).splitlines()
    assert len(lines) == 4
    assert [any(f in line for line in lines) for f in ("node.memory_mb", "profiles.ha.control_plane",
                                                       "network.pod_cidr", "components.runc.version")] == [True] * 4


# --------------------------------------------------------------------------
# Command line and inventory


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # The venv's Python first on PATH: the inventory's shebang is /usr/bin/env python3. The
    # clean_env fixture has removed the caller's K8S_LAB_* overrides from os.environ.
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    full_env = {**os.environ, "PATH": path, "K8S_LAB_PROVIDER": "docker", **(env or {})}
    return subprocess.run(args, capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=60, check=False)


def test_cli_check_and_resolve(tmp_path):
    proc = run(sys.executable, "-m", "tools.settings", "check", "--profile", "ha")
    assert proc.returncode == 0 and proc.stdout.startswith("settings OK: profile ha, provider docker, 5 nodes (")
    resolved = json.loads(run(sys.executable, "-m", "tools.settings", "resolve").stdout)
    assert resolved["api"]["endpoint"] == "https://192.168.56.11:6443"
    bad = write(tmp_path, {**SETTINGS, "kube_proxy_mode": "ipvs"})
    proc = run(sys.executable, "-m", "tools.settings", "check", "--file", str(bad))
    assert proc.returncode == 2 and "kube_proxy_mode" in proc.stderr and "Traceback" not in proc.stderr


def test_inventory_list():
    proc = run(str(INVENTORY), "--list", env={"K8S_LAB_PROFILE": "ha"})
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert inv["control_plane"]["hosts"] == ["cp1", "cp2", "cp3"]
    assert inv["workers"]["hosts"] == ["w1", "w2"]
    assert inv["etcd"]["hosts"] == ["cp1", "cp2", "cp3"]
    assert inv["k8s_cluster"]["children"] == ["control_plane", "workers"]
    assert inv["_meta"]["hostvars"]["w2"] == {
        "ansible_host": "192.168.56.22",
        "ansible_user": "root",
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_private_key_file": os.path.join(os.environ["K8S_LAB_STATE_DIR"], "ssh", "id_ed25519"),
        "lab_node_ip": "192.168.56.22",
        "lab_pod_cidr": "10.244.4.0/24",
        "lab_node_role": "worker",
        "lab_runtime": "containerd",
        "lab_cri_socket": "/run/containerd/containerd.sock",
        "lab_runtime_units": ["containerd"],
    }
    lab = inv["all"]["vars"]["lab_settings"]
    assert (lab["profile"], lab["api"]["vip"], len(lab["nodes"])) == ("ha", "192.168.56.10", 5)
    # The nodes' artifact plan, from its one producer, for the settings' source, mirror and architecture.
    assert inv["all"]["vars"]["lab_artifacts"] == artifacts.node_plan(
        artifacts.load_versions(), [lab["arch"]], lab["artifacts"]["source"], lab["artifacts"]["mirror"])


def test_inventory_of_an_external_etcd():
    proc = run(str(INVENTORY), "--list", env={"K8S_LAB_PROFILE": "external-etcd"})
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert inv["etcd"]["hosts"] == ["e1", "e2", "e3"]
    assert inv["control_plane"]["hosts"] == ["cp1", "cp2"]
    assert inv["_meta"]["hostvars"]["e1"]["lab_node_role"] == "etcd"


def test_inventory_of_one_machine():
    proc = run(str(INVENTORY), "--list", env={"K8S_LAB_PROFILE": "single"})
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert inv["control_plane"]["hosts"] == ["cp1"] and inv["etcd"]["hosts"] == ["cp1"]
    assert not inv.get("workers", {}).get("hosts")
    assert inv["all"]["vars"]["lab_settings"]["control_plane_workloads"] is True


def test_inventory_host():
    proc = run(str(INVENTORY), "--host", "cp1")
    assert proc.returncode == 0 and json.loads(proc.stdout)["lab_node_role"] == "control_plane"
    assert json.loads(run(str(INVENTORY), "--host", "nope").stdout) == {}


def test_inventory_with_broken_settings(tmp_path):
    bad = write(tmp_path, {**SETTINGS, "node": {"cpus": 2, "memory_mb": 1000}})
    proc = run(str(INVENTORY), "--list", env={"K8S_LAB_SETTINGS": str(bad)})
    assert proc.returncode == 1 and proc.stdout == ""
    assert "node.memory_mb: 1000 is too little memory" in proc.stderr and "Traceback" not in proc.stderr


def test_ports_move_the_endpoints(tmp_path):
    def moved(s):
        s["network"].update(api_server_port=7443, api_lb_port=9443)

    default = load_modified(tmp_path, moved)
    assert (default["api"]["endpoint"], default["api"]["local_endpoint"]) == (
        "https://192.168.56.11:7443", "https://127.0.0.1:7443")
    assert load_modified(tmp_path, moved, profile="ha")["api"]["endpoint"] == "https://192.168.56.10:9443"


def test_ports_must_differ(tmp_path):
    assert "each port must differ" in problems(tmp_path, lambda s: s["network"].update(api_lb_port=2379))
    assert "network.etcd_peer_port" in problems(tmp_path, lambda s: s["network"].update(etcd_peer_port=70000))


def test_derived_values_for_other_machines(tmp_path):
    doc = load_modified(tmp_path)
    nodes = [{"name": "m-1", "role": "control_plane", "ip": "172.30.6.11", "etcd": True, "pod_cidr": "10.244.0.0/24"},
             {"name": "m-2", "role": "control_plane", "ip": "172.30.6.12", "etcd": True, "pod_cidr": "10.244.1.0/24"}]
    d = S.derived(doc, nodes, "172.30.6.0/24")
    assert d["api"]["endpoint"] == "https://172.30.6.10:8443"
    assert d["nodes"] == nodes and d["paths"] == S.NODE_PATHS


@pytest.mark.parametrize(("role", "runtime"), [("crio", "crio"), ("cri_dockerd", "docker"), ("kubelet", "containerd")])
def test_molecule_settings_of_a_scenario_with_one_worker_and_no_control_plane(role, runtime):
    """A runtime's scenario is one worker: its settings resolve (derived() names that node as the API endpoint,
    which no runtime role reads), the node keeps its worker role and runs the scenario's runtime."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "molecule"))
    import lab_settings

    platforms = [{"name": f"molecule-{role}-1", "groups": ["k8s_cluster", "workers"],
                  "networks": [{"ipv4_address": "172.30.31.21"}],
                  "docker_networks": [{"ipam_config": [{"subnet": "172.30.31.0/24"}]}]}]
    lab = lab_settings.molecule_settings(role, platforms)
    assert [(n["role"], n["runtime"]) for n in lab["nodes"]] == [("worker", runtime)]
    assert lab["api"]["endpoint"].startswith("https://172.30.31.21:")
