"""The repository: every read and change of sessions, messages, context and memory.

It is built in layers by topic, each a module of its own: settings and statistics
(``settings_store``), agents and memory entries (``agent_store``), sessions
(``session_store``), contexts (``context_store``) and messages (``message_store``), over
the shared bookkeeping of ``base``. This module adds what spans them: forks and imports.

Each public method that changes more than one row does it in one transaction. Message
positions are dense (0..n-1 within a session); inserting or deleting shifts the ones
after. ``sessions.message_count`` and ``sessions.token_count`` (tokens of active
messages) are kept current by every change, so listing sessions never aggregates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as with_fields
from functools import cache
from typing import Any

from sqlalchemy import (
    Integer,
    Select,
    Text,
    bindparam,
    case,
    cast,
    delete,
    insert,
    null,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection

from workbench.core.conversation import (
    ROLES,
    Conversation,
    ImportNote,
    SessionInfo,
    utcnow,
)
from workbench.core.identity import (
    fingerprint_messages,
    own_session,
    own_session_id,
    parts_key,
)
from workbench.errors import NotFoundError, StorageError
from workbench.store import bulk
from workbench.store.base import (
    _check_state,
)
from workbench.store.context_store import KEPT, TAKE, _carries_context
from workbench.store.dialect import Dialect
from workbench.store.message_store import MessageStore
from workbench.store.rows import (
    MESSAGE_COLUMNS,
    message_from_row,
    session_from_row,
)
from workbench.store.schema import AGENTS, COMPACTIONS, MESSAGES, SESSION_CONTEXT, SESSIONS
from workbench.store.types import json_text, json_value, text_to_time, time_to_text


@dataclass
class ImportOutcome:
    """What happened to one conversation handed to :meth:`Repository.import_conversation`."""

    session: SessionInfo
    created: bool  # a new session was made
    status: str = ""
    """``"created"``, ``"unchanged"`` (stored before, nothing changed) or ``"updated"``
    (new turns appended, or replaced)."""
    reused_id: bool = False
    """Created although a different stored conversation has the same source id."""
    note: ImportNote | None = None
    """What the import left as it was, and why (a context changed here since the
    import, kept over the file's)."""

    def __post_init__(self) -> None:
        if not self.status:
            self.status = "created" if self.created else "unchanged"


@dataclass(frozen=True)
class _Stored:
    """A stored session of a conversation's (source, source id), as import matches it."""

    session_id: int
    source_file: str | None
    fingerprint: str | None  # None: imported before fingerprints were kept
    count: int | None
    older_copy: bool = False
    """The conversation is an older copy of the session (its export before turns were
    added): its context is not newer than the session's, and is not taken."""
    metadata: str | None = field(default=None, compare=False)
    """The session's source metadata as stored (JSON text), when read with it."""


_MADE_HERE = "\x00made in the workbench"
"""The ``source_file`` of the candidate a session made in the workbench makes: no path
equals it, so ``replace`` never replaces such a session with a file's copy of it."""


def _import_action(
    conv: Conversation, stored: list[_Stored], replace: bool, full: str | None = None,
    prefix_of: Callable[[int, int], str] | None = None,
) -> tuple[str, _Stored | None]:
    """What importing ``conv`` does given the stored sessions of its source id:
    ``"replace"``, ``"unchanged"``, ``"append"`` (with the session) or ``"create"``.
    ``full`` is the fingerprint of all of ``conv``'s messages when already known.
    ``prefix_of(session_id, n)``, the fingerprint of a stored session's first ``n``
    messages, lets an older copy of a stored session (its export before turns were
    added, imported after the newer one) be recognised as that session, unchanged."""
    if not stored:
        return "create", None
    if replace:
        for candidate in stored:
            # Sessions imported before source files were kept replace as they used to.
            if candidate.source_file in (None, conv.source_file):
                return "replace", candidate
    total = len(conv.messages)
    if full is None:
        full = fingerprint_messages(conv.messages)
    for candidate in stored:
        if candidate.count == total and _same_messages(candidate, conv, total, full):
            return "unchanged", candidate
    grown = [c for c in stored if c.count is not None and c.count < total]
    for candidate in sorted(grown, key=lambda c: c.count or 0, reverse=True):
        if _same_messages(candidate, conv, candidate.count or 0):
            return "append", candidate
    if prefix_of is not None and total:
        for candidate in stored:
            if candidate.count is not None and candidate.count > total and \
                    prefix_of(candidate.session_id, total) == full:
                return "unchanged", with_fields(candidate, older_copy=True)
    return "create", None


def _same_messages(
    candidate: _Stored, conv: Conversation, count: int, full: str | None = None
) -> bool:
    """Whether the stored session's fingerprint is that of ``conv``'s first ``count``
    messages (``full``: that fingerprint, when known). A session stored before parts
    were fingerprinted (see :func:`~workbench.core.identity.fingerprint_messages`)
    holds the fingerprint without them: ``conv`` matches it that way too when some of
    those messages have parts, so importing a file again after the upgrade does not
    duplicate it."""
    if full is None:
        full = fingerprint_messages(conv.messages, count)
    if candidate.fingerprint == full:
        return True
    if not any(parts_key(m.parts) for m in conv.messages[:count]):
        return False  # without parts the two fingerprints are one
    return candidate.fingerprint == fingerprint_messages(conv.messages, count,
                                                         with_parts=False)


class Repository(MessageStore):
    """Sessions, messages, context, memory entries and agents in one database (a SQLite
    file or the team store on PostgreSQL)."""

    def fork_session(
        self, session_id: int, at_message_id: int, *, title: str | None = None
    ) -> SessionInfo:
        """A new session holding copies of the messages up to and including
        ``at_message_id`` and a copy of the context; it records where it came from."""
        with self.db.write() as conn:
            src = conn.execute(_FORK_SOURCE, {"id": session_id}).first()
            if src is None:
                raise NotFoundError(f"There is no session with id {session_id}.")
            at = conn.execute(
                _FORK_AT, {"message_id": at_message_id, "session_id": session_id}
            ).first()
            if at is None:
                raise NotFoundError(
                    f"Session {session_id} has no message with id {at_message_id}."
                )
            new_id = self._insert_session(
                conn,
                title or f"{src[0]} (fork)",
                src[1],
                json_value(src[2]) or [],
                None,
                None,
                None,
                None,
                json_value(src[3]) or {},
                forked_from=(session_id, at_message_id),
            )
            conn.execute(
                _FORK_MESSAGES,
                {"new_id": new_id, "session_id": session_id, "position": at[0]},
            )
            conn.execute(
                _FORK_CONTEXT,
                {"new_id": new_id, "session_id": session_id, "now": time_to_text(utcnow())},
            )
            self._refresh_counts(conn, new_id)
        return self.get_session(new_id)

    # == import ========================================================================

    def import_conversation(
        self,
        conversation: Conversation,
        *,
        agent_id: int | None = None,
        replace: bool = False,
    ) -> ImportOutcome:
        """Store a whole conversation (session, messages, context) in one transaction.

        A conversation is recognised by its ``(source, source_id)`` and the fingerprint
        of its messages (:mod:`workbench.core.identity`):

        * the same messages as a stored session of that id: nothing changes
          (``"unchanged"``);
        * the stored session's messages followed by new ones (the source grew): the new
          ones are appended to it (``"updated"``);
        * the first messages of a stored session (an older export of it, read after the
          newer one): nothing changes (``"unchanged"``; its context is not taken);
        * for a path of a tree (``Conversation.tree_id``) that matches none of its own
          id's sessions: the same, among the sessions of the tree's other paths;
        * with ``replace=True``, a stored session of that id read from the same
          ``source_file``: its messages, context and compactions are replaced
          (``"updated"``);
        * anything else is a new session (``"created"``; ``reused_id`` when another
          stored conversation has the same id).

        A session made in this database (not imported) is matched by the id its export
        names it by (:func:`~workbench.core.identity.own_source_id`, under any source):
        its export read back is that session, by its messages now (an older export of
        it is unchanged, its context left as the session's).
        """
        for i, m in enumerate(conversation.messages):
            if m.role not in ROLES:
                raise StorageError(f"Message {i}: role {m.role!r} is not one of {ROLES}.")
            _check_state(m.state)
        if agent_id is None:
            agent_id = self.default_agent().id
        with self.db.write() as conn:
            candidates = self._candidates(conn, conversation)

            def prefix_of(session_id: int, count: int) -> str:
                rows = conn.execute(_SESSION_MESSAGES, {"session_id": session_id}).all()
                return fingerprint_messages([message_from_row(r) for r in rows[:count]])

            action, target = _import_action(conversation, candidates, replace,
                                            prefix_of=prefix_of)
            other_path = False
            if action == "create" and conversation.tree_id:
                # Another path of the same tree, stored when it was the current one (or
                # a branch that has become current since): this path, kept as it is.
                family = [c for c in self._tree_sessions(conn, conversation)
                          if c not in candidates]
                found, path_of = _import_action(conversation, family, False,
                                                prefix_of=prefix_of)
                if found in ("unchanged", "append"):
                    action, target, other_path = found, path_of, True
            reused = action == "create" and bool(candidates)
            note: ImportNote | None = None
            if action == "unchanged":
                assert target is not None
                session_id, status = target.session_id, "unchanged"
                if not target.older_copy:
                    # The same turns with new facts, summary or tasks (a context file
                    # saved again): the context is what changed, and it is kept, unless
                    # the session's was changed here since (see _imported_context).
                    taken, note = self._take_context(conn, session_id, conversation)
                    if taken:
                        status = "updated"
                newer = None if target.older_copy or other_path else \
                    self._newer_source_metadata(conn, session_id, conversation)
                if newer is not None:
                    # The same turns, and the source says something new of the whole
                    # (archived, starred, a project, tags in its params…): kept, with
                    # the source's time of it (so an older export does not undo it).
                    conn.execute(_SET_SOURCE_METADATA, {
                        "session_id": session_id, "metadata_": _metadata_text(newer)})
                    if conversation.updated_at is not None:
                        conn.execute(_UPDATED_NOT_BEFORE, {
                            "session_id": session_id,
                            "latest": time_to_text(conversation.updated_at)})
                    self.db.changed(conn, (session_id,))
                    status = "updated"
            elif action == "replace":
                assert target is not None
                session_id, status = target.session_id, "updated"
                self._replace_imported(conn, session_id, conversation)
            elif action == "append":
                assert target is not None
                session_id = target.session_id
                grew, note = self._append_imported(conn, session_id, conversation,
                                                   target.count or 0)
                status = "updated" if grew else "unchanged"
            else:
                status = "created"
                times = [m.created_at for m in conversation.messages if m.created_at]
                first, updated = bulk.session_times(conversation, times, utcnow())
                session_id = self._insert_session(
                    conn,
                    conversation.title,
                    agent_id,
                    conversation.tags,
                    conversation.source,
                    conversation.source_id,
                    first,
                    updated,
                    None,
                )
                self._insert_messages(
                    conn, session_id, 0, conversation.messages, keep_missing_time=True
                )
                self._write_context(conn, session_id, conversation.context, imported=True)
                self._refresh_counts(conn, session_id, touch=False)
                self._set_identity(conn, session_id, conversation)
        return ImportOutcome(
            self.get_session(session_id), status == "created", status, reused_id=reused,
            note=note,
        )

    def _take_context(
        self, conn: Connection, session_id: int, conversation: Conversation
    ) -> tuple[bool, ImportNote | None]:
        """Write the context of a conversation read again where the import should (see
        :meth:`_imported_context`); returns whether it was written, and the note saying
        why not when the session's own was kept over a different one."""
        action = self._imported_context(conn, session_id, conversation.context)
        if action == TAKE:
            self._write_context(conn, session_id, conversation.context, imported=True)
            return True, None
        if action == KEPT:
            return False, ImportNote(
                entry=str(conversation.source_id or conversation.title),
                note=(
                    f"not its facts, summary and tasks: session {session_id}'s were "
                    "changed in the workbench since they were imported, and were kept "
                    "over the file's different ones (importing with replace takes the "
                    "file's)"
                ),
            )
        return False, None

    def _candidates(self, conn: Connection, conversation: Conversation) -> list[_Stored]:
        """The stored sessions of the conversation's ``(source, source_id)``, oldest first,
        each with its fingerprint (computed now for sessions imported before 0004)."""
        if conversation.source_id is None or conversation.source is None:
            return []
        rows = conn.execute(
            _CANDIDATES,
            {"source": conversation.source, "source_id": conversation.source_id},
        ).all()
        own = self._own_session(conn, conversation.source_id)
        found = [] if own is None else [self._own_candidate(conn, own, conversation)]
        return found + self._stored(conn, rows)

    def _stored(self, conn: Connection, rows: Sequence[Any]) -> list[_Stored]:
        """Rows of ``_STORED_IDENTITY`` as candidates, each fingerprinted (now, and
        kept, for a session imported before 0004)."""
        found: list[_Stored] = []
        for session_id, source_file, fp, count in rows:
            if fp is None or count is None:
                fp, count = self._fingerprint_stored(conn, int(session_id))
            found.append(_Stored(int(session_id), source_file, fp, int(count)))
        return found

    def _newer_source_metadata(
        self, conn: Connection, session_id: int, conversation: Conversation
    ) -> dict[str, Any] | None:
        """What the source says of the conversation as a whole, to store, when it
        differs from what the session holds in an export not older than the session (an
        older export's metadata is not newer); None otherwise. The session's mark of a
        missing time stays."""
        row = conn.execute(_METADATA_AND_UPDATED, {"id": session_id}).first()
        if row is None or _same_metadata(row[0], conversation.metadata):
            return None
        updated = conversation.updated_at
        if updated is not None and row[1] is not None and updated < text_to_time(row[1]):
            return None
        stored = json_value(row[0])
        if isinstance(stored, dict) and stored.get(bulk.SESSION_TIME_MISSING) is True:
            return {**conversation.metadata, bulk.SESSION_TIME_MISSING: True}
        return conversation.metadata

    def _tree_sessions(self, conn: Connection, conversation: Conversation) -> list[_Stored]:
        """The stored sessions of the tree ``conversation`` is a path of: those of the
        tree's id and of its branches' ids (``<tree id>#branch-…``), oldest first."""
        tree_id = conversation.tree_id
        if tree_id is None or conversation.source is None:
            return []
        rows = conn.execute(
            _TREE_SESSIONS,
            {"source": conversation.source, "tree_id": tree_id,
             "branches": _escape_like(tree_id + "#branch-") + "%"},
        ).all()
        return self._stored(conn, rows)

    def _own_session(self, conn: Connection, source_id: str | None) -> int | None:
        """The session made in this database (not imported: it has no source id) whose
        own id (:func:`~workbench.core.identity.own_source_id`, what its export names it
        by) is ``source_id``; ``None`` when there is none."""
        session_id = own_session_id(source_id)
        if session_id is None or source_id is None:
            return None
        row = conn.execute(_OWN_SESSION, {"id": session_id}).first()
        if row is None or row[1] is not None:
            return None
        return session_id if own_session(source_id, text_to_time(row[0]), session_id) else None

    def _own_candidate(
        self, conn: Connection, session_id: int, conversation: Conversation
    ) -> _Stored:
        """A session made here as import matches it against its own export: by its
        messages now. An export made before turns were added matches the session's
        first messages (the same session, ``older_copy``); one holding more than the
        session has is the session grown (its new messages are appended)."""
        rows = conn.execute(_SESSION_MESSAGES, {"session_id": session_id}).all()
        stored = [message_from_row(r) for r in rows]
        total = len(conversation.messages)
        if len(stored) >= total:
            return _Stored(session_id, _MADE_HERE, fingerprint_messages(stored, total),
                           total, older_copy=len(stored) > total)
        return _Stored(session_id, _MADE_HERE, fingerprint_messages(stored), len(stored))

    def find_exported(self, source: str, source_id: str) -> int | None:
        """The session an export names by ``source`` and ``source_id`` (a fork's parent):
        a session made here whose own id it is, else the first imported from it."""
        with self.db.read() as conn:
            own = self._own_session(conn, source_id)
            if own is not None:
                return own
            row = conn.execute(
                _CANDIDATES, {"source": source, "source_id": source_id}
            ).first()
        return None if row is None else int(row[0])

    def _fingerprint_stored(self, conn: Connection, session_id: int) -> tuple[str, int]:
        """Fingerprint a session imported before fingerprints were kept, and keep it."""
        rows = conn.execute(_SESSION_MESSAGES, {"session_id": session_id}).all()
        messages = [message_from_row(r) for r in rows]
        fp = fingerprint_messages(messages)
        conn.execute(
            _SET_FINGERPRINT,
            {"session_id": session_id, "fingerprint_": fp, "count_": len(messages)},
        )
        self.db.changed(conn, (session_id,))
        return fp, len(messages)

    def _set_identity(
        self, conn: Connection, session_id: int, conversation: Conversation
    ) -> None:
        """Keep what a later import recognises the conversation by, and its metadata."""
        conn.execute(
            _SET_IDENTITY,
            {
                "session_id": session_id,
                "source_file_": conversation.source_file,
                "fingerprint_": fingerprint_messages(conversation.messages),
                "count_": len(conversation.messages),
                "metadata_": _metadata_text(conversation.metadata),
            },
        )
        self.db.changed(conn, (session_id,))

    def session_metadata(self, session_id: int) -> dict[str, Any]:
        """What the source said about the session as a whole (empty when nothing)."""
        row = self._read_one(_SESSION_METADATA, session_id,
                             f"There is no session with id {session_id}.")
        value = json_value(row[0])
        return value if isinstance(value, dict) else {}

    def set_fork_origin(self, session_id: int, from_session_id: int,
                        position: int | None) -> None:
        """Record that a session was forked from another at the message at ``position``
        (an imported branch of a conversation tree); when that message is gone or not
        known (``None``), at the session alone."""
        self.set_fork_origins([(session_id, from_session_id, position)])

    def set_fork_origins(self, links: Sequence[tuple[int, int, int | None]]) -> set[int]:
        """:meth:`set_fork_origin` for many ``(session, from session, position)`` links,
        in one transaction (an import links every branch of a tree at once); returns
        the sessions linked at their message (the others are linked to the session
        they were forked from, at no message)."""
        if not links:
            return set()
        linked: set[int] = set()
        with self.db.write() as conn:
            for session_id, origin, position in links:
                if position is not None and conn.execute(
                    _SET_FORK_ORIGIN,
                    {"session_id": session_id, "origin": origin, "at_position": position},
                ).rowcount:
                    linked.add(session_id)
                    continue
                conn.execute(_SET_FORK_SESSION, {"session_id": session_id, "origin": origin})
            self.db.changed(conn, [session_id for session_id, _, _ in links])
        return linked

    def _replace_imported(
        self, conn: Connection, session_id: int, conversation: Conversation
    ) -> None:
        """Replace an imported session's messages, context and compaction records."""
        conn.execute(_DELETE_MESSAGES, {"session_id": session_id})
        # The compactions folded messages that are gone now: undoing one would report
        # messages "active again" that were never folded.
        conn.execute(_DELETE_COMPACTIONS, {"session_id": session_id})
        conn.execute(
            _RETITLE,
            {
                "session_id": session_id,
                "title_": conversation.title,
                "tags_": json_text(list(dict.fromkeys(conversation.tags))),
            },
        )
        self._insert_messages(conn, session_id, 0, conversation.messages, keep_missing_time=True)
        self._write_context(conn, session_id, conversation.context, imported=True)
        self._refresh_counts(conn, session_id, touch=False)
        self._set_identity(conn, session_id, conversation)

    def _append_imported(
        self, conn: Connection, session_id: int, conversation: Conversation, known: int
    ) -> tuple[bool, ImportNote | None]:
        """Append the messages after the first ``known`` to an imported session; returns
        whether the session changed, and why its context was not taken from the file
        when it was kept (see :meth:`_take_context`).

        A session that grew in the workbench since its import (a chat) may hold some of
        them already: its own export read back holds the turns the chat added. Those are
        not added a second time: only the messages after what the session holds, when
        the session's messages are the conversation's first ones."""
        held = self._held_of(conn, session_id, conversation, known)
        new = conversation.messages[held:]
        if not new:
            taken, note = self._take_context(conn, session_id, conversation)
            self._set_identity(conn, session_id, conversation)
            return taken, note
        start = self._next_position(conn, session_id)
        self._insert_messages(conn, session_id, start, new, keep_missing_time=True)
        # The grown source's context (a context file's facts, tasks, usage) is newer,
        # unless the session's was changed here since the import.
        _taken, note = self._take_context(conn, session_id, conversation)
        self._refresh_counts(conn, session_id, touch=False)
        self._set_identity(conn, session_id, conversation)
        times = [m.created_at for m in new if m.created_at is not None]
        latest = max(times) if times else conversation.updated_at
        if latest is not None:
            conn.execute(
                _UPDATED_NOT_BEFORE,
                {"session_id": session_id, "latest": time_to_text(latest)},
            )
        return True, note

    def _held_of(self, conn: Connection, session_id: int, conversation: Conversation,
                 known: int) -> int:
        """How many of the conversation's first messages the session holds: ``known``
        (those it was imported with), or more when the messages added to it since are
        the conversation's next ones."""
        rows = conn.execute(_SESSION_MESSAGES, {"session_id": session_id}).all()
        shared = min(len(rows), len(conversation.messages))
        if shared <= known:
            return known
        stored = [message_from_row(r) for r in rows[:shared]]
        if fingerprint_messages(stored) == fingerprint_messages(conversation.messages,
                                                                shared):
            return shared
        return known

    def import_many(
        self,
        conversations: Sequence[Conversation | bulk.PreparedConversation],
        *,
        agent_id: int | None = None,
        replace: bool = False,
    ) -> list[ImportOutcome]:
        """Store a batch of conversations in ONE transaction, the fast way (see
        :mod:`workbench.store.bulk`). All or nothing: on an error nothing of the batch
        is stored, so a caller can retry conversations one by one to isolate a bad one.
        Conversations may come already prepared by :func:`workbench.store.bulk.prepare`.

        Conversations whose source id is stored are matched as :meth:`import_conversation`
        says: unchanged ones change nothing and different ones are new sessions of the
        batch; those that grew, those ``replace`` replaces, and a source id repeated in
        the batch go through :meth:`import_conversation` after the batch, one by one.
        """
        if agent_id is None:
            agent_id = self.default_agent().id
        now = utcnow()
        batch = [
            c if isinstance(c, bulk.PreparedConversation) else bulk.prepare(c, now)
            for c in conversations
        ]
        fresh: list[bulk.PreparedConversation] = []
        unchanged: dict[int, int] = {}  # index in batch -> stored session id
        reused: set[int] = set()  # indexes of new sessions whose source id is taken
        deferred: list[int] = []
        with self.db.write() as conn:
            stored = self._stored_sources(conn, [p.conversation for p in batch])
            seen: set[tuple[str | None, str]] = set()
            for i, prepared in enumerate(batch):
                conv = prepared.conversation
                if conv.source_id is not None:
                    key = (conv.source, conv.source_id)
                    if key in seen or self._own_session(conn, conv.source_id) is not None:
                        # A repeated id, or a session made here read back from its
                        # export: matched one by one in import_conversation.
                        deferred.append(i)
                        continue
                    seen.add(key)
                    known = stored.get(key)
                    # A path of a tree imported before (see Conversation.tree_id) may be
                    # a session of another path's id: matched in import_conversation.
                    tree_known = conv.tree_id is not None and (
                        (conv.source, conv.tree_id) in stored)
                    if known:
                        if any(c.fingerprint is None for c in known):
                            deferred.append(i)  # fingerprinted in import_conversation
                            continue
                        action, target = _import_action(
                            conv, known, replace, full=prepared.session[9]
                        )
                        if action == "unchanged" and target is not None and \
                                not _carries_context(conv.context) and \
                                _same_metadata(target.metadata, conv.metadata):
                            unchanged[i] = target.session_id
                        elif action == "create" and not tree_known and all(
                            c.count is None or c.count <= len(conv.messages) for c in known
                        ):
                            reused.add(i)
                            fresh.append(prepared)
                        else:
                            deferred.append(i)  # appended to or replaced, one by one
                        continue
                    if tree_known:
                        deferred.append(i)
                        continue
                fresh.append(prepared)
            new_ids = bulk.insert_batch(conn, fresh, agent_id)
            infos = self._sessions_by_id(conn, list(unchanged.values()))
            if new_ids:
                self.db.changed(conn, new_ids)
                agent_name = conn.execute(_AGENT_NAME, {"id": agent_id}).scalar_one()
                # Made from the values just written, rather than read back row by row.
                for session_id, prepared in zip(new_ids, fresh, strict=True):
                    infos[session_id] = session_from_row(
                        bulk.session_row(session_id, agent_id, str(agent_name), prepared)
                    )
        outcomes: list[ImportOutcome] = []
        next_new = iter(new_ids)
        later = set(deferred)
        for i, prepared in enumerate(batch):
            if i in later:
                outcomes.append(
                    self.import_conversation(
                        prepared.conversation, agent_id=agent_id, replace=replace
                    )
                )
            elif i in unchanged:
                outcomes.append(ImportOutcome(infos[unchanged[i]], False, "unchanged"))
            else:
                outcomes.append(
                    ImportOutcome(infos[next(next_new)], True, "created", reused_id=i in reused)
                )
        return outcomes

    def _stored_sources(
        self, conn: Connection, conversations: Sequence[Conversation]
    ) -> dict[tuple[str | None, str], list[_Stored]]:
        """The sessions already stored under the conversations' (source, source id)."""
        wanted: dict[str, list[str]] = {}
        for conv in conversations:
            # A NULL source never matches (``source = NULL`` is never true), as before.
            if conv.source_id is not None and conv.source is not None:
                wanted.setdefault(conv.source, []).append(conv.source_id)
                if conv.tree_id is not None and conv.tree_id != conv.source_id:
                    wanted[conv.source].append(conv.tree_id)
        found: dict[tuple[str | None, str], list[_Stored]] = {}
        statement = _stored_sources_statement(self.dialect)
        for source, source_ids in wanted.items():
            # One row of JSON: every fetched row costs a trip through the interpreter
            # lock, which a busy reading thread makes slow.
            text = conn.execute(
                statement, {"source": source, "source_ids": json_text(source_ids)}
            ).scalar_one()
            for sid, rid, source_file, fp, count, metadata in json_value(text):
                found.setdefault((source, sid), []).append(
                    _Stored(int(rid), source_file, fp, count, metadata=metadata)
                )
        return found

    def _sessions_by_id(
        self, conn: Connection, session_ids: Sequence[int]
    ) -> dict[int, SessionInfo]:
        """The sessions with these ids, read as one row of JSON (see _stored_sources)."""
        if not session_ids:
            return {}
        text = conn.execute(
            _sessions_by_id_statement(self.dialect),
            {"session_ids": json_text(list(dict.fromkeys(session_ids)))},
        ).scalar_one()
        infos = [session_from_row(row) for row in json_value(text)]
        return {info.id: info for info in infos}


# == statements ==========================================================================

_FORK_SOURCE = select(
    SESSIONS.c.title, SESSIONS.c.agent_id, SESSIONS.c.tags, SESSIONS.c.overrides
).where(SESSIONS.c.id == bindparam("id"))
_FORK_AT = select(MESSAGES.c.position).where(
    MESSAGES.c.id == bindparam("message_id"),
    MESSAGES.c.session_id == bindparam("session_id"),
)
# Every column of a message but its id; the copy belongs to no compaction.
_COPIED = [c for c in MESSAGES.c if c.name != "id"]
_FORK_MESSAGES = insert(MESSAGES).from_select(
    [c.name for c in _COPIED],
    select(
        *(
            bindparam("new_id", type_=Integer) if c.name == "session_id"
            else cast(null(), Integer) if c.name == "compaction_id"
            else c
            for c in _COPIED
        )
    )
    .where(
        MESSAGES.c.session_id == bindparam("session_id"),
        MESSAGES.c.position <= bindparam("position"),
    )
    .order_by(MESSAGES.c.position),
)
_FORK_CONTEXT = insert(SESSION_CONTEXT).from_select(
    [c.name for c in SESSION_CONTEXT.c],
    select(
        *(
            bindparam("new_id", type_=Integer) if c.name == "session_id"
            else bindparam("now", type_=Text) if c.name == "updated_at"
            else c
            for c in SESSION_CONTEXT.c
        )
    ).where(SESSION_CONTEXT.c.session_id == bindparam("session_id")),
)
# What an import recognises a stored session by (see _Stored).
_STORED_IDENTITY = (SESSIONS.c.id, SESSIONS.c.source_file, SESSIONS.c.fingerprint,
                    SESSIONS.c.fingerprint_count)
_CANDIDATES = (
    select(*_STORED_IDENTITY)
    .where(
        SESSIONS.c.source == bindparam("source"),
        SESSIONS.c.source_id == bindparam("source_id"),
    )
    .order_by(SESSIONS.c.id)
)
_TREE_SESSIONS = (
    select(*_STORED_IDENTITY)
    .where(
        SESSIONS.c.source == bindparam("source"),
        or_(SESSIONS.c.source_id == bindparam("tree_id"),
            SESSIONS.c.source_id.like(bindparam("branches"), escape="\\")),
    )
    .order_by(SESSIONS.c.id)
)


def _escape_like(text: str) -> str:
    """``text`` matched literally by LIKE (with ``\\`` as the escape character)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_OWN_SESSION = select(SESSIONS.c.created_at, SESSIONS.c.source_id).where(
    SESSIONS.c.id == bindparam("id")
)
# The columns ``rows.message_from_row`` reads, in its order.
_SESSION_MESSAGES = (
    select(MESSAGES.c.id, *(MESSAGES.c[name] for name in MESSAGE_COLUMNS))
    .where(MESSAGES.c.session_id == bindparam("session_id"))
    .order_by(MESSAGES.c.position)
)
_BY_SESSION_ID = SESSIONS.c.id == bindparam("session_id")
_SET_FINGERPRINT = (
    update(SESSIONS)
    .where(_BY_SESSION_ID)
    .values(fingerprint=bindparam("fingerprint_"), fingerprint_count=bindparam("count_"))
)
_SET_IDENTITY = (
    update(SESSIONS)
    .where(_BY_SESSION_ID)
    .values(
        source_file=bindparam("source_file_"),
        fingerprint=bindparam("fingerprint_"),
        fingerprint_count=bindparam("count_"),
        metadata=bindparam("metadata_"),
    )
)
_SESSION_METADATA = select(SESSIONS.c.metadata).where(SESSIONS.c.id == bindparam("id"))
_METADATA_AND_UPDATED = select(SESSIONS.c.metadata, SESSIONS.c.updated_at).where(
    SESSIONS.c.id == bindparam("id"))
_SET_SOURCE_METADATA = (
    update(SESSIONS).where(_BY_SESSION_ID).values(metadata=bindparam("metadata_"))
)


def _metadata_text(metadata: dict[str, Any]) -> str | None:
    return json_text(metadata) if metadata else None


def _same_metadata(stored: str | None, metadata: dict[str, Any]) -> bool:
    """Whether the stored metadata text says what ``metadata`` says (as JSON reads it;
    the store's own mark of a session without a time left out)."""
    return _source_said(json_value(stored)) == _source_said(
        json_value(_metadata_text(metadata)))


def _source_said(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        return {}
    return {k: v for k, v in metadata.items() if k != bulk.SESSION_TIME_MISSING}
_ORIGIN_MESSAGE = select(MESSAGES.c.id).where(
    MESSAGES.c.session_id == bindparam("origin"),
    MESSAGES.c.position == bindparam("at_position"),
)
_SET_FORK_ORIGIN = (
    update(SESSIONS)
    .where(_BY_SESSION_ID, _ORIGIN_MESSAGE.exists())
    .values(
        forked_from_session_id=bindparam("origin"),
        forked_from_message_id=_ORIGIN_MESSAGE.scalar_subquery(),
    )
)
# A fork whose message is not known (gone before the export): linked to the session.
_SET_FORK_SESSION = (
    update(SESSIONS)
    .where(_BY_SESSION_ID)
    .values(forked_from_session_id=bindparam("origin"), forked_from_message_id=None)
)
_DELETE_MESSAGES = delete(MESSAGES).where(MESSAGES.c.session_id == bindparam("session_id"))
_DELETE_COMPACTIONS = delete(COMPACTIONS).where(
    COMPACTIONS.c.session_id == bindparam("session_id")
)
_RETITLE = (
    update(SESSIONS)
    .where(_BY_SESSION_ID)
    .values(title=bindparam("title_"), tags=bindparam("tags_"))
)
# The later of the stored time and ``latest`` (both fixed-width UTC text).
_UPDATED_NOT_BEFORE = (
    update(SESSIONS)
    .where(_BY_SESSION_ID)
    .values(
        updated_at=case(
            (SESSIONS.c.updated_at < bindparam("latest"), bindparam("latest")),
            else_=SESSIONS.c.updated_at,
        )
    )
)
_AGENT_NAME = select(AGENTS.c.name).where(AGENTS.c.id == bindparam("id"))
# The columns ``rows.session_from_row`` reads, in its order.
_SESSION_COLUMNS = (
    SESSIONS.c.id, SESSIONS.c.title, SESSIONS.c.agent_id, SESSIONS.c.created_at,
    SESSIONS.c.updated_at, SESSIONS.c.tags, SESSIONS.c.pinned, SESSIONS.c.archived,
    SESSIONS.c.forked_from_session_id, SESSIONS.c.forked_from_message_id,
    SESSIONS.c.overrides, SESSIONS.c.source, SESSIONS.c.source_id,
    SESSIONS.c.message_count, SESSIONS.c.token_count, AGENTS.c.name,
)


@cache
def _stored_sources_statement(dialect: Dialect) -> Select[Any]:
    """The stored sessions of one source among a JSON array of source ids, as one JSON
    text of ``[source_id, id, source_file, fingerprint, fingerprint_count, metadata]``
    rows."""
    wanted = dialect.json_array_items(bindparam("source_ids", type_=Text))
    return select(
        dialect.json_rows(
            SESSIONS.c.source_id, SESSIONS.c.id, SESSIONS.c.source_file,
            SESSIONS.c.fingerprint, SESSIONS.c.fingerprint_count, SESSIONS.c.metadata,
        )
    ).where(
        SESSIONS.c.source == bindparam("source"),
        SESSIONS.c.source_id.in_(select(wanted.c.value)),
    )


@cache
def _sessions_by_id_statement(dialect: Dialect) -> Select[Any]:
    """The sessions of a JSON array of ids as one JSON text of ``session_from_row`` rows."""
    wanted = dialect.json_array_items(bindparam("session_ids", type_=Text))
    # PostgreSQL hands out the elements as text; SQLite's json_each as integers.
    ids = cast(wanted.c.value, Integer) if dialect.is_postgresql else wanted.c.value
    return (
        select(dialect.json_rows(*_SESSION_COLUMNS))
        .select_from(SESSIONS.join(AGENTS, AGENTS.c.id == SESSIONS.c.agent_id))
        .where(SESSIONS.c.id.in_(select(ids)))
    )
