"""The fresh-host test's container starts as soon as the session's tests are collected and runs in the background,
at a low CPU weight, while the other tests run (most of `make test` waits on clusters); the test itself, near the
end, waits for it and reads its output. K8S_LAB_FRESH_HOST_BACKGROUND=0 starts it in the test instead."""

from __future__ import annotations

import os
import sys


def fresh_host():
    return sys.modules.get("test_fresh_host")  # imported by its basename (pytest's default import mode)


def pytest_collection_finish(session):
    module = fresh_host()
    if module is None or session.config.option.collectonly or \
            os.environ.get("K8S_LAB_FRESH_HOST_BACKGROUND", "1") != "1":
        return
    if any(item.get_closest_marker("fresh_host") for item in session.items):
        module.start_in_background()


def pytest_sessionfinish(session, exitstatus):
    module = fresh_host()
    if module is not None and "run" in module.BACKGROUND:  # started, never waited for (deselected, interrupted)
        module.remove(module.BACKGROUND.pop("run"))
