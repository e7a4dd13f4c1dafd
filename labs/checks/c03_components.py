from labs.core import Evidence, Lab, check

CONTROL_PLANE = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"]
NODE = ["kubelet", "kube-proxy", "containerd"]
VERSION = {"etcd": "etcd --version | head -1", "containerd": "containerd --version"}


@check(
    "C03", "The minimal control plane, and kubelet, kube-proxy and a CRI runtime on every node",
    claim="The minimal control plane is etcd, kube-apiserver, kube-scheduler and kube-controller-manager; kubelet "
          "and kube-proxy run on every node, beside a CRI container runtime.",
    texts=["000", "001", "004"],
    see=["ssh cp1 systemctl status etcd kube-apiserver kube-scheduler kube-controller-manager",
         "ssh w1 systemctl status kubelet kube-proxy containerd", "ssh w1 crictl version"],
    does="On each node: which of the components' systemd units are active, their processes and versions, and "
         "whether containerd answers over CRI (crictl version).",
)
def run(lab: Lab, ev: Evidence) -> None:
    for name in lab.nodes:
        wanted = (CONTROL_PLANE if name in lab.control_plane else []) + NODE
        # One round trip per node: state, main PID and version of each unit.
        script = "; ".join(
            f"echo \"{u}|$(systemctl is-active {u})|$(systemctl show -p MainPID --value {u})|"
            f"$({VERSION.get(u, u + ' --version')} 2>&1 | head -1)\"" for u in wanted)
        for line in lab.sh(name, script).splitlines():
            unit, state, pid, version = line.split("|", 3)
            ev.expect(state == "active" and pid not in ("", "0"), f"{name}: {unit} active, pid {pid}, {version}",
                      f"{name}: {unit} is {state}")
        cri = lab.sh(name, "crictl version")
        runtime = dict(line.split(":", 1) for line in cri.splitlines() if ":" in line)
        ev.expect("containerd" in runtime.get("RuntimeName", ""),
                  f"{name}: CRI answers — {runtime.get('RuntimeName', '').strip()} "
                  f"{runtime.get('RuntimeVersion', '').strip()}")
