import time

from labs.core import Evidence, Lab, check, test_image, wait_for


def deployment(name: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "main", "image": test_image(),
                                                           "imagePullPolicy": "IfNotPresent"}]}}}}


@check(
    "C13", "All built-in controllers run in kube-controller-manager; without it nothing is acted upon",
    claim="All built-in controllers run in the one kube-controller-manager process; if it stops, changes made "
          "through the API are not acted upon.",
    texts=["000", "004"],
    see=["ssh cp1 systemctl stop kube-controller-manager  # on every control-plane node",
         "kubectl scale deploy web --replicas=3; kubectl get pods  # nothing new",
         "ssh cp1 systemctl start kube-controller-manager"],
    does="Runs a one-replica Deployment, stops the controller manager everywhere, scales to three and sees no new "
         "pod; starts it and sees the three pods appear.",
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    def pods(ns: str) -> int:
        return len(lab.core.list_namespaced_pod(ns, label_selector="app=web").items)

    with lab.namespace("C13") as ns:
        lab.apps.create_namespaced_deployment(ns, deployment("web", 1))
        wait_for(lambda: pods(ns) == 1, 90, "the Deployment's first pod")
        lab.stop_units(lab.control_plane, ["kube-controller-manager"], ev)
        lab.apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}})
        time.sleep(15)
        ev.expect(pods(ns) == 1, "scaled to 3 replicas with no controller manager: after 15 s still 1 pod",
                  f"pods appeared without the controller manager ({pods(ns)})")
        lab.start_units(lab.control_plane, ["kube-controller-manager"], ev)
        wait_for(lambda: pods(ns) == 3, 120, "the controllers to create the missing pods")
        ev.expect(True, "controller manager back: 3 pods")
