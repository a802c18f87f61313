"""The domain objects of SPEC §1, as plain dataclasses with no I/O.

The store turns rows into these, the formats parse files into them, and the engine and
the GUI pass them around. They are ordinary mutable dataclasses; code that hands them to
callers who must not change the original (``Memory.messages()``) copies them with
:meth:`Message.copy`.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class Role(StrEnum):
    """Who said a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


ROLES: tuple[str, ...] = tuple(r.value for r in Role)


class MessageState(StrEnum):
    """Whether a message is in the model's view (SPEC §1)."""

    ACTIVE = "active"
    FOLDED = "folded"
    EVICTED = "evicted"


STATES: tuple[str, ...] = tuple(s.value for s in MessageState)


class TaskStatus(StrEnum):
    """Life cycle of an active task in the session context."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (the store rejects naive times)."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive values are taken to be UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_time(value: Any) -> datetime | None:
    """Read a time from ISO 8601 text or a Unix timestamp; ``None`` when absent.

    Raises ``ValueError`` for a value that is present but not a time.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        return as_utc(datetime.fromisoformat(text))
    raise ValueError(f"{value!r} is not a time")


def format_time(value: datetime | None) -> str | None:
    """ISO 8601 text in UTC with a ``Z`` suffix, or ``None``."""
    if value is None:
        return None
    return as_utc(value).isoformat().replace("+00:00", "Z")


@dataclass
class Message:
    """One message of a session.

    ``position`` is the 0-based place in the session (dense: 0..n-1). ``metadata`` is
    free JSON; ``important`` is kept as its own field and shown inside ``metadata`` by
    :meth:`public_metadata`. ``token_count`` is cached together with the name of the
    encoding that produced it.
    """

    role: str
    content: str = ""
    id: int | None = None
    session_id: int | None = None
    position: int | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    parts: list[dict[str, Any]] | None = None
    created_at: datetime | None = None
    token_count: int | None = None
    token_encoding: str | None = None
    state: str = MessageState.ACTIVE.value
    important: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    compaction_id: int | None = None

    def copy(self) -> Message:
        """A deep copy: changing it never changes the original."""
        return copy.deepcopy(self)

    def public_metadata(self) -> dict[str, Any]:
        """``metadata`` with ``important`` folded in, as exports and JSON show it."""
        meta = dict(self.metadata)
        if self.important:
            meta["important"] = True
        return meta


_TASK_KEYS = frozenset({"id", "description", "status", "progress", "created_at", "updated_at"})
_TASK_TIMES = ("created_at", "updated_at")


def _same_time(raw: Any, value: datetime | None) -> bool:
    """Whether ``raw`` (a time as a file wrote it) still denotes ``value``."""
    try:
        return parse_time(raw) == value
    except (ValueError, OverflowError, OSError):
        return False


@dataclass
class Task:
    """An active task an agent keeps in its session context.

    ``extra`` keeps the keys of a task read from a file that the workbench has no field
    for, and ``raw_times`` the times a file wrote as epoch numbers, so that writing the
    task back gives what was read.
    """

    id: str
    description: str
    status: str = TaskStatus.PENDING.value
    progress: float | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    raw_times: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "description": self.description,
            "status": self.status,
            "progress": self.progress,
        }
        for key in _TASK_TIMES:
            value = getattr(self, key)
            raw = self.raw_times.get(key)
            out[key] = raw if raw is not None and _same_time(raw, value) else format_time(value)
        for key, value in self.extra.items():
            out.setdefault(key, copy.deepcopy(value))
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        """Build a task from its JSON form; raises ``ValueError`` on a bad field."""
        if not isinstance(data, dict):
            raise ValueError(f"a task must be an object, not {type(data).__name__}")
        if "description" not in data and "id" not in data:
            raise ValueError("a task needs an 'id' or a 'description'")
        progress = data.get("progress")
        if progress is not None and (
            isinstance(progress, bool) or not isinstance(progress, int | float)
        ):
            raise ValueError(f"task progress must be a number, not {progress!r}")
        raw_times = {
            key: data[key]
            for key in _TASK_TIMES
            if isinstance(data.get(key), int | float) and not isinstance(data.get(key), bool)
        }
        return cls(
            id=str(data.get("id") or data.get("description")),
            description=str(data.get("description", "")),
            status=str(data.get("status") or TaskStatus.PENDING.value),
            progress=None if progress is None else (
                progress if isinstance(progress, int) else float(progress)
            ),
            created_at=parse_time(data.get("created_at")),
            updated_at=parse_time(data.get("updated_at")),
            extra={k: copy.deepcopy(v) for k, v in data.items() if k not in _TASK_KEYS},
            raw_times=raw_times,
        )


