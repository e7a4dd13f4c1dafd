from labs.core import Evidence, Lab, check, pod_manifest, test_image, wait_for


@check(
    "C01", "A cluster is control-plane nodes and worker nodes",
    claim="A cluster is one or more machines (nodes) of two kinds: control-plane nodes run the control-plane "
          "components, worker nodes run the workloads.",
    texts=["000", "001", "004"],
    see=["kubectl get nodes -L node-role.kubernetes.io/control-plane",
         "ssh cp1 systemctl status kube-apiserver; ssh w1 systemctl status kube-apiserver  # not found on workers",
         "kubectl get pods -A -o wide"],
    does="Compares the inventory with the Node objects, checks on every machine that the control-plane units are "
         "active exactly on control-plane machines, and places an ordinary pod to see it land on a worker.",
)
def run(lab: Lab, ev: Evidence) -> None:
    nodes = {n.metadata.name: n for n in lab.core.list_node().items}
    ev.expect(set(nodes) == set(lab.nodes), f"inventory machines {sorted(lab.nodes)} are the cluster's nodes "
              f"{sorted(nodes)}")
    for name in lab.nodes:
        active = lab.sh(name, "for u in etcd kube-apiserver kube-controller-manager kube-scheduler; do "
                              "systemctl is-active --quiet $u && echo $u; done; true").split()
        if name in lab.control_plane:
            ev.expect(len(active) == 4, f"{name} (control plane) runs {', '.join(active)}",
                      f"{name} (control plane) runs only {active}")
        else:
            ev.expect(not active, f"{name} (worker) runs no control-plane component",
                      f"{name} (worker) runs {active}")
    with lab.namespace("C01") as ns:
        lab.core.create_namespaced_pod(ns, pod_manifest("workload", test_image()))
        pod = wait_for(lambda: lab.core.read_namespaced_pod("workload", ns).spec.node_name, 60, "the pod to be placed")
        ev.expect(pod in lab.workers, f"an ordinary pod was placed on {pod}, a worker",
                  f"an ordinary pod was placed on {pod}, not a worker")
