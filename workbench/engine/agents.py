"""Agents and their long-term memory, for the command line and other front ends.

* :func:`find_agent` by name or id; :func:`edit_agent` changes instructions, provider,
  model, memory policy (checked) and built-in tools (names checked);
* :func:`write_memory`, :func:`list_memory`, :func:`recall_memory`,
  :func:`forget_memory`: entries written for a session (its agent's policy decides the
  scope and namespace) or for an agent (``agent`` scope), listed, recalled the way a
  turn recalls them, and deleted.
"""

from __future__ import annotations

from typing import Any

from workbench.core.conversation import Agent, MemoryEntry
from workbench.core.policy import MemoryPolicy
from workbench.engine.builtin_tools import builtin_tool_names
from workbench.engine.recall import LongTermMemory, StoreEntries
from workbench.engine.session_context import add_memory_entry, delete_memory_entry
from workbench.engine.workspace import Workspace
from workbench.errors import NotFoundError, RequestError

__all__ = [
    "edit_agent",
    "find_agent",
    "forget_memory",
    "list_memory",
    "recall_memory",
    "write_memory",
]

_EDITABLE = ("instructions", "provider", "model", "memory_policy", "tools")


def find_agent(ws: Workspace, ref: str | int | None) -> Agent:
    """The agent named ``ref`` (or with that id); ``None``: the default agent."""
    if ref is None:
        return ws.repo.default_agent()
    text = str(ref).strip()
    agents = ws.repo.list_agents()
    for agent in agents:
        if agent.name == text or (text.isdigit() and agent.id == int(text)):
            return agent
    folded = [a for a in agents if a.name.casefold() == text.casefold()]
    if len(folded) == 1:
        return folded[0]
    names = ", ".join(a.name for a in ws.repo.list_agents())
    raise NotFoundError(f"There is no agent {text!r}; the agents are: {names}.")


def edit_agent(ws: Workspace, ref: str | int, **fields: Any) -> Agent:
    """Change the fields given (``instructions``, ``provider``, ``model``,
    ``memory_policy`` merged into the stored one, ``tools``); bad values (a provider
    or tool that does not exist, a wrong policy) raise :class:`RequestError` and
    change nothing."""
    unknown = sorted(set(fields) - set(_EDITABLE))
    if unknown:
        raise RequestError(f"Agents have no field {unknown[0]!r}.")
    agent = find_agent(ws, ref)
    changes = {k: v for k, v in fields.items() if v is not None}
    if "memory_policy" in changes:
        merged = {**(agent.memory_policy or {}), **changes["memory_policy"]}
        MemoryPolicy.from_dict(merged)  # raises with the setting's name when wrong
        changes["memory_policy"] = merged
    if "tools" in changes:
        known = builtin_tool_names()
        bad = [t for t in changes["tools"] if t not in known]
        if bad:
            raise RequestError(
                f"There is no built-in tool {bad[0]!r}; the tools are: {', '.join(known)}."
            )
    for key in ("provider", "model"):
        if key in changes and not str(changes[key]).strip():
            changes[key] = None  # an empty value clears it
    if changes.get("provider") is not None:
        names = [c.name for c in ws.provider_settings().list()]
        if changes["provider"] not in names:
            raise RequestError(
                f"There is no provider named {changes['provider']!r}; "
                + (f"the providers are: {', '.join(names)}." if names else
                   "add one with: workbench providers add NAME --kind openai "
                   "--base-url URL --model MODEL")
            )
    if not changes:
        return agent
    return ws.repo.update_agent(agent.id, **changes)


def _session_policy(ws: Workspace, session_id: int) -> tuple[Agent, MemoryPolicy]:
    info = ws.repo.get_session(session_id)
    agent = ws.repo.get_agent(info.agent_id)
    overrides = (info.overrides or {}).get("memory_policy")
    return agent, MemoryPolicy.from_dict(agent.memory_policy, overrides)


def write_memory(
    ws: Workspace,
    text: str,
    *,
    session_id: int | None = None,
    agent: str | int | None = None,
    namespace: str | None = None,
) -> tuple[MemoryEntry, bool]:
    """Write an entry: for a session (the scope and namespace its agent's policy recalls
    with) or for an agent (``agent`` scope, recalled in all its sessions whatever
    their scope says about others). Returns it and whether it is new."""
    if not text or not text.strip():
        raise RequestError("A memory entry needs some text.")
    if session_id is not None and agent is not None:
        raise RequestError("Write for a session or for an agent, not both.")
    if session_id is not None:
        return add_memory_entry(ws, session_id, text, namespace=namespace)
    owner = find_agent(ws, agent)
    policy = MemoryPolicy.from_dict(owner.memory_policy)
    space = namespace or (policy.namespace if isinstance(policy.namespace, str) else "default")
    return ws.repo.add_memory_entry(owner.id, text.strip(), scope="agent", namespace=space,
                                    metadata=dict(policy.metadata))


def list_memory(
    ws: Workspace, *, session_id: int | None = None, agent: str | int | None = None
) -> list[MemoryEntry]:
    """Entries, newest first: a session's own and its agent's, or one agent's, or all."""
    if session_id is not None:
        owner, _ = _session_policy(ws, session_id)
        return [e for e in ws.repo.list_memory_entries(agent_id=owner.id)
                if e.session_id in (None, session_id)]
    if agent is not None:
        return ws.repo.list_memory_entries(agent_id=find_agent(ws, agent).id)
    return ws.repo.list_memory_entries()


def recall_memory(
    ws: Workspace, query: str, *, session_id: int | None = None, agent: str | int | None = None
) -> list[MemoryEntry]:
    """What a turn would recall for ``query``: in a session with its policy, else for
    an agent with its policy in ``agent`` scope."""
    if session_id is not None:
        owner, policy = _session_policy(ws, session_id)
        return LongTermMemory(StoreEntries(ws.repo, owner.id), policy, session_id).recall(query)
    owner = find_agent(ws, agent)
    policy = MemoryPolicy.from_dict(owner.memory_policy).replace(scope="agent")
    return LongTermMemory(StoreEntries(ws.repo, owner.id), policy).recall(query)


def forget_memory(ws: Workspace, entry_id: int) -> MemoryEntry:
    """Delete an entry; returns it as it was."""
    return delete_memory_entry(ws, entry_id)
