from labs.i18n import _
from labs.kube import pod_manifest, test_image
from labs.lab import Lab
from labs.nodefacts import CONTROL_PLANE
from labs.registry import Evidence, check
from labs.timing import wait_for


@check(
    "C01", _("A cluster is control-plane nodes and worker nodes"),
    claim=_("A cluster is one or more machines (nodes) of two kinds: control-plane nodes run the control-plane "
            "components, worker nodes run the workloads."),
    texts=["000", "001", "004"],
    see=["kubectl get nodes -L node-role.kubernetes.io/control-plane",
         "lab ssh cp1 -- ps -o pid,args -C etcd,kube-apiserver,kube-controller-manager,kube-scheduler",
         "lab ssh w1 -- ps -o pid,args -C etcd,kube-apiserver,kube-controller-manager,kube-scheduler   # nothing",
         "kubectl get pods -A -o wide"],
    does=_("Compares the inventory with the Node objects. On every machine, looks at the running processes (the "
           "executable each one runs, not its name or its unit): the four control-plane components run on every "
           "control-plane machine, each as the main process of its systemd unit, and none runs on a worker, whoever "
           "started it. (With an external etcd, etcd runs on its own machines instead, and on nothing else.) Then "
           "places an ordinary pod and sees it land on a worker."),
    hints=[
        _("*inventory machines […], the cluster's nodes […]*: a machine never registered (its kubelet is stopped or "
          "cannot reach the API server; see C16), or a Node is left over from a machine that is gone (`kubectl delete "
          "node`)."),
        _("*cp1 (control plane): kube-scheduler does not run as the main process of its unit (no such process)*: the "
          "unit is stopped or crashing (`lab ssh cp1 -- systemctl status kube-scheduler`, `journalctl -u "
          "kube-scheduler`); a disruptive check running at the same time also does this. With a process named in the "
          "parentheses instead, the binary runs, but not as the unit's main process (started by hand while the unit "
          "is down)."),
        _("*cp1: control-plane processes outside their units: pid … /usr/local/bin/etcd (…)*: a second copy of a "
          "component runs beside its unit, started by hand (the parentheses name the unit or session scope holding "
          "it)."),
        _("*w1 (worker) runs control-plane components: pid … (…)*: a control-plane binary runs on a worker, as a unit "
          "or from a shell: the two kinds of nodes are no longer separate."),
        _("*an ordinary pod was placed on cp1, not a worker*: the control-plane taint is gone (`kubectl describe node "
          "cp1 | grep Taints`)."),
        _("*timed out … waiting for the pod to be placed*: kube-scheduler is stopped on every control-plane node."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    nodes = {n.metadata.name: n for n in lab.core.list_node().items}
    ev.expect(set(nodes) == set(lab.nodes),
              _("inventory machines {machines} are the cluster's nodes {nodes}").format(
                  machines=sorted(lab.nodes), nodes=sorted(nodes)),
              _("inventory machines {machines}, the cluster's nodes {nodes}").format(
                  machines=sorted(lab.nodes), nodes=sorted(nodes)))
    if lab.external_etcd:
        ev.add(_("{machines}: the machines of an external etcd, not nodes").format(
            machines=", ".join(lab.external_etcd)))
    for name in lab.machines:
        snap = lab.snapshot(name)
        running = snap.running(CONTROL_PLANE)
        if wanted := lab.control_plane_components(name):
            kind = _("control plane") if name in lab.control_plane else "etcd"
            for comp in wanted:
                procs = [p for p in running if p.binary == comp]
                main = [p for p in procs if snap.component_of(p) == comp]
                ev.expect(bool(main),
                          _("{name} ({kind}) runs {comp}: {process}").format(
                              name=name, kind=kind, comp=comp, process=main[0] if main else ""),
                          _("{name} ({kind}): {comp} does not run as the main process of its unit "
                            "({processes})").format(
                              name=name, kind=kind, comp=comp,
                              processes=", ".join(map(str, procs)) or _("no such process")))
            strays = [p for p in running if snap.component_of(p) is None or p.binary not in wanted]
            ev.expect(not strays,
                      _("{name}: no control-plane process outside its unit or its machine's role").format(name=name),
                      _("{name} ({kind}): control-plane processes outside their units or its role: {processes}").format(
                          name=name, kind=kind, processes=", ".join(map(str, strays))))
        else:
            ev.expect(not running,
                      _("{name} (worker) runs no control-plane component (no process executes {binaries})").format(
                          name=name, binaries=", ".join(CONTROL_PLANE)),
                      _("{name} (worker) runs control-plane components: {processes}").format(
                          name=name, processes=", ".join(map(str, running))))
    with lab.namespace("C01") as ns:
        lab.core.create_namespaced_pod(ns, pod_manifest("workload", test_image()))
        pod = wait_for(lambda: lab.core.read_namespaced_pod("workload", ns).spec.node_name, 60,
                       _("the pod to be placed"))
        ev.expect(pod in lab.workload_nodes,
                  (_("an ordinary pod was placed on {pod}, a worker") if pod in lab.workers else
                   _("an ordinary pod was placed on {pod}, a control-plane node that takes workloads too (no taint: "
                     "the small installation)")).format(pod=pod),
                  _("an ordinary pod was placed on {pod}, not a worker").format(pod=pod))
