"""The VM tests bring up libvirt VMs (an hour and more under software emulation): they run from `make test-vm`
(which sets K8S_LAB_TEST_VM=1), never as part of `make test`."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("K8S_LAB_TEST_VM") == "1":
        return
    skip = pytest.mark.skip(reason="VM tests run from `make test-vm` (K8S_LAB_TEST_VM=1)")
    for item in items:
        if "tests/vm/" in str(item.fspath):
            item.add_marker(skip)
