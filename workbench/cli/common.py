"""What the command modules share: opening the workspace, printing JSON, the JSON of
core records and the argument types.

It sits below every command module and below :mod:`workbench.cli` (which builds the
parser from them), so each imports it plainly and none imports the package.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from workbench.cli.output import writes_unicode
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


def print_json(data: Any) -> None:
    # Escaped where the output's encoding could not carry a character: still the same JSON.
    json.dump(data, sys.stdout, ensure_ascii=not writes_unicode(sys.stdout), indent=2)
    sys.stdout.write("\n")


def open_workspace(args: argparse.Namespace) -> Any:
    # Imported here: ``workbench --version`` and ``--help`` stay quick without the engine.
    from workbench.engine.workspace import Workspace

    return Workspace.open(args.db)


@contextmanager
def session_editing(
    args: argparse.Namespace, *, exact: bool = False
) -> Iterator[tuple[SessionInfo, Any]]:
    """The session ``args.session`` names and the engine's editing of it, in an open
    workspace (closed when the block ends). ``exact``: a name several sessions share is
    refused (for a change that cannot be taken back), not taken as the newest."""
    with open_workspace(args) as ws:
        find = ws.find_one_session if exact else ws.find_session
        yield find(args.session), ws.editing()


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
