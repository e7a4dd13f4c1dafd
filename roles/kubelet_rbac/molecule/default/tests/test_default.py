"""kubelet_rbac: the API server's kubelet client identity may use the kubelet
API (logs, exec, port-forward go through nodes/proxy)."""

import os
from pathlib import Path

from kubernetes import client, config

API = config.new_client_from_config(str(Path(os.environ["K8S_LAB_STATE_DIR"]) / "admin.kubeconfig"))
USER = "kube-apiserver-kubelet-client"


def test_binding_names_the_api_servers_kubelet_client():
    binding = client.RbacAuthorizationV1Api(API).read_cluster_role_binding("k8s-arch-lab:apiserver-kubelet-api")
    assert binding.role_ref.name == "system:kubelet-api-admin"
    assert [(s.kind, s.name) for s in binding.subjects] == [("User", USER)]


def test_api_server_may_use_the_kubelet_api():
    for verb, subresource in (("get", "proxy"), ("create", "proxy"), ("get", "log")):
        review = client.V1SubjectAccessReview(spec={
            "user": USER,
            "resourceAttributes": {"verb": verb, "resource": "nodes", "subresource": subresource},
        })
        assert client.AuthorizationV1Api(API).create_subject_access_review(review).status.allowed, (verb, subresource)
