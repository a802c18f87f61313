"""``Memory``: the ordered messages of one session as the model sees them (SPEC §2).

``Memory(max_messages=None)`` keeps its messages in a list; ``Memory.open(ws, session_id)``
keeps them in the workbench database of the open workspace ``ws``. Both behave the same, through one
:class:`MemoryBacking` protocol:

* ``append`` / ``extend`` add messages (their token counts are cached at once);
* ``messages()``, ``last(n)``, ``by_role``, ``search``, ``important``, ``where`` return
  copies: changing them never changes memory;
* a window of ``max_messages`` (``Memory(N)``) keeps the newest N *non-system*
  messages: system messages are counted apart and never evicted by the window, and the
  oldest non-system messages leave first in, first out. A tool call and its results
  leave together, so the window may hold fewer than N; :attr:`Memory.window_note` then
  says so. ``clear()`` evicts everything and ``prune(max_tokens)`` evicts the oldest
  until the total fits, keeping the leading system message and the messages marked
  important (the ``important`` field or ``metadata["important"]``), as compaction does.
  Evicted messages are never deleted: in the store they keep their rows with state
  ``evicted``;
* ``appended()`` returns what was added since :meth:`Memory.begin_run`; messages given
  before the first run are not in it.

Every method takes the memory's lock, so threads (a GUI and its workers) can share one
``Memory``. A store-backed memory does not read the session when it opens: request
assembly reads it in pages from the newest message backwards (:meth:`Memory.history`,
a :class:`~workbench.engine.stored_history.StoredHistory`), its length is one count, and
the active messages are loaded and cached only by the operations that need all of them
(``messages()``, ``view()``, ``prune``, a window, ...). Before each operation it compares
the session's change stamp (``updated_at`` and message count) with the one it last saw
and forgets its cache when another writer changed the session.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Protocol

from workbench.core.assembly import call_ids, tool_units
from workbench.core.compaction import is_protected
from workbench.core.conversation import (
    ROLES,
    Agent,
    Message,
    MessageState,
    SessionContext,
    utcnow,
)
from workbench.core.policy import MemoryPolicy
from workbench.core.tokens import TokenCounter, fill_counts, get_counter
from workbench.engine.recall import EntryStore, LocalEntries, LongTermMemory, StoreEntries
from workbench.engine.stored_history import StoredHistory
from workbench.engine.workspace import Workspace
from workbench.errors import RequestError
from workbench.store.repository import Repository

__all__ = ["InMemoryBacking", "Memory", "MemoryBacking", "StoreBacking", "copy_message"]

EVICTED = MessageState.EVICTED.value
ACTIVE = MessageState.ACTIVE.value

#: Keyword fields ``Memory.append`` accepts besides role and content.
MESSAGE_FIELDS = frozenset(
    {"name", "tool_calls", "tool_call_id", "parts", "metadata", "important", "created_at"}
)


def copy_message(msg: Message) -> Message:
    """A copy sharing nothing mutable with ``msg`` (cheaper than a deep copy)."""
    out = copy.copy(msg)
    if msg.metadata:
        out.metadata = copy.deepcopy(msg.metadata)
    else:
        out.metadata = {}
    if msg.tool_calls is not None:
        out.tool_calls = copy.deepcopy(msg.tool_calls)
    if msg.parts is not None:
        out.parts = copy.deepcopy(msg.parts)
    return out


class MemoryBacking(Protocol):
    """Where a :class:`Memory` keeps its messages and the session's context."""

    session_id: int | None

    def load(self) -> list[Message]:
        """The session's active messages in order."""
        ...

    def store(self, messages: Sequence[Message]) -> list[Message]:
        """Append messages in one transaction; returns them with ids and positions."""
        ...

    def evict(self, messages: Sequence[Message]) -> None:
        """Set the messages' state to ``evicted`` (they stay stored)."""
        ...

    def replace(self, remove: Sequence[int], messages: Sequence[Message]) -> list[Message]:
        """Delete the messages with ids ``remove`` and append ``messages`` in one
        transaction; returns the appended ones with ids and positions."""
        ...

    def evicted(self) -> list[Message]:
        """The session's evicted messages in order."""
        ...

    def save_counts(self, messages: Sequence[Message]) -> None:
        """Persist the token counts cached on these stored messages."""
        ...

    def get_context(self) -> SessionContext:
        ...

    def set_context(self, context: SessionContext) -> None:
        ...

    def stamp(self) -> Any:
        """A value that changes when someone else changes the session (None: never)."""
        ...

    def agent(self) -> Agent | None:
        """The session's agent, when there is one."""
        ...

    def policy(self) -> MemoryPolicy | None:
        """The memory policy the session's agent and overrides define, if any."""
        ...

    def entries(self) -> EntryStore:
        """Where the agent's long-term memory entries live."""
        ...


