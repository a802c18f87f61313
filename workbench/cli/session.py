"""``workbench session rename|pin|unpin|tag|untag|fork|archive|delete SESSION …``."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common import print_result, session_editing, session_json
from workbench.errors import WorkbenchError


def cmd_session(args: argparse.Namespace) -> int:
    with session_editing(args, exact=args.action == "delete") as (info, edit):
        action = args.action
        if action == "rename":
            if not args.title.strip():
                raise WorkbenchError("A session title cannot be empty.")
            result = edit.rename_session(info.id, args.title.strip()).after
            said = f"Session {result.id} is now titled {result.title!r}."
        elif action in ("pin", "unpin"):
            result = edit.set_pinned(info.id, action == "pin").after
            said = f"Session {result.id} {'pinned' if result.pinned else 'unpinned'}."
        elif action in ("archive", "unarchive"):
            result = edit.set_archived(info.id, action == "archive").after
            said = f"Session {result.id} {'archived' if result.archived else 'unarchived'}."
        elif action in ("tag", "untag"):
            tags = list(info.tags)
            for tag in args.tags:
                tag = tag.strip()
                if not tag:
                    raise WorkbenchError("A tag cannot be empty.")
                if action == "tag" and tag not in tags:
                    tags.append(tag)
                elif action == "untag":
                    if tag not in tags:
                        raise WorkbenchError(f"Session {info.id} has no tag {tag!r}.")
                    tags.remove(tag)
            result = edit.set_tags(info.id, tags).after
            said = f"Session {result.id} tags: {', '.join(result.tags) or '(none)'}."
        elif action == "fork":
            at = edit.find_message(info.id, args.message)
            assert at.id is not None
            result = edit.fork_session(info.id, at.id, title=args.title)
            said = (f"Forked session {info.id} at message #{at.id} into session "
                    f"{result.id} ({result.title!r}, {result.message_count} messages).")
        else:
            if not args.yes:
                raise WorkbenchError(
                    f"Deleting session {info.id} ({info.title!r}, {info.message_count} "
                    "messages) cannot be undone; add --yes to delete it."
                )
            result = edit.delete_session(info.id)
            said = f"Deleted session {result.id} ({result.title!r})."
    data = session_json(result)
    data["archived"] = result.archived
    if action == "delete":
        data["deleted"] = True
    return print_result(args, data, said)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``session`` and its actions."""
    p = subparsers.add_parser("session", parents=[common],
                              help="rename, pin, tag, fork, archive or delete a session")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def base(name: str, help_text: str) -> argparse.ArgumentParser:
        q = actions.add_parser(name, parents=[common], help=help_text)
        q.add_argument("session", help="session id, source id or title")
        q.set_defaults(func=cmd_session)
        return q

    base("rename", "give the session a new title").add_argument("title", help="the new title")
    base("pin", "pin the session to the top of the list")
    base("unpin", "unpin the session")
    base("tag", "add tags").add_argument("tags", nargs="+", metavar="TAG", help="tags to add")
    base("untag", "remove tags").add_argument("tags", nargs="+", metavar="TAG",
                                              help="tags to remove")
    q = base("fork", "copy the session up to a message into a new session")
    q.add_argument("message", help="#ID or position of the last message to copy")
    q.add_argument("--title", help="title of the new session (default: derived)")
    base("archive", "archive the session (hidden from the list without --all)")
    base("unarchive", "bring an archived session back")
    base("delete", "delete the session for good").add_argument(
        "--yes", action="store_true", help="confirm: the delete cannot be undone")
