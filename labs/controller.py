"""A small controller written with the official client, as any operator is.

Desired state: for every ConfigMap labelled ``k8s-arch-lab/greeting`` (data ``name: <someone>``) there is a
ConfigMap ``<name>-greeting`` with ``message: Hello, <someone>!``, owned by it (deleted with it).

The loop is level-triggered: any change to any ConfigMap of the namespace (a source created or edited, a
derived one deleted or tampered with) wakes it up, and it compares the whole desired state with the actual one.

    python -m labs.controller [NAMESPACE]    # runs until Ctrl-C, with the admin kubeconfig (or $KUBECONFIG);
                                             # by default in the kubeconfig context's namespace, else `default`
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

LABEL = "k8s-arch-lab/greeting"
DERIVED_LABEL = "k8s-arch-lab/greeting-of"
MANAGER = "k8s-arch-lab-controller"


class GreetingController:
    def __init__(self, api_client: client.ApiClient, namespace: str, log: Callable[[str], None] = print) -> None:
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.log = log
        self.stop = threading.Event()
        self.reconciled = 0

    def desired(self, source) -> dict:
        name = source.metadata.name
        owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": source.metadata.uid, "controller": True}
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{name}-greeting", "labels": {DERIVED_LABEL: name}, "ownerReferences": [owner]},
                "data": {"message": f"Hello, {(source.data or {}).get('name', 'world')}!"}}

    def reconcile(self) -> None:
        """Make the actual state the desired one (server-side apply: only what differs is written)."""
        for source in self.core.list_namespaced_config_map(self.namespace, label_selector=LABEL).items:
            want = self.desired(source)
            name = want["metadata"]["name"]
            try:
                have = self.core.read_namespaced_config_map(name, self.namespace).data
            except ApiException as exc:
                if exc.status != 404:
                    raise
                have = None
            if have != want["data"]:
                self.core.patch_namespaced_config_map(name, self.namespace, want, field_manager=MANAGER, force=True,
                                                      _content_type="application/apply-patch+yaml")
                self.reconciled += 1
                self.log(f"reconciled {name}: {have} -> {want['data']}")

    def run(self) -> None:
        """Reconcile, then watch every ConfigMap of the namespace and reconcile at each event, until stopped."""
        version = None
        while not self.stop.is_set():
            if version is None:  # start, or the watch fell too far behind (410 Gone): re-read everything
                self.reconcile()
                version = self.core.list_namespaced_config_map(self.namespace).metadata.resource_version
            try:
                for event in watch.Watch().stream(self.core.list_namespaced_config_map, self.namespace,
                                                  resource_version=version, timeout_seconds=2):
                    version = event["object"].metadata.resource_version
                    self.reconcile()
                    if self.stop.is_set():
                        break
            except ApiException as exc:
                if exc.status != 410:
                    raise
                version = None


def context_namespace(kubeconfig: str) -> str:
    """The namespace of the kubeconfig's current context, as kubectl uses it: `default` when it names none."""
    from kubernetes import config

    _, current = config.list_kube_config_contexts(config_file=kubeconfig)
    return (current or {}).get("context", {}).get("namespace") or "default"


def main(argv: list[str]) -> int:
    from labs.lab import Lab

    lab = Lab()  # the lab's admin kubeconfig, or $KUBECONFIG
    namespace = argv[0] if argv else context_namespace(str(lab.kubeconfig))
    print(f"greeting controller: watching the ConfigMaps of namespace {namespace} (Ctrl-C ends it)", flush=True)
    controller = GreetingController(lab.api_client, namespace)
    try:
        controller.run()
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
