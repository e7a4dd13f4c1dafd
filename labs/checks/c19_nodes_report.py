from datetime import UTC, datetime

import yaml

from labs.core import Evidence, Lab, check, parse_duration, wait_for

PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure")


@check(
    "C19", "Nodes report their state and resources all the time",
    claim="Nodes report their state and resources to the control plane all the time.",
    texts=["001", "004"],
    see=["kubectl -n kube-node-lease get lease -w -o custom-columns=NAME:.metadata.name,RENEWED:.spec.renewTime",
         "kubectl get node w1 -o jsonpath='{.status.capacity}'; ssh w1 'nproc; grep MemTotal /proc/meminfo'",
         "kubectl describe node w1 | grep -A8 Conditions"],
    does="Reads each node's Lease in kube-node-lease and waits (at most leaseDurationSeconds) until every one is "
         "renewed; compares each Node's capacity with the machine (nproc, MemTotal); checks its conditions: Ready, "
         "no pressure, last heartbeat younger than the kubelet's nodeStatusReportFrequency plus the lease duration.",
)
def run(lab: Lab, ev: Evidence) -> None:
    leases = {n: lab.coordination.read_namespaced_lease(n, "kube-node-lease").spec for n in lab.nodes}
    duration = max(spec.lease_duration_seconds for spec in leases.values())
    renewed: dict[str, float] = {}

    def all_renewed():
        for node, spec in leases.items():
            now = lab.coordination.read_namespaced_lease(node, "kube-node-lease").spec
            if node not in renewed and now.renew_time > spec.renew_time:
                renewed[node] = (now.renew_time - spec.renew_time).total_seconds()
        return len(renewed) == len(leases)

    wait_for(all_renewed, duration, f"every node's Lease to be renewed (leaseDurationSeconds {duration})")
    for node in lab.nodes:
        spec = leases[node]
        ev.expect(True, f"{node}: Lease renewed {renewed[node]:.1f}s after the previous renewal "
                  f"(leaseDurationSeconds {spec.lease_duration_seconds}, holder {spec.holder_identity})")

    for node in lab.nodes:
        obj = lab.core.read_node(node)
        cpus = int(lab.sh(node, "nproc"))
        mem_kib = int(lab.sh(node, "awk '/^MemTotal:/ {print $2}' /proc/meminfo"))
        cap = obj.status.capacity
        ev.expect(cap["cpu"] == str(cpus) and cap["memory"] == f"{mem_kib}Ki",
                  f"{node}: capacity cpu {cap['cpu']}, memory {cap['memory']} = machine's nproc {cpus}, "
                  f"MemTotal {mem_kib} kB", f"{node}: capacity {cap['cpu']} cpu / {cap['memory']}, machine {cpus} "
                  f"cpu / {mem_kib}Ki")
        config = yaml.safe_load(lab.sh(node, "cat /var/lib/kubelet/config.yaml")) or {}
        report = parse_duration(config.get("nodeStatusReportFrequency", "5m"))
        conditions = {c.type: c for c in obj.status.conditions}
        age = max((datetime.now(UTC) - c.last_heartbeat_time).total_seconds() for c in conditions.values())
        ok = conditions["Ready"].status == "True" and all(conditions[p].status == "False" for p in PRESSURE)
        ev.expect(ok and age <= report + duration,
                  f"{node}: Ready, no pressure; oldest heartbeat {age:.0f}s ago (report every {report:.0f}s)",
                  f"{node}: conditions {[(t, c.status) for t, c in conditions.items()]}, heartbeat {age:.0f}s ago")
