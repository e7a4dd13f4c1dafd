"""coredns: the DNS Deployment available with the pinned image, the kube-dns
Service on the cluster's DNS address (UDP and TCP), and cluster names
resolved through it from every node."""

from component import VERSIONS, admin_client
from kubernetes import client

API = admin_client()
# One A query over UDP to the kube-dns Service; prints the first answer's address.
QUERY = r"""
import socket, struct, sys
q = struct.pack(">6H", 0x4b8, 0x100, 1, 0, 0, 0) + b"".join(
    bytes([len(p)]) + p.encode() for p in sys.argv[1].split(".")) + b"\0" + struct.pack(">2H", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
for attempt in range(5):
    try:
        s.sendto(q, ("10.96.0.10", 53))
        r = s.recv(512)
        break
    except socket.timeout:
        continue
rcode, answers = r[3] & 15, struct.unpack(">H", r[6:8])[0]
print(socket.inet_ntoa(r[-4:]) if rcode == 0 and answers else f"rcode {rcode}, {answers} answers")
"""


def test_deployment_is_available_with_the_pinned_image():
    deployment = client.AppsV1Api(API).read_namespaced_deployment("coredns", "kube-system")
    image = VERSIONS["images"]["coredns"]
    assert deployment.spec.template.spec.containers[0].image == f"{image['name']}:{image['version']}"
    assert deployment.status.available_replicas == deployment.spec.replicas == 2


def test_service_on_the_cluster_dns_address():
    service = client.CoreV1Api(API).read_namespaced_service("kube-dns", "kube-system")
    assert service.spec.cluster_ip == "10.96.0.10"
    assert {(p.port, p.protocol) for p in service.spec.ports} == {(53, "UDP"), (53, "TCP"), (9153, "TCP")}


def test_cluster_names_resolve_from_every_node(host):
    assert host.check_output("python3 -c %s kubernetes.default.svc.cluster.local", QUERY) == "10.96.0.1"
    assert host.check_output("python3 -c %s kube-dns.kube-system.svc.cluster.local", QUERY) == "10.96.0.10"
