"""``workbench message edit|insert|delete|important SESSION MESSAGE …``.

A session is named by id, source id or title; a message by ``#ID`` or its position
(``workbench show`` prints both). Every change goes through the engine's
:class:`~workbench.engine.editing.Editing`, which counts the tokens again.
"""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common import message_json, print_result, session_editing
from workbench.core.conversation import ROLES
from workbench.errors import WorkbenchError


def cmd_message(args: argparse.Namespace) -> int:
    with session_editing(args) as (info, edit):
        action = args.action
        if action == "insert":
            where = edit.find_message(info.id, args.message)
            position = int(where.position or 0) + (0 if args.before else 1)
            result = edit.insert_message(info.id, position, args.role, args.text)
            said = f"Inserted message #{result.id} at position {result.position}."
        else:
            target = edit.find_message(info.id, args.message)
            assert target.id is not None
            if action == "edit":
                if args.text is None and args.role is None:
                    raise WorkbenchError("Give the new text (--text) or role (--role).")
                result = edit.edit_message(target.id, content=args.text, role=args.role).after
                said = f"Edited message #{result.id} ({result.token_count} tokens)."
            elif action == "delete":
                result = edit.delete_message(target.id)
                said = f"Deleted message #{result.id} (position {result.position})."
            else:
                result = edit.set_important(target.id, not args.off).after
                said = (f"Message #{result.id} is "
                        f"{'marked important' if result.important else 'no longer important'}.")
    return print_result(args, message_json(result), said)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``message`` and its actions."""
    p = subparsers.add_parser("message", parents=[common],
                              help="edit, insert, delete or mark a message")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def base(name: str, help_text: str) -> argparse.ArgumentParser:
        q = actions.add_parser(name, parents=[common], help=help_text)
        q.add_argument("session", help="session id, source id or title")
        q.add_argument("message", help="#ID or position of the message")
        q.set_defaults(func=cmd_message)
        return q

    q = base("edit", "change a message's text or role")
    q.add_argument("--text", help="the new text")
    q.add_argument("--role", choices=ROLES, help="the new role")
    q = base("insert", "insert a new message after (or --before) MESSAGE")
    q.add_argument("role", choices=ROLES, help="role of the new message")
    q.add_argument("text", help="text of the new message")
    q.add_argument("--before", action="store_true", help="insert before MESSAGE, not after")
    base("delete", "delete a message")
    q = base("important", "mark a message important (never folded, never pruned)")
    q.add_argument("--off", action="store_true", help="unmark it instead")
