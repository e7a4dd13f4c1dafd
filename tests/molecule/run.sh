#!/usr/bin/env bash
# Run the roles' molecule scenarios (roles/<role>/molecule/default):
#
#   tests/molecule/run.sh [ROLE...]
#
# Without arguments: every role that has a scenario, in the order of
# playbooks/site.yml (tests/molecule/roles.yml), then any others. Each is a
# full `molecule test` (create, converge, idempotence, verify, destroy); the
# run stops at the first failure and ends with each scenario's result and
# duration. Interrupted, it destroys the scenario that was running. Needs
# Docker, the node image (make node-image) and the artifact cache (make
# artifacts; K8S_LAB_CACHE, default: python3 -m tools.locations cache).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${VENV:-$root/.venv}
export PATH="$venv/bin:$PATH"
export ANSIBLE_ROLES_PATH="$root/roles"
export K8S_LAB_CACHE=${K8S_LAB_CACHE:-$(cd "$root" && python3 -m tools.locations cache)}

die() { echo "run.sh: $*" >&2; exit 2; }
command -v molecule >/dev/null || die "molecule is not installed in $venv (run \`make deps\`)"
docker info >/dev/null 2>&1 || die "the Docker daemon is not running (run \`make deps\`)"

if (( $# )); then
    roles=("$@")
else
    mapfile -t roles < <(python3 - "$root" <<'PY'
import sys
from pathlib import Path

import yaml

root = Path(sys.argv[1])
have = sorted(p.parents[2].name for p in root.glob("roles/*/molecule/default/molecule.yml"))
order = list(yaml.safe_load((root / "tests/molecule/roles.yml").read_text())["lab_molecule_runs"])
print("\n".join([r for r in order if r in have] + [r for r in have if r not in order]))
PY
)
fi
for role in "${roles[@]}"; do
    [ -f "$root/roles/$role/molecule/default/molecule.yml" ] || die "no molecule scenario for role '$role'"
done

results=()
summary() {
    (( ${#results[@]} )) || return 0
    echo
    echo "molecule scenarios:"
    printf '  %-26s %-7s %s\n' "${results[@]}"
}
trap summary EXIT

# Interrupted (Ctrl-C, SIGTERM): stop the scenario that runs and destroy its
# containers, network and volumes, so nothing is left behind.
child=""
current=""
on_signal() {
    trap - INT TERM
    if [ -n "$child" ]; then
        kill -INT "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
    fi
    if [ -n "$current" ]; then
        echo "run.sh: interrupted: destroying the $current scenario" >&2
        (cd "$root/roles/$current" && molecule destroy) >/dev/null 2>&1 || true
    fi
    exit 130
}
trap on_signal INT TERM

total=0
for role in "${roles[@]}"; do
    echo "=== molecule test: $role"
    start=$SECONDS
    status=passed
    current=$role
    (cd "$root/roles/$role" && exec molecule test) &
    child=$!
    wait "$child" || status=FAILED
    child=""
    current=""
    took=$(( SECONDS - start ))
    total=$(( total + took ))
    results+=("$role" "$status" "$(printf '%dm%02ds' $(( took / 60 )) $(( took % 60 )))")
    [ "$status" = passed ] || exit 1
done
results+=("(total)" "" "$(printf '%dm%02ds' $(( total / 60 )) $(( total % 60 )))")
