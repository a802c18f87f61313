"""The commands over the library of conversations: ``sessions``, ``show``, ``import``,
``export``, ``search`` and ``stats``."""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.cli.common import (
    EXIT_ERROR,
    message_json,
    open_workspace,
    positive_int,
    print_json,
    session_json,
    shorten,
)
from workbench.cli.output import clip, line_width, write_control, write_utf8
from workbench.core.conversation import ROLES, STATES, format_time, parse_time
from workbench.core.identity import metadata_lines
from workbench.errors import WorkbenchError


def cmd_sessions(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        sessions = ws.list_sessions(
            include_archived=args.all, filter_text=args.filter, limit=args.limit
        )
    if args.json:
        print_json([session_json(s) for s in sessions])
        return 0
    if not sessions:
        if args.filter:
            print(f"No sessions match {args.filter!r}"
                  + ("." if args.all else " (archived ones are shown with --all)."))
        else:
            print("No sessions yet. Import some with: workbench import PATH")
        return 0
    print(f"{'ID':>6}  {'MSGS':>7}  {'TOKENS':>9}  {'UPDATED':<16}  TITLE")
    room = line_width() - 46  # what the columns before the title leave
    for s in sessions:
        flags = ("* " if s.pinned else "") + ("[archived] " if s.archived else "")
        tags = clip(f"  [{', '.join(s.tags)}]", room // 3) if s.tags else ""
        title = shorten(s.title, max(8, room - len(flags) - len(tags)))
        print(
            f"{s.id:>6}  {s.message_count:>7}  {s.token_count:>9}  "
            f"{s.updated_at.strftime('%Y-%m-%d %H:%M'):<16}  "
            + clip(f"{flags}{title}{tags}", room)
        )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        info, messages, context = ws.session_view(args.session)
        metadata = ws.session_metadata(info.id)
    if args.json:
        ctx = context.to_json()
        print_json(
            {
                "id": info.id,
                "title": info.title,
                "source": info.source,
                "source_id": info.source_id,
                "forked_from": (
                    {"session": info.forked_from_session_id,
                     "message": info.forked_from_message_id}
                    if info.forked_from_session_id is not None else None
                ),
                "metadata": metadata,
                "messages": [message_json(m) for m in messages],
                "context": {
                    k: ctx[k] for k in ("facts", "summary", "tasks", "tool_stats", "token_usage")
                },
            }
        )
        return 0
    print(f"# {info.title}  (session {info.id}, {info.message_count} messages, "
          f"{info.token_count} tokens)")
    if info.source:
        print(f"Imported from {info.source}" + (f" ({info.source_id})" if info.source_id else ""))
    if info.forked_from_session_id is not None:
        at = f" at message #{info.forked_from_message_id}" if info.forked_from_message_id else ""
        print(f"Forked from session {info.forked_from_session_id}{at}")
    if metadata.get("time_missing") is True:
        print(f"Time unknown: the source gave none (imported {format_time(info.created_at)})")
    for line in metadata_lines({k: v for k, v in metadata.items() if k != "time_missing"}):
        print(f"  {line}")
    for m in messages:
        label = m.role + (f" ({m.name})" if m.name else "")
        marks = (" [important]" if m.important else "") + (
            f" [{m.state}]" if m.state != "active" else ""
        )
        print(f"\n[{m.position}] {label}{marks}  #{m.id}  {m.token_count or '?'} tokens")
        if m.content:
            print(m.content)
        for call in m.tool_calls or []:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            print(f"  → {fn.get('name', '?')}({fn.get('arguments', '')})")
    if context.summary:
        print(f"\nSummary:\n{context.summary}")
    if context.facts:
        print("\nFacts:")
        for fact in context.facts:
            print(f"- {fact}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    show = not args.json and sys.stderr.isatty()
    progress = _ProgressLine("Imported {done:,} conversation(s)…") if show else None
    with open_workspace(args) as ws:
        # Token counts are made while importing (on a thread of their own, overlapping
        # the parse and the writes) and stored with the rows, so when the command
        # returns every imported message has its count.
        try:
            report = ws.import_path(
                Path("/dev/stdin") if args.path == "-" else Path(args.path),
                format=args.format,
                replace=args.replace,
                progress=progress,
            )
        finally:
            if progress is not None:
                # Also when the import fails: the reason then starts a line of its own.
                progress.finish()
        # Messages an older version stored without a count (its import counted them in
        # a pass of its own, which could be interrupted): counted now.
        counting = _ProgressLine("Counted the tokens of {done:,} of {total:,} message(s)…")
        for counted, total in ws.count_missing_tokens():
            if show:
                counting(counted, total)
        if show:
            counting.finish()
    failed = not report.sessions and bool(report.skipped)
    if args.json:
        data = report.to_json()
        for s in data["sessions"]:
            s.pop("created", None)
        print_json(data)
    elif not failed:  # a failure is the one line below (--json lists every entry)
        counts = report.counts()
        messages = sum(s.message_count for s, c in report.sessions if c)
        if counts["created"] or not report.sessions:
            print(
                f"Imported {counts['created']} session(s) with {messages} message(s) "
                f"from {args.path}."
            )
        else:  # all of it was there before: say what became of it, not "Imported 0"
            print(f"No new session from {args.path}.")
        if counts["updated"]:
            print(f"{counts['updated']} session(s) imported before were updated.")
        if counts["unchanged"]:
            print(
                f"{counts['unchanged']} session(s) were already imported and were left "
                "as they are."
            )
        for info in report.reused_ids:
            print(
                f"Session {info.id} ({info.title!r}) reuses the source id {info.source_id!r}"
                " of a different conversation imported before: imported as a new session."
            )
        for note in report.notes:
            print(f"Changed {note.entry}: {note.note}", file=sys.stderr)
        for skipped in report.skipped:
            print(f"Skipped {skipped.entry}: {skipped.reason}", file=sys.stderr)
    if failed:
        first = report.skipped[0]
        print(
            f"workbench: nothing was imported from {args.path}: {len(report.skipped)} "
            f"entr{'y was' if len(report.skipped) == 1 else 'ies were'} skipped "
            f"(first, {first.entry}: {first.reason})",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return 0


class _ProgressLine:
    """One line on stderr, rewritten at most every ``interval`` seconds; as a progress
    callback it always returns True (never cancels)."""

    def __init__(self, template: str, interval: float = 0.1) -> None:
        self.template = template
        self.interval = interval
        self.last: tuple[int, int | None] | None = None
        self._shown = 0.0

    def __call__(self, done: int, total: int | None) -> bool:
        self.last = (done, total)
        now = time.monotonic()
        if now - self._shown >= self.interval:
            self._shown = now
            self._write(done, total)
        return True

    def _write(self, done: int, total: int | None) -> None:
        write_control(sys.stderr, "\r")
        sys.stderr.write(self.template.format(done=done, total=total or done))
        sys.stderr.flush()

    def finish(self) -> None:
        """Show the last figures and end the line (nothing if never called)."""
        if self.last is not None:
            self._write(*self.last)
            sys.stderr.write("\n")
            sys.stderr.flush()


def cmd_export(args: argparse.Namespace) -> int:
    notes: list[str] = []
    if args.output == "-":
        # The export is the output: nothing else goes to standard output.
        if args.json:
            raise WorkbenchError("--json and -o - both print to standard output; "
                                 "give the export a file with -o PATH.")
        with open_workspace(args) as ws:
            text = ws.export_text(args.session, args.format, notes=notes)
        write_utf8(text)
        for note in notes:
            print(f"Not written ({args.format} cannot hold it): {note}.", file=sys.stderr)
        return 0
    with open_workspace(args) as ws:
        infos = ws.export_sessions(args.session, args.format, Path(args.output), notes=notes)
    if args.json:
        print_json({"path": str(args.output), "format": args.format,
                     "sessions": [session_json(s) for s in infos],
                     "not_exported": notes})
    else:
        print(f"Wrote {len(infos)} session(s) to {args.output} as {args.format}.")
        for note in notes:
            print(f"Not written ({args.format} cannot hold it): {note}.", file=sys.stderr)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from workbench.engine.agents import find_agent
    from workbench.engine.workspace import SEARCH_KINDS as KINDS
    from workbench.engine.workspace import SearchQuery

    message_filters = bool(args.role or args.state or args.since or args.until)
    with open_workspace(args) as ws:
        session_id = ws.find_session(args.session).id if args.session else None
        agent_id = find_agent(ws, args.agent).id if args.agent else None
        query = SearchQuery(
            text=args.query,
            roles=args.role or None,
            states=args.state or None,
            session_id=session_id,
            agent_id=agent_id,
            date_from=args.since,
            date_to=args.until,
            limit=args.limit,
            kinds=("message",) if message_filters else KINDS,
        )
        hits = ws.search(query)
        titles: dict[int, str] = {}
        for h in hits:
            if h.session_id is not None and h.session_id not in titles:
                titles[h.session_id] = h.title or ws.get_session(h.session_id).title
    if args.json:
        print_json(
            [
                {
                    "kind": h.kind,
                    "session_id": h.session_id,
                    "session_title": titles.get(h.session_id) if h.session_id else None,
                    "message_id": h.message_id,
                    "position": h.position,
                    "role": h.role,
                    "snippet": h.snippet,
                    "score": h.score,
                }
                for h in hits
            ]
        )
        return 0
    if not hits:
        print(f"Nothing found for {args.query!r}.")
        return 0
    width = line_width()
    for h in hits:
        # Where a hit is, then its snippet on up to two lines, each fitting the width.
        title = shorten(titles.get(h.session_id, ""), 40) if h.session_id else ""
        where = (
            f"{title!r} (session {h.session_id}) message {h.message_id} ({h.role})"
            if h.kind == "message"
            else f"session {title!r} ({h.session_id})" if h.kind == "session"
            else f"memory {h.memory_id}" + (f" of {title!r}" if title else "")
        )
        print(clip(f"{h.score:8.3f}  {where}", width))
        for line in textwrap.wrap(" ".join(h.snippet.split()), width - 10, max_lines=2,
                                  placeholder=" …"):
            print(" " * 10 + line)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        stats = ws.stats()
    if args.json:
        print_json(stats)
        return 0
    print(f"Database: {stats['database']}")
    print(f"Sessions: {stats['sessions']} ({stats['archived_sessions']} archived)")
    print(f"Messages: {stats['messages']}  "
          + ", ".join(f"{k} {v}" for k, v in stats["messages_by_role"].items()))
    print("States:   " + ", ".join(f"{k} {v}" for k, v in stats["messages_by_state"].items()))
    print(f"Active tokens: {stats['active_tokens']}  (messages not yet counted: "
          f"{stats['uncounted_messages']})")
    print(f"Memory entries: {stats['memory_entries']}  Agents: {stats['agents']}")
    return 0


def _date(text: str) -> datetime:
    try:
        value = parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (use YYYY-MM-DD)") from exc
    if value is None:
        raise argparse.ArgumentTypeError("an empty date")
    return value


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add the library's commands to the ``workbench`` parser."""
    from workbench.engine.workspace import (
        export_format_names,
        import_format_descriptions,
        import_format_names,
    )

    p = subparsers.add_parser("sessions", parents=[common], help="list sessions")
    p.add_argument("--all", action="store_true", help="include archived sessions")
    p.add_argument("--filter", metavar="TEXT", help="only titles or tags containing TEXT")
    p.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="show at most N sessions")
    p.set_defaults(func=cmd_sessions)

    p = subparsers.add_parser("show", parents=[common], help="print a session with its context")
    p.add_argument("session", help="session id, source id or title")
    p.set_defaults(func=cmd_show)

    import_names = import_format_names()
    described = "\n".join(
        textwrap.fill(text, 79, initial_indent=f"  {name:<13} ", subsequent_indent=" " * 16)
        for name, text in import_format_descriptions()
    )
    p = subparsers.add_parser(
        "import", parents=[common], help="import conversations from a file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"formats (found by looking at the file, or named with --format):\n{described}",
    )
    p.add_argument("path", help="file or folder; - for standard input")
    p.add_argument("--format", metavar="F",
                   help=f"skip auto-detection: {', '.join(import_names)}")
    p.add_argument("--replace", action="store_true",
                   help="replace conversations imported before from the same source")
    # quick_exit: see cli.run (the vocabulary's tables take a while to take apart).
    p.set_defaults(func=cmd_import, quick_exit=True)

    p = subparsers.add_parser("export", parents=[common], help="export sessions to a file")
    p.add_argument("session", nargs="+", help="session id(s), source id(s) or title(s)")
    p.add_argument("--format", required=True, metavar="F",
                   help=", ".join(export_format_names()))
    p.add_argument("-o", "--output", required=True, metavar="PATH",
                   help="the file to write; - for standard output")
    p.set_defaults(func=cmd_export)

    p = subparsers.add_parser("search", parents=[common], help="full-text search")
    p.add_argument("query", help='words, "a phrase", prefix*, OR, NOT; a query that '
                   "starts with - goes last, after --: workbench search -- '->'")
    p.add_argument("--role", action="append", choices=ROLES, help="only this role (repeatable)")
    p.add_argument("--state", action="append", choices=STATES, help="only this state")
    p.add_argument("--session", metavar="S", help="only this session")
    p.add_argument("--agent", metavar="A", help="only sessions of this agent (name or id)")
    p.add_argument("--since", type=_date, metavar="DATE", help="messages from this date on")
    p.add_argument("--until", type=_date, metavar="DATE", help="messages before this date")
    p.add_argument("--limit", type=positive_int, default=50, metavar="N",
                   help="show at most N hits (default 50)")
    p.set_defaults(func=cmd_search)

    p = subparsers.add_parser("stats", parents=[common], help="counts over the database")
    p.set_defaults(func=cmd_stats)
