"""The Vagrantfile's host code (tools/vagrant/lab_host.rb) on a Windows-like, a macOS-like and a Linux host: the Ruby
tests (tests/ruby/test_lab_host.rb) run under each host's RbConfig host_os with every host command refused; the key
the host code makes is one OpenSSH itself reads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ruby():
    found = shutil.which("ruby")
    if not found:
        pytest.skip("Ruby is not installed (it comes with Vagrant: `make deps`)")
    return found


def test_the_host_code_runs_on_every_host_without_a_host_command(ruby):
    proc = subprocess.run([ruby, str(ROOT / "tests/ruby/test_lab_host.rb")], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " 0 failures, 0 errors" in proc.stdout, proc.stdout


def test_openssh_reads_the_key_the_host_code_makes(ruby, tmp_path):
    if not shutil.which("ssh-keygen"):
        pytest.skip("no ssh-keygen to cross-check with")
    key = tmp_path / "state" / "ssh" / "id_ed25519"
    script = f'require {str(ROOT / "tools/vagrant/lab_host")!r}; puts LabHost.ensure_ssh_key({str(key)!r})'
    public = subprocess.run([ruby, "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    assert derived.split()[:2] == public.split()[:2]
    assert key.stat().st_mode & 0o777 == 0o600


def test_the_host_code_names_no_host_command():
    """What the Vagrantfile runs on every host is Ruby alone: no shell-out, no ssh-keygen, no hard-coded Unix path."""
    lines = (ROOT / "tools/vagrant/lab_host.rb").read_text().splitlines()
    code = "\n".join(line.split(" # ")[0] for line in lines if not line.strip().startswith("#"))  # comments aside
    for banned in ("system(", "`", "%x", "Open3", "spawn(", "ssh-keygen", '"/tmp', '"/usr', '"/bin'):
        assert banned not in code, banned
    vagrantfile = [line for line in (ROOT / "Vagrantfile").read_text().splitlines() if not line.strip().startswith("#")]
    assert not [line for line in vagrantfile if "ssh-keygen" in line]


def test_ruby_reads_the_same_machines_as_tools_settings_for_every_profile(ruby, monkeypatch):
    """The machine list the Vagrantfile can build without Python (controller: lab) is the one tools/settings.py
    resolves: names, roles and addresses, for every profile of settings.yml. Whether this host's artifact cache holds
    the runtimes profile's CRI-O and cri-dockerd is not the question here (a fresh machine's cache does not)."""
    import json

    from tools import settings as S

    monkeypatch.setattr(S, "_check_runtime_cache", lambda *args, **kwargs: [])

    profiles = yaml.safe_load((ROOT / "settings.yml").read_text())["profiles"]
    script = (f'require {str(ROOT / "tools/vagrant/lab_host")!r}; require "json"; '
              f'puts JSON.dump(LabHost.machines({str(ROOT)!r}, {{"K8S_LAB_PROFILE" => ARGV[0]}}))')
    for profile in profiles:
        out = subprocess.run([ruby, "-e", script, profile], capture_output=True, text=True, timeout=60, check=True)
        ruby_nodes = json.loads(out.stdout)["nodes"]
        python_nodes = [{k: n[k] for k in ("name", "role", "ip")}
                        for n in S.load(profile=profile, provider="docker")["nodes"]]
        assert ruby_nodes == python_nodes, profile


def _ruby_settings_error(ruby, call: str) -> str:
    """The message of the LabHost::SettingsError a call raises ("" when it raises none)."""
    script = (f'require {str(ROOT / "tools/vagrant/lab_host")!r}; '
              f'begin; {call}; rescue LabHost::SettingsError => e; puts e.message; end')
    return subprocess.run([ruby, "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout


def test_ruby_refuses_an_unknown_profile_naming_the_known_ones(ruby):
    out = _ruby_settings_error(ruby, f'LabHost.machines({str(ROOT)!r}, {{"K8S_LAB_PROFILE" => "huge"}})')
    assert 'profile "huge" is not one of profiles (single, default, ha' in out


def _ruby_json(ruby, expression: str, env: dict | None = None) -> object:
    import json
    import os

    script = f'require {str(ROOT / "tools/vagrant/lab_host")!r}; require "json"; puts JSON.dump({expression})'
    out = subprocess.run([ruby, "-e", script], capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, **(env or {})})
    return json.loads(out.stdout)


@pytest.mark.parametrize("env", [{}, {"K8S_LAB_CACHE": "/srv/cache", "K8S_LAB_STATE_DIR": "/srv/state"},
                                 {"XDG_CACHE_HOME": "/srv/xdg"}])
def test_ruby_and_tools_locations_agree_on_the_cache_and_the_state_folder(ruby, env, monkeypatch):
    from tools import locations

    for key in ("K8S_LAB_CACHE", "K8S_LAB_STATE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    got = _ruby_json(ruby, f"[LabHost.cache_dir, LabHost.state_dir({str(ROOT)!r})]")
    assert got == [str(locations.default_cache()), str(locations.state_dir())]


def test_ruby_settings_without_python_pick_the_provider_and_the_controller(ruby):
    from tools import settings as S

    def pick(argv="[]", env="{}", plugin="false", os_="linux"):
        return _ruby_json(ruby, f'LabHost.settings({str(ROOT)!r}, ENV.to_h.merge({env}), argv: {argv}, '
                                f'libvirt_plugin: {plugin}, os: :{os_}).slice("provider", "accel", "controller", '
                                '"controller_ip", "timeout_scale", "box")',
                          {"K8S_LAB_PROVIDER": "", "K8S_LAB_CONTROLLER": "", "VAGRANT_DEFAULT_PROVIDER": "",
                           "K8S_LAB_ACCEL": ""})

    python = S.load(profile="default", provider="docker")
    # settings.yml says auto: a macOS or Windows laptop gets VirtualBox, a Linux one with the plugin libvirt.
    assert pick(os_="macos")["provider"] == "virtualbox"
    assert pick(os_="windows")["provider"] == "virtualbox"
    linux = pick(plugin="true", env='{"K8S_LAB_ACCEL" => "emulation"}')
    assert linux["provider"] == "libvirt" and linux["accel"] == "emulation"
    assert linux["timeout_scale"] == S.EMULATION_TIMEOUT_SCALE == 8
    assert linux["box"] == yaml.safe_load((ROOT / "settings.yml").read_text())["box"]["libvirt"]
    assert linux["controller"] == "lab" and linux["controller_ip"] == python["controller_ip"]
    assert pick(argv='["up", "--provider=docker"]', plugin="true")["provider"] == "docker"
    assert pick(argv='["up", "--provider", "virtualbox"]')["provider"] == "virtualbox"
    assert pick(env='{"VAGRANT_DEFAULT_PROVIDER" => "libvirt"}', os_="macos")["provider"] == "libvirt"


def test_ruby_settings_refuse_a_host_side_controller_without_python(ruby):
    out = _ruby_settings_error(ruby, f'LabHost.settings({str(ROOT)!r}, {{"K8S_LAB_CONTROLLER" => "host"}})')
    assert 'controller: "host": a host-side controller needs the lab\'s Python here' in out
