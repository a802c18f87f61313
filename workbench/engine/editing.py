"""Edits of sessions and messages that can be taken back, for undo stacks.

Every operation returns what its inverse needs: an edit returns the message before and
after, a delete returns the whole deleted message (with its position), a session change
returns the session before and after. The inverse operations put things back as they
were, token counts included, so undo followed by redo ends where it started.

Two things cannot be put back byte for byte, and callers should know:

* A deleted message comes back through :meth:`Editing.restore_message` at its old
  position with every field it had, but SQLite gives it a **new id**. Undo stacks keep a
  map from old ids to new ones (:class:`IdAliases`) so that older commands still find it.
* Deleting a session is **deferred** (:class:`SessionTrash`): the session is only hidden
  until :meth:`SessionTrash.purge` removes it for good (the GUI purges when its window
  closes, when the undo history that could bring it back is gone). Nothing is written
  until then, so taking a delete back restores the session exactly, with its ids, times
  and order in the list. A session stays in the database if the program ends without
  purging: a delete that was never confirmed never loses data.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from workbench.core.conversation import ROLES, Message, SessionInfo
from workbench.core.titles import one_line
from workbench.core.tokens import TokenCounter, get_counter
from workbench.errors import ChangedElsewhereError, NotFoundError, RequestError, StorageError
from workbench.store.repository import Repository

__all__ = ["Editing", "IdAliases", "MessageChange", "SessionChange", "SessionTrash"]

_CHANGED_SINCE = ("{what} was changed in another window or on another desktop since, so "
                  "it was left as that change made it.")


@contextmanager
def _said_of(session: SessionInfo, field: str) -> Iterator[None]:
    """The store's refusal of a session field's change, said with the session's title."""
    try:
        yield
    except ChangedElsewhereError:
        title = " ".join(session.title.split())
        if len(title) > 60:
            title = title[:59] + "…"
        raise ChangedElsewhereError(_CHANGED_SINCE.format(
            what=f"The {field} of the session “{title}”")) from None


@dataclass(frozen=True)
class MessageChange:
    """A message before and after an edit."""

    before: Message
    after: Message


@dataclass(frozen=True)
class SessionChange:
    """A session's row before and after a change of title, pin, tags or archive flag."""

    before: SessionInfo
    after: SessionInfo


class IdAliases:
    """Old ids that now go by new ones (a message deleted and restored gets a new id).

    ``resolve`` follows the chain, so an id deleted and restored twice still leads to the
    row that exists now. Safe to use from several threads.
    """

    def __init__(self) -> None:
        self._map: dict[int, int] = {}
        self._lock = threading.Lock()

    def add(self, old: int, new: int) -> None:
        """Record that ``old`` is now ``new``."""
        if old == new:
            return
        with self._lock:
            self._map[old] = new

    def resolve(self, ident: int) -> int:
        """The id that ``ident`` stands for today."""
        with self._lock:
            seen: set[int] = set()
            while ident in self._map and ident not in seen:
                seen.add(ident)
                ident = self._map[ident]
            return ident


