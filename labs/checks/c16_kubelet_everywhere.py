from labs.core import Evidence, Lab, check


@check(
    "C16", "kubelet runs on every node, control plane included, and registers it",
    claim="kubelet runs on every node, control plane included, and registers it.",
    texts=["000"],
    see=["kubectl get nodes", "ssh cp1 systemctl status kubelet", "ssh cp1 journalctl -u kubelet | grep -i register"],
    does="For each inventory machine: an active kubelet unit, and a Node object of the same name whose kubelet "
         "version is the kubelet's.",
)
def run(lab: Lab, ev: Evidence) -> None:
    registered = {n.metadata.name: n for n in lab.core.list_node().items}
    for name in lab.nodes:
        ev.expect(lab.host(name).service("kubelet").is_running, f"{name}: kubelet active",
                  f"{name}: kubelet is not running")
        node = registered.get(name)
        ev.expect(node is not None, f"{name}: Node object registered", f"{name}: no Node object")
        running = lab.sh(name, "kubelet --version").split()[-1]
        reported = node.status.node_info.kubelet_version
        ev.expect(reported == running, f"{name}: the Node reports kubelet {reported}, the node runs {running}",
                  f"{name}: the Node reports kubelet {reported} but the node runs {running}")