def _unknown(data: dict[str, Any], known: Collection[str]) -> dict[str, Any]:
    """The keys of ``data`` the workbench has no field for, with copies of their values."""
    return {k: copy.deepcopy(v) for k, v in data.items() if k not in known}


def _with_unknown(out: dict[str, Any], unknown: dict[str, Any]) -> dict[str, Any]:
    """``out`` with copies of the ``unknown`` keys it does not have yet (written back)."""
    for key, value in unknown.items():
        out.setdefault(key, copy.deepcopy(value))
    return out


_TOOL_STATS_KEYS = frozenset({"total_calls", "by_tool", "calls_by_tool", "failures"})


@dataclass
class ToolStats:
    """How often the agent called tools, by tool, and how many calls failed.

    ``extra`` keeps the keys a file had that the workbench has no field for.
    """

    total_calls: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)
    failures: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return _with_unknown({
            "total_calls": self.total_calls,
            "by_tool": dict(self.by_tool),
            "failures": self.failures,
        }, self.extra)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ToolStats:
        data = data or {}
        by_tool = data.get("by_tool") or data.get("calls_by_tool") or {}
        return cls(
            total_calls=int(data.get("total_calls", 0) or 0),
            by_tool={str(k): int(v) for k, v in dict(by_tool).items()},
            failures=int(data.get("failures", 0) or 0),
            extra=_unknown(data, _TOOL_STATS_KEYS),
        )


_DEFAULT_USAGE_KEYS = ("total_input", "total_output", "total")
_INPUT_KEYS = ("total_input", "input_tokens")
_OUTPUT_KEYS = ("total_output", "output_tokens")


@dataclass
class TokenUsage:
    """Tokens the provider billed for this session, summed over its calls.

    A usage read from a file remembers its keys in order (``keys``) and the values of
    those the workbench has no field for (``extra``, such as ``by_session``), so that
    writing it back gives what was read; ``keys`` is ``None`` for the default shape
    (``total_input``, ``total_output``, ``total``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] | None = field(default=None, compare=False)

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        known = {
            **dict.fromkeys(_INPUT_KEYS, self.input_tokens),
            **dict.fromkeys(_OUTPUT_KEYS, self.output_tokens),
            "total": self.total,
        }
        keys = self.keys if self.keys is not None else _DEFAULT_USAGE_KEYS
        out: dict[str, Any] = {}
        for key in keys:
            if key in known:
                out[key] = known[key]
            elif key in self.extra:
                out[key] = copy.deepcopy(self.extra[key])
        return _with_unknown(out, self.extra)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TokenUsage:
        """A usage as a file writes it (its keys and unknown values remembered)."""
        data = data or {}
        known = {*_INPUT_KEYS, *_OUTPUT_KEYS, "total"}
        return cls(
            input_tokens=int(data.get("total_input", data.get("input_tokens", 0)) or 0),
            output_tokens=int(data.get("total_output", data.get("output_tokens", 0)) or 0),
            extra=_unknown(data, known),
            # The default shape is no shape to remember: the workbench's own export reads
            # back as the empty usage it was written from.
            keys=tuple(data) if data and tuple(data) != _DEFAULT_USAGE_KEYS else None,
        )


@dataclass
class SessionContext:
    """What an agent remembers about a session beyond its message list (SPEC §1)."""

    facts: list[str] = field(default_factory=list)
    summary: str = ""
    tasks: list[Task] = field(default_factory=list)
    tool_stats: ToolStats = field(default_factory=ToolStats)
    token_usage: TokenUsage = field(default_factory=TokenUsage)
    system_state: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> SessionContext:
        return copy.deepcopy(self)

    def to_json(self) -> dict[str, Any]:
        """The JSON shape the CLI's ``show --json`` prints under ``context``."""
        return {
            "facts": list(self.facts),
            "summary": self.summary,
            "tasks": [t.to_json() for t in self.tasks],
            "tool_stats": self.tool_stats.to_json(),
            "token_usage": self.token_usage.to_json(),
            "system_state": copy.deepcopy(self.system_state),
            "environment": copy.deepcopy(self.environment),
        }