class Editing:
    """Undoable edits over one repository; token counts are kept current on every edit.

    Message ids passed in are resolved through :attr:`aliases` first, so a caller may
    keep using the id a message had before it was deleted and restored.
    """

    def __init__(self, repo: Repository, *, counter: TokenCounter | None = None):
        self.repo = repo
        self.aliases = IdAliases()
        self._counter = counter

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = get_counter()
        return self._counter

    # -- messages ----------------------------------------------------------------------

    def message(self, message_id: int) -> Message:
        """The message as stored now."""
        return self.repo.get_message(self.aliases.resolve(message_id))

    def find_message(self, session_id: int, ref: str | int) -> Message:
        """A message of the session by ``#id`` (or a bare id given as an int) or by its
        position (a whole number as text); raises :class:`NotFoundError` otherwise."""
        text = str(ref).strip()
        if isinstance(ref, int) or text.startswith("#"):
            digits = text.lstrip("#")
            if not digits.isdigit():
                raise NotFoundError(f"{text!r} is not a message id (use #ID or a position).")
            message = self.repo.get_message(self.aliases.resolve(int(digits)))
            if message.session_id != session_id:
                raise NotFoundError(f"Message #{digits} is not in session {session_id}.")
            return message
        try:
            position = int(text)
        except ValueError:
            raise NotFoundError(
                f"{text!r} is not a message: give #ID or a position number."
            ) from None
        page = self.repo.page_messages(session_id, after_position=position - 1, limit=1)
        if not page or page[0].position != position:
            raise NotFoundError(f"Session {session_id} has no message at position {position}.")
        return page[0]

    def edit_message(
        self, message_id: int, *, content: str | None = None, role: str | None = None,
        expected: Message | None = None,
    ) -> MessageChange:
        """Change a message's text and/or role; its token count is counted again.

        ``expected`` is the message as the editor read it: when the stored one's role or
        text differ (another window or desktop changed it meanwhile), nothing is written
        and :class:`ChangedElsewhereError` says so.
        """
        if role is not None and role not in ROLES:
            raise StorageError(f"Role {role!r} is not one of {', '.join(ROLES)}.")
        ident = self.aliases.resolve(message_id)
        before = self.repo.get_message(ident)
        draft = before.copy()
        if content is not None:
            draft.content = content
        if role is not None:
            draft.role = role
        tokens = self.counter.count_message(draft)
        try:
            # The comparison with what the editor started from is part of the UPDATE
            # that writes: no other desktop's edit can land between the two.
            after = self.repo.update_message(
                ident,
                content=content,
                role=role,
                token_count=tokens,
                token_encoding=self.counter.encoding_name,
                expected=None if expected is None else (expected.role, expected.content),
            )
        except ChangedElsewhereError:
            raise ChangedElsewhereError(
                "This message was changed in another window or on another desktop while "
                "you edited it, so your edit was not saved over that change."
            ) from None
        return MessageChange(before, after)

    def restore_fields(self, before: Message, *, expected: Message | None = None) -> Message:
        """Put a message's text, role, name and token count back as ``before`` had them.

        ``expected``: the message as the edit being undone left it; when the stored one's
        role or text differ (changed elsewhere since), nothing is written
        (:class:`ChangedElsewhereError`).
        """
        if before.id is None:
            raise StorageError("A message without an id cannot be restored in place.")
        ident = self.aliases.resolve(before.id)
        try:
            return self.repo.update_message(
                ident,
                content=before.content,
                role=before.role,
                name=before.name,
                token_count=before.token_count,
                token_encoding=before.token_encoding,
                expected=None if expected is None else (expected.role, expected.content),
            )
        except ChangedElsewhereError:
            raise ChangedElsewhereError(
                "This message was changed in another window or on another desktop "
                "after your edit, so the undo did not put your old text over that "
                "change."
            ) from None

    def insert_message(
        self, session_id: int, position: int, role: str, content: str = ""
    ) -> Message:
        """A new message at ``position`` (later messages move down one), token-counted."""
        message = Message(role=role, content=content)
        message.token_count = self.counter.count_message(message)
        message.token_encoding = self.counter.encoding_name
        return self.repo.insert_message(session_id, position, message)

    def append_message(self, session_id: int, role: str, content: str = "") -> Message:
        """A new message at the end of the session, token-counted."""
        message = Message(role=role, content=content)
        message.token_count = self.counter.count_message(message)
        message.token_encoding = self.counter.encoding_name
        return self.repo.append_message(session_id, message)

    def delete_message(self, message_id: int) -> Message:
        """Delete a message; returns it whole (position included) for :meth:`restore_message`."""
        return self.repo.delete_message(self.aliases.resolve(message_id))

    def restore_message(self, message: Message) -> Message:
        """Insert a deleted message back at its position with all its fields.

        The restored row has a new id; :attr:`aliases` learns it, so the old id keeps
        working for every method here.
        """
        if message.session_id is None or message.position is None:
            raise StorageError("Only a message read from the store (with session and position)"
                               " can be restored.")
        copy = message.copy()
        copy.id = None
        restored = self.repo.insert_message(
            int(message.session_id), int(message.position), copy, keep_missing_time=True
        )
        if message.id is not None and restored.id is not None:
            self.aliases.add(int(message.id), int(restored.id))
        return restored

    def set_important(self, message_id: int, important: bool, *,
                      expected: bool | None = None) -> MessageChange:
        """Mark or unmark a message as important (never folded by compaction).

        ``expected``: the mark the caller last saw (an undo: the one it set); when
        another window or desktop changed it since, nothing is written
        (:class:`ChangedElsewhereError`)."""
        ident = self.aliases.resolve(message_id)
        before = self.repo.get_message(ident)
        try:
            after = self.repo.set_important(ident, important, expected=expected)
        except ChangedElsewhereError:
            raise ChangedElsewhereError(_CHANGED_SINCE.format(
                what="This message's important mark")) from None
        return MessageChange(before, after)

    # -- sessions ----------------------------------------------------------------------

    def create_session(self, title: str) -> SessionInfo:
        """A new empty session for the default agent."""
        return self.repo.create_session(title=title)

    # ``expected`` below: the field's value the caller last saw (an undo: the value it
    # wrote). When another window or desktop changed the field since, nothing is
    # written (:class:`ChangedElsewhereError`); the check is the UPDATE's own condition.

    def rename_session(self, session_id: int, title: str, *,
                       expected: str | None = None) -> SessionChange:
        """Give the session a new title, on one line (control characters and runs of
        whitespace fold into single spaces); an empty one is refused."""
        title = one_line(title)
        if not title:
            raise RequestError("A session title cannot be empty.")
        before = self.repo.get_session(session_id)
        with _said_of(before, "title"):
            return SessionChange(before, self.repo.rename_session(session_id, title,
                                                                  expected=expected))

    def set_pinned(self, session_id: int, pinned: bool, *,
                   expected: bool | None = None) -> SessionChange:
        before = self.repo.get_session(session_id)
        with _said_of(before, "pin"):
            return SessionChange(before, self.repo.set_pinned(session_id, pinned,
                                                              expected=expected))

    def set_archived(self, session_id: int, archived: bool, *,
                     expected: bool | None = None) -> SessionChange:
        before = self.repo.get_session(session_id)
        with _said_of(before, "archive state"):
            return SessionChange(before, self.repo.set_archived(session_id, archived,
                                                                expected=expected))

    def set_tags(self, session_id: int, tags: Sequence[str], *,
                 expected: Sequence[str] | None = None) -> SessionChange:
        before = self.repo.get_session(session_id)
        with _said_of(before, "tags"):
            return SessionChange(before, self.repo.set_tags(session_id, tags,
                                                            expected=expected))

    def delete_session(self, session_id: int) -> SessionInfo:
        """Delete a session with its messages and context for good; returns it as it
        was. (Front ends with undo hide it in a :class:`SessionTrash` instead.)"""
        before = self.repo.get_session(session_id)
        self.repo.delete_session(session_id)
        return before

    def fork_session(
        self, session_id: int, message_id: int, *, title: str | None = None
    ) -> SessionInfo:
        """A new session holding the messages up to and including ``message_id``."""
        return self.repo.fork_session(
            session_id, self.aliases.resolve(message_id), title=title
        )


