"""kube_apiserver: the pinned release serving TLS on 6443, ready, refusing
anonymous API requests, keys 0600, and Secrets encrypted at rest in etcd."""

from component import admin_client, assert_pinned_kubernetes_release, assert_running_and_enabled
from kubernetes import client

CA = "/etc/kubernetes/pki/ca.crt"


def test_service_is_running_and_enabled(host):
    assert_running_and_enabled(host, "kube-apiserver")


def test_binary_is_the_pinned_release(host):
    assert_pinned_kubernetes_release(host, "kube-apiserver")


def test_serves_tls_on_6443_and_is_ready(host):
    assert host.socket("tcp://0.0.0.0:6443").is_listening
    assert host.check_output(f"curl -sf --cacert {CA} https://127.0.0.1:6443/readyz") == "ok"


def test_refuses_anonymous_api_requests(host):
    """Anonymous only on the health endpoints: /readyz answers, /api and /version (public to anonymous callers by
    default RBAC) get 401."""
    def status(path: str) -> str:
        return host.check_output(f"curl -s -o /dev/null -w '%{{http_code}}' --cacert {CA} https://127.0.0.1:6443{path}")

    assert status("/api") == status("/version") == "401"
    assert status("/readyz") == "200"


def test_keys_and_encryption_configuration_are_readable_by_root_only(host):
    for key in ("apiserver", "apiserver-kubelet-client", "apiserver-etcd-client", "sa"):
        assert host.file(f"/etc/kubernetes/pki/{key}.key").mode == 0o600, key
    encryption = host.file("/etc/kubernetes/encryption-config.yaml")
    assert encryption.mode == 0o600 and encryption.user == "root"
    assert encryption.contains("secretbox")


def test_audit_policy_and_hardening_flags(host):
    """What the CIS benchmark asks of the API server's own settings: an audit policy that records access to Secrets,
    ConfigMaps and TokenReviews (metadata only) and exec/attach/port-forward/proxy (with the request), rotated logs,
    no profiling, and service-account tokens that are not silently extended."""
    import yaml

    policy = yaml.safe_load(host.file("/etc/kubernetes/audit-policy.yaml").content_string)
    levels = {(g["group"], r): rule["level"] for rule in policy["rules"] for g in rule.get("resources", [])
              for r in g["resources"]}
    assert levels[("", "secrets")] == levels[("", "configmaps")] == "Metadata"
    assert levels[("authentication.k8s.io", "tokenreviews")] == "Metadata"
    assert all(levels[("", r)] == "Request" for r in ("pods/exec", "pods/attach", "pods/portforward", "pods/proxy"))
    assert host.file("/etc/systemd/system/kube-apiserver.service").mode == 0o600
    unit = host.file("/etc/systemd/system/kube-apiserver.service").content_string
    for flag in ("--profiling=false", "--service-account-extend-token-expiration=false", "--audit-log-maxage=",
                 "--audit-log-maxbackup=", "--audit-log-maxsize="):
        assert flag in unit, flag


def test_secrets_are_encrypted_in_etcd(host):
    api = client.CoreV1Api(admin_client())
    name, value = "molecule-encrypted", "plain-text-value"
    if not api.list_namespaced_secret("default", field_selector=f"metadata.name={name}").items:
        api.create_namespaced_secret("default", client.V1Secret(metadata={"name": name}, string_data={"k": value}))
    get = f". /etc/etcd/etcdctl.env && etcdctl get /registry/secrets/default/{name} --print-value-only"
    assert host.check_output(f"{get} | head -c 21") == "k8s:enc:secretbox:v1:"
    assert host.run(f"{get} | grep -q {value}").rc == 1


def test_pod_security_baseline_is_enforced_by_default(host):
    """A privileged pod in a namespace without Pod Security labels is refused (baseline enforced cluster-wide)."""
    from kubernetes.client.rest import ApiException

    api = client.CoreV1Api(admin_client())
    # No controller-manager in this scenario makes the namespace's default ServiceAccount, and the ServiceAccount
    # admission plugin (before PodSecurity) refuses a pod whose account is missing: make it here.
    try:
        api.create_namespaced_service_account("default", {"metadata": {"name": "default"}})
    except ApiException as exc:
        assert exc.status == 409, exc.body
    pod = {"metadata": {"name": "molecule-privileged"}, "spec": {"containers": [
        {"name": "c", "image": "localhost/none:0", "securityContext": {"privileged": True}}]}}
    try:
        api.create_namespaced_pod("default", pod, dry_run="All")
    except ApiException as exc:
        assert exc.status == 403 and "PodSecurity" in exc.body, exc.body
    else:
        raise AssertionError("a privileged pod was admitted")
