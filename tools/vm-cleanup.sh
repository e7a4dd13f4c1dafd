#!/usr/bin/env bash
# Remove what libvirt VMs of a lab may have left after `vagrant destroy`
# (or when Vagrant lost track of them): domains, their volumes and the
# networks named after the lab. The box's base image in the storage pool
# stays: it is a cache, shared by every lab on the host (`make box` replaces
# it when the box changes).
#
#   vm-cleanup.sh CLUSTER_NAME
set -euo pipefail
cluster=${1:?usage: vm-cleanup.sh CLUSTER_NAME}
uri=qemu:///system
command -v virsh >/dev/null || exit 0
timeout 10 virsh -c "$uri" version >/dev/null 2>&1 || exit 0
v() { timeout 60 virsh -q -c "$uri" "$@"; }

for dom in $(v list --all --name | grep "^$cluster-" || true); do
    v destroy "$dom" >/dev/null 2>&1 || true
    v undefine "$dom" --remove-all-storage --nvram >/dev/null 2>&1 || v undefine "$dom" >/dev/null 2>&1 || true
    echo "removed domain $dom"
done
for pool in $(v pool-list --all --name); do
    # The machines' disks ($cluster-<machine>.img), not the box's base image (..._vagrant_box_image_...).
    for vol in $(v vol-list --pool "$pool" 2>/dev/null | awk '{print $1}' | grep "^$cluster-" \
                 | grep -v '_vagrant_box_image_' || true); do
        v vol-delete --pool "$pool" "$vol" >/dev/null && echo "removed volume $pool/$vol"
    done
done
for net in "$cluster-mgmt" "$cluster-nodes"; do
    if v net-info "$net" >/dev/null 2>&1; then
        v net-destroy "$net" >/dev/null 2>&1 || true
        v net-undefine "$net" >/dev/null 2>&1 || true
        echo "removed network $net"
    fi
done
