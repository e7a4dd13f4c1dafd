"""Running checks: each with its undo actions carried out at its end (and, after a disruptive one, a wait until the
cluster is healthy again), the observing ones side by side, then the disruptive ones one by one, each result
printed as it comes. `lab check` and the tests share it."""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

from labs.registry import REGISTRY, CheckFailed, CheckSkipped, Evidence, Result, plain
from labs.restore import RESTORER

if TYPE_CHECKING:
    from labs.lab import Lab

COLORS = {"passed": "\033[32m", "failed": "\033[31m", "error": "\033[31m", "skipped": "\033[33m"}


def paint(status: str, text: str, tty: bool) -> str:
    return f"{COLORS[status]}{text}\033[0m" if tty else text


def run_check(lab: Lab, chk, tty: bool, tag: str = "", wait_healthy: bool = True) -> Result:
    """Run one check and undo what it did. After a disruptive check, wait (bounded) until the cluster is
    healthy again, unless ``wait_healthy`` is False: a falsification test keeps the cluster broken on
    purpose while the check runs, and waits for health itself once it has repaired it."""
    ev = Evidence(progress=lambda line: print(f"    … {tag}{line}", flush=True))
    started = time.monotonic()
    status, message = "passed", ""
    try:
        chk.func(lab, ev)
    except CheckSkipped as exc:
        status, message = "skipped", str(exc)
    except CheckFailed as exc:
        status, message = "failed", str(exc)
    except KeyboardInterrupt:
        RESTORER.run_all(log=ev.add)
        raise
    except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
        status, message = "error", f"{type(exc).__name__}: {exc}"
    finally:
        errors = RESTORER.run_all(log=ev.add)
    # A claim found false stays "failed" (its evidence is the verdict) even when restoring goes wrong after it;
    # the restore problem is reported with it. Otherwise a restore problem makes the result an error.
    if errors:
        status = "failed" if status == "failed" else "error"
        message = f"{message}; could not restore: {'; '.join(errors)}".lstrip("; ")
    if wait_healthy and chk.disruptive and status != "skipped":
        try:
            lab.wait_healthy(timeout=180, ev=ev)
        except CheckFailed as exc:
            status = "failed" if status == "failed" else "error"
            message = f"{message}; cluster not healthy after the check: {exc}".lstrip("; ")
    return Result(chk.id, chk.title, status, ev.lines, message, round(time.monotonic() - started, 1), chk.disruptive,
                  ev.at)


class Progress:
    """How far a run is: N of M checks done and the time since it began, shown after each result on a terminal."""

    def __init__(self, total: int, show: bool) -> None:
        self.total, self.done, self.show, self.started = total, 0, show, time.monotonic()

    def tick(self) -> str:
        self.done += 1
        return f" [{self.done}/{self.total} done, {time.monotonic() - self.started:.0f}s]" if self.show else ""


PROGRESS = Progress(0, False)
HINT_SETTINGS: dict = {}  # the running cluster's settings, which fill the hints' @placeholders@


def print_result(res: Result, tty: bool) -> None:
    head = paint(res.status, res.status.upper(), tty)
    print(f"{head:>8}  {res.id} {res.title} ({res.seconds:.1f}s){PROGRESS.tick()}")
    for line in res.evidence:
        print(f"          {line}")
    if res.message and res.status != "passed":
        print(f"          → {res.message}")
    if res.status in ("failed", "error") and res.id in REGISTRY:
        for hint in REGISTRY[res.id].hints_for(res.message, HINT_SETTINGS):
            print(f"          hint: {plain(hint)}")
    print()


def run_parallel(lab: Lab, chks: list, jobs: int, tty: bool) -> list[Result]:
    """Run observing checks side by side (each in its own namespace, with its own undo stack); print each
    result as it comes; return them in the order given. Daemon threads: Ctrl-C does not wait for them."""
    if not chks:
        return []
    for node in lab.nodes:
        lab.host(node)  # testinfra hosts are not created thread-safely: create them all up front
    pending: queue.Queue = queue.Queue()
    for chk in chks:
        pending.put(chk)
    done: dict[str, Result] = {}
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                chk = pending.get_nowait()
            except queue.Empty:
                return
            with lock:
                print(f"  ▶ {chk.id} {chk.title}", flush=True)
            res = run_check(lab, chk, tty, tag=f"{chk.id}: " if jobs > 1 else "")
            with lock:
                done[chk.id] = res
                print_result(res, tty)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, min(jobs, len(chks))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.5)  # short joins: Ctrl-C reaches the main thread
    return [done[c.id] for c in chks]


def run_checks(lab: Lab, chks: list, jobs: int, tty: bool, progress: bool = False,
               wait_healthy: bool = True) -> list[Result]:
    """The observing checks first, side by side (``jobs`` at a time); then the disruptive ones one by one. Each
    result printed as it comes (colours when ``tty``; with ``progress``, how many are done); all returned,
    observing ones first. ``wait_healthy`` False: no wait for health after a disruptive check (while a fault is
    in the cluster on purpose, a break-and-fix exercise, as in the falsification tests)."""
    global PROGRESS  # noqa: PLW0603 - one run at a time per process
    PROGRESS = Progress(len(chks), progress)
    HINT_SETTINGS.clear()
    HINT_SETTINGS.update(lab.settings())
    observe = [chk for chk in chks if not chk.disruptive]
    disrupt = [chk for chk in chks if chk.disruptive]
    results = run_parallel(lab, observe, jobs, tty)
    for chk in disrupt:  # one at a time: each one stops part of the cluster
        print(f"  ▶ {chk.id} {chk.title} [disruptive]", flush=True)
        res = run_check(lab, chk, tty, wait_healthy=wait_healthy)
        results.append(res)
        print_result(res, tty)
    return results
