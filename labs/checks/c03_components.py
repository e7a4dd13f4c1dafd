from labs.core import Evidence, Lab, check

CONTROL_PLANE = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"]
NODE = ["kubelet", "kube-proxy", "containerd"]
VERSION = {"etcd": "etcd --version | head -1", "kube-apiserver": "kube-apiserver --version",
           "kube-scheduler": "kube-scheduler --version", "kube-controller-manager": "kube-controller-manager --version",
           "kubelet": "kubelet --version", "kube-proxy": "kube-proxy --version", "containerd": "containerd --version"}


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
        for unit in wanted:
            host = lab.host(name)
            active = host.service(unit).is_running
            proc = host.process.filter(comm=unit[:15])
            version = lab.sh(name, VERSION[unit], check=False).splitlines()[0] if active else "-"
            ev.expect(active and bool(proc), f"{name}: {unit} active, pid {proc[0].pid if proc else '?'}, {version}",
                      f"{name}: {unit} is not running")
        cri = lab.sh(name, "crictl version")
        runtime = dict(line.split(":", 1) for line in cri.splitlines() if ":" in line)
        ev.expect("containerd" in runtime.get("RuntimeName", ""),
                  f"{name}: CRI answers — {runtime.get('RuntimeName', '').strip()} "
                  f"{runtime.get('RuntimeVersion', '').strip()}")
