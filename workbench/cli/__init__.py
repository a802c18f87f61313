"""The ``workbench`` command: the GUI with no arguments, subcommands otherwise (SPEC §8).

Every subcommand accepts ``--db PATH`` (``WORKBENCH_DB`` sets the default) and
``--json``. Errors print one line on stderr and exit non-zero.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from workbench.cli import (
    agents,
    chat,
    compact,
    context,
    library,
    memory,
    message,
    preflight,
    providers,
    session,
)
from workbench.cli.common import EXIT_ERROR, EXIT_USAGE, Parser
from workbench.cli.output import (
    log_to_stderr,
    silence_stdout,
    terminal_safe_output,
    tolerate_output_encoding,
)
from workbench.errors import WorkbenchError

__all__ = ["EXIT_ERROR", "EXIT_USAGE", "build_parser", "main", "run"]

# The command modules, in the order of ``workbench --help``. Each has
# ``register(subparsers, common)``, where ``common`` is the parent parser holding
# ``--db`` and ``--json``, and sets ``func`` to a callable taking the parsed arguments
# and returning the exit status. What they share is in :mod:`workbench.cli.common`.
COMMANDS = (library, providers, preflight, chat, compact, message, session, context,
            memory, agents)


def build_parser() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    # SUPPRESS: a --db given before the subcommand must not be reset by this default.
    common.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                        help="database file or team store postgresql://user@host/database "
                        "(default: WORKBENCH_DB, else WORKBENCH_HOME/workbench.db, else the "
                        "user data folder)")
    # SUPPRESS as for --db: given before the subcommand (or its action), it stays given.
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON")

    parser = Parser(
        prog="workbench",
        description="Conversation Workbench: browse, edit, compact and continue LLM "
        "conversations. With no command, opens the desktop window.",
    )
    parser.add_argument("--db", metavar="PATH", help="database file for the GUI, or a team "
                        "store's postgresql://user@host:port/database URL")
    parser.add_argument("--json", action="store_true", help="print JSON (for any command)")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--selftest", action="store_true",
                        help="check this installation offscreen on a temporary database, "
                        "print what was checked and exit (0 when all is well)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for command in COMMANDS:
        command.register(sub, common)
    return parser


# Set by main when a command that asks for it (``quick_exit`` in its defaults) has run to
# its end: see run.
_quick_exit = False


def run() -> NoReturn:
    """The ``workbench`` program (the console script and ``python -m workbench``):
    :func:`main`, then the process ends.

    After a command that asks for it (``import``) has finished, with everything it
    wrote closed (the database is closed inside the command) and no other thread left
    that a normal exit would wait for, the process ends at once once its output is
    flushed, rather than taking apart the interpreter's objects one by one: after an
    import that is the token vocabulary's tables and the parse's leftovers, 0.2-0.5 s
    of a command that lasts a few seconds.
    """
    global _quick_exit
    _quick_exit = False
    code = main()
    others = [t for t in threading.enumerate()
              if t is not threading.main_thread() and not t.daemon]
    if _quick_exit and not others:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed or gone (``| head``): nothing to keep
                pass
        os._exit(code)
    raise SystemExit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``workbench`` command line with ``argv`` (default: the process's
    arguments) and return the exit status."""
    tolerate_output_encoding()
    parser = build_parser()
    Parser.words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.version:
        from workbench import __version__

        print(f"workbench {__version__}")
        return 0
    if args.selftest:
        from workbench.gui.selftest import run_selftest

        return run_selftest()
    if args.command is None:
        from workbench.gui.app import run_gui

        return run_gui(args.db or None)
    # Error lines too: an error may quote a file name or a server's words.
    with terminal_safe_output(not args.json):
        return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    """Run the parsed subcommand; every failure is one line on stderr."""
    global _quick_exit
    try:
        with log_to_stderr():
            code = int(args.func(args))
        _quick_exit = bool(getattr(args, "quick_exit", False))
        return code
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python from
        # complaining when it flushes stdout on the way out.
        silence_stdout()
        return 0
    except WorkbenchError as exc:
        print(f"workbench: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"workbench: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
              file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - a native library's panic is one too
        # A bug, not a situation the engine words: still one line, unless asked for
        # the traceback (WORKBENCH_DEBUG=1).
        if os.environ.get("WORKBENCH_DEBUG"):
            raise
        print(f"workbench: internal error ({type(exc).__name__}: "
              f"{' '.join(str(exc).split())}); run again with WORKBENCH_DEBUG=1 for the "
              "traceback, and please report it", file=sys.stderr)
        return EXIT_ERROR

if __name__ == "__main__":
    raise SystemExit(main())