@dataclass
class SessionInfo:
    """A session's row: everything but its messages and context."""

    id: int
    title: str
    agent_id: int
    created_at: datetime
    updated_at: datetime
    tags: list[str] = field(default_factory=list)
    pinned: bool = False
    archived: bool = False
    forked_from_session_id: int | None = None
    forked_from_message_id: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    source_id: str | None = None
    message_count: int = 0
    token_count: int = 0
    agent_name: str | None = None


@dataclass(frozen=True)
class ForkOrigin:
    """Where a session was forked from, as an export names it: the parent session's
    ``source`` and ``source_id`` (as the export gives them, so that reading it back finds
    the parent in the same file or in the database), and the ``position`` of the
    parent's message the fork was made at (``None`` when that message is gone)."""

    source: str
    source_id: str
    position: int | None


@dataclass
class Conversation:
    """A whole conversation as a format reads it, before it is stored.

    ``source`` names the format and ``source_id`` the conversation's own id in that
    source, and ``source_file`` the file it was read from (the engine fills it in): with
    a fingerprint of the messages, they let an import recognise a conversation it has
    seen before (see :mod:`workbench.core.identity`). ``metadata`` holds what the
    source says about the conversation as a whole (a model, a score, a project...);
    ``forked_from`` the session it was forked from, when its export names one.
    """

    title: str
    messages: list[Message] = field(default_factory=list)
    context: SessionContext = field(default_factory=SessionContext)
    source: str | None = None
    source_id: str | None = None
    source_file: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    forked_from: ForkOrigin | None = None
    """The session this one was forked from, when an export said so; the engine links
    the fork once the parent is stored (or found in the database)."""
    tree_id: str | None = None
    """For a path through a tree of messages (ChatGPT, Claude and Open WebUI keep every
    edited question and regenerated answer): the source id of the tree, shared by its
    current path and each branch. The path that was current when the tree was imported
    before may be a branch now, and a branch may have become the current path: a stored
    session of the same tree holding this path's messages is this path."""


@dataclass
class Agent:
    """A named profile: instructions, provider and model, memory policy, tools."""

    id: int
    name: str
    instructions: str = ""
    provider: str | None = None
    model: str | None = None
    memory_policy: dict[str, Any] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)


@dataclass
class MemoryEntry:
    """A long-term memory entry an agent can recall (SPEC §1)."""

    id: int
    agent_id: int
    content: str
    scope: str = "agent"
    namespace: str = "default"
    session_id: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None


@dataclass
class SkippedEntry:
    """An entry of an input file that was not imported, and why."""

    entry: str
    reason: str


@dataclass
class ImportNote:
    """Something an import had to change in an entry it still imported, and where.

    ``entry`` names the entry as :class:`SkippedEntry` does (``"item 3"``, ``"line 7"``,
    or the conversation's id); ``note`` is a sentence saying what was changed.
    """

    entry: str
    note: str


@dataclass
class SearchHit:
    """One search result: a message, a session title or a memory entry."""

    kind: str  # "message", "session" or "memory"
    session_id: int | None
    message_id: int | None
    role: str | None
    snippet: str
    score: float
    memory_id: int | None = None
    position: int | None = None
    title: str | None = None
