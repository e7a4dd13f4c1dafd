#!/bin/sh
# Runs inside the debootstrapped rootfs (chroot) to turn it into a node image.
set -eu

# Units that make no sense in a container (no udev, no consoles, no kernel
# modules to load, no read-only root to remount).
for unit in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
    systemd-udev-trigger.service systemd-modules-load.service systemd-remount-fs.service \
    sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
    systemd-firstboot.service getty@tty1.service console-getty.service getty.target \
    apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
    ln -sf /dev/null "/etc/systemd/system/$unit"
done

# SSH: keys only; host keys are made at first boot so no two nodes share them.
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/ssh/sshd_config.d /etc/systemd/system/ssh.service.d /root/.ssh
chmod 0700 /root/.ssh
cat > /etc/ssh/sshd_config.d/lab.conf <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
AuthorizedKeysFile .ssh/authorized_keys /etc/ssh/authorized_keys.d/%u
CONF
cat > /etc/systemd/system/ssh.service.d/hostkeys.conf <<'CONF'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
CONF
systemctl enable ssh.service >/dev/null 2>&1

# The journal reads /dev/kmsg only where it is passed in; keep it small.
mkdir -p /etc/systemd/journald.conf.d
printf '[Journal]\nSystemMaxUse=64M\n' > /etc/systemd/journald.conf.d/lab.conf

# Each container gets its own machine-id at start (see the entrypoint).
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id

# Smaller image.
apt-get clean
rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /usr/share/locale/* /var/cache/debconf/*-old
