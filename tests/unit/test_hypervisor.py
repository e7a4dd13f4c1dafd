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
    probe = H.probe_kvm(machine="x86_64", kernel=lambda: None, cache=None, **kwargs)
    assert probe.ok is ok and reason in probe.reason
    cmd = calls[0]
    assert cmd[cmd.index("-accel") + 1] == "kvm" and cmd[cmd.index("-cpu") + 1] == "host"


def test_kvm_probe_needs_the_device_and_qemu():
    kwargs, calls = fake(("qemu-system-x86_64",), ())
    assert "/dev/kvm is missing" in H.probe_kvm(machine="x86_64", cache=None, **kwargs).reason and not calls
    kwargs, calls = fake((), ("/dev/kvm",))
    assert "qemu-system-x86_64 is not installed" in H.probe_kvm(machine="x86_64", cache=None,
                                                                 **kwargs).reason and not calls


SECTOR_OK = (3, "SeaBIOS\nBooting from Hard Disk..OK\n")
KERNEL_HANGS = (None, "SeaBIOS\nBooting from ROM..Probing EDD (edd=off to disable)... ok\n")  # this kind of host
KERNEL_BOOTS = (0, "[    0.000000] Linux version 6.1.0-50-amd64 (debian-kernel@lists.debian.org)\n"
                   "[    0.912000] Kernel panic - not syncing: VFS: Unable to mount root fs\n")


def two_stage(kernel_result, tmp_path):
    """A fake qemu: the boot sector runs; the kernel does what kernel_result says."""
    kernel = tmp_path / "vmlinuz-6.1.0-50-amd64"
    kernel.write_bytes(b"bzImage")
    calls = []

    def run(cmd, timeout):
        calls.append(cmd)
        return kernel_result if "-kernel" in cmd else SECTOR_OK

    return dict(which=lambda name: str(tmp_path / name), exists=lambda path: True, run=run,
                kernel=lambda: kernel), calls


@pytest.fixture()
def qemu(tmp_path):
    (tmp_path / "qemu-system-x86_64").write_bytes(b"qemu")  # the verdict's key names qemu's file


@pytest.mark.usefixtures("qemu")
@pytest.mark.parametrize(("kernel_result", "ok", "reason"), [
    (KERNEL_BOOTS, True, "booted a Linux kernel"),
    (KERNEL_HANGS, False, "printed no banner"),  # the sector ran, the kernel hangs: a VM would never get an IP
    ((1, "qemu-system-x86_64: error: failed to set MSR 0x10a"), False, "failed to set MSR"),
])
def test_a_boot_sector_is_not_enough_a_kernel_must_boot(kernel_result, ok, reason, tmp_path):
    kwargs, calls = two_stage(kernel_result, tmp_path)
    probe = H.probe_kvm(machine="x86_64", cache=None, **kwargs)
    assert probe.ok is ok and reason in probe.reason
    kernel_cmd = calls[1]
    assert kernel_cmd[kernel_cmd.index("-accel") + 1] == "kvm" and kernel_cmd[kernel_cmd.index("-cpu") + 1] == "host"
    assert "console=ttyS0" in kernel_cmd[kernel_cmd.index("-append") + 1]


@pytest.mark.usefixtures("qemu")
def test_the_kernels_verdict_is_kept_for_this_boot_qemu_and_kernel(tmp_path):
    cache = tmp_path / "kvm-probe.json"
    kwargs, calls = two_stage(KERNEL_HANGS, tmp_path)
    first = H.probe_kvm(machine="x86_64", cache=cache, **kwargs)
    assert not first.ok and len(calls) == 2 and cache.exists()
    again = H.probe_kvm(machine="x86_64", cache=cache, **kwargs)
    assert again == first and len(calls) == 2  # no qemu at all the second time
    kernel = kwargs["kernel"]()
    kernel.write_bytes(b"another bzImage")  # another kernel (or qemu, or a reboot): probed again
    H.probe_kvm(machine="x86_64", cache=cache, **kwargs)
    assert len(calls) == 4


def test_without_a_kernel_the_boot_sectors_verdict_stands_and_says_so(tmp_path):
    kwargs, _ = two_stage(KERNEL_BOOTS, tmp_path)
    kwargs["kernel"] = lambda: None
    probe = H.probe_kvm(machine="x86_64", cache=None, **kwargs)
    assert probe.ok and "no Linux kernel found" in probe.reason


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
