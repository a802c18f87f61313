"""The built-in tools an agent can enable (SPEC §3): search, recall, remember, time.

An agent lists the tools it may call by name in its ``tools`` field. The four built-in
ones are made here as :class:`~workbench.core.tools.Tool` objects bound to a repository,
the agent and (when there is one) the session of the turn:

=========================  ===============================================================
name                       what it does
=========================  ===============================================================
``search_conversations``   full-text search over every session of the workbench
                           (messages and titles); the hits with their session's title
``recall_memory``          the agent's long-term memory entries most relevant to a query,
                           under the agent's memory policy (scope, namespace)
``remember_fact``          stores a long-term memory entry under the same policy, so a
                           later ``recall_memory`` (or the automatic recall) finds it
``current_time``           the current time in UTC, ISO 8601
=========================  ===============================================================

:func:`tools_for_agent` returns the enabled ones, in the table's order; names an agent
lists that are not built in are left to whoever supplies such tools.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from workbench.core.conversation import Agent
from workbench.core.policy import MemoryPolicy
from workbench.core.tools import Tool, tool
from workbench.engine.recall import LongTermMemory, StoreEntries
from workbench.errors import NotFoundError, RequestError
from workbench.store.repository import Repository
from workbench.store.searching import SearchQuery, search

__all__ = [
    "BUILTIN_TOOLS",
    "MAX_RESULTS",
    "builtin_tool_names",
    "make_builtin_tool",
    "tools_for_agent",
]

#: Built-in tool names and the label a settings form shows for each, in display order.
BUILTIN_TOOLS: dict[str, str] = {
    "search_conversations": "Search the workbench's conversations",
    "recall_memory": "Recall long-term memory",
    "remember_fact": "Remember a fact",
    "current_time": "Current time",
}

#: The most hits a search or recall tool returns in one call.
MAX_RESULTS = 20

Clock = Callable[[], datetime]


def builtin_tool_names() -> list[str]:
    """The names of the built-in tools, in display order."""
    return list(BUILTIN_TOOLS)


def _limit(value: int) -> int:
    return max(1, min(int(value), MAX_RESULTS))


class _Bound:
    """What the tools of one turn are bound to: the store, the agent, the session."""

    def __init__(
        self,
        repo: Repository,
        agent: Agent,
        session_id: int | None,
        policy: MemoryPolicy,
        clock: Clock,
    ):
        self.repo = repo
        self.agent = agent
        self.session_id = session_id
        self.policy = policy
        self.clock = clock

    def long_term(self, max_entries: int | None = None) -> LongTermMemory:
        policy = self.policy if max_entries is None else self.policy.replace(
            max_entries=max_entries)
        return LongTermMemory(StoreEntries(self.repo, self.agent.id), policy, self.session_id)

    def _title(self, session_id: int | None, titles: dict[int, str]) -> str | None:
        if session_id is None:
            return None
        if session_id not in titles:
            try:
                titles[session_id] = self.repo.get_session(session_id).title
            except NotFoundError:
                titles[session_id] = ""
        return titles[session_id] or None

    # -- the tools' bodies -------------------------------------------------------------

    def search_conversations(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Search every conversation stored in the workbench (message texts and session
        titles) and return the best matches with their session's title.

        Args:
            query: words to look for; "quoted phrases" and prefix* are understood.
            limit: how many matches to return (1 to 20).
        """
        if not query.strip():
            raise RequestError("Give some words to search for.")
        hits = search(
            self.repo.db,
            SearchQuery(text=query, kinds=("message", "session"), limit=_limit(limit),
                        highlight=("", "")),
        )
        titles: dict[int, str] = {}
        found = []
        for hit in hits:
            item: dict[str, Any] = {
                "session_id": hit.session_id,
                "session_title": hit.title or self._title(hit.session_id, titles),
                "kind": hit.kind,
            }
            if hit.kind == "message":
                item["role"] = hit.role
                item["text"] = hit.snippet
            found.append(item)
        return found

    def recall_memory(self, query: str, limit: int = 5) -> list[str]:
        """Recall the long-term memory entries most relevant to a query, best first.

        Args:
            query: what to remember things about.
            limit: how many entries to return (1 to 20).
        """
        if not query.strip():
            raise RequestError("Say what to recall.")
        return [entry.content for entry in self.long_term(_limit(limit)).recall(query)]

    def remember_fact(self, fact: str) -> str:
        """Remember a fact in long-term memory, to be recalled in later turns and
        conversations.

        Args:
            fact: the fact, as one self-contained sentence.
        """
        entry, created = self.long_term().remember(fact.strip(), {"source": "tool"})
        if created:
            return f"Remembered (memory entry {entry.id})."
        return f"Already remembered (memory entry {entry.id})."

    def current_time(self) -> str:
        """The current date and time in UTC (ISO 8601)."""
        now = self.clock()
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        return now.astimezone(UTC).isoformat(timespec="seconds")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def make_builtin_tool(
    name: str,
    repo: Repository,
    agent: Agent,
    *,
    session_id: int | None = None,
    policy: MemoryPolicy | None = None,
    clock: Clock | None = None,
) -> Tool:
    """The built-in tool called ``name`` bound to ``agent`` (and ``session_id``).

    ``policy`` is the memory policy recall and remember follow (default: the agent's);
    ``clock`` replaces the system clock for ``current_time``. An unknown name raises
    :class:`~workbench.errors.RequestError`.
    """
    if name not in BUILTIN_TOOLS:
        raise RequestError(
            f"There is no built-in tool named {name!r}; the built-in tools are "
            f"{', '.join(BUILTIN_TOOLS)}."
        )
    bound = _Bound(
        repo,
        agent,
        session_id,
        policy if policy is not None else MemoryPolicy.from_dict(agent.memory_policy),
        clock or _utcnow,
    )
    built = tool(name=name)(getattr(bound, name))
    # The docstring's summary wraps; the model reads it better on one line.
    return replace(built, description=" ".join(built.description.split()))


def tools_for_agent(
    agent: Agent,
    repo: Repository,
    *,
    session_id: int | None = None,
    policy: MemoryPolicy | None = None,
    clock: Clock | None = None,
    names: Sequence[str] | None = None,
) -> list[Tool]:
    """The built-in tools ``agent`` enables (its ``tools`` field, or ``names``), bound
    to the turn's session; names that are not built in are skipped."""
    wanted = set(agent.tools if names is None else names)
    return [
        make_builtin_tool(name, repo, agent, session_id=session_id, policy=policy, clock=clock)
        for name in BUILTIN_TOOLS
        if name in wanted
    ]
