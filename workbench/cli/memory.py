"""``workbench memory write|list|recall|forget``: an agent's long-term memory entries."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common import fields_json, open_workspace, print_json
from workbench.core.conversation import MemoryEntry, format_time


def _entry_json(entry: MemoryEntry) -> dict[str, Any]:
    return {
        **fields_json(entry, "id", "agent_id", "content", "scope", "namespace", "session_id",
                      "metadata"),
        "created_at": format_time(entry.created_at),
    }


def _print_entries(entries: list[MemoryEntry], empty: str) -> None:
    if not entries:
        print(empty)
    for e in entries:
        where = f"session {e.session_id}" if e.session_id is not None else "agent"
        print(f"#{e.id}  [{e.scope}/{e.namespace}, {where}]  {' '.join(e.content.split())}")


def cmd_memory(args: argparse.Namespace) -> int:
    from workbench.engine import agents

    with open_workspace(args) as ws:
        session_id = None
        if getattr(args, "session", None):
            session_id = ws.find_session(args.session).id
        agent = getattr(args, "agent", None)
        if args.action == "write":
            entry, created = agents.write_memory(ws, args.text, session_id=session_id,
                                                 agent=agent, namespace=args.namespace)
            if args.json:
                print_json({**_entry_json(entry), "created": created})
            else:
                print(f"{'Wrote' if created else 'Already there:'} memory entry #{entry.id} "
                      f"({entry.scope} scope, namespace {entry.namespace}).")
            return 0
        if args.action == "forget":
            entry = agents.forget_memory(ws, args.id)
            if args.json:
                print_json({**_entry_json(entry), "deleted": True})
            else:
                print(f"Forgot memory entry #{entry.id}.")
            return 0
        if args.action == "list":
            entries = agents.list_memory(ws, session_id=session_id, agent=agent)
            empty = "No memory entries."
        else:
            entries = agents.recall_memory(ws, args.query, session_id=session_id, agent=agent)
            empty = f"Nothing recalled for {args.query!r}."
    if args.json:
        print_json([_entry_json(e) for e in entries])
    else:
        _print_entries(entries, empty)
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``memory`` and its actions."""
    p = subparsers.add_parser("memory", parents=[common],
                              help="write, list, recall or forget long-term memory entries")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def owner(q: argparse.ArgumentParser) -> None:
        group = q.add_mutually_exclusive_group()
        group.add_argument("--session", metavar="S",
                           help="for this session (id, source id or title)")
        group.add_argument("--agent", metavar="A", help="for this agent (name or id)")

    q = actions.add_parser("write", parents=[common], help="remember a text")
    q.add_argument("text", help="what to remember")
    owner(q)
    q.add_argument("--namespace", metavar="N", help="namespace (default: the policy's)")
    q.set_defaults(func=cmd_memory)
    q = actions.add_parser("list", parents=[common], help="list entries, newest first")
    owner(q)
    q.set_defaults(func=cmd_memory)
    q = actions.add_parser("recall", parents=[common],
                           help="the entries a turn would recall for QUERY")
    q.add_argument("query", help="the prompt to recall for")
    owner(q)
    q.set_defaults(func=cmd_memory)
    q = actions.add_parser("forget", parents=[common], help="delete an entry")
    q.add_argument("id", type=int, help="the entry's id (memory list shows it)")
    q.set_defaults(func=cmd_memory)