class SessionTrash:
    """Sessions deleted while the delete can still be taken back.

    :meth:`put` only records the ids: callers hide trashed sessions from their lists
    (:meth:`hidden`) and :meth:`purge` deletes them for good. :meth:`take_back` returns a
    session untouched. Thread-safe.
    """

    def __init__(self, repo: Repository):
        self.repo = repo
        self._ids: set[int] = set()
        self._lock = threading.Lock()

    def put(self, session_ids: Iterable[int]) -> None:
        """Hide these sessions until they are taken back or purged."""
        ids = list(session_ids)
        for sid in ids:
            self.repo.get_session(sid)  # NotFoundError for an unknown id, before any change
        with self._lock:
            self._ids.update(ids)

    def take_back(self, session_ids: Iterable[int]) -> None:
        """Show these sessions again, exactly as they were."""
        with self._lock:
            self._ids.difference_update(session_ids)

    def hidden(self) -> frozenset[int]:
        """The ids in the trash now."""
        with self._lock:
            return frozenset(self._ids)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._ids

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)

    def purge(self) -> int:
        """Delete every trashed session for good; returns how many were deleted."""
        with self._lock:
            ids = sorted(self._ids)
            self._ids.clear()
        deleted = 0
        for sid in ids:
            try:
                self.repo.delete_session(sid)
            except NotFoundError:
                continue  # already gone (deleted elsewhere): nothing left to do
            deleted += 1
        return deleted
