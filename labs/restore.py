"""Restoring what checks change, even on failure or Ctrl-C: the per-thread undo stacks (one Restorer for the
process, RESTORER) and the SIGINT/SIGTERM handlers that run them all."""

from __future__ import annotations

import atexit
import signal
import threading
from collections.abc import Callable

from labs.i18n import _


class Restorer:
    """Stacks of undo actions, one per thread (checks may run side by side), each run at the end of its check;
    all of them at exit and on SIGINT/SIGTERM. Once closed (interrupted), an action pushed by a check that is
    still running is carried out at once: nothing is created that nobody would delete."""

    def __init__(self) -> None:
        self._stacks: dict[int, list[tuple[str, Callable[[], None]]]] = {}
        self._lock = threading.Lock()
        self.closed = False
        atexit.register(self.run_everything)

    @property
    def actions(self) -> list[tuple[str, Callable[[], None]]]:
        with self._lock:
            return self._stacks.setdefault(threading.get_ident(), [])

    def push(self, what: str, action: Callable[[], None]) -> None:
        if self.closed:
            action()
            return
        self.actions.append((what, action))

    def discard(self, what: str) -> None:
        """Forget an undo action that the check already carried out itself."""
        actions = self.actions
        for i in range(len(actions) - 1, -1, -1):
            if actions[i][0] == what:
                del actions[i]
                return

    def run_all(self, log: Callable[[str], None] | None = None) -> list[str]:
        """Carry out this thread's undo actions, newest first."""
        return self._run(self.actions, log)

    def run_everything(self) -> None:
        """Carry out every thread's undo actions (exit, interrupt)."""
        self.closed = True
        with self._lock:
            stacks = list(self._stacks.values())
        for actions in stacks:
            self._run(actions, None)

    @staticmethod
    def _run(actions: list, log: Callable[[str], None] | None) -> list[str]:
        errors = []
        while actions:
            try:
                what, action = actions.pop()
            except IndexError:  # another thread emptied it meanwhile
                break
            try:
                action()
                if log:
                    log(_("restored: {what}").format(what=what))
            except Exception as exc:  # noqa: BLE001 - every undo must get its chance
                errors.append(_("{what}: {error}").format(what=what, error=exc))
        return errors


RESTORER = Restorer()


def _on_signal(signum, _frame):
    RESTORER.run_everything()
    raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


def install_signal_handlers() -> None:
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
