"""Mitogen's linear strategy, from the pinned mitogen package (requirements.txt), where ansible.cfg's
strategy_plugins finds it whatever the virtualenv's Python version.

One change: the installed collections are listed once per run. Mitogen's planner lists them
(ansible.collections.list.list_collection_dirs, which reads the manifest of each of the ~100 collections the
`ansible` package installs) the first time a process runs a collection's module, and Ansible runs every task of
every host in a new worker process, so it did so for each task and host that uses a collection's module
(ansible.posix.sysctl, community.crypto, kubernetes.core): a sixth of the workers' CPU time in a re-run that
changes nothing. The list cannot change during a run; it is made here, in the controller's process, before the
workers are forked, and they inherit it."""

import ansible.collections.list
import ansible_mitogen.planner
from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as MitogenLinear

_collection_dirs: list[bytes] | None = None


def collection_dirs() -> list[bytes]:
    """The installed collections' folders, listed the first time only."""
    global _collection_dirs
    if _collection_dirs is None:
        _collection_dirs = list(ansible.collections.list.list_collection_dirs())
    return _collection_dirs


def _load_collections(invocation) -> None:
    """ansible_mitogen.planner._load_collections, from the list made once."""
    for path in collection_dirs():
        invocation._extra_sys_paths.add(path.decode("utf-8"))


ansible_mitogen.planner._load_collections = _load_collections


class StrategyModule(MitogenLinear):
    def run(self, iterator, play_context):
        collection_dirs()  # in the controller's process, before this play's workers are forked
        return super().run(iterator, play_context)
