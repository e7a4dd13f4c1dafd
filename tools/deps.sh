#!/usr/bin/env bash
# `make deps`: what the host needs, installed idempotently, on Debian 12 or
# Ubuntu 24.04 (as root or with sudo):
#  - Debian packages: Python with venv, Docker's engine, Vagrant, debootstrap,
#    the C toolchain and libseccomp for the runc build, a static busybox for
#    the test image;
#  - the Python virtualenv (.venv) from requirements.txt;
#  - a Go toolchain for the builds when no suitable `go` is installed: the
#    version pinned in versions.yml (host_tools.go), from the Go module proxy,
#    checked against its pinned sha256, kept in the artifact cache and linked
#    as .venv/bin/go;
#  - for the libvirt provider (PROVIDER=libvirt, or settings.yml): qemu,
#    libvirt, vagrant-libvirt and what `make box` needs, and libvirtd running;
#  - a running Docker daemon (started here when none runs: CI starts without).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${K8S_LAB_VENV:-$root/.venv}
python=${PYTHON:-python3}

packages=(python3 python3-venv docker.io vagrant debootstrap busybox-static gcc libc6-dev libseccomp-dev pkg-config
          make bzip2 file git openssh-client rsync ca-certificates curl unzip graphviz)
# The libvirt provider: VMs under qemu, Vagrant's plugin for them, and the box build (tools/box).
libvirt_packages=(qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients vagrant-libvirt dnsmasq-base
                  iptables grub-pc-bin fdisk e2fsprogs)

log() { echo "deps: $*"; }
die() { echo "deps: error: $*" >&2; exit 1; }
sudo=""; (( EUID == 0 )) || sudo=sudo

apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    (( ${#missing[@]} )) || return 0
    command -v apt-get >/dev/null || die "missing ${missing[*]} and this host has no apt-get; install them by hand"
    log "installing ${missing[*]}"
    $sudo apt-get update -qq
    local candidates=() unavailable=()
    for p in "${missing[@]}"; do
        if [ -n "$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ && $2 != "(none)" {print $2}')" ]; then
            candidates+=("$p")
        else
            unavailable+=("$p")
        fi
    done
    if (( ${#unavailable[@]} )); then
        local hint=""
        [[ " ${unavailable[*]} " == *" vagrant "* ]] && hint=" (Ubuntu 24.04 no longer packages Vagrant: install it from HashiCorp's packages, then run \`make deps\` again)"
        die "this host's package sources have no ${unavailable[*]}$hint"
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${candidates[@]}" >/dev/null
}

# `tools/deps.sh test-tools` (make test-tools, part of make test): what only the tests need, learners do not:
# headless Chromium and a font with Cyrillic, for the test that opens `lab check --html`'s page; Vagrant's libvirt
# plugin (the plugin alone, without libvirt's daemon or qemu), so that the Vagrantfile's libvirt configuration is
# validated on every host.
if [ "${1:-}" = test-tools ]; then
    apt_install chromium fonts-dejavu-core vagrant-libvirt && log "headless Chromium and Vagrant's libvirt plugin present"
    exit 0
fi

# `tools/deps.sh controller`: inside the lab's controller machine (controller: lab; tools/controller/provision.sh):
# what Ansible and `lab` need there and the virtualenv; no Go, Docker, Vagrant or hypervisor.
controller_packages=(python3 python3-venv make git openssh-client rsync ca-certificates curl graphviz)
if [ "${1:-}" = controller ]; then
    apt_install "${controller_packages[@]}" && log "controller packages present"
else
    apt_install "${packages[@]}" && log "host packages present"
fi

# Python virtualenv, refreshed only when requirements.txt changes.
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$root/requirements.txt" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "creating $venv from requirements.txt"
    "$python" -m venv "$venv"
    # The controller machine: no byte-compiling at install (the ansible package's collections are tens of thousands
    # of modules, few ever imported; under emulation compiling them all takes minutes). Python compiles on import.
    # It also leaves out what only the tests need (requirements.txt's "# tests only" lines).
    requirements=$root/requirements.txt pip_extra=()
    if [ "${1:-}" = controller ]; then
        requirements=$(mktemp) && grep -v "# tests only" "$root/requirements.txt" > "$requirements"
        pip_extra=(--no-compile)
    fi
    if [ -n "${K8S_LAB_WHEELS:-}" ]; then
        # The controller machine without PyPI: the host's wheels (below), the lab's build backend among them.
        "$venv/bin/pip" install -q --disable-pip-version-check "${pip_extra[@]}" --no-index \
            --find-links "$K8S_LAB_WHEELS" -r "$requirements"
        "$venv/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$K8S_LAB_WHEELS" \
            --no-deps -e "$root"
    else
        "$venv/bin/pip" install -q --disable-pip-version-check "${pip_extra[@]}" -r "$requirements"
        "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e "$root"
    fi
    [ "$requirements" = "$root/requirements.txt" ] || rm -f "$requirements"
    echo "$want" > "$stamp"
else
    log "virtualenv $venv up to date"
fi
[ "${1:-}" = controller ] && exit 0
vpy="$venv/bin/python"
# The same wheels in the artifact cache, for a controller machine (controller: lab) that cannot reach PyPI: the host's
# cache goes into it (tools/controller/provision.sh), as the artifacts do.
wheels="$(cd "$root" && "$vpy" -m tools.locations cache)/wheels"
if [ "$(cat "$wheels/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
    log "downloading the virtualenv's wheels into $wheels (for a controller machine offline)"
    rm -rf "$wheels" && mkdir -p "$wheels"
    "$venv/bin/pip" download -q --disable-pip-version-check --only-binary=:all: -r "$root/requirements.txt" -d "$wheels"
    # pyproject.toml's build backend, for the lab's own editable install there.
    "$venv/bin/pip" download -q --disable-pip-version-check --only-binary=:all: -d "$wheels" \
        "$("$vpy" -c 'import tomllib; print(tomllib.load(open("'"$root"'/pyproject.toml", "rb"))["build-system"]["requires"][0])')"
    echo "$want" > "$wheels/.requirements.sha256"
fi

# Go, for the builds (the lab's images always; every component where upstream cannot be reached).
go_pin() { "$vpy" -c 'import sys, yaml; g = yaml.safe_load(open(sys.argv[1]))["host_tools"]["go"]; print(eval(sys.argv[2]))' \
    "$root/versions.yml" "$1"; }
go_ok() {  # $1 = a go binary: is it at least the minimum version?
    local have
    have=$("$1" env GOVERSION 2>/dev/null) || return 1
    "$vpy" -c 'import sys
def v(s): return tuple(int(x) for x in s.removeprefix("go").split("-")[0].split(".") if x.isdigit())
sys.exit(0 if v(sys.argv[1]) >= v(sys.argv[2]) else 1)' "$have" "$(go_pin 'g["minimum"]')"
}
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
go_bin=""
for candidate in "$(readlink -f "$venv/bin/go" 2>/dev/null)" "$(PATH=${PATH//$venv\/bin:/} command -v go || true)" \
                 /usr/local/go/bin/go /usr/lib/go/bin/go; do
    [ -n "$candidate" ] && [ -x "$candidate" ] && go_ok "$candidate" && { go_bin=$candidate; break; }
done
if [ -z "$go_bin" ]; then
    version=$(go_pin 'g["version"]')
    dest="$(cd "$root" && "$python" -m tools.locations cache)/go/go$version-$arch"
    if ! { [ -x "$dest/bin/go" ] && go_ok "$dest/bin/go"; }; then
        url=$(go_pin "g['url'].format(version=g['version'], arch='$arch')")
        proxy=${GOPROXY:-}; proxy=${proxy%%[,|]*}
        if [ -n "$proxy" ] && [ "$proxy" != direct ] && [ "$proxy" != off ]; then
            url="${proxy%/}/${url#https://proxy.golang.org/}"
        fi
        sum=$(go_pin "g['sha256']['$arch']")
        log "installing Go $version ($arch) from the Go module proxy"
        tmp=$(mktemp -d)
        curl -fsSL --retry 3 --connect-timeout 20 --max-time 600 -o "$tmp/go.zip" "$url" \
            || { rm -rf "$tmp"; die "cannot download Go $version from $url"; }
        echo "$sum  $tmp/go.zip" | sha256sum -c --quiet - >/dev/null 2>&1 \
            || { rm -rf "$tmp"; die "the Go toolchain from $url does not match its pinned sha256 $sum (versions.yml)"; }
        unzip -q "$tmp/go.zip" -d "$tmp/x"
        rm -rf "$dest" && mkdir -p "$(dirname "$dest")"
        mv "$tmp"/x/golang.org/toolchain@*/ "$dest"
        rm -rf "$tmp"
    fi
    go_bin="$dest/bin/go"
fi
ln -sfn "$go_bin" "$venv/bin/go"
log "Go $("$go_bin" env GOVERSION) ($go_bin), linked as $venv/bin/go"

# The provider's own needs.
provider=$("$vpy" -m tools.settings resolve 2>/dev/null | "$vpy" -c 'import json, sys; print(json.load(sys.stdin)["provider"])' \
    || true)
if [ "$provider" = libvirt ]; then
    apt_install "${libvirt_packages[@]}" && log "libvirt packages present"
    "$root/tools/libvirtd.sh"
fi

# A Docker daemon.
if docker info >/dev/null 2>&1; then
    log "Docker daemon running"
else
    if [ -d /run/systemd/system ] && systemctl list-unit-files docker.service >/dev/null 2>&1; then
        log "starting docker.service"
        systemctl start docker.service
    else
        log "starting dockerd (no systemd on this host)"
        sudo=""; (( EUID == 0 )) || sudo=sudo
        $sudo sh -c 'nohup dockerd >/var/log/k8s-arch-lab-dockerd.log 2>&1 &'
    fi
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { echo "deps: error: dockerd did not start (see /var/log/k8s-arch-lab-dockerd.log)" >&2; exit 1; }
    log "Docker daemon running"
fi
