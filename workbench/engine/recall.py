"""Long-term memory: recalling entries for a prompt and capturing turns (SPEC §3).

A :class:`LongTermMemory` applies a :class:`~workbench.core.policy.MemoryPolicy` to an
:class:`EntryStore`: recall ranks entries by full-text relevance to the prompt (most
recent first on ties), keeps at most ``max_entries`` and, for ``session`` scope, only the
session's own; capture writes ``User: …\\nAssistant: …`` after each successful turn when
the policy says ``conversation``. Identical entries are stored once.

Two stores sit behind the one protocol: :class:`StoreEntries` over the SQLite
repository (FTS5 with BM25) and :class:`LocalEntries`, a list in memory with the same
ranking computed in Python, for scripts and tests without a database.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

from workbench.core.conversation import MemoryEntry, utcnow
from workbench.core.policy import MemoryPolicy
from workbench.errors import RequestError
from workbench.store.recall import prompt_terms, recall_entries, words
from workbench.store.repository import Repository

__all__ = ["EntryStore", "LocalEntries", "LongTermMemory", "StoreEntries", "capture_text"]


def capture_text(prompt: str, reply: str) -> str:
    """The entry a ``conversation`` capture writes for one turn."""
    return f"User: {prompt.strip()}\nAssistant: {reply.strip()}"


class EntryStore(Protocol):
    """Where an agent's long-term memory entries live."""

    def add(
        self,
        content: str,
        *,
        scope: str,
        namespace: str,
        session_id: int | None,
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[MemoryEntry, bool]:
        """Store an entry once; returns it and whether it was new."""
        ...

    def recall(
        self, text: str, *, scope: str, namespace: str, session_id: int | None, limit: int
    ) -> list[MemoryEntry]:
        """The entries most relevant to ``text``, best first, newest first on ties."""
        ...

    def entries(self) -> list[MemoryEntry]:
        """Every entry, newest first."""
        ...

    def recent(
        self, *, scope: str, namespace: str, session_id: int | None, limit: int
    ) -> list[MemoryEntry]:
        """The newest entries recall may return, newest first."""
        ...


class StoreEntries:
    """The entries of one agent in the workbench database."""

    def __init__(self, repo: Repository, agent_id: int):
        self.repo = repo
        self.agent_id = agent_id

    def add(
        self,
        content: str,
        *,
        scope: str,
        namespace: str,
        session_id: int | None,
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[MemoryEntry, bool]:
        return self.repo.add_memory_entry(
            self.agent_id,
            content,
            scope=scope,
            namespace=namespace,
            session_id=session_id if scope == "session" else None,
            metadata=dict(metadata or {}),
        )

    def recall(
        self, text: str, *, scope: str, namespace: str, session_id: int | None, limit: int
    ) -> list[MemoryEntry]:
        found = recall_entries(
            self.repo.db,
            text,
            agent_id=self.agent_id,
            scope=scope,
            namespace=namespace,
            session_id=session_id,
            limit=limit,
        )
        return [entry for entry, _ in found]

    def entries(self) -> list[MemoryEntry]:
        return self.repo.list_memory_entries(agent_id=self.agent_id)

    def recent(
        self, *, scope: str, namespace: str, session_id: int | None, limit: int
    ) -> list[MemoryEntry]:
        found = self.repo.list_memory_entries(
            agent_id=self.agent_id, namespace=namespace,
            session_id=session_id if scope == "session" else None,
        )
        return found[:max(0, limit)]


# BM25's usual constants, as SQLite's FTS5 uses them.
_K1 = 1.2
_B = 0.75


class LocalEntries:
    """Entries kept in a list, ranked like the store ranks them (BM25, then recency)."""

    def __init__(self, agent_id: int = 0):
        self.agent_id = agent_id
        self._entries: list[MemoryEntry] = []
        self._hashes: dict[tuple[str, str, int, str], MemoryEntry] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(
        self,
        content: str,
        *,
        scope: str,
        namespace: str,
        session_id: int | None,
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[MemoryEntry, bool]:
        if scope not in ("agent", "session"):
            raise RequestError(f"Memory scope {scope!r} is not 'agent' or 'session'.")
        session = session_id if scope == "session" else None
        digest = hashlib.sha256(content.strip().encode("utf-8")).hexdigest()
        key = (scope, namespace, session or 0, digest)
        with self._lock:
            found = self._hashes.get(key)
            if found is not None:
                return found, False
            entry = MemoryEntry(
                id=next(self._ids),
                agent_id=self.agent_id,
                content=content,
                scope=scope,
                namespace=namespace,
                session_id=session,
                metadata=dict(metadata or {}),
                created_at=utcnow(),
            )
            self._entries.append(entry)
            self._hashes[key] = entry
            return entry, True

    def recall(
        self, text: str, *, scope: str, namespace: str, session_id: int | None, limit: int
    ) -> list[MemoryEntry]:
        terms = prompt_terms(text)
        if not terms or limit <= 0:
            return []
        with self._lock:
            snapshot = list(self._entries)
        # Like FTS5, the statistics come from every entry, not only the filtered ones.
        docs = [Counter(words(e.content)) for e in snapshot]
        total = len(docs) or 1
        average = sum(sum(d.values()) for d in docs) / total or 1.0
        frequency = {t: sum(1 for d in docs if t in d) for t in terms}
        scored = []
        for entry, doc in zip(snapshot, docs, strict=True):
            if not _matches(entry, scope, namespace, session_id):
                continue
            length = sum(doc.values())
            score = 0.0
            for term in terms:
                tf = doc.get(term, 0)
                if not tf:
                    continue
                n = frequency[term]
                idf = max(math.log((total - n + 0.5) / (n + 0.5) + 1.0), 1e-6)
                score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average))
            if score > 0:
                scored.append((round(score, 6), entry))
        scored.sort(key=lambda pair: (-pair[0], -_timestamp(pair[1]), -pair[1].id))
        return [entry for _, entry in scored[:limit]]

    def entries(self) -> list[MemoryEntry]:
        with self._lock:
            return sorted(self._entries, key=lambda e: (-_timestamp(e), -e.id))

    def recent(
        self, *, scope: str, namespace: str, session_id: int | None, limit: int
    ) -> list[MemoryEntry]:
        found = [e for e in self.entries() if _matches(e, scope, namespace, session_id)]
        return found[:max(0, limit)]


def _matches(entry: MemoryEntry, scope: str, namespace: str, session_id: int | None) -> bool:
    """``agent`` scope: every entry of the agent in the namespace, whatever session wrote
    it; ``session`` scope: the session's own entries only (exact match)."""
    if entry.namespace != namespace:
        return False
    return scope != "session" or entry.session_id == session_id


def _timestamp(entry: MemoryEntry) -> float:
    return entry.created_at.timestamp() if entry.created_at else 0.0


class LongTermMemory:
    """Recall and capture for one session under a memory policy."""

    def __init__(
        self, entries: EntryStore, policy: MemoryPolicy, session_id: int | None = None
    ):
        self.store = entries
        self.policy = policy
        self.session_id = session_id

    @property
    def namespace(self) -> str:
        """The policy's namespace as a name (a template or callable not resolved for a
        turn yet stands for itself)."""
        value = self.policy.namespace
        return value if isinstance(value, str) else "default"

    def recall(self, prompt: str) -> list[MemoryEntry]:
        """The policy's ``max_entries`` entries most relevant to ``prompt``; when no
        entry matches the prompt's words, the most recent ones (seed 004: "hello"
        still recalls "User prefers the name Alex."). None when memory is disabled."""
        if self.policy.max_entries <= 0 or not self.policy.enabled:
            return []
        if self.policy.scope == "session" and self.session_id is None:
            return []
        scope, namespace, limit = self.policy.scope, self.namespace, self.policy.max_entries
        found = self.store.recall(prompt, scope=scope, namespace=namespace,
                                  session_id=self.session_id, limit=limit)
        if found:
            return found
        return self.store.recent(scope=scope, namespace=namespace, session_id=self.session_id,
                                 limit=limit)

    def remember(
        self, content: str, metadata: Mapping[str, Any] | None = None
    ) -> tuple[MemoryEntry, bool]:
        """Store an entry on purpose (what ``manual`` capture means); returns it and
        whether it was new. Empty text raises :class:`RequestError`."""
        if not content or not content.strip():
            raise RequestError("A memory entry needs some text.")
        if self.policy.scope == "session" and self.session_id is None:
            raise RequestError("A memory entry of scope 'session' needs a stored session.")
        return self.store.add(
            content,
            scope=self.policy.scope,
            namespace=self.namespace,
            session_id=self.session_id,
            metadata={**self.policy.metadata, **(metadata or {})},
        )

    def capture(self, prompt: str, reply: str) -> MemoryEntry | None:
        """After a successful turn: the entry written when capture is ``conversation``."""
        if self.policy.capture != "conversation" or not (prompt.strip() or reply.strip()):
            return None
        if not self.policy.enabled:
            return None
        if self.policy.scope == "session" and self.session_id is None:
            return None
        entry, _ = self.store.add(
            capture_text(prompt, reply),
            scope=self.policy.scope,
            namespace=self.namespace,
            session_id=self.session_id,
            metadata={**self.policy.metadata, "source": "conversation"},
        )
        return entry
