"""``workbench context SESSION``: show a session's facts, summary and tasks, or change
them (``--add-fact``, ``--remove-fact``, ``--summary``, ``--add-task``,
``--task-status ID STATUS``). Changes go through the engine's ``change_context``: they
are made on the context as stored, in one transaction."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from workbench.cli.common import open_workspace, print_json
from workbench.core.conversation import SessionContext, TaskStatus, utcnow
from workbench.errors import WorkbenchError

STATUSES = tuple(s.value for s in TaskStatus)


def cmd_context(args: argparse.Namespace) -> int:
    from workbench.engine.session_context import change_context, new_task

    changes: set[str] = set()

    def change(context: SessionContext) -> None:
        # Run by the engine on the context as stored, in one transaction: a change made
        # meanwhile (the window, another command) is never overwritten.
        facts = list(context.facts)
        for fact in args.add_fact or []:
            if not fact.strip():
                raise WorkbenchError("A fact cannot be empty.")
            facts.append(fact.strip())
        for fact in args.remove_fact or []:
            if fact not in facts:
                raise WorkbenchError(f"Session {info.id} has no fact {fact!r}.")
            facts.remove(fact)
        if facts != context.facts:
            context.facts = facts
            changes.add("facts")
        if args.summary is not None:
            context.summary = args.summary
            changes.add("summary")
        tasks = list(context.tasks)
        for description in args.add_task or []:
            if not description.strip():
                raise WorkbenchError("A task needs a description.")
            tasks.append(new_task(description.strip(), existing=tasks))
        for ident, status in args.task_status or []:
            if status not in STATUSES:
                raise WorkbenchError(
                    f"Task status {status!r} is not one of {', '.join(STATUSES)}.")
            if not any(t.id == ident for t in tasks):
                raise WorkbenchError(f"Session {info.id} has no task {ident!r}.")
            tasks = [replace(t, status=status, updated_at=utcnow()) if t.id == ident else t
                     for t in tasks]
        if args.add_task or args.task_status:
            context.tasks = tasks
            changes.add("tasks")

    with open_workspace(args) as ws:
        info = ws.find_session(args.session)
        wanted = (args.add_fact or args.remove_fact or args.summary is not None
                  or args.add_task or args.task_status)
        if wanted:
            context = change_context(ws, info.id, change).after
        else:
            context = ws.get_context(info.id)
    data = context.to_json()
    shown = {k: data[k] for k in ("facts", "summary", "tasks")}
    if args.json:
        print_json({"session_id": info.id, "title": info.title, **shown})
        return 0
    if changes:
        print(f"Changed the {', '.join(sorted(changes))} of session {info.id}.")
    print(f"# Context of {info.title} (session {info.id})")
    print("Facts:" if context.facts else "Facts: none")
    for fact in context.facts:
        print(f"- {fact}")
    print("Summary:" if context.summary else "Summary: none")
    if context.summary:
        print(context.summary)
    print("Tasks:" if context.tasks else "Tasks: none")
    for task in context.tasks:
        print(f"- [{task.status}] {task.id}: {task.description}")
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``context``."""
    p = subparsers.add_parser("context", parents=[common],
                              help="show or change a session's facts, summary and tasks")
    p.add_argument("session", help="session id, source id or title")
    p.add_argument("--add-fact", action="append", metavar="TEXT",
                   help="add a fact (repeatable)")
    p.add_argument("--remove-fact", action="append", metavar="TEXT",
                   help="remove a fact, given exactly (repeatable)")
    p.add_argument("--summary", metavar="TEXT",
                   help="replace the long-term summary ('' clears it)")
    p.add_argument("--add-task", action="append", metavar="TEXT",
                   help="add a pending task (repeatable)")
    p.add_argument("--task-status", nargs=2, action="append", metavar=("ID", "STATUS"),
                   help=f"set a task's status: {', '.join(STATUSES)}")
    p.set_defaults(func=cmd_context)
