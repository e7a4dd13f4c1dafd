"""Which machines this host can run, found by trying rather than by looking.

A /dev/kvm that exists proves little: under nested virtualization it can be
present while no guest can run (qemu aborts with ``-cpu host``, or the guest
kernel hangs). So the KVM probe boots real guests, in two stages:

1. qemu with KVM and the host's CPU model runs a 512-byte boot sector that
   writes "OK" to the serial port and exits qemu through its debug-exit port
   (a second at most; catches the hosts where qemu aborts at once);
2. then a Linux kernel (the host's own in /boot, else the one of the lab's
   box, from the artifact cache) must print its "Linux version" banner on the
   serial console. A boot sector is not enough: on nested hosts whose KVM
   lacks what a kernel needs, the sector (even in long mode) runs while the
   kernel hangs right after its real-mode setup ("Probing EDD ... ok"), and
   a VM created with KVM there never gets an IP address.

The kernel's verdict is kept in the artifact cache (kvm-probe.json), keyed by
the host's boot, qemu and the kernel tried, so later calls cost nothing.
Bounded: 20 seconds at most. Where no kernel is found, the boot sector's
verdict stands and the reason says so.

    python3 -m tools.hypervisor     # what this host can run, and why
"""

from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT = 15.0  # seconds: a working KVM boots the sector in well under one
KERNEL_PROBE_TIMEOUT = 20.0  # seconds: under KVM the banner comes in well under one, and the kernel panics
# (no root file system; panic=-1 and -no-reboot end qemu) a second or two later
KERNEL_BANNER = "Linux version"

# mov dx,0x3f8; mov al,'O'; out dx,al; mov al,'K'; out dx,al; mov al,10; out dx,al
# mov al,1; mov dx,0xf4; out dx,al (isa-debug-exit: qemu exits with status 3); cli; hlt; jmp $-1
_BOOT_CODE = bytes([0xBA, 0xF8, 0x03, 0xB0, 0x4F, 0xEE, 0xB0, 0x4B, 0xEE, 0xB0, 0x0A, 0xEE,
                    0xB0, 0x01, 0xBA, 0xF4, 0x00, 0xEE, 0xFA, 0xF4, 0xEB, 0xFD])
BOOT_SECTOR = _BOOT_CODE + bytes(510 - len(_BOOT_CODE)) + b"\x55\xaa"
_DEBUG_EXIT_STATUS = 3  # (1 << 1) | 1


@dataclass(frozen=True)
class Probe:
    ok: bool
    reason: str


def _run(cmd: list[str], timeout: float) -> tuple[int | None, str]:
    """Exit status (None on timeout) and combined output of a bounded command."""
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        return None, out if isinstance(out, str) else out.decode(errors="replace")
    except OSError as exc:
        return None, str(exc)
    return proc.returncode, proc.stdout + proc.stderr


