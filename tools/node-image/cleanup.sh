#!/usr/bin/env bash
# Remove one lab's node containers, their volumes and its Docker networks;
# another lab on this host (another cluster_name and node network) stays.
# Caches (artifacts, node image) stay.
#
#   cleanup.sh CLUSTER_NAME [NODE_CIDR...]
#
# NODE_CIDR: the lab's node networks, which Vagrant's docker provider names
# after their subnet.
set -euo pipefail
cluster=${1:?usage: cleanup.sh CLUSTER_NAME [NODE_CIDR...]}
shift
docker info >/dev/null 2>&1 || exit 0
# The lab's containers: labelled with its name; a container made before that
# label existed is one of the lab's nodes named "<cluster>-<node>".
ids=$(docker ps -aq --filter label=org.k8s-arch-lab.cluster="$cluster")
ids="$ids $(docker ps -a --filter label=org.k8s-arch-lab.node --format '{{.ID}} {{.Names}} {{.Label "org.k8s-arch-lab.cluster"}}' |
    awk -v c="$cluster" 'index($2, c "-") == 1 && $3 == "" {print $1}')"
ids=$(echo $ids)
[ -z "$ids" ] || docker rm -f -v $ids >/dev/null
vols=$(docker volume ls -q | grep -E "^${cluster}-[^-]+-(containerd|containers|docker)\$" || true)
[ -z "$vols" ] || docker volume rm -f $vols >/dev/null
nets=""
for cidr in "$@"; do
    nets="$nets $(docker network ls -q --filter "name=^vagrant_network_${cidr}\$")"
done
nets=$(echo $nets)
[ -z "$nets" ] || docker network rm $nets >/dev/null
echo "lab $cluster: node containers, volumes and networks removed"
