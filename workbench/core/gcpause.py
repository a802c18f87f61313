"""Pausing the cyclic garbage collector around allocation-heavy work.

Loading a long session builds tens of thousands of objects that live for one call and
are freed by reference counting. While they live, the collector's generational passes
walk them again and again (a full pass over 100,000 objects holds the interpreter for
100 ms and more), which can double the time of a preview or a preflight and freeze the
UI thread meanwhile. None of that work creates reference cycles worth collecting early.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_pausers = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector for the ``with`` block.

    Nested and concurrent uses (several threads) are counted: the collector runs again
    when the last one ends, and only if it was enabled when the first one began.
    """
    global _pausers, _was_enabled
    with _lock:
        if _pausers == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _lock:
            _pausers -= 1
            if _pausers == 0 and _was_enabled:
                gc.enable()
