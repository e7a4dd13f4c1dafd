import base64
import os
import tempfile

import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.rest import ApiException

from labs.i18n import _
from labs.kube import pod_manifest, run_pod, test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for


def status_of(call) -> int:
    try:
        call()
    except ApiException as exc:
        return exc.status
    return 200


@check(
    "C20", _("kubelet uses the same HTTPS API with its own, node-restricted credentials"),
    claim=_("kubelet talks to the API server over the same HTTPS API as kubectl, with its own credentials, and is "
            "restricted to what its node needs."),
    texts=["004"],
    see=["lab ssh w1 -- cat /var/lib/kubelet/kubeconfig | grep client-certificate-data | awk '{print $2}' | base64 "
         "-d | openssl x509 -noout -subject   # CN=system:node:w1, O=system:nodes",
         "kubectl create secret generic unrelated --from-literal=k=v",
         "kubectl auth can-i get secret/unrelated --as=system:node:w1 --as-group=system:nodes   # no",
         "kubectl auth can-i get node/w1 --as=system:node:w1 --as-group=system:nodes   # yes",
         "kubectl delete secret unrelated"],
    does=_("Reads a worker's kubelet kubeconfig over SSH and uses its client certificate (in a 0600 temp directory, "
           "removed afterwards) with the official client against the API server: the certificate's subject is "
           "system:node:<name> in system:nodes; it reads its own Node and a Secret mounted by a pod on its node, but "
           "is refused (403) a Secret no pod on its node uses and a change to another Node."),
    hints=[
        _("*GET Secret other -> 200*: the Node authorizer is off (`--authorization-mode` without `Node`) and RBAC "
          "gives `system:nodes` more, e.g. a ClusterRoleBinding of `system:node` to the group."),
        _("*PATCH Node w2 -> 200*: NodeRestriction is not enabled (`--enable-admission-plugins`)."),
        _("*POST Node … -> 200*: on a one-machine cluster the kubelet tried to create another Node, and could: "
          "NodeRestriction is not enabled (`--enable-admission-plugins`)."),
        _("*its own Node -> 401*: the kubelet's certificate is not signed by the API server's `--client-ca-file`."),
        _("*CN=…, O=…* other than `system:node:<name>` / `system:nodes`: the kubelet runs with another identity and "
          "the Node authorizer does not recognise it."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    node = lab.workload_nodes[0]
    # Another Node to try to change: a second node of the cluster; a one-machine cluster has none, so the kubelet
    # tries to create one (NodeRestriction refuses both: a kubelet may only write its own Node).
    other = next((n for n in lab.workload_nodes + lab.control_plane if n != node), None)
    user = yaml.safe_load(lab.sh(node, f"cat {lab.unit_arg(node, 'kubelet', 'kubeconfig')}"))["users"][0]["user"]
    pem = {k: base64.b64decode(user[f"{k}-data"]) for k in ("client-certificate", "client-key")}
    cert = x509.load_pem_x509_certificate(pem["client-certificate"])
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    ev.expect(cn == f"system:node:{node}" and "system:nodes" in orgs,
              _("{node}'s kubelet certificate: CN={cn}, O={orgs}, issuer {issuer}").format(
                  node=node, cn=cn, orgs=",".join(orgs), issuer=cert.issuer.rfc4514_string()),
              _("{node}'s kubelet certificate: CN={cn}, O={orgs}").format(node=node, cn=cn, orgs=orgs))
    with tempfile.TemporaryDirectory(prefix="lab-c20-") as tmp, lab.namespace("C20") as ns:
        paths = {}
        for k, data in pem.items():
            paths[k] = os.path.join(tmp, k)
            with open(os.open(paths[k], os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(data)
        cfg = client.Configuration(host=lab.server)
        cfg.ssl_ca_cert = lab.api_client.configuration.ssl_ca_cert
        cfg.cert_file, cfg.key_file = paths["client-certificate"], paths["client-key"]
        kubelet = client.CoreV1Api(client.ApiClient(cfg))

        for name in ("mounted", "other"):
            lab.core.create_namespaced_secret(ns, {"metadata": {"name": name}, "stringData": {"k": "v"}})
        run_pod(lab, ns, pod_manifest("user", test_image(), nodeName=node, volumes=[
            {"name": "s", "secret": {"secretName": "mounted"}}], container={
            "volumeMounts": [{"name": "s", "mountPath": "/secret"}]}))
        own = status_of(lambda: kubelet.read_node(node))
        ev.expect(own == 200,
                  _("as system:node:{node}: GET its own Node -> {status}").format(node=node, status=own),
                  _("its own Node -> {status}").format(status=own))
        mounted = wait_for(lambda: status_of(lambda: kubelet.read_namespaced_secret("mounted", ns)) == 200, 30,
                           _("the node authorizer to allow the mounted Secret"))
        ev.expect(mounted, _("GET Secret {ns}/mounted (used by a pod on {node}) -> 200").format(ns=ns, node=node))
        got = status_of(lambda: kubelet.read_namespaced_secret("other", ns))
        ev.expect(got == 403,
                  _("GET Secret {ns}/other (no pod on {node} uses it) -> {status}").format(
                      ns=ns, node=node, status=got),
                  _("GET Secret other -> {status}, expected 403").format(status=got))
        if other:
            got = status_of(lambda: kubelet.patch_node(other, {"metadata": {"labels": {"k8s-arch-lab/c20": "x"}}}))
            if got != 403:  # the claim does not hold: take the label back off
                lab.core.patch_node(other, {"metadata": {"labels": {"k8s-arch-lab/c20": None}}})
            ev.expect(got == 403,
                      _("PATCH Node {other} (another node) -> {status}").format(other=other, status=got),
                      _("PATCH Node {other} -> {status}").format(other=other, status=got))
        else:
            other = f"{ns}-phantom"
            got = status_of(lambda: kubelet.create_node({"metadata": {"name": other}}))
            if got != 403:  # the claim does not hold: the kubelet made another Node; take it away
                status_of(lambda: lab.core.delete_node(other))
            ev.expect(got == 403,
                      _("POST Node {other} (a Node that is not its own) -> {status}").format(other=other, status=got),
                      _("POST Node {other} -> {status}").format(other=other, status=got))
