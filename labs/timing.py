"""Bounded waiting: how much slower this cluster's machines are than real hardware (Timing, scaled), polling until
something holds (wait_for), and reading the durations components are configured with (parse_duration)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from labs.i18n import _
from labs.registry import CheckFailed


class Timing:
    """How much longer than on real hardware things may take on this cluster's machines: the settings'
    timeout_scale (1, or more for VMs under software emulation), read from the inventory by Lab."""

    scale: float = 1.0


def scaled(seconds: float) -> float:
    """A bound on how long something takes on real hardware, for this cluster's machines."""
    return seconds * Timing.scale


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 1.0):
    """Poll ``predicate`` until it returns something truthy; bounded by ``timeout`` (seconds on real hardware,
    scaled for the cluster's machines: see Timing)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - the cluster may be recovering
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = _(" (last error: {error})").format(error=last_exc) if last_exc else ""
            raise CheckFailed(_("timed out after {timeout:.0f}s waiting for {what}{detail}").format(
                timeout=timeout, what=what, detail=detail))
        time.sleep(interval)


def parse_duration(text: str) -> float:
    total = 0.0
    for number, unit in re.findall(r"([\d.]+)(ms|s|m|h)", text):
        total += float(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total
