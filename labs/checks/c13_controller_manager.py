import time

from labs.i18n import _
from labs.kube import test_image
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for


def deployment(name: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "main", "image": test_image(),
                                                           "imagePullPolicy": "IfNotPresent"}]}}}}


@check(
    "C13", _("All built-in controllers run in kube-controller-manager; without it nothing is acted upon"),
    claim=_("All built-in controllers run in the one kube-controller-manager process; if it stops, changes made "
            "through the API are not acted upon."),
    texts=["000", "004"],
    see=["kubectl create deployment web --image=@image@ --replicas=2; kubectl rollout status deployment web "
         "--timeout=90s",
         "for n in @nodes.control_plane@; do lab ssh $n -- systemctl stop kube-controller-manager; done",
         "kubectl scale deployment web --replicas=4; sleep 10; kubectl get pods -l app=web   # still two",
         "for n in @nodes.control_plane@; do lab ssh $n -- systemctl start kube-controller-manager; done",
         "kubectl rollout status deployment web --timeout=120s; kubectl get pods -l app=web   # four",
         "kubectl delete deployment web"],
    does=_("Runs a one-replica Deployment and times how long the controllers take to create a pod when it is scaled "
           "to two. Stops the controller manager everywhere, scales to four and sees no new pod for three times that "
           "long (at least 5 s); starts it and sees the four pods appear."),
    hints=[
        _("*pods appeared without the controller manager (4)*: a controller manager still runs — the unit's stop did "
          "not end the process (`lab ssh cp1 -- pgrep -a kube-controller`), or one runs outside the inventory's "
          "control plane."),
        _("*timed out after 90s waiting for the Deployment's first pod*, or *… waiting for the controllers to create "
          "the second pod*: the controller manager was already down before the check (a disruptive check running at "
          "the same time?) — `kubectl get events -n lab-c13-…`."),
        _("*timed out after 120s waiting for the controllers to create the missing pods*: the controller manager did "
          "not come back or did not become leader (`journalctl -u kube-controller-manager`, `kubectl -n kube-system "
          "get lease kube-controller-manager`)."),
    ],
    disruptive=True,
)
def run(lab: Lab, ev: Evidence) -> None:
    def pods(ns: str) -> int:
        return len(lab.core.list_namespaced_pod(ns, label_selector="app=web").items)

    with lab.namespace("C13") as ns:
        lab.apps.create_namespaced_deployment(ns, deployment("web", 1))
        wait_for(lambda: pods(ns) == 1, 90, _("the Deployment's first pod"))
        started = time.monotonic()
        lab.apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 2}})
        wait_for(lambda: pods(ns) == 2, 60, _("the controllers to create the second pod"))
        took = time.monotonic() - started
        window = max(5.0, 3 * took)
        ev.add(_("with the controller manager running, scaling 1 -> 2 created the pod in {took:.2f} s").format(
            took=took))
        lab.stop_units(lab.control_plane, ["kube-controller-manager"], ev)
        lab.apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 4}})
        time.sleep(window)
        ev.expect(pods(ns) == 2,
                  _("scaled to 4 replicas with no controller manager: after {window:.0f} s still 2 pods").format(
                      window=window),
                  _("pods appeared without the controller manager ({count})").format(count=pods(ns)))
        lab.start_units(lab.control_plane, ["kube-controller-manager"], ev)
        wait_for(lambda: pods(ns) == 4, 120, _("the controllers to create the missing pods"))
        ev.expect(True, _("controller manager back: 4 pods"))
