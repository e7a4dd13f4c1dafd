"""Mitogen's linear strategy, from the pinned mitogen package (requirements.txt), where ansible.cfg's
strategy_plugins finds it whatever the virtualenv's Python version."""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule  # noqa: F401
