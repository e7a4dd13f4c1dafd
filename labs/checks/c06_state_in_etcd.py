import base64
import uuid

from kubernetes import client

from labs.i18n import _
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

# What the API server's encryption providers put before a value they encrypted (k8s:enc:<provider>:v1:<key name>:).
ENCRYPTED = (b"k8s:enc:secretbox:v1:", b"k8s:enc:aescbc:v1:", b"k8s:enc:aesgcm:v1:", b"k8s:enc:kms:v2:")


def printable(data: bytes, n: int = 70, at: bytes = b"") -> str:
    """Up to ``n`` bytes as text (non-printable as "."): from the start, or ending with ``at`` when found."""
    start = max(0, data.find(at) + len(at) - n) if at and at in data else 0
    return "".join(chr(b) if 32 <= b < 127 else "." for b in data[start:start + n])


@check(
    "C06", _("Cluster state lives in etcd; every change through the API is stored there"),
    claim=_("Cluster configuration and state live in etcd; every change made through the API is stored there."),
    texts=["000", "001"],
    see=["kubectl create configmap note --from-literal=text=hello",
         "lab ssh cp1 -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl get /registry/configmaps/default/note | od "
         "-c | head'   # hello, in protobuf",
         "kubectl create secret generic secret-note --from-literal=text=hello",
         "lab ssh cp1 -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl get /registry/secrets/default/secret-note | "
         "od -c | head'   # k8s:enc:secretbox:v1: and no hello",
         "lab ssh cp1 -- '. @paths.etcd_config_dir@/etcdctl.env; etcdctl get /registry --prefix --keys-only | head'",
         "kubectl delete configmap note; kubectl delete secret secret-note"],
    does=_("Creates a ConfigMap through the API and reads its key in etcd with etcdctl on every etcd member (the "
           "value, in the API server's protobuf encoding, holds the data); changes it (new value, higher "
           "mod_revision); deletes it (key gone). Writes a Secret through every API server (each at its own address) "
           "and finds each value encrypted in etcd (k8s:enc:secretbox:v1:<key>:, plaintext absent)."),
    hints=[
        _("*cp1: etcd key … missing or without '…'*: the API server writes to another etcd (`--etcd-servers`) or "
          "another prefix."),
        _("*the change is not in etcd*: the API server answered from somewhere else than the etcd read here."),
        _("*Secret written through cp2's API server (https://…) is not stored encrypted*: on that machine "
          "`--encryption-provider-config` is missing, or its first provider is `identity`. Secrets written before "
          "encryption was turned on stay in clear until rewritten (`kubectl get secrets -A -o json | kubectl replace "
          "-f -`)."),
        _("an etcdctl error: etcd is down on that member (a disruptive check may be running): re-run."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    prefix = lab.unit_arg(lab.control_plane[0], "kube-apiserver", "etcd-prefix") or "/registry"
    members = lab.etcd_members
    first, second = f"hello-{uuid.uuid4().hex[:8]}", f"changed-{uuid.uuid4().hex[:8]}"
    with lab.namespace("C06", pods=False) as ns:
        key = f"{prefix}/configmaps/{ns}/note"
        lab.core.create_namespaced_config_map(ns, {"metadata": {"name": "note"}, "data": {"text": first}})
        for node in members:
            kv = lab.etcd_get(key, node)
            seen = f'{printable(kv["value"], 24)}…{printable(kv["value"], 24, at=first.encode())}' if kv else ""
            ev.expect(kv is not None and first.encode() in kv["value"],
                      _("{node}: etcd key {key} (rev {revision}): {seen}").format(
                          node=node, key=key, revision=kv and kv["mod_revision"], seen=seen),
                      _("{node}: etcd key {key} missing or without {first!r}").format(node=node, key=key, first=first))
        before = kv["mod_revision"]
        lab.core.patch_namespaced_config_map("note", ns, {"data": {"text": second}})
        kv = lab.etcd_get(key, members[0])
        ev.expect(kv is not None and second.encode() in kv["value"] and first.encode() not in kv["value"]
                  and kv["mod_revision"] > before,
                  _("after the change: value holds {second!r}, mod_revision {before} -> {after}").format(
                      second=second, before=before, after=kv and kv["mod_revision"]),
                  _("the change is not in etcd: {value}").format(value=kv and printable(kv["value"])))
        lab.core.delete_namespaced_config_map("note", ns)
        wait_for(lambda: lab.etcd_get(key, members[0]) is None, 30, _("{key} to leave etcd").format(key=key))
        ev.expect(True, _("after the delete: {key} is gone from etcd").format(key=key))

        for node, server in lab.api_servers().items():
            secret, name = f"s3cret-{uuid.uuid4().hex[:8]}", f"token-{node}"
            client.CoreV1Api(lab.api_client_for(server)).create_namespaced_secret(
                ns, {"metadata": {"name": name}, "stringData": {"password": secret}})
            kv = lab.etcd_get(f"{prefix}/secrets/{ns}/{name}", members[0])
            encrypted = kv is not None and kv["value"].startswith(ENCRYPTED)
            ev.expect(encrypted and secret.encode() not in kv["value"],
                      _("Secret written through {node}'s API server ({server}) stored encrypted: {value}… (plaintext "
                        "{secret!r} absent)").format(
                          node=node, server=server, value=printable(kv["value"], 40) if kv else "", secret=secret),
                      _("Secret written through {node}'s API server ({server}) is not stored encrypted: "
                        "{value}").format(
                          node=node, server=server, value=kv and printable(kv["value"])))
        ev.add(_("through the API the Secret reads back in clear: {value}").format(
            value=base64.b64decode(lab.core.read_namespaced_secret(name, ns).data["password"]).decode()))
