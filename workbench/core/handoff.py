"""Quick hand-offs of the interpreter lock while Python code and native code overlap.

The extractive summarizer writes its lines in Python on one thread while another thread
counts the finished ones with tiktoken, which lets go of the interpreter lock while it
encodes. Each time the counting thread comes back for its next block it needs the lock
for a moment, and a thread that waits for the lock only gets it when the running thread
drops it: by default after 5 ms (``sys.getswitchinterval()``). Across a few blocks that
wait serializes most of the counting behind the line writing (measured: Python work and
a count run side by side took about as long as one after the other). A switch interval
of a fraction of a millisecond for the duration lets the two really overlap; the cost is
more frequent, cheap switches elsewhere in the process for those few milliseconds.
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
def quick_handoff() -> Iterator[None]:
    """Shorten the interpreter's switch interval for the ``with`` block.

    Nested and concurrent uses are counted: the interval set before the first one began
    comes back when the last one ends. A shorter interval set by someone else is kept.
    """
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = sys.getswitchinterval()
            if _saved > HANDOFF_INTERVAL:
                sys.setswitchinterval(HANDOFF_INTERVAL)
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                sys.setswitchinterval(_saved)
