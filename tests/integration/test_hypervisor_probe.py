"""The KVM probe of tools/hypervisor.py against this host's real qemu: bounded, its verdict names the stage that
decided it, and the kernel it boots is a kernel that does boot (under software emulation), so that "no banner under
KVM" is KVM's fault and never the kernel's."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tools import hypervisor as H

pytestmark = pytest.mark.integration

QEMU = shutil.which("qemu-system-x86_64")
needs_qemu = pytest.mark.skipif(not QEMU or not os.path.exists("/dev/kvm"),
                                reason="needs qemu-system-x86_64 and /dev/kvm")


@needs_qemu
def test_the_probe_is_bounded_and_says_which_stage_decided():
    started = time.monotonic()
    probe = H.probe_kvm(cache=None)
    took = time.monotonic() - started
    assert took < H.PROBE_TIMEOUT + H.KERNEL_PROBE_TIMEOUT + 10, took
    if H.probe_kernel():
        assert "Linux kernel" in probe.reason or "boot sector" not in probe.reason, probe.reason
    print(f"KVM probe: {probe} in {took:.1f} s")


@needs_qemu
def test_the_probes_kernel_boots_under_emulation():
    kernel = H.probe_kernel()
    if not kernel:
        pytest.skip("no kernel to try: none in /boot and no box built (make box)")
    status, out = H._run([QEMU, "-accel", "tcg", "-M", "pc", "-m", "256", "-nodefaults", "-display", "none",
                          "-serial", "stdio", "-no-reboot", "-kernel", str(kernel),
                          "-append", "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1"], 120.0)
    assert H.KERNEL_BANNER in out, f"{kernel} printed no banner under TCG (exit {status}):\n{out[-2000:]}"
