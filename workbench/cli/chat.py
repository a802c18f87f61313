"""``workbench chat SESSION PROMPT``: one turn with a model, through the memory engine.

The request is built from the session's memory (its agent's instructions, summary and
history) by :class:`~workbench.engine.model.Model`; the reply streams to stdout as it
arrives, and on success the prompt and the reply are appended to the session with the
provider's usage (unless the agent's memory mode is ``manual``, which stores nothing).
Ctrl+C stops the request at once (the connection is closed) and appends nothing, unless
``--keep-partial`` asks to keep what had arrived, marked as stopped. ``--new`` creates
the session (titled SESSION) when there is none by that name.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from workbench.cli.common import open_workspace, positive_int, print_json
from workbench.cli.output import clip, line_width, silence_stdout, write_control
from workbench.core.provider import CancelToken
from workbench.errors import NotFoundError, OperationCancelledError, WorkbenchError

EXIT_INTERRUPTED = 130
EXIT_FAILED = 1


def cmd_chat(args: argparse.Namespace) -> int:
    from workbench.engine.turn import prepare_turn

    with open_workspace(args) as ws:
        created = False
        try:
            info = ws.find_session(args.session)
        except NotFoundError:
            if not args.new:
                raise
            info = ws.create_session(args.session)
            created = True
        status = EXIT_FAILED
        retries = RetryNotices()
        try:
            with prepare_turn(
                ws,
                args.session,
                provider=args.provider,
                max_tokens=args.max_tokens,
                stream=not args.no_stream,
                auto=None,  # the agent's memory mode: manual stores nothing
                on_retry=retries,
            ) as setup:
                status = _run(setup.model, args, retries)
                return status
        finally:
            retries.clear()
            if created and status != 0:
                _remove_if_empty(ws, info.id)


class RetryNotices:
    """What the provider's retries tell: on a terminal, one status line on stderr,
    rewritten at each retry and erased before anything else is printed (so a person
    sees why the reply is late); elsewhere nothing, so that a failure is still the one
    line of its reason. The reply's summary line counts them either way."""

    def __init__(self) -> None:
        self.count = 0
        self.shown = False

    def __call__(self, notice: Any) -> None:
        self.count += 1
        if not _is_terminal(sys.stderr):
            return
        # Cut to the terminal's width: a line that wrapped could not be erased.
        line = (f"Retrying in {notice.delay:.1f} s (attempt {notice.attempt} of "
                f"{notice.attempts}): {notice.error}")
        write_control(sys.stderr, "\r\x1b[K")
        sys.stderr.write(clip(line, line_width() - 1))
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        """Erase the status line, if one is shown."""
        if self.shown:
            write_control(sys.stderr, "\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _remove_if_empty(ws: Any, session_id: int) -> None:
    """Delete a session ``--new`` created for a turn that failed, if nothing was added."""
    try:
        if ws.get_session(session_id).message_count == 0:
            ws.delete_session(session_id)
    except WorkbenchError as exc:
        print(f"workbench: the empty session could not be removed: {exc}", file=sys.stderr)


def _run(model: Any, args: argparse.Namespace, retries: RetryNotices) -> int:
    cancel = CancelToken()
    outcome: dict[str, Any] = {}
    printed = {"any": False, "newline": True, "closed": False}

    def show(text: str) -> None:
        if args.json or printed["closed"]:
            return
        retries.clear()
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader went away (``| head``): the turn goes on and is stored, quietly.
            printed["closed"] = True
            silence_stdout()
            return
        printed["any"] = True
        printed["newline"] = text.endswith("\n")

    finished = threading.Event()

    def work() -> None:
        try:
            outcome["response"] = model.execute(
                args.prompt, on_text=show, cancel=cancel, keep_partial=args.keep_partial
            )
        except BaseException as exc:  # handed to the main thread, which reports it
            outcome["error"] = exc
        finally:
            finished.set()

    # The call runs in a worker so that Ctrl+C in the main thread can stop it promptly
    # through the cancel token (closing the connection) instead of unwinding mid-write.
    # The main thread waits on an Event the worker sets last, not on Thread.join: on
    # Python 3.11 a KeyboardInterrupt inside join(timeout) can leave is_alive() False
    # while the worker still runs, and the process would exit before the partial reply
    # is stored.
    worker = threading.Thread(target=work, name="workbench-chat", daemon=True)
    worker.start()
    interrupted = False
    while not finished.is_set():
        try:
            finished.wait(0.1)
        except KeyboardInterrupt:
            interrupted = True
            cancel.cancel()
    retries.clear()
    error = outcome.get("error")
    response = outcome.get("response")
    if printed["closed"]:
        if error is None and not interrupted:
            return 0  # stored; nobody is left to read more
    elif printed["any"] and not printed["newline"]:
        sys.stdout.write("\n")
        sys.stdout.flush()
    if interrupted or isinstance(error, OperationCancelledError) or (response and response.stopped):
        if response is not None and response.stopped and response.appended:
            print("workbench: stopped; the partial reply was kept, marked as stopped.",
                  file=sys.stderr)
        else:
            print("workbench: stopped; nothing was added to the session.", file=sys.stderr)
        return EXIT_INTERRUPTED
    if error is not None:
        raise error
    assert response is not None
    if args.json:
        print_json({
            "text": response.text,
            "finish_reason": response.finish_reason,
            "model": response.model,
            "usage": response.usage.to_json() if response.usage else None,
            "appended": [m.id for m in response.messages] if response.appended else [],
            "compaction": (
                {"id": response.compaction_id, "message": response.compaction_note}
                if response.compaction_id is not None else None
            ),
        })
    else:
        if not printed["any"] and response.text:
            print(response.text)
        usage = response.usage
        tokens = (f"{usage.input_tokens} in, {usage.output_tokens} out"
                  if usage is not None else "usage not reported")
        retried = (f"; after {retries.count} retr{'y' if retries.count == 1 else 'ies'}"
                   if retries.count else "")
        print(f"[{tokens}; finish: {response.finish_reason or '?'}{retried}]",
              file=sys.stderr)
        if response.compaction_id is not None:
            print(f"workbench: {response.compaction_note} Undo it with: workbench "
                  f"undo-compaction {args.session!r}", file=sys.stderr)
        if not response.appended:
            print("workbench: the agent's memory mode is manual: nothing was added to "
                  "the session (workbench agents edit AGENT --mode auto stores turns).",
                  file=sys.stderr)
    return 0


def add_turn_options(p: argparse.ArgumentParser) -> None:
    """The options that decide how a turn is sent, shared by ``chat`` and ``preflight``."""
    p.add_argument("--provider", metavar="NAME",
                   help="provider to use (default: the agent's, else the only one)")
    p.add_argument("--no-stream", action="store_true", help="wait for the whole reply")
    p.add_argument("--max-tokens", type=positive_int, metavar="N",
                   help="longest reply, in tokens")


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``chat`` to the ``workbench`` parser."""
    p = subparsers.add_parser("chat", parents=[common],
                              help="send a prompt in a session and stream the reply")
    p.add_argument("session", help="session id, source id or title")
    p.add_argument("prompt", help="the new user prompt")
    add_turn_options(p)
    p.add_argument("--keep-partial", action="store_true",
                   help="on Ctrl+C, keep the partial reply (marked as stopped)")
    p.add_argument("--new", action="store_true",
                   help="create the session, titled SESSION, if there is none by that name")
    p.set_defaults(func=cmd_chat)
