#!/usr/bin/env bash
# Make libvirt's system instance answer (qemu:///system), for the libvirt
# provider. Where a service manager runs (systemd), it starts the daemons;
# on hosts without one (CI containers, this project's build machines) the
# daemons are started here, in the background, and their logs go to
# /var/log/k8s-arch-lab-libvirtd.log.
#
# On such hosts qemu is also told to run as root (`user`/`group` in
# /etc/libvirt/qemu.conf, in a marked block): with the default user,
# libvirtd probes qemu again on every call when /dev/kvm is present but not
# usable (about 84 s per domain created). Hosts with a service manager keep
# their configuration untouched.
set -euo pipefail
uri=qemu:///system
log() { echo "libvirtd: $*"; }
die() { echo "libvirtd: error: $*" >&2; exit 1; }
sudo=""; (( EUID == 0 )) || sudo=sudo

answers() { timeout 10 virsh -c "$uri" version >/dev/null 2>&1; }

command -v virsh >/dev/null || die "virsh is missing: run \`make deps PROVIDER=libvirt\`"
if answers; then
    log "libvirt answers on $uri"
    exit 0
fi

if [ -d /run/systemd/system ]; then
    log "starting libvirtd through systemd"
    $sudo systemctl start virtlogd.service libvirtd.service
else
    conf=/etc/libvirt/qemu.conf
    if ! grep -q '^# BEGIN k8s-arch-lab' "$conf" 2>/dev/null; then
        log "no service manager: qemu runs as root (marked block in $conf)"
        printf '%s\n' '# BEGIN k8s-arch-lab (tools/libvirtd.sh: no service manager on this host)' \
            'user = "root"' 'group = "root"' '# END k8s-arch-lab' | $sudo tee -a "$conf" >/dev/null
    fi
    pgrep -x virtlogd >/dev/null || { log "starting virtlogd"; $sudo virtlogd -d; }
    if ! pgrep -x libvirtd >/dev/null; then
        log "starting libvirtd (no service manager on this host)"
        $sudo sh -c 'nohup libvirtd >>/var/log/k8s-arch-lab-libvirtd.log 2>&1 &'
    fi
fi
for _ in $(seq 1 30); do
    answers && { log "libvirt answers on $uri"; exit 0; }
    sleep 1
done
die "libvirtd does not answer on $uri after 30 s (see /var/log/k8s-arch-lab-libvirtd.log or its service's journal)"
