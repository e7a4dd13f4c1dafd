#!/bin/sh
# Entrypoint of a lab node container: make the kernel interfaces that systemd,
# kubelet and containerd write to writable, then become systemd.
#
# Without --privileged (hosts whose capability bounding set lacks
# CAP_SYS_RESOURCE cannot grant it), Docker mounts /sys, each cgroup
# hierarchy and /proc/sys read-only; the node has CAP_SYS_ADMIN, so it can
# remount them read-write inside its own mount namespace.
set -eu

remount_rw() {
    # $1 = mount point; only if it is currently read-only
    if awk -v m="$1" '$2 == m && $4 ~ /(^|,)ro(,|$)/ {found=1} END {exit !found}' /proc/self/mounts; then
        mount -o remount,rw "$1" 2>/dev/null || mount -o remount,bind,rw "$1"
    fi
}

remount_rw /sys
for m in $(awk '$2 ~ "^/sys/fs/cgroup" {print $2}' /proc/self/mounts); do
    remount_rw "$m"
done
remount_rw /proc/sys

# kubelet and containerd need shared mount propagation.
mount --make-rshared /

# A fresh machine-id per container, so that every node is a distinct machine.
if [ ! -s /etc/machine-id ]; then
    systemd-machine-id-setup >/dev/null 2>&1 || true
fi

exec /sbin/init "$@"
