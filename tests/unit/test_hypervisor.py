"""Unit tests of the provider choice (tools/hypervisor.py): the probes' verdicts from recorded outputs, and what
auto chooses from them. The real qemu probe runs in tests/integration/test_hypervisor_probe.py."""

from __future__ import annotations

import pytest

from tools import hypervisor as H

MSR_ABORT = ("qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\n"
             "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion failed.\n")
HOSTINFO = "Host Information:\n\nProcessor supports HW virtualization: {}\nProcessor supports PAE: yes\n"


def fake(tools=(), files=(), result=(0, "")):
    calls = []

    def run(cmd, timeout):
        calls.append(cmd)
        return result

    return dict(which=lambda name: f"/usr/bin/{name}" if name in tools else None,
                exists=lambda path: path in files, run=run), calls


def test_boot_sector_is_a_valid_mbr():
    assert len(H.BOOT_SECTOR) == 512 and H.BOOT_SECTOR[-2:] == b"\x55\xaa"


@pytest.mark.parametrize(("result", "ok", "reason"), [
    ((3, "SeaBIOS\nBooting from Hard Disk..OK\n"), True, "ran"),
    ((134, MSR_ABORT), False, "failed to set MSR 0x10a"),  # this kind of host: nested KVM without the MSRs
    ((None, "SeaBIOS"), False, "did not finish"),  # hangs: bounded by the timeout
    ((1, "qemu-system-x86_64: Could not access KVM kernel module: Permission denied"), False, "Permission denied"),
])
def test_kvm_probe_verdicts(result, ok, reason):
    kwargs, calls = fake(("qemu-system-x86_64",), ("/dev/kvm",), result)
    probe = H.probe_kvm(machine="x86_64", **kwargs)
    assert probe.ok is ok and reason in probe.reason
    cmd = calls[0]
    assert cmd[cmd.index("-accel") + 1] == "kvm" and cmd[cmd.index("-cpu") + 1] == "host"


def test_kvm_probe_needs_the_device_and_qemu():
    kwargs, calls = fake(("qemu-system-x86_64",), ())
    assert "/dev/kvm is missing" in H.probe_kvm(machine="x86_64", **kwargs).reason and not calls
    kwargs, calls = fake((), ("/dev/kvm",))
    assert "qemu-system-x86_64 is not installed" in H.probe_kvm(machine="x86_64", **kwargs).reason and not calls


@pytest.mark.parametrize(("tools", "files", "result", "ok", "reason"), [
    (("VBoxManage",), ("/dev/vboxdrv",), (0, HOSTINFO.format("yes")), True, "hardware virtualization"),
    (("VBoxManage",), ("/dev/vboxdrv",), (0, HOSTINFO.format("no")), False, "no hardware virtualization"),
    (("VBoxManage",), (), (0, HOSTINFO.format("yes")), False, "kernel driver"),
    ((), ("/dev/vboxdrv",), (0, ""), False, "not installed"),
])
def test_virtualbox_probe(tools, files, result, ok, reason):
    kwargs, _ = fake(tools, files, result)
    probe = H.probe_virtualbox(**kwargs)
    assert probe.ok is ok and reason in probe.reason


YES, NO = H.Probe(True, "works"), H.Probe(False, "broken")


@pytest.mark.parametrize(("vbox", "libvirt", "kvm", "provider", "accel"), [
    (YES, YES, YES, "virtualbox", "hardware"),
    (NO, YES, YES, "libvirt", "kvm"),
    (NO, YES, NO, "docker", "container"),  # libvirt installed, KVM unusable: this kind of host
    (NO, NO, YES, "docker", "container"),
])
def test_auto(vbox, libvirt, kvm, provider, accel):
    choice = H.choose("auto", vbox=lambda: vbox, libvirt=lambda: libvirt, kvm=lambda: kvm)
    assert (choice.provider, choice.accel) == (provider, accel)
    assert choice.reason.startswith("auto: ") and not choice.warning
    if provider == "docker":
        assert "broken" in choice.reason  # says why no VM provider was taken


def test_explicit_libvirt_without_kvm_runs_under_emulation_with_a_warning():
    choice = H.choose("libvirt", kvm=lambda: NO)
    assert (choice.provider, choice.accel) == ("libvirt", "emulation") and "emulation" in choice.warning
    assert H.choose("libvirt", kvm=lambda: YES).accel == "kvm"
    never = lambda: pytest.fail("probed although the provider was given")  # noqa: E731
    assert H.choose("docker", kvm=never, vbox=never, libvirt=never).provider == "docker"
