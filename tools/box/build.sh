#!/usr/bin/env bash
# `make box`: the lab's own Debian 12 Vagrant box for the libvirt provider,
# built offline from Debian packages (no Vagrant Cloud, no ISO, no installer).
#
#   debootstrap (the node package list shared with the node image, plus a
#   kernel) -> setup.sh in a chroot (user vagrant with Vagrant's insecure key,
#   systemd-networkd DHCP on eth0, SSH host keys made at first boot, an empty
#   machine-id, a swap file) -> ext4 filled straight from the folder
#   (mkfs.ext4 -d: no loop device, no mount) -> an MBR disk with GRUB written
#   by hand (boot.img + core.img) -> qcow2 -> box.img + metadata.json +
#   Vagrantfile -> `vagrant box add`.
#
# The box is rebuilt only when its inputs change (this folder, the package
# list, Vagrant's insecure key); the debootstrapped rootfs is cached as a
# tarball in the artifact cache.
#
# Environment:
#   K8S_LAB_BOX            box name (default k8s-arch-lab/debian12)
#   K8S_LAB_CACHE          the artifact cache (tools/locations.py says where by default)
#   K8S_LAB_DEBIAN_MIRROR  Debian mirror (default: the one this host's apt uses)
#   K8S_LAB_BOX_DISK_GB    virtual disk size (default 20)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
name=${K8S_LAB_BOX:-k8s-arch-lab/debian12}
cache=$(cd "$here/../.." && python3 -m tools.locations cache)
disk_gb=${K8S_LAB_BOX_DISK_GB:-20}
suite=bookworm
packages_file="$here/../node-packages.txt"

die() { echo "box: error: $*" >&2; exit 1; }
log() { echo "box: $*"; }

for tool in debootstrap mkfs.ext4 sfdisk qemu-img grub-mkimage vagrant; do
    command -v "$tool" >/dev/null || die "$tool is not installed (run \`make deps PROVIDER=libvirt\`)"
done
[ -f /usr/lib/grub/i386-pc/boot.img ] || die "GRUB's BIOS images are missing (package grub-pc-bin; run \`make deps PROVIDER=libvirt\`)"
(( EUID == 0 )) || die "debootstrap and the chroot need root: run as root or with sudo"

# Vagrant's insecure public key, which the box trusts for the first login
# (Vagrant then replaces it with a key of its own per machine).
insecure_key=""
for d in /usr/share/rubygems-integration/all/gems/vagrant-*/keys /opt/vagrant/embedded/gems/gems/vagrant-*/keys \
         /opt/vagrant/embedded/gems/*/gems/vagrant-*/keys; do
    [ -f "$d/vagrant.pub" ] && { insecure_key="$d/vagrant.pub"; break; }
done
[ -n "$insecure_key" ] || die "Vagrant's insecure public key (keys/vagrant.pub in Vagrant's gem) was not found"

inputs=$( (cd "$here" && cat build.sh setup.sh; cat "$packages_file" "$insecure_key"; echo "$disk_gb") \
    | sha256sum | cut -c1-12)
boxdir="$cache/box"
boxfile="$boxdir/debian12-$inputs.box"
mkdir -p "$boxdir"

installed() { vagrant box list --machine-readable 2>/dev/null | awk -F, -v n="$name" \
    '$3 == "box-name" {cur=$4} $3 == "box-provider" && cur == n && $4 == "libvirt" {found=1} END {exit !found}'; }
if [ -s "$boxfile" ] && [ "$(cat "$boxdir/installed" 2>/dev/null)" = "$name $inputs" ] && installed; then
    log "$name (libvirt, inputs $inputs) is up to date"
    exit 0
fi

