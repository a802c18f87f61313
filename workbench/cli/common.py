"""What the command modules share: opening the workspace, printing JSON, the JSON of
core records and the argument types.

It sits below every command module and below :mod:`workbench.cli` (which builds the
parser from them), so each imports it plainly and none imports the package.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from workbench.core.conversation import Message, SessionInfo, format_time

EXIT_ERROR = 1
EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line on stderr (SPEC §8): the
    reason and where to read more, without the usage block."""

    # The words of the command line being parsed (set by :func:`workbench.cli.main`),
    # for the hint about values that start with "-".
    words: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        hint = ""
        dashed = [w for w in self.words if w.startswith("-") and len(w) > 1
                  and w != "--" and not w.lstrip("-").replace(".", "", 1).isdigit()
                  and w.split("=", 1)[0] not in self._option_string_actions]
        if dashed and "required" in message:
            hint = f"; to give {dashed[0]!r} as a value, end the command with: -- {dashed[0]}"
        self.exit(EXIT_USAGE, f"{self.prog}: {message}{hint} (see: {self.prog} --help)\n")


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


@contextmanager
def terminal_safe_stdout(wanted: bool) -> Iterator[None]:
    """While the block runs, standard output shows control characters instead of
    passing them to the terminal, when ``wanted`` and standard output is a terminal."""
    inner = sys.stdout
    try:
        on_terminal = wanted and bool(inner.isatty())
    except (AttributeError, ValueError):
        on_terminal = False
    if not on_terminal:
        yield
        return
    sys.stdout = TerminalText(inner)
    try:
        yield
    finally:
        if isinstance(sys.stdout, TerminalText):
            sys.stdout = inner


def silence_stdout() -> None:
    """Point standard output at the null device, so that nothing more written there (nor
    Python's flush on the way out) complains about a reader that went away."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (captured output)
        pass


def _writes_unicode(stream: Any) -> bool:
    """Whether ``stream`` encodes every character (UTF-8 or UTF-16/32)."""
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "")
    return encoding.startswith("utf")


def tolerate_output_encoding() -> None:
    """On a terminal whose encoding cannot show every character (``LANG`` of Latin-1,
    ``PYTHONIOENCODING=ascii``), print ``?`` for those characters instead of failing
    with a traceback. JSON escapes them instead (see :func:`print_json`)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and not _writes_unicode(stream):
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="replace")


def write_utf8(text: str) -> None:
    """``text`` on standard output as UTF-8 whatever the terminal's encoding (an export
    is a UTF-8 file, also when it goes through a pipe)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None or _writes_unicode(sys.stdout):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    sys.stdout.flush()
    buffer.write(text.encode("utf-8"))
    buffer.flush()


def print_json(data: Any) -> None:
    # Escaped where the output's encoding could not carry a character: still the same JSON.
    json.dump(data, sys.stdout, ensure_ascii=not _writes_unicode(sys.stdout), indent=2)
    sys.stdout.write("\n")


def open_workspace(args: argparse.Namespace) -> Any:
    # Imported here: ``workbench --version`` and ``--help`` stay quick without the engine.
    from workbench.engine.workspace import Workspace

    return Workspace.open(args.db)


@contextmanager
def session_editing(args: argparse.Namespace) -> Iterator[tuple[SessionInfo, Any]]:
    """The session ``args.session`` names and the engine's editing of it, in an open
    workspace (closed when the block ends)."""
    with open_workspace(args) as ws:
        yield ws.find_session(args.session), ws.editing()


def print_result(args: argparse.Namespace, data: Any, said: str) -> int:
    """``data`` as JSON with ``--json``, else the sentence ``said``; exit status 0."""
    if args.json:
        print_json(data)
    else:
        print(said)
    return 0


def fields_json(record: Any, *names: str) -> dict[str, Any]:
    """The named attributes of a core record, under their own names."""
    return {name: getattr(record, name) for name in names}


def session_json(s: SessionInfo) -> dict[str, Any]:
    return {
        **fields_json(s, "id", "title"),
        "messages": s.message_count,
        "tokens": s.token_count,
        "updated_at": format_time(s.updated_at),
        **fields_json(s, "pinned", "tags"),
    }


def message_json(m: Message) -> dict[str, Any]:
    return {
        **fields_json(m, "id", "position", "role", "content", "state", "token_count", "name",
                      "tool_calls", "tool_call_id"),
        "metadata": m.public_metadata(),
    }


def shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def line_width() -> int:
    """The width human output fits in: the terminal's, else ``COLUMNS``, else 80."""
    import shutil

    return max(40, shutil.get_terminal_size((80, 24)).columns)


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis marking the cut (spaces kept)."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def whole_number(text: str, *, least: int, what: str) -> int:
    """``text`` as an int of at least ``least``, else an argparse error naming ``what``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(what)
    return value


def positive_int(text: str) -> int:
    return whole_number(text, least=1, what=f"{text!r} must be above zero")
