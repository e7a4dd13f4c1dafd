import threading
import time

from kubernetes import client
from kubernetes.client.rest import ApiException

from labs.controller import LABEL, MANAGER, GreetingController
from labs.i18n import _
from labs.lab import Lab
from labs.registry import Evidence, check
from labs.timing import wait_for

REACTION = 30  # seconds: the controller reacts to watch events, not to a timer


@check(
    "C15", _("Your own controller works against the same API"),
    claim=_("You can write your own controllers (operators) against the same API."),
    texts=["000"],
    see=["python -m labs.controller   # the lab's controller (labs/controller.py), in another terminal",
         "kubectl create configmap team --from-literal=name=world; kubectl label configmap team "
         "k8s-arch-lab/greeting=",
         "kubectl wait --for=create configmap/team-greeting --timeout=30s; kubectl get configmap team-greeting -o "
         "yaml --show-managed-fields",
         "kubectl delete configmap team team-greeting"],
    does=_("Creates a labelled ConfigMap while no controller runs (nothing derived appears), then runs the lab's "
           "GreetingController (labs/controller.py, official client, watch + reconcile) in a thread for a bounded "
           "time: the derived ConfigMap appears, owned by the source and written by the controller's field manager; "
           "it follows a change of the source and is put back after someone tampers with it."),
    hints=[
        _("*team-greeting exists before the controller runs*: another copy of the controller is running against the "
          "namespace."),
        _("*timed out … the controller to …*: the controller died; *controller: [...]* shows its exception (an API "
          "server restart during the check breaks its watch): re-run."),
    ],
)
def run(lab: Lab, ev: Evidence) -> None:
    with lab.namespace("C15", pods=False) as ns:
        def message():
            try:
                return (lab.core.read_namespaced_config_map("team-greeting", ns).data or {}).get("message")
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        lab.core.create_namespaced_config_map(ns, {"metadata": {"name": "team", "labels": {LABEL: ""}},
                                                   "data": {"name": "world"}})
        time.sleep(3)
        ev.expect(message() is None,
                  _("without the controller: no team-greeting after 3s"),
                  _("team-greeting exists before the controller runs: {message!r}").format(message=message()))

        logs, errors = [], []
        controller = GreetingController(client.ApiClient(lab.api_client.configuration), ns, log=logs.append)

        def loop():
            try:
                controller.run()
            except Exception as exc:  # noqa: BLE001 - reported by the check
                errors.append(repr(exc))

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        ev.step(_("controller started"))
        try:
            wait_for(lambda: message() == "Hello, world!", REACTION, _("the controller to create team-greeting"))
            made = lab.core.read_namespaced_config_map("team-greeting", ns)
            managers = {f.manager for f in made.metadata.managed_fields or []}
            ev.expect(MANAGER in managers and made.metadata.owner_references[0].name == "team",
                      _("team-greeting created: message 'Hello, world!', owner ConfigMap team, written by "
                        "{managers}").format(managers=managers),
                      _("team-greeting: managers {managers}, owners {owners}").format(
                          managers=managers, owners=made.metadata.owner_references))
            lab.core.patch_namespaced_config_map("team", ns, {"data": {"name": "lab"}})
            wait_for(lambda: message() == "Hello, lab!", REACTION, _("the controller to follow the change"))
            ev.expect(True, _("source changed to name=lab: team-greeting now says 'Hello, lab!'"))
            lab.core.patch_namespaced_config_map("team-greeting", ns, {"data": {"message": "tampered"}})
            wait_for(lambda: message() == "Hello, lab!", REACTION, _("the controller to undo the tampering"))
            ev.expect(True, _("team-greeting edited by hand to 'tampered': put back to 'Hello, lab!'"))
        finally:
            controller.stop.set()
            thread.join(REACTION)
        ev.add(_("controller log: {logs}").format(logs="; ".join(logs)))
        ev.expect(not errors and not thread.is_alive(),
                  _("controller stopped cleanly after {count} writes").format(count=controller.reconciled),
                  _("controller: {errors}").format(errors=errors or _("did not stop")))
