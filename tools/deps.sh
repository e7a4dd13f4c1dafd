#!/usr/bin/env bash
# `make deps`: what the host needs, installed idempotently.
#  - Debian packages: Docker's engine, Vagrant, debootstrap, the C toolchain
#    and libseccomp for the runc build, a static busybox for the test image;
#  - the Python virtualenv (.venv) from requirements.txt;
#  - a running Docker daemon (started here when none runs: CI starts without).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${K8S_LAB_VENV:-$root/.venv}
python=${PYTHON:-python3}

packages=(docker.io vagrant debootstrap busybox-static gcc libc6-dev libseccomp-dev pkg-config make
          file git openssh-client rsync ca-certificates)

log() { echo "deps: $*"; }

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
    if ! command -v apt-get >/dev/null; then
        echo "deps: error: missing ${missing[*]} and this host has no apt-get; install them by hand" >&2
        exit 1
    fi
    sudo=""; (( EUID == 0 )) || sudo=sudo
    log "installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    log "Debian packages present"
fi

if ! command -v go >/dev/null; then
    log "note: Go is not on PATH; \`make artifacts\` can then only download release files (images need Go)"
fi

# Python virtualenv, refreshed only when requirements.txt changes.
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$root/requirements.txt" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "creating $venv from requirements.txt"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/requirements.txt"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e "$root"
    echo "$want" > "$stamp"
else
    log "virtualenv $venv up to date"
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
