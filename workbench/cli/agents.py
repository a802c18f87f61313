"""``workbench agents list|show|edit NAME``: agents' instructions, provider, model,
memory policy and built-in tools."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from workbench.cli.common import fields_json, open_workspace, print_json
from workbench.cli.output import clip, line_width
from workbench.core.conversation import Agent
from workbench.core.policy import CAPTURES, INJECTS, MODES, SCOPES
from workbench.errors import WorkbenchError


def _agent_json(agent: Agent) -> dict[str, Any]:
    return fields_json(agent, "id", "name", "instructions", "provider", "model",
                       "memory_policy", "tools")


def _show(agent: Agent) -> None:
    print(f"Agent {agent.name} (id {agent.id})")
    print(f"  Provider: {agent.provider or '(the only one configured)'}")
    print(f"  Model: {agent.model or '(the provider’s)'}")
    print(f"  Tools: {', '.join(agent.tools) or 'none'}")
    policy = ", ".join(f"{key} {json.dumps(value, ensure_ascii=False)}"
                       for key, value in (agent.memory_policy or {}).items()) or "the defaults"
    print(textwrap.fill(policy, line_width() - 1, initial_indent="  Memory policy: ",
                        subsequent_indent=" " * 17))
    print("  Instructions:" + ("" if agent.instructions else " none"))
    for line in (agent.instructions or "").splitlines():
        print(f"    {line}")


def _policy_changes(args: argparse.Namespace) -> dict[str, Any] | None:
    policy: dict[str, Any] = {}
    if args.memory_policy:
        try:
            loaded = json.loads(args.memory_policy)
        except ValueError as exc:
            raise WorkbenchError(f"--memory-policy is not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise WorkbenchError("--memory-policy must be a JSON object.")
        policy.update(loaded)
    for key in ("mode", "scope", "capture", "inject", "namespace", "max_entries"):
        value = getattr(args, key)
        if value is not None:
            policy[key] = value
    if args.memory is not None:
        policy["enabled"] = args.memory == "on"
    return policy or None


def cmd_agents(args: argparse.Namespace) -> int:
    from workbench.engine import agents

    with open_workspace(args) as ws:
        if args.action == "list":
            found = ws.list_agents()
            if args.json:
                print_json([_agent_json(a) for a in found])
            else:
                width = line_width()
                print(f"{'ID':>4}  {'NAME':<16}  {'PROVIDER':<12}  {'MODEL':<20}  TOOLS")
                for a in found:
                    print(clip(f"{a.id:>4}  {clip(a.name, 16):<16}  "
                               f"{clip(a.provider or '-', 12):<12}  "
                               f"{clip(a.model or '-', 20):<20}  "
                               f"{', '.join(a.tools) or 'none'}", width))
            return 0
        if args.action == "show":
            agent = agents.find_agent(ws, args.name)
        else:
            tools = None
            if args.tools is not None:
                tools = [t.strip() for t in args.tools.split(",") if t.strip()]
            agent = agents.edit_agent(
                ws, args.name, instructions=args.instructions, provider=args.provider,
                model=args.model, memory_policy=_policy_changes(args), tools=tools)
    if args.json:
        print_json(_agent_json(agent))
    else:
        if args.action == "edit":
            print(f"Saved agent {agent.name}.")
        _show(agent)
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``agents`` and its actions."""
    p = subparsers.add_parser("agents", parents=[common], help="list, show or edit agents")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser("list", parents=[common], help="list the agents")
    q.set_defaults(func=cmd_agents)
    q = actions.add_parser("show", parents=[common], help="show one agent")
    q.add_argument("name", help="agent name or id")
    q.set_defaults(func=cmd_agents)
    q = actions.add_parser("edit", parents=[common], help="change an agent")
    q.add_argument("name", help="agent name or id")
    q.add_argument("--instructions", metavar="TEXT", help="the system instructions")
    q.add_argument("--provider", metavar="NAME", help="provider config ('' clears it)")
    q.add_argument("--model", metavar="MODEL", help="model override ('' clears it)")
    q.add_argument("--tools", metavar="LIST",
                   help="built-in tools, comma-separated ('' for none): search_conversations,"
                   " recall_memory, remember_fact, current_time")
    q.add_argument("--memory", choices=("on", "off"), help="long-term memory on or off")
    q.add_argument("--mode", choices=MODES, help="append turns to memory (auto) or not")
    q.add_argument("--scope", choices=SCOPES, help="recall the agent's or the session's entries")
    q.add_argument("--capture", choices=CAPTURES, help="write each turn as an entry or not")
    q.add_argument("--inject", choices=INJECTS,
                   help="recalled entries go into the instructions or a context message")
    q.add_argument("--namespace", metavar="N", help="memory namespace ({key} for the context's)")
    q.add_argument("--max-entries", type=int, metavar="N", help="entries recalled per turn")
    q.add_argument("--memory-policy", metavar="JSON",
                   help="other memory policy settings as a JSON object (merged)")
    q.set_defaults(func=cmd_agents)