def probe_kvm(*, which: Callable[[str], str | None] = shutil.which,
              exists: Callable[[str], bool] = os.path.exists,
              run: Callable[[list[str], float], tuple[int | None, str]] = _run,
              machine: str | None = None,
              kernel: Callable[[], Path | None] | None = None,
              cache: Path | None | bool = True) -> Probe:
    """Can qemu run a guest with KVM and the host CPU model (as libvirt's host-model/passthrough would)?
    ``kernel`` finds the Linux kernel the second stage boots (default: probe_kernel); ``cache`` is the file that
    keeps the kernel's verdict (True: the artifact cache's kvm-probe.json; None: not kept)."""
    machine = machine or platform.machine()
    if not exists("/dev/kvm"):
        return Probe(False, "/dev/kvm is missing (no KVM module, or hardware virtualization off in the firmware)")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK) and exists("/dev/kvm") and os.geteuid() != 0:
        return Probe(False, "/dev/kvm is not accessible to this user (add the user to the kvm group)")
    if machine in ("x86_64", "amd64"):
        qemu = which("qemu-system-x86_64")
        if not qemu:
            return Probe(False, "qemu-system-x86_64 is not installed (package qemu-system-x86)")
        vmlinuz = (kernel or probe_kernel)()
        cache = _cache_file(cache) if vmlinuz else None
        kept = _kept_verdict(cache, qemu, vmlinuz)
        if kept:
            return kept
        with tempfile.TemporaryDirectory(prefix="k8s-lab-kvm-") as tmp:
            disk = Path(tmp) / "probe.img"
            disk.write_bytes(BOOT_SECTOR)
            status, out = run([qemu, "-accel", "kvm", "-cpu", "host", "-M", "pc", "-m", "16", "-nodefaults",
                               "-display", "none", "-serial", "stdio", "-no-reboot",
                               "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
                               "-drive", f"file={disk},format=raw,if=ide"], PROBE_TIMEOUT)
        if status == _DEBUG_EXIT_STATUS and "OK" in out:
            return probe_kvm_kernel(qemu, vmlinuz, run=run, cache=cache)
        if status is None:
            return Probe(False, f"a KVM guest did not finish a 512-byte boot within {PROBE_TIMEOUT:.0f} s")
        return Probe(False, f"qemu cannot run a KVM guest here: {_last_error(status, out)}")
    if machine in ("aarch64", "arm64"):
        qemu = which("qemu-system-aarch64")
        if not qemu:
            return Probe(False, "qemu-system-aarch64 is not installed (package qemu-system-arm)")
        # No firmware needed to create the VM and its vCPUs; a guest that cannot be created fails at once.
        status, out = run([qemu, "-accel", "kvm", "-cpu", "host", "-M", "virt", "-m", "16", "-nodefaults",
                           "-display", "none", "-S", "-no-reboot"], 3.0)
        if status is None:
            return Probe(True, "qemu created a KVM guest with the host CPU model (qemu probe)")
        return Probe(False, f"qemu cannot create a KVM guest here: {out.strip().splitlines()[-1:] or status}")
    return Probe(False, f"no KVM probe for {machine}")


def _last_error(status: int | None, out: str) -> str:
    """What a failed qemu run says: its last line with "error" in it, else its last line, else its status."""
    return next((line.strip() for line in reversed(out.splitlines()) if "error" in line.lower()),
                out.strip().splitlines()[-1] if out.strip() else f"exit status {status}")


def probe_kernel() -> Path | None:
    """The Linux kernel (x86_64 bzImage) the KVM probe boots: the running host kernel's own file, else another in
    /boot, else the lab's box kernel (extracted once from the box's root file system in the artifact cache)."""
    release = platform.release()
    for candidate in [Path(f"/boot/vmlinuz-{release}"), *sorted(Path("/boot").glob("vmlinuz-*"), reverse=True)]:
        if candidate.is_file() and os.access(candidate, os.R_OK):
            return candidate
    return _box_kernel()


