"""A check that times out waiting for its pods says how it last saw them (labs.kube.wait_ready_pods), so that a
failure on a healthy cluster can be told apart: no pod made (the controllers did not act), none scheduled, or a
container still waiting."""

from __future__ import annotations

import datetime
import re

import pytest
from kubernetes import client

from labs.kube import pod_state, wait_ready_pods
from labs.registry import CheckFailed


def pod(name: str, node: str | None, phase: str, waiting: str | None = None, ready: bool = False,
        deleted: bool = False) -> client.V1Pod:
    state = client.V1ContainerState(waiting=client.V1ContainerStateWaiting(reason=waiting)) if waiting else \
        client.V1ContainerState(running=client.V1ContainerStateRunning())
    statuses = None if phase == "Pending" and not waiting else [client.V1ContainerStatus(
        name="main", image="echo", image_id="", ready=ready, restart_count=0, state=state)]
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, deletion_timestamp=datetime.datetime.now(datetime.UTC)
                                     if deleted else None),
        spec=client.V1PodSpec(node_name=node, containers=[]),
        status=client.V1PodStatus(phase=phase, container_statuses=statuses))


@pytest.mark.parametrize(("seen", "shown"), [
    (pod("web-a", None, "Pending"), "web-a@(not scheduled) Pending"),
    (pod("web-b", "w2", "Pending", waiting="ContainerCreating"), "web-b@w2 Pending ContainerCreating"),
    (pod("web-c", "w2", "Running"), "web-c@w2 Running not ready"),
    (pod("web-d", "w1", "Running", ready=True), "web-d@w1 Running"),
    (pod("web-e", "w2", "Running", ready=True, deleted=True), "web-e@w2 Running Terminating"),
])
def test_a_pod_is_shown_with_what_keeps_it_from_being_ready(seen, shown):
    assert pod_state(seen) == shown


class Pods:
    """A lab whose API lists the same pods at every look."""

    def __init__(self, *pods: client.V1Pod) -> None:
        self.core = self
        self.pods = list(pods)

    def list_namespaced_pod(self, ns: str, label_selector: str) -> client.V1PodList:
        return client.V1PodList(items=self.pods)


def test_a_timeout_names_the_pods_as_last_seen():
    lab = Pods(pod("web-a", "w2", "Running", ready=True), pod("web-b", None, "Pending"))
    with pytest.raises(CheckFailed) as failed:
        wait_ready_pods(lab, "lab-c29-x", "web", 2, timeout=0)
    message = str(failed.value)
    # the pattern the falsification tests match still matches (tests/e2e/test_labs.py: C12)
    assert re.search(r"waiting for \d+ ready pods app=web", message)
    assert message.endswith("; the pods then: web-a@w2 Running, web-b@(not scheduled) Pending")


def test_a_timeout_without_any_pod_says_none():
    with pytest.raises(CheckFailed, match=r"waiting for 2 ready pods app=web in ns; the pods then: none$"):
        wait_ready_pods(Pods(), "ns", "web", 2, timeout=0)


def test_ready_pods_are_returned():
    ready = [pod("web-a", "w1", "Running", ready=True), pod("web-b", "w2", "Running", ready=True)]
    assert wait_ready_pods(Pods(*ready), "ns", "web", 2, timeout=0) == ready
