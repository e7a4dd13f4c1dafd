import json

import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from labs.i18n import _
from labs.kube import pod_manifest, test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for


def message(body: bytes | str | None) -> str:
    """The message of an API Status body."""
    try:
        return json.loads(body or "{}").get("message", "")[:150]
    except ValueError:
        return str(body)[:150]


def refusal(call) -> tuple[int, str]:
    """The status and message of a refused API call; (0, "") when it was not refused."""
    try:
        call()
    except ApiException as exc:
        return exc.status, message(exc.body)
    return 0, ""


@check(
    "C05", _("The API server validates, authenticates and authorizes; it does not place pods"),
    claim=_("The API server validates requests, authenticates and authorizes callers; it holds no business logic and "
            "does not decide placement."),
    texts=["000", "001"],
    see=["kubectl run Bad_Name --image=x   # 422 Invalid",
         "curl -sS --cacert @state@/pki/ca.crt https://@api@/api/v1/pods   # 401: no credentials",
         "kubectl create serviceaccount nobody; token=$(kubectl create token nobody)",
         "curl -sS --cacert @state@/pki/ca.crt -H \"Authorization: Bearer $token\" "
         "https://@api@/api/v1/namespaces/default/pods   # 403 Forbidden: known, but allowed nothing",
         "kubectl get pods -w -o wide   # in another terminal: a new pod has NODE <none> first, then the scheduler's "
         "choice",
         "kubectl run newcomer --image=@image@; kubectl wait --for=condition=PodScheduled pod/newcomer --timeout=60s",
         "kubectl get events --field-selector reason=Scheduled,involvedObject.name=newcomer   # by default-scheduler",
         "kubectl delete pod newcomer; kubectl delete serviceaccount nobody"],
    does=_("At every API server's own address (not through the load-balanced one): sends a malformed pod (422), an "
           "anonymous request (401/403), and a request with the token of a fresh ServiceAccount that has no RBAC "
           "rights (403, the message naming the account: authenticated, not authorized). Then watches a new pod from "
           "its creation: stored without a node, bound later by default-scheduler (Scheduled event)."),
    hints=[
        _("*timed out … waiting for the default ServiceAccount of lab-c05-…*: kube-controller-manager, which creates "
          "every namespace's `default` ServiceAccount, is stopped or slow."),
        _("*cp2 (https://…:@ports.api_server@): malformed pod: status created! …*: that API server stored an invalid "
          "object — it is not the lab's kube-apiserver, or validation was switched off."),
        _("*cp2 (https://…:@ports.api_server@): anonymous request answered 200*: RBAC grants something to "
          "`system:anonymous` or `system:unauthenticated`."),
        _("*cp2 (https://…:@ports.api_server@): ServiceAccount without rights: status allowed!*: that API server "
          "authorizes everything (`--authorization-mode=AlwaysAllow` in `systemctl cat kube-apiserver`), or a "
          "(Cluster)RoleBinding grants rights to all service accounts."),
        _("*the pod's versions do not show a later binding* (a timeout): kube-scheduler is stopped, the pod stays "
          "Pending."),
        _("*no Scheduled event by default-scheduler*: another scheduler, or something else, set `nodeName`."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    cfg = lab.api_client.configuration
    with lab.namespace("C05") as ns:
        lab.core.create_namespaced_service_account(ns, {"metadata": {"name": "nobody"}})
        token = lab.core.create_namespaced_service_account_token(
            "nobody", ns, {"spec": {"audiences": [], "expirationSeconds": 600}}).status.token
        http = urllib3.PoolManager(ca_certs=cfg.ssl_ca_cert, cert_reqs="CERT_REQUIRED")
        bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"}, "spec": {"containers": []}}
        for node, server in lab.api_servers().items():
            admin = client.CoreV1Api(lab.api_client_for(server))
            status, msg = refusal(lambda a=admin: a.create_namespaced_pod(ns, bad))
            ev.expect(status == 422,
                      _("{node} ({server}): malformed pod (name Bad_Name, no containers) refused: {status} "
                        "{msg}").format(node=node, server=server, status=status, msg=msg),
                      _("{node} ({server}): malformed pod: status {status} {msg}").format(
                          node=node, server=server, status=status or _("created!"), msg=msg))

            resp = http.request("GET", f"{server}/api/v1/namespaces/{ns}/pods", timeout=10, retries=False)
            ev.expect(resp.status in (401, 403),
                      _("{node}: anonymous GET pods (server verified with the CA, no credentials): "
                        "{status} {data}").format(node=node, status=resp.status, data=message(resp.data)),
                      _("{node} ({server}): anonymous request answered {status}").format(
                          node=node, server=server, status=resp.status))

            sa_cfg = client.Configuration(host=server)
            sa_cfg.ssl_ca_cert = cfg.ssl_ca_cert
            sa_cfg.api_key = {"authorization": f"Bearer {token}"}
            nobody = client.CoreV1Api(client.ApiClient(sa_cfg))
            status, msg = refusal(lambda n=nobody: n.list_namespaced_pod(ns))
            ev.expect(status == 403 and f"system:serviceaccount:{ns}:nobody" in msg,
                      _("{node}: ServiceAccount without RBAC rights (TokenRequest token) lists pods: "
                        "{status} {msg}").format(node=node, status=status, msg=msg),
                      _("{node} ({server}): ServiceAccount without rights: status {status} {msg}").format(
                          node=node, server=server, status=status or _("allowed!"), msg=msg))

        rv = lab.core.list_namespaced_pod(ns).metadata.resource_version
        created = lab.core.create_namespaced_pod(ns, pod_manifest("fresh", test_image()))
        ev.add(_("create answered: pod fresh, spec.nodeName={node_name}").format(node_name=created.spec.node_name))
        versions = []
        for event in watch.Watch().stream(lab.core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=60):
            pod = event["object"]
            versions.append((event["type"], pod.metadata.resource_version, pod.spec.node_name))
            if pod.spec.node_name:
                break
        ev.add(_("watched versions of the pod: {versions}").format(
            versions="; ".join(f"{t} rv={r} nodeName={n}" for t, r, n in versions)))
        ev.expect(bool(versions) and versions[0][2] is None and versions[-1][2] is not None,
                  _("stored without a node first, bound to {node} afterwards").format(
                      node=versions[-1][2] if versions else "?"),
                  _("the pod's versions do not show a later binding: {versions}").format(versions=versions))
        events = wait_for(lambda: lab.core.list_namespaced_event(
            ns, field_selector="involvedObject.name=fresh,reason=Scheduled").items, 30, _("the Scheduled event"))
        sources = {e.reporting_component or (e.source.component if e.source else "") for e in events}
        ev.expect("default-scheduler" in sources,
                  _("Scheduled event by default-scheduler: {event}").format(event=events[0].message if events else ""),
                  _("no Scheduled event by default-scheduler ({sources})").format(sources=sources))
