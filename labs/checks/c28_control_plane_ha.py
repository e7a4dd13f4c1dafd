from labs.i18n import _
from labs.lab import THREE_WRITE_ATTEMPTS, Lab
from labs.registry import CheckSkipped, Evidence, check
from labs.timing import wait_for

UNITS = ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "haproxy", "keepalived"]


@check(
    "C28", _("The control plane can be spread over several nodes for availability"),
    claim=_("The control plane can be spread over several nodes for availability."),
    texts=["004"],
    see=["kubectl config view --minify | grep server   # the shared API address",
         "for n in @nodes.control_plane@; do echo \"$n: $(lab ssh $n -- ip -4 -o addr show to @vip@)\"; done   # who "
         "holds it",
         "lab ssh cp1 -- systemctl stop kube-apiserver etcd haproxy keepalived",
         "sleep 10; kubectl create configmap still-here --request-timeout=20s   # still works",
         "for n in @nodes.control_plane@; do echo \"$n: $(lab ssh $n -- ip -4 -o addr show to @vip@)\"; done   # "
         "moved",
         "kubectl -n kube-system get lease kube-scheduler kube-controller-manager   # the leaders",
         "lab ssh cp1 -- systemctl start --no-block etcd kube-apiserver haproxy keepalived",
         "lab status --wait 180   # the lab healthy again",
         "kubectl delete configmap still-here"],
    does=_("With several control-plane nodes: takes the one holding the shared API address out (all its control-plane "
           "units and its load balancer), then reads and writes through the same address. Skipped with one "
           "control-plane node."),
    hints=[
        _("*timed out after 30s waiting for a write through `https://@api@` with cp1 down*: the address did not move "
          "(keepalived on cp2/cp3 stopped, or VRRP between the nodes blocked: `lab ssh cp2 -- journalctl -u "
          "keepalived`), or it moved but no API server behind it is ready — the other API servers are down (`lab ssh "
          "cp2 -- systemctl status kube-apiserver`), or etcd lost its quorum because another member was already down."),
        _("*the API address moved to ?* (evidence, not a failure): no other control-plane node holds the kubeconfig's "
          "address — usually because that address is not the shared one at all (a kubeconfig naming one node's API "
          "server directly, as on a single-node cluster), so the check could not tell which node to take out and took "
          "cp1."),
        _("The check ends in *error* with *cluster not healthy after the check*: cp1's units did not come back (etcd "
          "rejoining: `lab ssh cp1 -- journalctl -u etcd`)."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    cps = lab.control_plane
    if len(cps) < 2:
        raise CheckSkipped(_("the cluster has {count} control-plane node; the claim needs several: bring the lab up "
                             "with PROFILE=ha (settings.yml: profile: ha)").format(count=len(cps)))
    vip = lab.server.split("//")[1].rsplit(":", 1)[0]
    holder = next((n for n in cps if vip in lab.sh(n, "ip -4 -o addr show", check=False)), cps[0])
    ev.add(_("the API address {server} is held by {holder}").format(server=lab.server, holder=holder))
    units = [u for u in UNITS if u != "etcd" or holder in lab.etcd_members]  # etcd: where it is stacked
    with lab.namespace("C28", pods=False) as ns:
        lab.stop_units([holder], units, ev)
        error = wait_for(lambda: lab.api_writes(ns, "still-writable") is None or None, THREE_WRITE_ATTEMPTS,
                         _("a write through {server} with {holder} down").format(server=lab.server, holder=holder), 2)
        ev.expect(error is True,
                  _("{holder} down: the API still answers through {server} and the write succeeds").format(
                      holder=holder, server=lab.server))
        others = [n for n in cps if n != holder and vip in lab.sh(n, "ip -4 -o addr show", check=False)]
        ev.add(_("the API address moved to {node}").format(node=others[0] if others else "?"))
        lab.start_units([holder], units, ev)
