"""Processes: how segrl starts a Python child process (so that nothing in the working folder is
imported by it), and the signals that stop a segrl process as Ctrl-C does.

``python -m NAME`` puts the working folder first on the child's ``sys.path``: a ``segrl.py``,
``mlflow.py`` or ``numpy.py`` there would run in place of the module. Every Python child segrl starts
(a bench's cells, ``segrl ui``'s MLflow server) is started with ``python_command`` and
``python_environment``: ``-P`` keeps the working folder off the child's path, and
``PYTHONSAFEPATH=1`` keeps it off the path of every Python process the child starts in turn (MLflow's
server starts its workers as ``python -m uvicorn``).

SIGTERM (what ``kill``, ``timeout`` and cluster schedulers send) stops segrl as Ctrl-C's SIGINT does:
``handling(raise_interrupt)`` turns it into an ``Interrupted`` (a ``KeyboardInterrupt``) that names
it, and a training job's ``segrl.jobs.stop_requests`` stops at a step boundary on either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from segrl.errors import Interrupted

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a segrl command as a Ctrl-C does: SIGINT (Ctrl-C) and SIGTERM."""
SAFE_PATH_VARIABLE = "PYTHONSAFEPATH"


def python_command(*args: str) -> list[str]:
    """The command line of a Python child process running ``args`` (``"-m", "segrl", ...``) with
    this interpreter, the working folder kept off its ``sys.path`` (``-P``, Python 3.11+)."""
    return [sys.executable, "-P", *args]


def python_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (else this process's environment) for a Python child process: with
    ``PYTHONSAFEPATH=1``, so that the Python processes it starts in turn keep the working folder off
    their ``sys.path`` too."""
    return {**(os.environ if env is None else env), SAFE_PATH_VARIABLE: "1"}


def raise_interrupt(signum: int, frame: Any) -> None:
    """A signal handler: raise ``Interrupted`` naming the signal, as Python's own SIGINT handler
    raises ``KeyboardInterrupt``."""
    raise Interrupted(signum=signum)


@contextlib.contextmanager
def handling(
    handler: Callable[[int, Any], Any], signals: Collection[int] = STOP_SIGNALS
) -> Iterator[None]:
    """``handler(signum, frame)`` handles ``signals`` inside the block; the handlers before it are
    put back after. Outside the main thread (where Python takes no handler), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():  # None: a handler not set from Python
            signal.signal(s, signal.SIG_DFL if old is None else old)
