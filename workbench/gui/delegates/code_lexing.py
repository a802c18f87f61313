"""Lexing code blocks off the UI thread, on one thread that ends when it runs dry.

Pygments is pure Python (one block may take 10 ms), so a timeline row's code is painted
plain first and lexed here into :func:`code_colours`' cache; ``done`` is then called on
the lexing thread, for the delegate to colour the row from that cache.

The thread is started by the first block to lex and ends as soon as nothing is left to
lex, rather than idling for the rest of the process (an executor's worker would): an
idle thread that a normal exit waits for keeps ``workbench import`` from ending at once
in a process that once painted code (cli.run), and outlives the window that asked.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence

from workbench.gui.delegates.markdown import CodeBlock, code_colours

log = logging.getLogger(__name__)

_lock = threading.Lock()
_waiting: deque[tuple[Sequence[CodeBlock], bool, Callable[[], None]]] = deque()
_thread: threading.Thread | None = None


def lex_later(blocks: Sequence[CodeBlock], dark: bool, done: Callable[[], None]) -> None:
    """Lex ``blocks`` for the theme (``dark``) on the lexing thread, then call ``done``
    there; blocks are lexed in the order they were asked for."""
    global _thread
    with _lock:
        _waiting.append((blocks, dark, done))
        if _thread is None:
            _thread = threading.Thread(target=_drain, name="code-colours")
            _thread.start()


def lexing_thread() -> threading.Thread | None:
    """The lexing thread while it has blocks to lex, else None."""
    with _lock:
        return _thread


def _drain() -> None:
    global _thread
    while True:
        with _lock:
            if not _waiting:
                _thread = None
                return
            blocks, dark, done = _waiting.popleft()
        try:
            for block in blocks:
                if block.language:
                    code_colours(block.language, block.shown or block.text, dark)
        except Exception:  # a lexer's bug leaves that block plain, not the thread dead
            log.exception("lexing a code block failed")
        done()
