"""Running a CP-SAT solve so that Ctrl-C stops the command, not just the search.

By default CP-SAT catches SIGINT itself while it solves: the first Ctrl-C ends the search
and ``Solve`` returns the best found so far, as if the time limit had been reached, so an
interrupted command went on to finish with a weaker answer (an exact worst case became an
interval) and exit 0; its handler, restored afterwards, could also leave a later Ctrl-C to
kill the process without a word. Here the solver leaves signals alone and runs on a worker
thread while the main thread waits in Python, where SIGINT raises ``KeyboardInterrupt`` at
once: the search is stopped and the interrupt goes on up to the command line (exit 130).
"""

from __future__ import annotations

import threading
from typing import Any

WAIT_S = 0.05  # the main thread wakes this often (a signal also wakes it)


def solve(solver: Any, model: Any, callback: Any = None) -> Any:
    """``solver.Solve(model, callback)``'s status; Ctrl-C stops the search and raises
    ``KeyboardInterrupt``."""
    solver.parameters.catch_sigint_signal = False

    def run() -> Any:
        return solver.Solve(model) if callback is None else solver.Solve(model, callback)

    if threading.current_thread() is not threading.main_thread():
        return run()  # signals reach the main thread only: nothing to wait for here
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["status"] = run()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            outcome["error"] = e
        finally:
            done.set()

    threading.Thread(target=work, name="streamplan-cp-sat", daemon=True).start()
    # wait on an event, not Thread.join: a KeyboardInterrupt inside join can mark a running
    # thread finished (Python 3.11), and the process then exits under a live solver (abort)
    try:
        while not done.wait(WAIT_S):
            pass
    except BaseException:  # Ctrl-C: stop the search, wait for the solver to return, go on up
        solver.StopSearch()
        done.wait()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["status"]
