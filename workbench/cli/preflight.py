"""``workbench preflight SESSION PROMPT``: the request a chat would send, not sent (SPEC §3).

With ``--json`` it prints ``{"payload", "tokens": {"system", "memory", "summary",
"history", "prompt", "total"}, "left_out": [{"first_id", "first_position", "last_id",
"last_position", "count", "reason"}] (runs of consecutive messages left out for one
reason), "budget",
"provider", "http", "recalled"}``; ``provider.assumed`` is true when no provider is
configured at all and an offline OpenAI-compatible stand-in built the payload. Where
``workbench chat`` refuses (several providers and none chosen, the agent's provider
gone), preflight refuses with the same line and exit status.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from workbench.cli.common import open_workspace, positive_int, print_json


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``preflight`` subcommand."""
    p = subparsers.add_parser(
        "preflight",
        parents=[common],
        help="show the exact request a chat would send, without sending it",
    )
    p.add_argument("session", help="session id, source id or title")
    p.add_argument("prompt", help="the new user prompt")
    p.add_argument(
        "--context-window",
        type=positive_int,
        metavar="N",
        help="assume this context window instead of the provider's",
    )
    from workbench.cli.chat import add_turn_options

    add_turn_options(p)
    p.set_defaults(func=cmd_preflight)


def cmd_preflight(args: argparse.Namespace) -> int:
    from workbench.engine.turn import preflight_session

    with open_workspace(args) as ws:
        result = preflight_session(
            ws,
            args.session,
            args.prompt,
            provider=args.provider,
            max_tokens=args.max_tokens,
            stream=not args.no_stream,
            context_window=args.context_window,
        )
    data = result.to_json()
    if args.json:
        print_json(data)
        return 0
    provider = data["provider"]
    print(f"Provider: {provider['kind']} model {provider['model']}"
          + (f" ({provider['name']})" if provider.get("name") else ""))
    if provider.get("assumed"):
        print(f"  (assumed: {provider.get('note', 'no provider configured')})")
    budget = data["budget"]
    print(f"Budget: {budget['available'] if budget['available'] is not None else 'no limit'} "
          f"tokens for messages (window {budget['context_window']}, "
          f"{budget['reserved_output']} reserved for the reply, {budget['tools']} for tools)")
    tokens = data["tokens"]
    print("Tokens: " + ", ".join(f"{k} {v}" for k, v in tokens.items()))
    left_out = data["left_out"]
    if left_out:
        reasons: Counter[str] = Counter()
        for item in left_out:
            reasons[item["reason"]] += item["count"]
        print(f"Left out: {sum(reasons.values())} message(s): "
              + "; ".join(f"{n} {reason}" for reason, n in reasons.items()))
    else:
        print("Left out: nothing")
    if data["recalled"]:
        print(f"Recalled memory entries: {len(data['recalled'])}")
    print("Payload:")
    print(json.dumps(data["payload"], ensure_ascii=False, indent=2))
    return 0
