#!/bin/sh
# Runs inside the debootstrapped rootfs (chroot) to turn it into a bootable
# VM for Vagrant's libvirt provider. $1 = the root filesystem's UUID, $2 =
# the swap partition's.
set -eu
uuid=$1
swap_uuid=$2
export DEBIAN_FRONTEND=noninteractive

# Root by UUID; a small swap partition, as real machines and upstream boxes
# have (the lab's common role turns swap off and keeps it off: kubelet wants
# none).
cat > /etc/fstab <<CONF
UUID=$uuid / ext4 errors=remount-ro 0 1
UUID=$swap_uuid none swap sw 0 0
CONF
echo 'LANG=C.UTF-8' > /etc/default/locale

echo debian12 > /etc/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\tdebian12\n' > /etc/hosts

# Network: DHCP on the first NIC (kernel names: net.ifnames=0). Vagrant
# configures the private network's NIC itself (systemd-networkd files).
mkdir -p /etc/systemd/network
cat > /etc/systemd/network/10-eth0.network <<'CONF'
[Match]
Name=eth0

[Network]
DHCP=ipv4
CONF
systemctl enable systemd-networkd.service systemd-resolved.service >/dev/null 2>&1

# Vagrant's user: the insecure key for the first login, passwordless sudo.
useradd -m -s /bin/bash vagrant
install -d -m 0700 -o vagrant -g vagrant /home/vagrant/.ssh
install -m 0600 -o vagrant -g vagrant /tmp/vagrant.pub /home/vagrant/.ssh/authorized_keys
echo 'vagrant ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/vagrant
chmod 0440 /etc/sudoers.d/vagrant

# SSH: keys only; host keys are made at first boot so no two machines share them.
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/ssh/sshd_config.d /etc/systemd/system/ssh.service.d
cat > /etc/ssh/sshd_config.d/lab.conf <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
CONF
cat > /etc/systemd/system/ssh.service.d/hostkeys.conf <<'CONF'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
CONF
systemctl enable ssh.service >/dev/null 2>&1

# Nothing that competes with the lab in the background.
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer; do
    ln -sf /dev/null "/etc/systemd/system/$unit"
done
mkdir -p /etc/systemd/journald.conf.d
printf '[Journal]\nSystemMaxUse=128M\n' > /etc/systemd/journald.conf.d/lab.conf

# A small initramfs with the drivers a libvirt (virtio) or SATA disk needs;
# the rest load from the root filesystem.
sed -i 's/^MODULES=.*/MODULES=list/' /etc/initramfs-tools/initramfs.conf
printf '%s\n' virtio_pci virtio_blk virtio_scsi virtio_net sd_mod ahci ata_piix ext4 \
    > /etc/initramfs-tools/modules
update-initramfs -u -k all >/dev/null

# GRUB (written to the disk by build.sh) boots the kernel straight away.
mkdir -p /boot/grub
cat > /boot/grub/grub.cfg <<CONF
set timeout=0
search --no-floppy --fs-uuid --set=root $uuid
linux /vmlinuz root=UUID=$uuid ro net.ifnames=0 biosdevname=0 console=tty0 console=ttyS0,115200n8
initrd /initrd.img
boot
CONF
[ -e /vmlinuz ] && [ -e /initrd.img ]

# Each VM gets its own machine-id (hence its own DHCP identity) at first boot.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id

apt-get clean
rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /var/cache/debconf/*-old
