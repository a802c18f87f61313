"""How the command line writes for people: on a terminal or through a pipe, in any
encoding, at the terminal's width, with the engine's warnings as one line each and a
closed pipe silent.

It imports nothing of the command line, so every command module (and
:mod:`workbench.cli.common`) may import it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _OneLineFormatter(logging.Formatter):
    """A log record as one ``workbench: …`` line: its message, never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        return "workbench: " + " ".join(record.getMessage().split())


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record comes (not when it was made)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


@contextmanager
def log_to_stderr() -> Iterator[None]:
    """While the block runs, warnings of the engine (a token cache rebuilt, a
    background pass that failed) are one ``workbench:`` line each on stderr, never a
    traceback."""
    handler = _StderrHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_OneLineFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


# Control characters a terminal would act on (escape sequences retitle the window, move
# the cursor, hide text; a carriage return overwrites the line), in text that comes
# from conversations. Newlines and tabs are text.
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _shown(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


class TerminalText(io.TextIOBase):
    """Standard output on a terminal, with the control characters of what is written
    shown as ``\\x1b`` rather than obeyed: a title or message imported from elsewhere
    is data, never a command to the terminal."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(_TERMINAL_CONTROLS.sub(_shown, text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return int(self.inner.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "encoding", None) or "utf-8")


def write_control(stream: Any, text: str) -> None:
    """Write the command line's own control characters (``\\r`` to rewrite a progress
    line, ``\\x1b[K`` to erase it) to ``stream`` as they are, past :class:`TerminalText`."""
    inner = stream.inner if isinstance(stream, TerminalText) else stream
    inner.write(text)


def _on_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextmanager
def terminal_safe_output(stdout_wanted: bool) -> Iterator[None]:
    """While the block runs, standard output (when ``stdout_wanted``) and standard error
    show control characters instead of passing them to the terminal, each when it is a
    terminal: a file name, a title or a server's error text is data, never a command."""
    saved = (sys.stdout, sys.stderr)
    if stdout_wanted and _on_terminal(sys.stdout):
        sys.stdout = TerminalText(sys.stdout)
    if _on_terminal(sys.stderr):
        sys.stderr = TerminalText(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def silence_stdout() -> None:
    """Point standard output at the null device, so that nothing more written there (nor
    Python's flush on the way out) complains about a reader that went away."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (captured output)
        pass


def writes_unicode(stream: Any) -> bool:
    """Whether ``stream`` encodes every character (UTF-8 or UTF-16/32)."""
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "")
    return encoding.startswith("utf")


def tolerate_output_encoding() -> None:
    """On a terminal whose encoding cannot show every character (``LANG`` of Latin-1,
    ``PYTHONIOENCODING=ascii``), print ``?`` for those characters instead of failing
    with a traceback. JSON escapes them instead (see :func:`print_json`)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and not writes_unicode(stream):
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="replace")


def write_utf8(text: str) -> None:
    """``text`` on standard output as UTF-8 whatever the terminal's encoding (an export
    is a UTF-8 file, also when it goes through a pipe)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None or writes_unicode(sys.stdout):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    sys.stdout.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def line_width() -> int:
    """The width human output fits in: the terminal's, else ``COLUMNS``, else 80."""
    import shutil

    return max(40, shutil.get_terminal_size((80, 24)).columns)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis marking the cut (spaces kept)."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
