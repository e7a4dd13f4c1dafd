"""What a disruptive check saw that another check's claim is also about, kept for the rest of one `lab check` run.

Losing a worker is the slowest thing the lab does (the node controller's grace period, 40 s and more). C29 loses one
to show its workload moving; what C14 claims (the node controller notices the silent node: not Ready, tainted
unreachable) is seen on the way. When one run holds both, the runner runs C29 first and C14 reads C29's record instead
of losing a node a second time; C14 alone, or after a C29 that did not get that far, loses the node itself.

A record exists only while a run that holds both checks is open (the runner opens it), so that a check run on its own
(`lab check C14`, a falsification test) never reads another run's observations."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class NodeLoss:
    """A worker whose kubelet was stopped, as the check that stopped it saw it."""

    by: str  # the check that lost the node
    worker: str
    grace: float  # kube-controller-manager's --node-monitor-grace-period, seconds
    stopped: float = field(default_factory=time.monotonic)  # when the kubelet was stopped (monotonic)
    not_ready_after: float | None = None  # seconds from the stop to the Node's Ready condition turning Unknown/False
    status: str = ""  # that condition's status
    taints: list[str] = field(default_factory=list)  # the node's taint keys seen then
    ready_again: bool = False  # the kubelet started again and the Node Ready again

    def not_ready(self, status: str, taints: list[str]) -> None:
        self.not_ready_after, self.status, self.taints = round(time.monotonic() - self.stopped, 1), status, taints

    def age(self) -> float:
        return time.monotonic() - self.stopped


class Episodes:
    """The records of one run, open while the runner runs checks that can share them."""

    def __init__(self) -> None:
        self.open = False
        self.node_loss: NodeLoss | None = None

    def begin(self) -> None:
        self.open, self.node_loss = True, None

    def end(self) -> None:
        self.open, self.node_loss = False, None

    def lose_node(self, by: str, worker: str, grace: float) -> NodeLoss:
        """A node loss starting now; recorded for the run when one is open (else only returned)."""
        loss = NodeLoss(by, worker, grace)
        if self.open:
            self.node_loss = loss
        return loss


EPISODES = Episodes()