class InMemoryBacking:
    """Messages and context in plain Python objects, for scripts and tests."""

    def __init__(self) -> None:
        self.session_id: int | None = None
        self._all: list[Message] = []
        self._ids = itertools.count(1)
        self._context = SessionContext()
        self._entries = LocalEntries()

    def load(self) -> list[Message]:
        return [m for m in self._all if m.state == ACTIVE]

    def store(self, messages: Sequence[Message]) -> list[Message]:
        now = utcnow()
        for msg in messages:
            msg.id = next(self._ids)
            msg.position = len(self._all)
            msg.created_at = msg.created_at or now
            self._all.append(msg)
        return list(messages)

    def replace(self, remove: Sequence[int], messages: Sequence[Message]) -> list[Message]:
        gone = set(remove)
        self._all = [m for m in self._all if m.id not in gone]
        for position, msg in enumerate(self._all):
            msg.position = position
        return self.store(messages)

    def evict(self, messages: Sequence[Message]) -> None:
        for msg in messages:
            msg.state = EVICTED

    def evicted(self) -> list[Message]:
        return [m for m in self._all if m.state == EVICTED]

    def save_counts(self, messages: Sequence[Message]) -> None:
        return None  # the counts already live on the objects

    def get_context(self) -> SessionContext:
        return self._context.copy()

    def set_context(self, context: SessionContext) -> None:
        self._context = context.copy()

    def stamp(self) -> Any:
        return None

    def agent(self) -> Agent | None:
        return None

    def policy(self) -> MemoryPolicy | None:
        return None

    def entries(self) -> EntryStore:
        return self._entries


class StoreBacking:
    """One session of the workbench database."""

    def __init__(self, repo: Repository, session_id: int):
        self.repo = repo
        self.session_id: int | None = session_id
        self._id = session_id
        self.info = repo.get_session(session_id)  # raises NotFoundError for a bad id

    def load(self) -> list[Message]:
        return self.repo.list_messages(self._id, states=(ACTIVE,))

    def history(self) -> StoredHistory:
        """The active messages read in pages, newest first, without loading them (those
        an earlier history read, while the database did not change, are not read again)."""
        return StoredHistory.latest(self.repo, self._id)

    def count(self) -> int:
        """How many active messages the session holds."""
        return self.repo.message_count(self._id, states=(ACTIVE,))

    def open_calls(self, wanted: Sequence[str]) -> set[str]:
        """Which of the call ids ``wanted`` an active assistant message made."""
        made = self.repo.call_ids_made(self._id, ACTIVE)
        return {c for c in wanted if c in made}

    def store(self, messages: Sequence[Message]) -> list[Message]:
        return self.repo.append_messages(self._id, list(messages))

    def replace(self, remove: Sequence[int], messages: Sequence[Message]) -> list[Message]:
        _removed, stored = self.repo.replace_messages(self._id, list(remove), list(messages))
        return stored

    def evict(self, messages: Sequence[Message]) -> None:
        ids = [m.id for m in messages if m.id is not None]
        if ids:
            self.repo.set_state(ids, EVICTED)

    def evicted(self) -> list[Message]:
        return self.repo.list_messages(self._id, states=(EVICTED,))

    def save_counts(self, messages: Sequence[Message]) -> None:
        rows = [
            (m.id, m.token_count, m.token_encoding or "")
            for m in messages
            if m.id is not None and m.token_count is not None
        ]
        if rows:
            self.repo.set_token_counts(rows)

    def get_context(self) -> SessionContext:
        return self.repo.get_context(self._id)

    def set_context(self, context: SessionContext) -> None:
        self.repo.set_context(self._id, context)

    def stamp(self) -> Any:
        info = self.repo.get_session(self._id)
        self.info = info
        return (info.updated_at, info.message_count)

    def agent(self) -> Agent | None:
        return self.repo.get_agent(self.info.agent_id)

    def policy(self) -> MemoryPolicy | None:
        agent = self.agent()
        overrides = self.info.overrides.get("memory_policy") if self.info.overrides else None
        return MemoryPolicy.from_dict(agent.memory_policy if agent else None, overrides)

    def entries(self) -> EntryStore:
        return StoreEntries(self.repo, self.info.agent_id)


