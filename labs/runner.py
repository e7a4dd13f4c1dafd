"""Running checks: each with its undo actions carried out at its end (and, after a disruptive one, a wait until the
cluster is healthy again), the observing ones side by side, then the disruptive ones one by one, each result
printed as it comes. `lab check` and the tests share it."""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

from labs.episodes import EPISODES
from labs.i18n import _, join, tr
from labs.registry import REGISTRY, CheckFailed, CheckSkipped, Evidence, Result, message_of, plain
from labs.restore import RESTORER

if TYPE_CHECKING:
    from labs.lab import Lab

COLORS = {"passed": "\033[32m", "failed": "\033[31m", "error": "\033[31m", "skipped": "\033[33m"}
# A result's status as people read it (the JSON and JUnit reports keep the English words above).
STATUS = {"passed": _("passed"), "failed": _("failed"), "skipped": _("skipped"), "error": _("error")}


def paint(status: str, text: str, tty: bool) -> str:
    return f"{COLORS[status]}{text}\033[0m" if tty else text


def run_check(lab: Lab, chk, tty: bool, tag: str = "", wait_healthy: bool = True) -> Result:
    """Run one check and undo what it did. After a disruptive check, wait (bounded) until the cluster is
    healthy again, unless ``wait_healthy`` is False: a falsification test keeps the cluster broken on
    purpose while the check runs, and waits for health itself once it has repaired it."""
    ev = Evidence(progress=lambda line: print(f"    … {tag}{tr(line)}", flush=True))
    started = time.monotonic()
    status, message = "passed", ""
    try:
        chk.func(lab, ev)
    except CheckSkipped as exc:
        status, message = "skipped", message_of(exc)
    except CheckFailed as exc:
        status, message = "failed", message_of(exc)
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
        message = also(message, _("could not restore: {errors}").format(errors=join("; ", errors)))
    if wait_healthy and chk.disruptive and status != "skipped":
        try:
            lab.wait_healthy(timeout=180, ev=ev)
        except CheckFailed as exc:
            status = "failed" if status == "failed" else "error"
            message = also(message, _("cluster not healthy after the check: {error}").format(error=message_of(exc)))
    return Result(chk.id, chk.title, status, ev.lines, message, round(time.monotonic() - started, 1), chk.disruptive,
                  ev.at)


def also(message: str, more: str) -> str:
    """A result's message with one more problem after it."""
    return _("{message}; {more}").format(message=message, more=more) if message else more


class Progress:
    """How far a run is: N of M checks done and the time since it began, shown after each result on a terminal."""

    def __init__(self, total: int, show: bool) -> None:
        self.total, self.done, self.show, self.started = total, 0, show, time.monotonic()

    def tick(self) -> str:
        self.done += 1
        if not self.show:
            return ""
        return " " + tr(_("[{done}/{total} done, {seconds:.0f}s]").format(
            done=self.done, total=self.total, seconds=time.monotonic() - self.started))


PROGRESS = Progress(0, False)
HINT_SETTINGS: dict = {}  # the running cluster's settings, which fill the hints' @placeholders@


def print_result(res: Result, tty: bool) -> None:
    """A result as it comes, in the chosen language."""
    head = paint(res.status, tr(STATUS[res.status]).upper(), tty)
    print(f"{head:>8}  {res.id} {tr(res.title)} ({res.seconds:.1f}s){PROGRESS.tick()}")
    for line in res.evidence:
        print(f"          {tr(line)}")
    if res.message and res.status != "passed":
        print(f"          → {tr(res.message)}")
    if res.status in ("failed", "error") and res.id in REGISTRY:
        for hint in REGISTRY[res.id].hints_for(res.message, HINT_SETTINGS):
            print("          " + tr(_("hint: {hint}").format(hint=plain(hint))))
    print()


def summary(results: list[Result], seconds: float | None = None) -> str:
    """How many checks passed, failed (errors included) and were skipped; with ``seconds``, how long they took."""
    counts = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "skipped", "error")}
    values = {"passed": counts["passed"], "failed": counts["failed"] + counts["error"], "skipped": counts["skipped"]}
    if seconds is None:
        return _("{passed} passed, {failed} failed, {skipped} skipped").format(**values)
    return _("{passed} passed, {failed} failed, {skipped} skipped in {seconds:.0f}s").format(seconds=seconds, **values)


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
                print(f"  ▶ {chk.id} {tr(chk.title)}", flush=True)
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
    disrupt = disruptive_order([chk for chk in chks if chk.disruptive])
    results = run_parallel(lab, observe, jobs, tty)
    shared = {chk.reads for chk in disrupt} & {chk.id for chk in disrupt}
    if shared:
        EPISODES.begin()  # a check reads another's observations (labs.episodes): kept for this run only
    try:
        for chk in disrupt:  # one at a time: each one stops part of the cluster
            print(f"  ▶ {chk.id} {tr(chk.title)} " + tr(_("[disruptive]")), flush=True)
            res = run_check(lab, chk, tty, wait_healthy=wait_healthy)
            results.append(res)
            print_result(res, tty)
    finally:
        EPISODES.end()
    return results


def disruptive_order(chks: list) -> list:
    """The disruptive checks in their order, but a check that reads another's observations (``reads``, when that
    one is in the run too) right after it."""
    ids = [chk.id for chk in chks]
    rank = {chk.id: (ids.index(chk.reads) + 0.5 if chk.reads in ids else ids.index(chk.id)) for chk in chks}
    return sorted(chks, key=lambda chk: rank[chk.id])
