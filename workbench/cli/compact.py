"""``workbench compact``, ``workbench undo-compaction`` and ``workbench compactions``.

``compact SESSION [--dry-run] [--keep N | --range FIRST LAST] [--summarizer extractive|model]
[--provider NAME] [--prompt TEXT] [--json]`` previews (``--dry-run``) or applies a
compaction; with ``--json`` it prints ``{"changed", "folded", "kept", "summary",
"tokens_before", "tokens_after", …}``. Without ``--keep`` or ``--range`` the session's
policy decides, and a session within it has "nothing to compact" (exit 0, nothing
changed). ``undo-compaction SESSION [--id N]`` undoes the last compaction still applied
(again and again walks back through earlier ones; undoing one already undone is an
error); ``compactions SESSION`` lists them.
"""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common import open_workspace, print_json, whole_number
from workbench.cli.output import clip, line_width
from workbench.core.compaction import SUMMARIZERS
from workbench.errors import WorkbenchError


def _non_negative(text: str) -> int:
    return whole_number(text, least=0, what="the keep count must be 0 or more")


def _position(text: str) -> int:
    return whole_number(text, least=0, what=f"position {text} does not exist: positions "
                        "start at 0 (workbench show prints them)")


def cmd_compact(args: argparse.Namespace) -> int:
    from workbench.engine import compaction

    if args.range and args.range[0] > args.range[1]:
        raise WorkbenchError(
            f"--range {args.range[0]} {args.range[1]}: the first position comes after the "
            "last; give FIRST <= LAST."
        )
    with open_workspace(args) as ws:
        info = ws.find_session(args.session)
        plan = compaction.preview(
            ws,
            info.id,
            keep=args.keep,
            fold_range=tuple(args.range) if args.range else None,
            # Naming a provider asks for the model summarizer unless told otherwise.
            summarizer=args.summarizer or ("model" if args.provider else None),
            provider_name=args.provider,
            prompt=args.prompt,
        )
        if args.dry_run or not plan.changed:
            result = compaction.CompactionResult(False, plan, None, plan.reason)
        elif plan.warning and not args.force:
            raise WorkbenchError(
                f"{plan.warning} Nothing was changed; apply it anyway with --force."
            )
        else:
            result = compaction.apply(ws, plan)
    if args.json:
        data = result.to_json()
        data["dry_run"] = bool(args.dry_run)
        data["warning"] = plan.warning
        if args.dry_run:
            # A dry run changes nothing, but says whether applying would.
            data["changed"] = False
            data["would_change"] = plan.changed
        print_json(data)
        return 0
    _print_human(args, info.id, plan, result.compaction_id)
    return 0


def _print_human(args: argparse.Namespace, session_id: int, plan: Any, compaction_id: Any) -> None:
    if not plan.changed:
        print(plan.reason or "Nothing to compact.")
        return
    if not plan.folded_count:
        print(plan.reason)
        if plan.facts_removed or plan.facts_after != plan.facts_before:
            print(f"Facts sorted; duplicates removed: {len(plan.facts_removed)}.")
        if plan.tasks_pruned:
            print(f"Completed tasks pruned: {len(plan.tasks_pruned)}.")
        return
    verb = "Would fold" if args.dry_run else "Folded"
    ranges = ", ".join(
        f"{r.first_position}" if r.first_position == r.last_position
        else f"{r.first_position}-{r.last_position}"
        for r in plan.ranges
    )
    print(
        f"{verb} {plan.folded_count} message(s) (positions {ranges}) into the summary; "
        f"{plan.active_after} active message(s) stay."
    )
    print(
        f"Request tokens: {plan.tokens_before} -> {plan.tokens_after} "
        + (f"(saves {plan.tokens_saved})." if plan.tokens_saved > 0 else "(saves nothing).")
    )
    if plan.warning:
        print(f"Warning: {plan.warning}")
    if plan.facts_removed:
        print(f"Duplicate facts removed: {len(plan.facts_removed)}.")
    if plan.tasks_pruned:
        print(f"Completed tasks pruned: {len(plan.tasks_pruned)}.")
    print()
    print(plan.summary)
    if not args.dry_run:
        print()
        print(
            f"Compaction {compaction_id} recorded; undo it with: "
            f"workbench undo-compaction {session_id}"
        )


def cmd_undo(args: argparse.Namespace) -> int:
    from workbench.engine import compaction

    with open_workspace(args) as ws:
        info = ws.find_session(args.session)
        record = compaction.undo(ws, info.id, args.id)
    if args.json:
        print_json({"undone": True, **record.to_json()})
        return 0
    print(
        f"Undid compaction {record.id} of session {info.id}: {record.folded_count} "
        "message(s) are active again and the summary, facts and tasks are as they were."
    )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from workbench.engine import compaction

    with open_workspace(args) as ws:
        info = ws.find_session(args.session)
        records = compaction.history(ws, info.id)
    if args.json:
        print_json([r.to_json() for r in records])
        return 0
    if not records:
        print(f"Session {info.id} has never been compacted.")
        return 0
    width = line_width()
    for r in records:
        state = " (undone)" if r.undone else ""
        print(clip(
            f"#{r.id}  {r.created_at.strftime('%Y-%m-%d %H:%M')}  {r.summarizer}  "
            f"{r.folded_count} folded  {r.tokens_before}->{r.tokens_after} tokens"
            f"{state}  [{r.policy}]", width
        ))
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the compaction subcommands to the ``workbench`` parser."""
    p = sub.add_parser(
        "compact", parents=[common], help="fold old messages of a session into its summary"
    )
    p.add_argument("session", help="session id, source id or title")
    p.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--keep", type=_non_negative, metavar="N",
                       help="fold all but the newest N active messages")
    which.add_argument("--range", type=_position, nargs=2, metavar=("FIRST", "LAST"),
                       help="fold the messages at positions FIRST to LAST")
    p.add_argument("--summarizer", choices=SUMMARIZERS,
                   help="extractive (no model) or model (default: the session's policy)")
    p.add_argument("--provider", metavar="NAME",
                   help="provider for the model summarizer (implies --summarizer model; "
                   "default: the policy's or the agent's)")
    p.add_argument("--prompt", metavar="TEXT", help="instructions for the model summarizer")
    p.add_argument("--force", action="store_true",
                   help="apply even when folding would not lower the request's tokens")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("undo-compaction", parents=[common],
                       help="undo the last compaction still applied to a session")
    p.add_argument("session", help="session id, source id or title")
    p.add_argument("--id", type=int, metavar="N",
                   help="the compaction to undo (default: the last one still applied)")
    p.set_defaults(func=cmd_undo)

    p = sub.add_parser("compactions", parents=[common], help="list a session's compactions")
    p.add_argument("session", help="session id, source id or title")
    p.set_defaults(func=cmd_list)