def _check_tool_calls(calls: Any) -> list[dict[str, Any]]:
    if not isinstance(calls, list) or not calls:
        raise RequestError("'tool_calls' must be a non-empty list of tool calls.")
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("id"), str)
            or not call["id"]
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
        ):
            raise RequestError(
                "A tool call must look like {'id': 'call_1', 'type': 'function', "
                f"'function': {{'name': ..., 'arguments': '...'}}}}; got {call!r}."
            )
    return calls


class Memory:
    """The ordered messages of one session (see the module documentation)."""

    def __init__(
        self,
        max_messages: int | None = None,
        *,
        counter: TokenCounter | None = None,
        policy: MemoryPolicy | None = None,
        backing: MemoryBacking | None = None,
    ):
        if max_messages is not None and (
            isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1
        ):
            raise RequestError(
                f"max_messages must be a whole number of at least 1, not {max_messages!r}."
            )
        self._lock = threading.RLock()
        self._backing: MemoryBacking = backing or InMemoryBacking()
        self._counter = counter
        self._policy = policy
        stored_policy = self._backing.policy()
        if max_messages is None:
            source = policy or stored_policy
            max_messages = source.max_messages if source else None
        self._max_messages = max_messages
        # None: a store-backed memory that has not loaded its messages (see _loaded()).
        self._active: list[Message] | None = []
        self._appended: list[Message] = []
        self._run_started = False
        #: Why the window holds fewer than ``max_messages`` non-system messages ("" if not).
        self.window_note = ""
        self._stamp: Any = None
        self._reload()

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        ws: Workspace,
        session_id: int,
        *,
        max_messages: int | None = None,
        counter: TokenCounter | None = None,
        policy: MemoryPolicy | None = None,
    ) -> Memory:
        """The memory of a session stored in the open workspace ``ws``.

        Without ``max_messages`` the window is the session's policy's ``max_messages``.
        The memory uses the workspace's database and never closes it.
        """
        return cls(
            max_messages,
            counter=counter,
            policy=policy,
            backing=StoreBacking(ws.repo, session_id),
        )

    # -- properties ---------------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        """The stored session's id (``None`` for an in-memory memory)."""
        return self._backing.session_id

    @property
    def max_messages(self) -> int | None:
        """The sliding window's size, or ``None`` for no window."""
        return self._max_messages

    @property
    def counter(self) -> TokenCounter:
        """The token counter whose counts this memory caches."""
        if self._counter is None:
            self._counter = get_counter()
        return self._counter

    @property
    def lock(self) -> threading.RLock:
        """The lock every method holds; hold it to make several calls one step."""
        return self._lock

    def policy(self) -> MemoryPolicy:
        """The policy given to this memory, else the session's agent's, else defaults."""
        if self._policy is not None:
            return self._policy
        stored = self._backing.policy()
        if stored is not None:
            return stored
        return MemoryPolicy(max_messages=self._max_messages)

    @property
    def repository(self) -> Repository | None:
        """The repository a stored session's memory reads and writes (``None`` in
        memory): compaction writes through it under :attr:`lock`, then calls
        :meth:`refresh`."""
        backing = self._backing
        return backing.repo if isinstance(backing, StoreBacking) else None

    def agent(self) -> Agent | None:
        """The stored session's agent (``None`` in memory)."""
        return self._backing.agent()

    def long_term(self, policy: MemoryPolicy | None = None) -> LongTermMemory:
        """Long-term memory (recall and capture) for this session under ``policy``."""
        return LongTermMemory(
            self._backing.entries(), policy or self.policy(), self._backing.session_id
        )

    # -- syncing ------------------------------------------------------------------------

    def _reload(self) -> None:
        self._stamp = self._backing.stamp()
        if isinstance(self._backing, StoreBacking):
            self._active = None  # read when an operation needs every message
        else:
            self._active = self._backing.load()

    def _stored(self) -> StoreBacking:
        """The store backing: what a memory whose messages are not loaded has."""
        if not isinstance(self._backing, StoreBacking):
            raise AssertionError("only a store-backed memory reads without loading")
        return self._backing

    def _loaded(self) -> list[Message]:
        """The active messages, loading (and caching) them if not done yet."""
        if self._active is None:
            self._active = self._backing.load()
        return self._active

    def _sync(self) -> None:
        if self._stamp is None:
            return
        if self._backing.stamp() != self._stamp:
            self._reload()

    def refresh(self) -> None:
        """Reload the messages from the store (done by itself when the session changed)."""
        with self._lock:
            self._reload()

    # -- adding ---------------------------------------------------------------------------

    def append(self, role: str, content: str | None = "", **fields: Any) -> Message:
        """Add one message and return a copy of it as stored.

        ``fields`` may be ``name``, ``tool_calls`` (assistant, OpenAI shape),
        ``tool_call_id`` (tool: it must answer a call in memory), ``parts``, ``metadata``,
        ``important`` and ``created_at``. Bad input raises :class:`RequestError` and
        leaves memory unchanged.
        """
        unknown = sorted(set(fields) - MESSAGE_FIELDS)
        if unknown:
            raise RequestError(
                f"Messages have no field {unknown[0]!r}; the fields are "
                f"{', '.join(sorted(MESSAGE_FIELDS))}."
            )
        metadata = fields.pop("metadata", None)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise RequestError("'metadata' must be a mapping.")
        msg = Message(
            role=role,
            content=content or "",
            metadata=copy.deepcopy(dict(metadata or {})),
            **fields,
        )
        return self.extend([msg])[0]

    def extend(self, messages: Sequence[Message]) -> list[Message]:
        """Add several messages in one step (one transaction in the store); returns copies.

        The messages are validated together: a tool result may answer a call made
        earlier in the same batch. If any is bad, none is added.
        """
        batch = [copy_message(m) for m in messages]
        if not batch:
            return []
        with self._lock:
            self._sync()
            self._prepare(batch)
            stored = self._backing.store(batch)
            if self._active is not None:
                self._active.extend(stored)
            return self._after_store(stored)

    def replace(self, ids: Collection[int], messages: Sequence[Message]) -> list[Message]:
        """Delete the active messages with these ids and add ``messages`` at the end, as
        one step (one transaction in the store): a reply replaced by a new one never
        leaves both or neither. Validated like :meth:`extend`; returns copies of the
        added messages."""
        batch = [copy_message(m) for m in messages]
        wanted = set(ids)
        with self._lock:
            self._sync()
            self._prepare(batch)
            stored = self._backing.replace(sorted(wanted), batch)
            if self._active is not None:
                self._active = [m for m in self._active if m.id not in wanted]
                self._active.extend(stored)
            return self._after_store(stored)

    def _prepare(self, batch: list[Message]) -> None:
        """Validate new messages and make them new rows: active, unplaced, counted."""
        self._validate(batch)
        for msg in batch:
            msg.id = None
            msg.position = None
            msg.state = ACTIVE
            msg.compaction_id = None
        fill_counts(batch, self.counter)

    def _after_store(self, stored: list[Message]) -> list[Message]:
        """After new rows were written (lock held): note them, window, stamp; copies."""
        if self._run_started:
            self._appended.extend(stored)
        self._apply_window()
        self._stamp = self._backing.stamp()
        return [copy_message(m) for m in stored]

    def last_turn(self) -> tuple[Sequence[Message], Message, list[Message]] | None:
        """The last user message, the history before it (read-only, as cheap as
        :meth:`history`) and copies of the messages after it; None without any user
        message. What "regenerate" sends again and replaces."""
        with self._lock:
            self._sync()
            history = self.history()
            for index in range(len(history) - 1, -1, -1):
                prompt = history[index]
                if prompt.role != "user":
                    continue
                after = [copy_message(history[i]) for i in range(index + 1, len(history))]
                before: Sequence[Message]
                if isinstance(history, StoredHistory):
                    before = StoredHistory(history.repo, history.session_id, length=index,
                                           before_position=prompt.position)
                else:
                    before = history[:index]
                return before, copy_message(prompt), after
            return None

    def _open_calls(self, batch: Sequence[Message]) -> set[str]:
        """The call ids made in memory that the batch's tool results may answer."""
        if self._active is not None:
            open_calls: set[str] = set()
            for msg in self._active:
                if msg.role == "assistant" and msg.tool_calls:
                    open_calls.update(call_ids(msg))
            return open_calls
        # Not loaded: ask the store only about the calls the batch does not make itself.
        made: set[str] = set()
        asked: list[str] = []
        for msg in batch:
            if msg.role == "assistant" and isinstance(msg.tool_calls, list):
                made.update(call_ids(msg))
            if msg.role == "tool" and msg.tool_call_id and msg.tool_call_id not in made:
                asked.append(msg.tool_call_id)
        if not asked:
            return set()
        return self._stored().open_calls(asked)

    def _validate(self, batch: Sequence[Message]) -> None:
        open_calls = self._open_calls(batch)
        for msg in batch:
            if msg.role not in ROLES:
                raise RequestError(
                    f"Role {msg.role!r} is not one of {', '.join(ROLES)}; nothing was added."
                )
            if not isinstance(msg.content, str):
                raise RequestError("A message's content must be text; nothing was added.")
            if msg.tool_calls is not None:
                if msg.role != "assistant":
                    raise RequestError("Only assistant messages carry tool calls.")
                open_calls.update(call_ids(msg) if _check_tool_calls(msg.tool_calls) else ())
            if msg.role == "tool":
                if not msg.tool_call_id:
                    raise RequestError(
                        "A tool result needs the 'tool_call_id' of the call it answers; "
                        "nothing was added."
                    )
                if msg.tool_call_id not in open_calls:
                    raise RequestError(
                        f"The tool result answers call {msg.tool_call_id!r}, but no assistant "
                        "message in memory made that call; nothing was added."
                    )
            elif msg.tool_call_id is not None:
                raise RequestError("Only tool messages carry a 'tool_call_id'.")

    # -- evicting ------------------------------------------------------------------------

    def _evict_indices(self, indices: Sequence[int]) -> list[Message]:
        if not indices:
            return []
        chosen = set(indices)
        active = self._loaded()
        leaving = [active[i] for i in sorted(chosen)]
        self._backing.evict(leaving)
        for msg in leaving:
            msg.state = EVICTED
        self._active = [m for i, m in enumerate(active) if i not in chosen]
        return leaving

    def _apply_window(self) -> None:
        limit = self._max_messages
        if limit is None:
            return
        active = self._loaded()
        held = sum(1 for m in active if m.role != "system")
        if held <= limit:
            return
        excess = held - limit
        leaving: list[int] = []
        for unit in tool_units(active):
            if excess <= 0:
                break
            members = [i for i in unit if active[i].role != "system"]
            if not members:
                continue
            leaving.extend(members)
            excess -= len(members)
        self._evict_indices(leaving)
        held = sum(1 for m in self._loaded() if m.role != "system")
        self.window_note = (
            f"The window holds {held} of {limit} messages: a tool call and its results "
            "left together." if held < limit else ""
        )

    def clear(self) -> int:
        """Evict every message (they stay in the store); returns how many."""
        with self._lock:
            self._sync()
            count = len(self._evict_indices(range(len(self._loaded()))))
            self._stamp = self._backing.stamp()
            return count

    def prune(self, max_tokens: int) -> list[Message]:
        """Evict the oldest messages until their tokens total at most ``max_tokens``.

        The leading system message always stays, and an assistant message with tool
        calls leaves together with its results; messages marked important stay (the
        total may then remain above the budget). Returns copies of what was evicted.
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
            raise RequestError(f"prune needs a token count of 0 or more, not {max_tokens!r}.")
        with self._lock:
            self._sync()
            active = self._loaded()
            fill_counts(active, self.counter)
            total = sum(m.token_count or 0 for m in active)
            leaving: list[int] = []
            for unit in tool_units(active):
                if total <= max_tokens:
                    break
                if unit[0] == 0 and active[0].role == "system":
                    continue
                if any(is_protected(active[i]) for i in unit):
                    continue  # important (or pinned) messages stay, as in compaction
                leaving.extend(unit)
                total -= sum(active[i].token_count or 0 for i in unit)
            evicted = self._evict_indices(leaving)
            self._stamp = self._backing.stamp()
            return [copy_message(m) for m in evicted]

    def evict(self, ids: Collection[int], *, state: str = EVICTED) -> list[Message]:
        """Evict the active messages with these ids (they stay stored, as ``evicted``).

        ``state`` is the state the messages show afterwards here (``folded`` for
        messages a caller folded into the summary). Returns copies of them, in order.
        """
        with self._lock:
            self._sync()
            wanted = set(ids)
            active = self._loaded()
            leaving = self._evict_indices([i for i, m in enumerate(active) if m.id in wanted])
            for message in leaving:
                message.state = state
            self._stamp = self._backing.stamp()
            return [copy_message(m) for m in leaving]

    # -- reading -----------------------------------------------------------------------------

    def messages(self) -> list[Message]:
        """Copies of the active messages in order."""
        with self._lock:
            self._sync()
            return [copy_message(m) for m in self._loaded()]

    def view(self) -> list[Message]:
        """The active messages themselves, in a new list, for request assembly.

        Unlike :meth:`messages` nothing is copied, so this is cheap for long sessions;
        callers must treat the messages as read-only.
        """
        with self._lock:
            self._sync()
            return list(self._loaded())

    def history(self) -> Sequence[Message]:
        """The active messages for request assembly, read-only and as cheap as can be.

        A store-backed memory that has not loaded its messages returns a
        :class:`~workbench.engine.stored_history.StoredHistory`, which reads pages from
        the newest message backwards only as far as it is walked; otherwise the same
        list :meth:`view` returns.
        """
        with self._lock:
            self._sync()
            if self._active is None:
                return self._stored().history()
            return list(self._active)

    def __len__(self) -> int:
        with self._lock:
            self._sync()
            if self._active is None:
                return self._stored().count()
            return len(self._active)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages())

    def __repr__(self) -> str:
        where = f"session {self.session_id}" if self.session_id is not None else "in memory"
        count = "?" if self._active is None else len(self._active)
        return f"<Memory {where}: {count} messages>"

    def last(self, n: int) -> list[Message]:
        """Copies of the ``n`` most recent active messages."""
        if n <= 0:
            return []
        with self._lock:
            self._sync()
            if self._active is None:
                history = self._stored().history()
                return [copy_message(m) for m in history[max(0, len(history) - n):]]
            return [copy_message(m) for m in self._active[-n:]]

    def by_role(self, role: str) -> list[Message]:
        """Copies of the active messages of one role."""
        if role not in ROLES:
            raise RequestError(f"Role {role!r} is not one of {', '.join(ROLES)}.")
        return self._select(lambda m: m.role == role)

    def search(self, text: str) -> list[Message]:
        """Copies of the active messages whose content holds ``text``, any case."""
        needle = text.casefold()
        return self._select(lambda m: needle in (m.content or "").casefold())

    def important(self) -> list[Message]:
        """Copies of the active messages marked important."""
        return self._select(lambda m: m.important or bool(m.metadata.get("important")))

    def where(self, **metadata: Any) -> list[Message]:
        """Copies of the active messages whose metadata has every given key and value."""
        def matches(m: Message) -> bool:
            meta = m.public_metadata()
            return all(k in meta and meta[k] == v for k, v in metadata.items())

        return self._select(matches)

    def _select(self, keep: Callable[[Message], bool]) -> list[Message]:
        with self._lock:
            self._sync()
            return [copy_message(m) for m in self._loaded() if keep(m)]

    def evicted(self) -> list[Message]:
        """Copies of the evicted messages (still stored, out of the model's view)."""
        with self._lock:
            return [copy_message(m) for m in self._backing.evicted()]

    def total_tokens(self) -> int:
        """Tokens of the active messages (counts are filled where missing)."""
        with self._lock:
            self._sync()
            active = self._loaded()
            fill_counts(active, self.counter)
            return sum(m.token_count or 0 for m in active)

    # -- runs ------------------------------------------------------------------------------

    def begin_run(self) -> None:
        """Mark the start of a run: :meth:`appended` reports from here on."""
        with self._lock:
            self._appended = []
            self._run_started = True

    def appended(self) -> list[Message]:
        """Copies of the messages added since the current run began (none before the
        first run: messages given beforehand are the conversation's context)."""
        with self._lock:
            return [copy_message(m) for m in self._appended]

    # -- context ---------------------------------------------------------------------------

    def context(self) -> SessionContext:
        """A copy of the session's context (facts, summary, tasks, tool stats, usage)."""
        with self._lock:
            return self._backing.get_context()

    def update_context(self, change: Callable[[SessionContext], None]) -> SessionContext:
        """Read, change and write the session's context as one step under the lock."""
        with self._lock:
            context = self._backing.get_context()
            change(context)
            self._backing.set_context(context)
            self._stamp = self._backing.stamp()
            return context.copy()

    def save_counts(self, messages: Sequence[Message]) -> None:
        """Persist token counts that request assembly cached on stored messages."""
        if messages:
            with self._lock:
                self._backing.save_counts(messages)
                self._stamp = self._backing.stamp()
