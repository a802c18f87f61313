"""Quick hand-offs of the interpreter lock while Python code and native code overlap.

Two threads that share work, one running Python and one in code that lets go of the
interpreter lock (tiktoken encoding a block of summary lines, SQLite stepping through an
import), meet each time the second one comes back for the lock: it only gets it when the
running thread drops it, by default after 5 ms (``sys.getswitchinterval()``). Across many
hand-offs that wait serializes most of the work (measured: Python work and a count run
side by side took about as long as one after the other). A switch interval of a
fraction of a millisecond while they overlap lets them really run together; the cost is
more frequent, cheap switches elsewhere in the process meanwhile.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["HANDOFF_INTERVAL", "quick_handoff"]

#: The switch interval (seconds) inside :func:`quick_handoff`.
HANDOFF_INTERVAL = 0.0002

_lock = threading.Lock()
_users = 0
_saved = 0.0


@contextmanager
def quick_handoff(interval: float = HANDOFF_INTERVAL) -> Iterator[None]:
    """Shorten the interpreter's switch interval to ``interval`` seconds (if it is longer)
    for the ``with`` block.

    Nested and concurrent uses are counted: the interval set before the first one began
    comes back when the last one ends; meanwhile the shortest one asked for holds.
    """
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = sys.getswitchinterval()
        if sys.getswitchinterval() > interval:
            sys.setswitchinterval(interval)
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                sys.setswitchinterval(_saved)
