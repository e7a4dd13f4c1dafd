import json

from labs.i18n import _
from labs.kube import crictl_container, image_in_store, pod_manifest, run_pod, test_image
from labs.lab import Lab
from labs.registry import Evidence, check


@check(
    "C22", _("The container runtime holds the images and runs the containers for the kubelet"),
    claim=_("The container runtime (containerd, CRI-O, … through CRI) pulls images and runs containers for the "
            "kubelet."),
    texts=["000", "001", "004"],
    see=["kubectl get nodes -o wide   # CONTAINER-RUNTIME containerd://... (also cri-o://, docker:// on runtimes)",
         "lab ssh w1 -- 'ctr -n k8s.io images ls | grep echo'; lab ssh w1 -- crictl images",
         "kubectl run boxed --image=@image@; kubectl wait --for=condition=Ready pod/boxed --timeout=90s; "
         "node=$(kubectl get pod boxed -o jsonpath='{.spec.nodeName}')",
         "lab ssh $node -- crictl pods --name boxed; lab ssh $node -- crictl ps --label io.kubernetes.pod.name=boxed",
         "kubectl delete pod boxed"],
    does=_("Starts a pod, then on its node: the image is in the node's runtime's own store (containerd's k8s.io "
           "namespace through ctr; CRI-O's containers-storage; Docker's image store) and known over CRI on the node's "
           "own socket (crictl images, the same image as the pod's imageID); crictl lists the pod's sandbox and its "
           "container with the id the pod status reports; the Node reports the runtime its settings give it."),
    hints=[
        _("*reports the runtime …* other than the node's own (containerd unless profiles.<p>.runtimes says "
          "otherwise): the kubelet talks to another CRI runtime."),
        _("*… not in …* (the runtime's store) while the pod runs: the kubelet's `containerRuntimeEndpoint` points to "
          "another runtime, or the image was removed after the container started (`ctr -n k8s.io images rm`, "
          "`crictl rmi`): a running container does not need its image any more, the next one on that node would."),
        _("*crictl image … vs pod imageID …*: the image was imported again with different content after the pod "
          "started."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    image = test_image()
    with lab.namespace("C22") as ns:
        pod = run_pod(lab, ns, pod_manifest("runtime", image))
        node, status = pod.spec.node_name, pod.status.container_statuses[0]
        runtime = lab.core.read_node(node).status.node_info.container_runtime_version
        ev.expect(runtime.startswith(f"{lab.cri_name(node)}://"),
                  _("{node} reports its runtime: {runtime}").format(node=node, runtime=runtime),
                  _("{node} reports the runtime {runtime}").format(node=node, runtime=runtime))
        held, store = image_in_store(lab, node, image)
        ev.expect(held, _("{node}: {image} is in {store}").format(node=node, image=image, store=store),
                  _("{node}: {image} not in {store}").format(node=node, image=image, store=store))
        images = json.loads(lab.crictl(node, "images -o json"))["images"]
        match = [i for i in images if image in (i.get("repoTags") or [])]
        # The pod's imageID is the image's id (containerd, Docker Engine) or one of its repo digests (CRI-O).
        same = bool(match) and any(ref and ref in status.image_id
                                   for ref in [match[0]["id"], *(match[0].get("repoDigests") or [])])
        ev.expect(same,
                  _("{node}: crictl images: {image} {id}… = the pod's imageID").format(
                      node=node, image=image, id=match[0]["id"][:19] if match else ""),
                  _("{node}: crictl image {id} vs pod imageID {image_id}").format(
                      node=node, id=match and match[0]["id"], image_id=status.image_id))
        sandbox = lab.crictl(node, f"pods -q --name '^runtime$' --namespace {ns}")
        cid = crictl_container(lab, node, ns, "runtime")
        state = json.loads(lab.crictl(node, f"inspect {cid}"))["status"]["state"] if cid else _("none")
        ev.expect(bool(sandbox) and bool(cid) and status.container_id.split("://")[-1].startswith(cid),
                  _("{node}: crictl: sandbox {sandbox}, container {cid} {state} = the pod's containerID "
                    "{container_id}…").format(node=node, sandbox=sandbox[:13], cid=cid[:13], state=state,
                                               container_id=status.container_id[:26]),
                  _("{node}: crictl sandbox {sandbox!r}, container {cid!r}; pod says {container_id}").format(
                      node=node, sandbox=sandbox, cid=cid, container_id=status.container_id))
