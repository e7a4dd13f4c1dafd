import yaml

from labs.i18n import _
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import parse_duration, scaled, wait_for

PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure")
RENEW_FRACTION = 0.25  # the kubelet renews its Lease every quarter of leaseDurationSeconds (fixed in the kubelet)


def heartbeat_limit(report: float, update: float, lease: float) -> float:
    """The oldest a healthy node's condition heartbeat can be: the kubelet posts an unchanged status once
    nodeStatusReportFrequency has passed, checked every nodeStatusUpdateFrequency, and after a change or its own
    restart it adds a one-time random delay in [-report/2, +report/2] (kubelet_node_status.go, calculateDelay);
    the lease duration as slack for a busy API server."""
    return 1.5 * report + update + lease


@check(
    "C19", _("Nodes report their state and resources all the time"),
    claim=_("Nodes report their state and resources to the control plane all the time."),
    texts=["001", "004"],
    see=["kubectl -n kube-node-lease get lease -w -o custom-columns=NAME:.metadata.name,RENEWED:.spec.renewTime   # "
         "in another terminal",
         "kubectl get node w1 -o jsonpath='{.status.capacity}'; echo; lab ssh w1 -- 'nproc; grep MemTotal "
         "/proc/meminfo'",
         "kubectl describe node w1 | grep -A8 Conditions"],
    does=_("Watches each node's Lease in kube-node-lease until it has been renewed twice: the kubelet renews it every "
           "quarter of leaseDurationSeconds (its renew interval), so the gap between two renewals must stay within "
           "that interval (plus a quarter, more on slow machines: timeout_scale); compares each Node's capacity with "
           "the machine (nproc, MemTotal); checks its conditions: Ready, no pressure, last heartbeat younger than the "
           "longest report interval the kubelet may take: after a change or a restart it adds a random delay of up "
           "to half its nodeStatusReportFrequency, so 1.5 × nodeStatusReportFrequency plus one "
           "nodeStatusUpdateFrequency (its status sync period) and the lease duration."),
    hints=[
        _("*timed out … waiting for every node's Lease to be renewed twice (renew interval 10s = leaseDurationSeconds "
          "40 / 4)*: a kubelet is stopped or cannot reach the API server (a disruptive check, C14 or C27, may be "
          "running)."),
        _("*w1: Lease renewed 14.2s after the previous renewal, more than its renew interval 10s allows (12.5s)*: the "
          "kubelet renews late — the machine or the API server is overloaded, or the kubelet was restarting."),
        _("*capacity … machine …*: the machine was resized and the kubelet not restarted, or the kubelet sees another "
          "cgroup than the machine (`cat /sys/fs/cgroup/cpuset.cpus.effective`)."),
        _("*conditions …, heartbeat N s ago*: the node is NotReady or under pressure (`kubectl describe node`)."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    leases = {n: lab.coordination.read_namespaced_lease(n, "kube-node-lease").spec for n in lab.nodes}
    duration = max(spec.lease_duration_seconds for spec in leases.values())
    interval = duration * RENEW_FRACTION
    seen: dict[str, list] = {n: [spec.renew_time] for n, spec in leases.items()}

    def renewed_twice():
        for node in lab.nodes:
            now = lab.coordination.read_namespaced_lease(node, "kube-node-lease").spec.renew_time
            if now > seen[node][-1]:
                seen[node].append(now)
        return all(len(times) >= 3 for times in seen.values())

    wait_for(renewed_twice, 2 * interval + 5,
             _("every node's Lease to be renewed twice (renew interval {interval:g}s = leaseDurationSeconds "
               "{duration} / 4)").format(interval=interval, duration=duration), 0.5)
    bound = interval * 1.25 + scaled(1) - 1  # a quarter of slack for a busy machine, more on slow ones
    for node in lab.nodes:
        gap = (seen[node][2] - seen[node][1]).total_seconds()
        ev.expect(gap <= bound,
                  _("{node}: Lease renewed {gap:.1f}s after the previous renewal (renew interval {interval:g}s, "
                    "holder {holder})").format(node=node, gap=gap, interval=interval,
                                               holder=leases[node].holder_identity),
                  _("{node}: Lease renewed {gap:.1f}s after the previous renewal, more than its renew interval "
                    "{interval:g}s allows ({bound:g}s)").format(node=node, gap=gap, interval=interval, bound=bound))

    for node in lab.nodes:
        obj = lab.core.read_node(node)
        cpus = int(lab.sh(node, "nproc"))
        mem_kib = int(lab.sh(node, "awk '/^MemTotal:/ {print $2}' /proc/meminfo"))
        cap = obj.status.capacity
        ev.expect(cap["cpu"] == str(cpus) and cap["memory"] == f"{mem_kib}Ki",
                  _("{node}: capacity cpu {cpu}, memory {memory} = machine's nproc {cpus}, MemTotal {kib} kB").format(
                      node=node, cpu=cap["cpu"], memory=cap["memory"], cpus=cpus, kib=mem_kib),
                  _("{node}: capacity {cpu} cpu / {memory}, machine {cpus} cpu / {kib}Ki").format(
                      node=node, cpu=cap["cpu"], memory=cap["memory"], cpus=cpus, kib=mem_kib))
        config = yaml.safe_load(lab.sh(node, f"cat {lab.unit_arg(node, 'kubelet', 'config')}")) or {}
        report = parse_duration(config.get("nodeStatusReportFrequency", "5m"))
        limit = heartbeat_limit(report, parse_duration(config.get("nodeStatusUpdateFrequency", "10s")), duration)
        conditions = {c.type: c for c in obj.status.conditions}
        age = max((lab.server_now() - c.last_heartbeat_time).total_seconds() for c in conditions.values())
        ok = conditions["Ready"].status == "True" and all(conditions[p].status == "False" for p in PRESSURE)
        ev.expect(ok and age <= limit,
                  _("{node}: Ready, no pressure; oldest heartbeat {age:.0f}s ago (report every {report:.0f}s, at most "
                    "{limit:.0f}s)").format(node=node, age=age, report=report, limit=limit),
                  _("{node}: conditions {conditions}, heartbeat {age:.0f}s ago (at most {limit:.0f}s)").format(
                      node=node, conditions=[(t, c.status) for t, c in conditions.items()], age=age, limit=limit))