start=$(date +%s)
if [ ! -s "$boxfile" ]; then
    mirror=${K8S_LAB_DEBIAN_MIRROR:-}
    if [ -z "$mirror" ]; then
        mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
            | grep -E '^[[:space:]]*(deb|URIs:)[[:space:]]' | grep -Eo 'https?://[^ ]+/debian/?' | grep -v security \
            | head -n1 || true)
    fi
    [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources*; set K8S_LAB_DEBIAN_MIRROR"

    work=$(mktemp -d "${TMPDIR:-/var/tmp}/k8s-lab-box.XXXXXX")
    cleanup() {
        for m in proc sys dev/pts dev; do umount -l "$work/rootfs/$m" 2>/dev/null || true; done
        rm -rf "$work"
    }
    trap cleanup EXIT
    root="$work/rootfs"

    # The node packages, plus what a machine (rather than a container) needs to boot.
    packages=$( (grep -Ev '^\s*(#|$)' "$packages_file"; grep -Ev '^\s*(#|$)' "$here/packages-vm.txt") \
        | sort -u | paste -sd, -)
    rootfs_tar="$boxdir/rootfs-$suite-$(printf '%s' "$packages" | sha256sum | cut -c1-12).tar"
    if [ ! -s "$rootfs_tar" ]; then
        log "debootstrap $suite from $mirror ..."
        t=$(date +%s)
        debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
            || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
        tar -C "$root" --numeric-owner -cf "$rootfs_tar.part" . && mv "$rootfs_tar.part" "$rootfs_tar"
        find "$boxdir" -name 'rootfs-*.tar' ! -path "$rootfs_tar" -delete
        log "debootstrap took $(( $(date +%s) - t ))s"
    else
        log "using cached rootfs $rootfs_tar"
        mkdir -p "$root" && tar -C "$root" --numeric-owner -xf "$rootfs_tar"
    fi

    # Filesystem UUIDs fixed per build, so that the kernel command line and fstab can name them.
    uuid=$(cat /proc/sys/kernel/random/uuid)
    swap_uuid=$(cat /proc/sys/kernel/random/uuid)
    install -m 0644 "$insecure_key" "$root/tmp/vagrant.pub"
    cp "$here/setup.sh" "$root/tmp/setup.sh"
    mount -t proc proc "$root/proc"
    mount -t sysfs sys "$root/sys"
    mount --bind /dev "$root/dev"
    chroot "$root" /bin/sh /tmp/setup.sh "$uuid" "$swap_uuid" >"$work/setup.log" 2>&1 \
        || { tail -n 30 "$work/setup.log" >&2; die "setup.sh failed in the chroot"; }
    for m in proc sys dev; do umount "$root/$m"; done
    rm -f "$root/tmp/setup.sh" "$root/tmp/vagrant.pub"
    # GRUB's modules next to its configuration, for anything grub.cfg loads.
    mkdir -p "$root/boot/grub/i386-pc"
    cp /usr/lib/grub/i386-pc/*.mod /usr/lib/grub/i386-pc/*.lst "$root/boot/grub/i386-pc/"

    # Disk: MBR; a bootable ext4 partition from sector 2048 (1 MiB), then 256 MiB of swap at the end.
    log "making the ${disk_gb} GB disk ..."
    t=$(date +%s)
    part_start=2048
    swap_mib=256
    disk_bytes=$(( disk_gb * 1024 * 1024 * 1024 ))
    swap_bytes=$(( swap_mib * 1024 * 1024 ))
    part_bytes=$(( disk_bytes - part_start * 512 - swap_bytes ))
    truncate -s "$part_bytes" "$work/part.raw"
    mkfs.ext4 -q -F -L root -U "$uuid" -d "$root" "$work/part.raw"
    truncate -s "$swap_bytes" "$work/swap.raw"
    mkswap -q -L swap -U "$swap_uuid" "$work/swap.raw" >/dev/null
    truncate -s "$disk_bytes" "$work/disk.raw"
    printf '%s\n' "start=$part_start, size=$(( part_bytes / 512 )), type=83, bootable" "type=82" \
        | sfdisk -q "$work/disk.raw"
    dd if="$work/part.raw" of="$work/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
    dd if="$work/swap.raw" of="$work/disk.raw" bs=1M seek=$(( 1 + part_bytes / 1024 / 1024 )) conv=notrunc status=none
    rm -f "$work/part.raw" "$work/swap.raw"
    # GRUB by hand (grub-install wants a partition device, which loop devices
    # do not always get): boot.img's code in the MBR (its partition table left
    # alone), core.img from sector 1, where boot.img looks for it by default.
    grub-mkimage -O i386-pc -o "$work/core.img" -p '(hd0,msdos1)/boot/grub' \
        biosdisk part_msdos ext2 normal linux configfile search echo test
    (( $(stat -c %s "$work/core.img") < (part_start - 1) * 512 )) || die "core.img does not fit before the partition"
    dd if=/usr/lib/grub/i386-pc/boot.img of="$work/disk.raw" bs=440 count=1 conv=notrunc status=none
    dd if="$work/core.img" of="$work/disk.raw" bs=512 seek=1 conv=notrunc status=none
    qemu-img convert -O qcow2 "$work/disk.raw" "$work/box.img"
    rm -f "$work/disk.raw"
    log "disk made in $(( $(date +%s) - t ))s ($(du -h "$work/box.img" | cut -f1) qcow2)"

    printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %d}\n' "$disk_gb" > "$work/metadata.json"
    cp "$here/Vagrantfile.box" "$work/Vagrantfile"
    tar -C "$work" -cf "$boxfile.part" metadata.json Vagrantfile box.img && mv "$boxfile.part" "$boxfile"
    find "$boxdir" -name 'debian12-*.box' ! -path "$boxfile" -delete
fi

# Replace the installed box, and the copy vagrant-libvirt uploaded into its
# storage pool (it would otherwise go on cloning the old one).
log "adding $boxfile to Vagrant as $name ..."
vagrant box remove --force --all --provider libvirt "$name" >/dev/null 2>&1 || true
if command -v virsh >/dev/null; then
    pool_prefix="$(echo "$name" | sed 's#/#-VAGRANTSLASH-#')_vagrant_box_image_"
    for pool in $(virsh -c qemu:///system pool-list --name 2>/dev/null); do
        virsh -c qemu:///system vol-list --pool "$pool" 2>/dev/null | awk 'NR > 2 {print $1}' \
            | grep "^$pool_prefix" | while read -r vol; do
                virsh -c qemu:///system vol-delete --pool "$pool" "$vol" >/dev/null 2>&1 || true
            done
    done
fi
vagrant box add --force --name "$name" --provider libvirt "$boxfile" >/dev/null
echo "$name $inputs" > "$boxdir/installed"
log "$name (libvirt, inputs $inputs) ready in $(( $(date +%s) - start ))s"
