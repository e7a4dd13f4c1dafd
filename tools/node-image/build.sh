#!/usr/bin/env bash
# Build the lab's node image: a Debian 12 rootfs made with debootstrap (no
# registry involved) with systemd as PID 1, sshd and python3.
#
# The image is tagged with a hash of its inputs (this folder) and rebuilt only
# when they change; the debootstrapped rootfs is cached as a tarball in the
# artifact cache, so a Docker reset does not repeat the download.
#
# Environment:
#   K8S_LAB_NODE_IMAGE     image repository (default k8s-arch-lab/node)
#   K8S_LAB_CACHE          the artifact cache (tools/locations.py says where by default)
#   K8S_LAB_DEBIAN_MIRROR  Debian mirror (default: the one this host's apt uses)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
image=${K8S_LAB_NODE_IMAGE:-k8s-arch-lab/node}
cache=$(cd "$here/../.." && python3 -m tools.locations cache)
suite=bookworm

die() { echo "node-image: error: $*" >&2; exit 1; }

packages_file="$here/../node-packages.txt"  # shared with the VM box (tools/box)
inputs=$(cd "$here" && cat build.sh setup.sh entrypoint.sh "$packages_file" | sha256sum | cut -c1-12)
tag="$suite-$inputs"

docker info >/dev/null 2>&1 || die "the Docker daemon is not running (run \`make deps\`, which starts it)"

if docker image inspect "$image:$tag" >/dev/null 2>&1; then
    docker tag "$image:$tag" "$image:$suite"
    echo "node image $image:$tag is up to date"
    exit 0
fi

mirror=${K8S_LAB_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
    # The mirror this host's apt already uses for Debian (deb822 or one-line format).
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -E '^[[:space:]]*(deb|URIs:)[[:space:]]' | grep -Eo 'https?://[^ ]+/debian/?' | grep -v security \
        | head -n1 || true)
fi
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources*; set K8S_LAB_DEBIAN_MIRROR"
command -v debootstrap >/dev/null || die "debootstrap is not installed (run \`make deps\`)"

packages=$(grep -Ev '^\s*(#|$)' "$packages_file" | paste -sd, -)
rootfs_tar="$cache/node-image/rootfs-$suite-$(printf '%s' "$packages" | sha256sum | cut -c1-12).tar"
mkdir -p "$cache/node-image"

work=$(mktemp -d "${TMPDIR:-/tmp}/k8s-lab-node.XXXXXX")
cleanup() {
    for m in proc sys dev; do umount -l "$work/rootfs/$m" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
root="$work/rootfs"

start=$(date +%s)
if [ ! -s "$rootfs_tar" ]; then
    echo "node-image: debootstrap $suite from $mirror ..."
    debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    tar -C "$root" --numeric-owner -cf "$rootfs_tar.part" . && mv "$rootfs_tar.part" "$rootfs_tar"
    # Only the rootfs of the current package list is worth keeping.
    find "$cache/node-image" -name 'rootfs-*.tar' ! -path "$rootfs_tar" -delete
else
    echo "node-image: using cached rootfs $rootfs_tar"
    mkdir -p "$root" && tar -C "$root" --numeric-owner -xf "$rootfs_tar"
fi

install -m 0755 "$here/entrypoint.sh" "$root/usr/local/sbin/node-entrypoint"
cp "$here/setup.sh" "$root/tmp/setup.sh"
chroot "$root" /bin/sh /tmp/setup.sh
rm -f "$root/tmp/setup.sh"

echo "node-image: importing $image:$tag ..."
tar -C "$root" --numeric-owner -c . | docker import - "$image:rootfs-$tag" >/dev/null
# `docker import --change` cannot set STOPSIGNAL on Docker 20.10: one build
# step on top of the imported rootfs (local image only, no registry) adds it.
printf '%s\n' "FROM $image:rootfs-$tag" \
    'ENV container=docker' \
    'STOPSIGNAL SIGRTMIN+3' \
    'ENTRYPOINT ["/usr/local/sbin/node-entrypoint"]' \
    "LABEL org.k8s-arch-lab.inputs=$inputs" \
    | DOCKER_BUILDKIT=0 docker build -q -t "$image:$tag" - >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; die "docker build failed"; }
docker rmi "$image:rootfs-$tag" >/dev/null
docker tag "$image:$tag" "$image:$suite"
# Older builds of the image are of no further use.
docker images --format '{{.Repository}}:{{.Tag}}' "$image" | grep -v -e ":$tag\$" -e ":$suite\$" \
    | xargs -r docker rmi >/dev/null 2>&1 || true
echo "node image $image:$tag built in $(( $(date +%s) - start ))s"
