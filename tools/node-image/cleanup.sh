#!/usr/bin/env bash
# Remove every lab node container, its volumes and the lab's Docker networks.
# Caches (artifacts, node image) stay. Arguments: node CIDRs whose Vagrant
# networks go too.
set -euo pipefail
docker info >/dev/null 2>&1 || exit 0
ids=$(docker ps -aq --filter label=org.k8s-arch-lab.node)
[ -z "$ids" ] || docker rm -f -v $ids >/dev/null
vols=$(docker volume ls -q | grep '^k8s-arch-lab-' || true)
[ -z "$vols" ] || docker volume rm -f $vols >/dev/null
nets=$(docker network ls -q --filter label=org.k8s-arch-lab.network)
# Vagrant's docker provider names the machines' network after its subnet.
for cidr in "$@"; do
    nets="$nets $(docker network ls -q --filter "name=^vagrant_network_${cidr}\$")"
done
nets=$(echo $nets)
[ -z "$nets" ] || docker network rm $nets >/dev/null
echo "lab node containers, volumes and networks removed"
