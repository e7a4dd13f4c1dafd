"""The VM tests bring up libvirt VMs under software emulation here. K8S_LAB_TEST_VM says which run: `single` (one
VM; `make test` sets it, VM_TEST=single by default), `1` or `default` (three VMs: `make test-vm`); unset, empty or
`0`, they are skipped."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("K8S_LAB_TEST_VM", "") not in ("", "0"):
        return
    skip = pytest.mark.skip(reason="VM tests run from `make test` (VM_TEST=single) and `make test-vm` "
                                   "(K8S_LAB_TEST_VM unset or 0 here)")
    for item in items:
        if "tests/vm/" in str(item.fspath):
            item.add_marker(skip)