def _box_kernel() -> Path | None:
    """The box's kernel, kept beside the box in the cache (<cache>/box/kernel/vmlinuz-*), extracted from the box's
    root file system tar when it is not there yet. None when there is no box root file system."""
    import tarfile

    from tools import locations

    boxdir = locations.default_cache() / "box"
    kept = sorted((boxdir / "kernel").glob("vmlinuz-*"))
    if kept:
        return kept[-1]
    for rootfs in sorted(boxdir.glob("rootfs-*.tar"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            with tarfile.open(rootfs) as tar:
                for member in tar:
                    name = member.name.lstrip("./")
                    if name.startswith("boot/vmlinuz-") and member.isfile():
                        data = tar.extractfile(member)
                        if data is None:
                            continue
                        target = boxdir / "kernel" / Path(name).name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        part = target.with_suffix(".part")
                        part.write_bytes(data.read())
                        part.replace(target)
                        return target
        except (OSError, tarfile.TarError):
            continue
    return None


def _verdict_key(qemu: str, kernel: Path) -> str:
    def ident(path: str | Path) -> str:
        st = os.stat(path)
        return f"{path}:{st.st_size}:{int(st.st_mtime)}"

    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "unknown-boot"
    return f"{boot}|{ident(qemu)}|{ident(kernel)}"


def _cache_file(cache: Path | None | bool) -> Path | None:
    if cache is True:
        from tools import locations

        return locations.default_cache() / "kvm-probe.json"
    return cache or None


def _kept_verdict(cache: Path | None, qemu: str, kernel: Path | None) -> Probe | None:
    """The verdict kept for this boot of the host, this qemu and the kernel the probe would try, if any."""
    if not cache or not kernel or not cache.exists():
        return None
    try:
        kept = json.loads(cache.read_text())
        if kept.get("key") == _verdict_key(qemu, kernel):
            return Probe(bool(kept["ok"]), str(kept["reason"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def probe_kvm_kernel(qemu: str, kernel: Path | None, *,
                     run: Callable[[list[str], float], tuple[int | None, str]] = _run,
                     cache: Path | None = None) -> Probe:
    """The second stage: does a Linux kernel under KVM (host CPU model) print its banner on the serial console?
    ``cache``: the file that keeps the verdict (None: not kept)."""
    if not kernel:
        return Probe(True, "a KVM guest with the host CPU model ran a boot sector (qemu probe; no Linux kernel "
                           "found to try: none in /boot, no box built yet)")
    status, out = run([qemu, "-accel", "kvm", "-cpu", "host", "-M", "pc", "-m", "256", "-nodefaults",
                       "-display", "none", "-serial", "stdio", "-no-reboot", "-kernel", str(kernel),
                       "-append", "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1"], KERNEL_PROBE_TIMEOUT)
    if KERNEL_BANNER in out:
        probe = Probe(True, f"a KVM guest with the host CPU model booted a Linux kernel ({kernel.name}; qemu probe)")
    elif status is None:
        last = next((line.strip() for line in reversed(out.splitlines()) if line.strip()), "nothing")
        probe = Probe(False, f"a Linux kernel under KVM ({kernel.name}) printed no banner within "
                             f"{KERNEL_PROBE_TIMEOUT:.0f} s (it hangs after: {last!r}), though a boot sector ran: "
                             "this host's KVM cannot run a real guest")
    else:
        probe = Probe(False, f"qemu cannot boot a Linux kernel under KVM here: {_last_error(status, out)}")
    if cache:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"key": _verdict_key(qemu, kernel), "ok": probe.ok,
                                         "reason": probe.reason}) + "\n")
        except OSError:
            pass
    return probe


def probe_virtualbox(*, which: Callable[[str], str | None] = shutil.which,
                     exists: Callable[[str], bool] = os.path.exists,
                     run: Callable[[list[str], float], tuple[int | None, str]] = _run) -> Probe:
    """Is VirtualBox installed, its kernel driver loaded, and hardware virtualization available to it?"""
    vbox = which("VBoxManage")
    if not vbox:
        return Probe(False, "VirtualBox is not installed")
    if not exists("/dev/vboxdrv"):
        return Probe(False, "VirtualBox's kernel driver is not loaded (/dev/vboxdrv is missing)")
    status, out = run([vbox, "list", "hostinfo"], 20.0)
    if status != 0:
        return Probe(False, f"`VBoxManage list hostinfo` failed: {out.strip()[-200:]}")
    for line in out.splitlines():
        if line.strip().lower().startswith("processor supports hw virtualization:"):
            if line.split(":", 1)[1].strip().lower() == "yes":
                return Probe(True, "VirtualBox reports hardware virtualization")
            return Probe(False, "VirtualBox reports no hardware virtualization (VT-x/AMD-V)")
    return Probe(False, "VirtualBox does not say whether hardware virtualization works")


def vagrant_libvirt_installed(run: Callable[[list[str], float], tuple[int | None, str]] = _run) -> bool:
    """Vagrant's libvirt plugin, as a system plugin (Debian's package) or a user plugin; `vagrant plugin list`
    (a few seconds) only when neither is found where they usually are."""
    home = Path(os.environ.get("VAGRANT_HOME") or Path.home() / ".vagrant.d")
    for pattern in ("/usr/share/rubygems-integration/all/gems/vagrant-libvirt-*",
                    "/usr/share/vagrant-plugins/plugins.d/vagrant-libvirt*",
                    str(home / "gems/*/gems/vagrant-libvirt-*")):
        if glob.glob(pattern):
            return True
    status, out = run(["vagrant", "plugin", "list"], 60.0)
    return status == 0 and "vagrant-libvirt" in out


def probe_libvirt(*, which: Callable[[str], str | None] = shutil.which,
                  run: Callable[[list[str], float], tuple[int | None, str]] = _run) -> Probe:
    """Is libvirt installed, with Vagrant's libvirt plugin? (Its daemon may still be stopped: tools/libvirtd.sh.)"""
    if not which("virsh"):
        return Probe(False, "libvirt is not installed")
    if not which("vagrant"):
        return Probe(False, "Vagrant is not installed")
    if not vagrant_libvirt_installed(run):
        return Probe(False, "Vagrant's libvirt plugin is not installed (package vagrant-libvirt)")
    return Probe(True, "libvirt and vagrant-libvirt are installed")


@dataclass(frozen=True)
class Choice:
    provider: str
    accel: str  # kvm | emulation (libvirt), hardware (virtualbox), container (docker)
    reason: str
    warning: str = ""


ACCEL_ENV = "K8S_LAB_ACCEL"  # how the host runs the libvirt VMs, as the Vagrantfile tells the controller machine
EMULATION_WARNING = ("no hardware virtualization works on this host: the libvirt VMs run under qemu's software "
                     "emulation (TCG), 10-30 times slower than real machines; every wait is scaled for it "
                     "(settings: timeout_scale). PROVIDER=docker is the fast way here.")


def choose(provider: str, *, kvm: Callable[[], Probe] = probe_kvm,
           vbox: Callable[[], Probe] = probe_virtualbox,
           libvirt: Callable[[], Probe] = probe_libvirt) -> Choice:
    """The provider to use and how its machines run. ``provider``: auto or one of the providers.

    auto takes VirtualBox or libvirt only where a VM can run with hardware acceleration, and the docker provider
    otherwise; an explicit libvirt without working KVM runs under emulation, with a warning."""
    if provider == "docker":
        return Choice("docker", "container", "set in the settings")
    if provider == "virtualbox":
        probe = vbox()
        return Choice("virtualbox", "hardware", "set in the settings",
                      "" if probe.ok else f"VirtualBox may not run here: {probe.reason}")
    if provider == "libvirt":
        # Inside the lab's controller machine the probe would test the controller, not the host that runs the
        # VMs: the Vagrantfile passes the host's answer (K8S_LAB_ACCEL, kvm or emulation).
        given = os.environ.get(ACCEL_ENV)
        if given in ("kvm", "emulation"):
            return Choice("libvirt", given, f"set in the settings; {ACCEL_ENV}={given} (from the host)",
                          EMULATION_WARNING if given == "emulation" else "")
        probe = kvm()
        if probe.ok:
            return Choice("libvirt", "kvm", f"set in the settings; {probe.reason}")
        return Choice("libvirt", "emulation", f"set in the settings; {probe.reason}", EMULATION_WARNING)
    # auto
    reasons = []
    probe = vbox()
    if probe.ok:
        return Choice("virtualbox", "hardware", f"auto: {probe.reason}")
    reasons.append(f"not VirtualBox: {probe.reason}")
    lv = libvirt()
    if lv.ok:
        probe = kvm()
        if probe.ok:
            return Choice("libvirt", "kvm", f"auto: {lv.reason} and {probe.reason}")
        reasons.append(f"not libvirt: {probe.reason}")
    else:
        reasons.append(f"not libvirt: {lv.reason}")
    return Choice("docker", "container",
                  "auto: no VM can run with hardware acceleration here (" + "; ".join(reasons) + "), so the "
                  "nodes are containers of the lab's node image")


def main() -> int:
    for name, probe in (("KVM", probe_kvm()), ("VirtualBox", probe_virtualbox()), ("libvirt", probe_libvirt())):
        print(f"{name:10} {'yes' if probe.ok else 'no ':3}  {probe.reason}")
    choice = choose("auto")
    print(f"auto ->    {choice.provider}: {choice.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
