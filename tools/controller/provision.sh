#!/usr/bin/env bash
# The lab's controller machine (settings.yml controller: lab): Vagrant's shell provisioner runs this inside it, as
# its login user, once the nodes are defined. It makes the controller what a host is after `make deps` and
# `make up`, so that the learner's own machine needs nothing but Vagrant and a hypervisor:
#   1. a copy of the checkout in ~/k8s-arch-lab (from /vagrant-src; the host's virtualenv and state stay out);
#   2. the packages and the virtualenv (`tools/deps.sh controller`: no Go, Docker or Vagrant in here);
#   3. the artifact cache: the host's (/vagrant-cache, when the host has one: offline), else the official
#      releases downloaded and checked against versions.yml (no Go on a laptop with internet);
#   4. the machines' SSH key into the state folder (0600), the profile and provider recorded, the settings checked;
#   5. the playbooks against the nodes (playbooks/site.yml), once every node answers (bounded wait).
# Environment (from the Vagrantfile): K8S_LAB_PROFILE, K8S_LAB_PROVIDER, K8S_LAB_ACCEL, K8S_LAB_NODES,
# K8S_LAB_OFFLINE (1: the host's cache came along), K8S_LAB_CACHE_EXCLUDES (what of it stays out).
set -euo pipefail
log() { echo "controller: $*"; }
die() { echo "controller: error: $*" >&2; exit 1; }
sudo=""; (( EUID == 0 )) || sudo=sudo
src=/vagrant-src
lab=$HOME/k8s-arch-lab
start=$SECONDS
phase() { log "$1 ($(( SECONDS - start )) s so far)"; }

[ -f "$src/Vagrantfile" ] || die "$src holds no checkout: the synced folder of the controller is missing"
command -v rsync >/dev/null || { $sudo apt-get update -qq && $sudo apt-get install -y -qq rsync >/dev/null; }
mkdir -p "$lab"
# What git ignores stays out of the copy and is never deleted from it: this machine's virtualenv, its state folder
# (the cluster's keys) and Vagrant's record.
rsync -a --delete --exclude-from="$src/.gitignore" "$src/" "$lab/"
phase "checkout copied into $lab"

# Python packages from PyPI, or from the host's wheels where they came along with its cache (offline).
wheels=""
[ "${K8S_LAB_OFFLINE:-}" = 1 ] && [ -f /vagrant-cache/wheels/.requirements.sha256 ] && \
    [ "$(cat /vagrant-cache/wheels/.requirements.sha256)" = "$(sha256sum "$lab/requirements.txt" | cut -d' ' -f1)" ] && \
    wheels=/vagrant-cache/wheels
K8S_LAB_IN_CONTROLLER=1 K8S_LAB_WHEELS=$wheels "$lab/tools/deps.sh" controller
phase "packages and virtualenv ready"

venv=$lab/.venv
cd "$lab"
cache=$("$venv/bin/python" -m tools.locations cache)
mkdir -p "$cache"
source=auto
if [ "${K8S_LAB_OFFLINE:-}" = 1 ] && [ -f /vagrant-cache/manifest.json ]; then
    # What of the host's cache stays out (K8S_LAB_CACHE_EXCLUDES, from the Vagrantfile), and the wheels, which
    # deps.sh took from /vagrant-cache itself.
    excludes=(--exclude=/wheels/)
    for entry in ${K8S_LAB_CACHE_EXCLUDES:-}; do excludes+=("--exclude=/$entry"); done
    rsync -a "${excludes[@]}" /vagrant-cache/ "$cache/"
    source=cache
    phase "the host's artifact cache copied into $cache"
fi
"$venv/bin/python" -m tools.artifacts --source "$source"
ln -sf "$("$venv/bin/python" -m tools.artifacts path --only kubectl)" "$venv/bin/kubectl"
phase "artifacts checked ($source)"

state=$("$venv/bin/python" -m tools.locations state)
install -d -m 0700 "$state" "$state/ssh"
if [ -f /tmp/k8s-arch-lab-ssh-key ]; then
    install -m 0600 /tmp/k8s-arch-lab-ssh-key "$state/ssh/id_ed25519"
    rm -f /tmp/k8s-arch-lab-ssh-key
fi
[ -f "$state/ssh/id_ed25519" ] || die "no SSH key for the nodes in $state/ssh (the Vagrantfile's file provisioner)"
"$venv/bin/python" -m tools.settings check
"$venv/bin/python" -m tools.settings record

# `lab`, `kubectl`, `ansible-playbook` and `make provision|check|smoke` in every login shell, as on a host after
# `make deps`; K8S_LAB_ACCEL: how the host runs the VMs, which this machine cannot probe from inside.
kubeconfig=$("$venv/bin/python" -m tools.settings kubeconfig)
$sudo tee /etc/profile.d/k8s-arch-lab.sh >/dev/null <<PROFILE
# k8s-arch-lab controller machine (tools/controller/provision.sh)
export PATH="$venv/bin:\$PATH"
export K8S_LAB_IN_CONTROLLER=1
export K8S_LAB_ACCEL="${K8S_LAB_ACCEL:-}"
export KUBECONFIG="$kubeconfig"
export ANSIBLE_CONFIG="$lab/ansible.cfg"
PROFILE
# `vagrant ssh controller -c 'lab …'` runs a non-login shell: lab itself, with the same environment.
$sudo tee /usr/local/bin/lab >/dev/null <<WRAPPER
#!/bin/sh
. /etc/profile.d/k8s-arch-lab.sh
cd "$lab" && exec "$venv/bin/lab" "\$@"
WRAPPER
$sudo chmod 0755 /usr/local/bin/lab
grep -qxF "cd $lab" "$HOME/.bashrc" 2>/dev/null || echo "cd $lab" >> "$HOME/.bashrc"

# As the Makefile does: the virtualenv first on PATH (the inventory script's python3 is the virtualenv's).
export PATH="$venv/bin:$PATH" K8S_LAB_IN_CONTROLLER=1 ANSIBLE_CONFIG="$lab/ansible.cfg"
# The nodes may still be booting (libvirt brings machines up side by side): wait for each, bounded.
scale=$("$venv/bin/python" -m tools.settings resolve | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["timeout_scale"])')
"$venv/bin/ansible" all -i inventory -m ansible.builtin.wait_for_connection -a "timeout=$(( 300 * scale ))" >/dev/null \
    || die "not every node answered SSH within $(( 300 * scale )) s: vagrant status shows the machines"
phase "nodes ${K8S_LAB_NODES:-} answer"
"$venv/bin/ansible-playbook" -i inventory playbooks/site.yml
phase "cluster provisioned; run: vagrant ssh controller -c 'lab check --all'"
