"""Undo commands: every edit of a message or a session, persisted off the UI thread.

``redo`` and ``undo`` only queue work on the serialized database writer
(:meth:`WorkerPool.write`); the views change when the store has answered, through the
signals of :class:`AppContext`. Because the writer runs jobs one at a time in order, a
command may be undone before its first ``redo`` has finished: the work functions keep
what the inverse needs on the command *inside* the writer thread, so the undo job,
queued later, always finds it.

Ids stay valid across delete and restore (a restored message gets a new id) because
every message id goes through the engine's :class:`~workbench.engine.editing.IdAliases`.
Deleted sessions go to the trash and are removed from the database only when the
window closes (see :class:`~workbench.engine.editing.SessionTrash`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtGui import QGuiApplication, QUndoCommand

from workbench.core.conversation import Message, SessionInfo
from workbench.engine.editing import MessageChange, SessionChange
from workbench.errors import ChangedElsewhereError
from workbench.gui.context import AppContext


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


class _StoreCommand(QUndoCommand):
    """A command whose two directions are jobs on the database writer."""

    def __init__(self, ctx: AppContext, text: str) -> None:
        super().__init__(text)
        self.ctx = ctx

    def _write(self, fn: Callable[[], Any], on_done: Callable[[Any], None]) -> None:
        self.ctx.workers.write(fn, name=self.text().lower(), on_done=on_done,
                               on_error=self._failed)

    def _failed(self, error: BaseException) -> None:
        self.ctx.report_error(error, doing=self.text().lower())
        # What is shown may no longer match the store: read it again.
        self.ctx.sessions_changed.emit()
        if self.ctx.current_session_id:
            self.ctx.session_reloaded.emit(self.ctx.current_session_id)


# -- messages ---------------------------------------------------------------------------


class EditMessageCommand(_StoreCommand):
    """Change a message's role and text."""

    def __init__(self, ctx: AppContext, message: Message, role: str, content: str) -> None:
        super().__init__(ctx, "Edit message")
        self._before = message.copy()
        self._role = role
        self._content = content
        self._refused = False  # the message changed elsewhere first: nothing was written
        self._undoing = False

    def redo(self) -> None:
        ident = int(self._before.id or 0)
        editing = self.ctx.editing
        before = self._before

        def run() -> MessageChange:
            # Written only over the text the editor started from: another window's or
            # desktop's edit made meanwhile is not lost to this one.
            return editing.edit_message(ident, content=self._content, role=self._role,
                                        expected=before)

        self._write(run, lambda change: self.ctx.announce_message("changed", change.after))

    def _failed(self, error: BaseException) -> None:
        if isinstance(error, ChangedElsewhereError) and self._undoing:
            # The undo found another edit over this one: it is left as it is.
            self._undoing = False
            super()._failed(error)
            return
        if isinstance(error, ChangedElsewhereError):
            # Nothing was written, so there is nothing to undo (an undo would put the
            # old text over the other edit); what was typed is kept on the clipboard.
            self._refused = True
            self.setObsolete(True)
            QGuiApplication.clipboard().setText(self._content)
            self.ctx.report_error(
                f"{error} Your text is on the clipboard: F2 on the message edits what "
                "it holds now.")
            self.ctx.sessions_changed.emit()
            if self.ctx.current_session_id:
                self.ctx.session_reloaded.emit(self.ctx.current_session_id)
            return
        super()._failed(error)

    def undo(self) -> None:
        if self._refused:
            return
        editing = self.ctx.editing
        before = self._before
        after = Message(role=self._role, content=self._content)  # as this edit left it
        self._undoing = True

        def restored(message: Message) -> None:
            self._undoing = False
            self.ctx.announce_message("changed", message)

        self._write(lambda: editing.restore_fields(before, expected=after), restored)


class InsertMessageCommand(_StoreCommand):
    """Insert a new message of any role at a position."""

    def __init__(self, ctx: AppContext, session_id: int, position: int, role: str,
                 content: str) -> None:
        super().__init__(ctx, f"Insert {role} message")
        self._session_id = session_id
        self._position = position
        self._role = role
        self._content = content
        self._stored: Message | None = None
        self.inserted_id: int | None = None

    def redo(self) -> None:
        editing = self.ctx.editing

        def run() -> Message:
            if self._stored is None:
                message = editing.insert_message(self._session_id, self._position, self._role,
                                                 self._content)
                self.inserted_id = message.id
            else:
                message = editing.restore_message(self._stored)
            self._stored = message
            return message

        self._write(run, lambda message: self.ctx.announce_message("inserted", message))

    def undo(self) -> None:
        editing = self.ctx.editing

        def run() -> Message:
            assert self._stored is not None and self._stored.id is not None
            removed = editing.delete_message(int(self._stored.id))
            self._stored = removed
            return removed

        self._write(run, lambda message: self.ctx.announce_message("removed", message))


class DeleteMessagesCommand(_StoreCommand):
    """Delete messages (the user's explicit purge); undo puts them back in place."""

    def __init__(self, ctx: AppContext, message_ids: Sequence[int]) -> None:
        super().__init__(ctx, f"Delete {_plural(len(message_ids), 'message')}")
        self._ids = list(message_ids)
        self._deleted: list[Message] = []

    def redo(self) -> None:
        editing = self.ctx.editing

        def run() -> list[Message]:
            current = sorted((editing.message(i) for i in self._ids),
                             key=lambda m: int(m.position or 0), reverse=True)
            # From the bottom up, so each position is still right when it is deleted.
            self._deleted = [editing.delete_message(int(m.id or 0)) for m in current]
            return list(self._deleted)

        def done(deleted: list[Message]) -> None:
            for message in deleted:
                self.ctx.announce_message("removed", message)
            them = "it" if len(deleted) == 1 else "them"
            self.ctx.status_reported.emit(
                f"Deleted {_plural(len(deleted), 'message')}; Edit → Undo (Ctrl+Z) brings "
                f"{them} back.")

        self._write(run, done)

    def undo(self) -> None:
        editing = self.ctx.editing

        def run() -> list[Message]:
            return [editing.restore_message(m) for m in reversed(self._deleted)]

        def done(restored: list[Message]) -> None:
            for message in restored:
                self.ctx.announce_message("inserted", message)
            # Replaces the "Deleted …" line, which would otherwise stay up after the undo.
            self.ctx.status_reported.emit(
                f"Brought back {_plural(len(restored), 'message')}.")

        self._write(run, done)


class RegenerateReplyCommand(_StoreCommand):
    """A reply the engine replaced by a regenerated one (already stored when this is
    pushed: the first ``redo`` only shows it). Undo brings the earlier reply back in
    its place; redo puts the regenerated one back."""

    def __init__(self, ctx: AppContext, replaced: Sequence[Message],
                 added: Sequence[Message]) -> None:
        super().__init__(ctx, "Regenerate the last reply")
        self._replaced = [m.copy() for m in replaced]  # as they were, oldest first
        self._added = [m.copy() for m in added]
        self._done_once = False

    def _announce(self, inserted: Sequence[Message], removed: Sequence[Message]) -> None:
        # In the order the store did them: each position is right at its moment.
        for message in inserted:
            self.ctx.announce_message("inserted", message)
        for message in removed:
            self.ctx.announce_message("removed", message)

    def _swap(self, out: str) -> None:
        editing = self.ctx.editing

        def run() -> tuple[list[Message], list[Message]]:
            leaving, coming = ((self._added, self._replaced) if out == "added"
                               else (self._replaced, self._added))
            # The messages coming back go in first (before the leaving ones, where they
            # were), so that no deleted id is handed to them.
            inserted = [editing.restore_message(m) for m in coming]
            current = sorted((editing.message(int(m.id or 0)) for m in leaving),
                             key=lambda m: int(m.position or 0), reverse=True)
            removed = [editing.delete_message(int(m.id or 0)) for m in current]
            leaving[:] = sorted(removed, key=lambda m: int(m.position or 0))
            return inserted, removed

        self._write(run, lambda result: self._announce(*result))

    def redo(self) -> None:
        if not self._done_once:  # the engine stored it; the composer showed it
            self._done_once = True
            return
        self._swap("replaced")

    def undo(self) -> None:
        self._swap("added")


class SetImportantCommand(_StoreCommand):
    """Mark or unmark messages as important. An undo (and a redo after it) changes a
    message's mark only while it is still the one this command left: a change another
    window or desktop made since is left as it is, and the person is told."""

    def __init__(self, ctx: AppContext, message_ids: Sequence[int], important: bool) -> None:
        what = "Mark" if important else "Unmark"
        super().__init__(ctx, f"{what} {_plural(len(message_ids), 'message')} important")
        self._ids = list(message_ids)
        self._important = important
        self._before: dict[int, bool] = {}
        self._left: set[int] = set()  # changed elsewhere: left alone since
        self._redone = False

    def redo(self) -> None:
        editing = self.ctx.editing
        if self._redone:  # again, after an undo
            self._write(lambda: self._each(self._important, self._before), self._announce)
            return

        def run() -> tuple[list[Message], list[str]]:
            changes = [editing.set_important(i, self._important) for i in self._ids]
            self._before = {i: c.before.important for i, c in zip(self._ids, changes,
                                                                  strict=True)}
            return [c.after for c in changes], []

        self._redone = True
        self._write(run, self._announce)

    def undo(self) -> None:
        self._write(lambda: self._each(None, {i: self._important for i in self._ids}),
                    self._announce)

    def _each(self, value: bool | None, expected: dict[int, bool]
              ) -> tuple[list[Message], list[str]]:
        """Set each message's mark to ``value`` (None: its mark before this command)
        where it is still ``expected``."""
        written: list[Message] = []
        refused: list[str] = []
        for i in self._ids:
            if i in self._left or i not in expected:
                continue
            mark = self._before.get(i, not self._important) if value is None else value
            try:
                written.append(self.ctx.editing.set_important(
                    i, mark, expected=expected[i]).after)
            except ChangedElsewhereError as error:
                self._left.add(i)
                refused.append(str(error))
        return written, refused

    def _announce(self, result: tuple[list[Message], list[str]]) -> None:
        messages, refused = result
        for message in messages:
            self.ctx.announce_message("changed", message)
        if refused:
            more = len(refused) - 1
            also = "" if not more else f" The same for {_plural(more, 'more message')}."
            self.ctx.report_error(refused[0] + also)
            if self.ctx.current_session_id:
                self.ctx.session_reloaded.emit(self.ctx.current_session_id)


# -- sessions ---------------------------------------------------------------------------


class _SessionListCommand(_StoreCommand):
    def _changed(self, _result: Any = None) -> None:
        self.ctx.sessions_changed.emit()


class NewSessionCommand(_SessionListCommand):
    """Create a session (undo hides it again; it is deleted when the window closes)."""

    def __init__(self, ctx: AppContext, title: str = "New session",
                 make: Callable[[], SessionInfo] | None = None, text: str = "New session"
                 ) -> None:
        super().__init__(ctx, text)
        self._title = title
        self._make = make
        self.session_id: int | None = None

    def redo(self) -> None:
        ctx = self.ctx

        def run() -> SessionInfo:
            if self.session_id is None:
                info = self._make() if self._make else ctx.editing.create_session(self._title)
                self.session_id = info.id
                return info
            ctx.trash.take_back([self.session_id])
            return ctx.workspace.get_session(self.session_id)

        def done(info: SessionInfo) -> None:
            self._changed()
            ctx.open_session(info.id)

        self._write(run, done)

    def undo(self) -> None:
        ctx = self.ctx

        def run() -> int:
            assert self.session_id is not None
            ctx.trash.put([self.session_id])
            return self.session_id

        def done(session_id: int) -> None:
            ctx.session_hidden.emit(session_id)
            self._changed()

        self._write(run, done)


class ForkSessionCommand(NewSessionCommand):
    """A new session holding a session's messages up to one message."""

    def __init__(self, ctx: AppContext, session_id: int, message_id: int,
                 title: str | None = None) -> None:
        def make() -> SessionInfo:
            return ctx.editing.fork_session(session_id, message_id, title=title)

        super().__init__(ctx, make=make, text="Fork session")


class DeleteSessionsCommand(_SessionListCommand):
    """Delete sessions: hidden at once, removed for good when the window closes."""

    def __init__(self, ctx: AppContext, session_ids: Sequence[int]) -> None:
        super().__init__(ctx, f"Delete {_plural(len(session_ids), 'session')}")
        self._ids = list(session_ids)
        self._was_open = 0  # the open session, when it was among them: undo reopens it

    def redo(self) -> None:
        ctx = self.ctx
        if ctx.current_session_id in self._ids:
            self._was_open = ctx.current_session_id

        def done(_result: Any) -> None:
            for sid in self._ids:
                ctx.session_hidden.emit(sid)
            self._changed()
            them = "it" if len(self._ids) == 1 else "them"
            ctx.status_reported.emit(
                f"Deleted {_plural(len(self._ids), 'session')}; Edit → Undo (Ctrl+Z) brings "
                f"{them} back until you quit.")

        self._write(lambda: ctx.trash.put(self._ids), done)

    def undo(self) -> None:
        ctx = self.ctx

        def done(_result: Any) -> None:
            self._changed()
            ctx.status_reported.emit(f"Brought back {_plural(len(self._ids), 'session')}.")
            if self._was_open and not ctx.current_session_id:
                ctx.open_session(self._was_open)  # back where the person was

        self._write(lambda: ctx.trash.take_back(self._ids), done)


class SessionFieldCommand(_SessionListCommand):
    """Rename, pin, archive or tag sessions; undo restores each one's previous value.

    An undo (and a redo after it) writes a session's field only while it still holds
    what this command left there: a change another window or desktop made since is
    not written over; the person is told, and that session is left as it is.
    """

    def __init__(self, ctx: AppContext, session_ids: Sequence[int], field: str, value: Any,
                 text: str) -> None:
        super().__init__(ctx, text)
        self._ids = list(session_ids)
        self._field = field
        self._value = value
        self._before: dict[int, Any] = {}
        self._after: dict[int, Any] = {}  # what the first redo wrote, per session
        self._left: set[int] = set()  # sessions changed elsewhere: left alone since
        self._redone = False  # redo was queued once: the next ones write over _after

    def _apply(self, session_id: int, value: Any, expected: Any = None) -> SessionChange:
        editing = self.ctx.editing
        if callable(value):  # a value that depends on the session, e.g. "its tags plus one"
            value = value(self.ctx.workspace.get_session(session_id))
        if self._field == "title":
            return editing.rename_session(session_id, value, expected=expected)
        if self._field == "pinned":
            return editing.set_pinned(session_id, value, expected=expected)
        if self._field == "archived":
            return editing.set_archived(session_id, value, expected=expected)
        if self._field == "tags":
            return editing.set_tags(session_id, value, expected=expected)
        raise ValueError(f"unknown session field {self._field!r}")

    def _each(self, values: dict[int, Any], expected: dict[int, Any]
              ) -> tuple[list[SessionInfo], list[str]]:
        """Write ``values`` over ``expected``, session by session; the ones changed
        elsewhere are left as they are (with the sentence that says so)."""
        written: list[SessionInfo] = []
        refused: list[str] = []
        for sid in self._ids:
            if sid not in values or sid in self._left:
                continue
            try:
                written.append(self._apply(sid, values[sid], expected[sid]).after)
            except ChangedElsewhereError as error:
                self._left.add(sid)
                refused.append(str(error))
        return written, refused

    def redo(self) -> None:
        if self._redone:  # again, after an undo (the jobs run in order: _after is known)
            def again() -> tuple[list[SessionInfo], list[str]]:
                return self._each(self._after, self._before)

            self._write(again, lambda result: self._done(*result, undone=False))
            return

        def run() -> list[SessionInfo]:
            changes = [self._apply(sid, self._value) for sid in self._ids]
            self._before = {
                change.before.id: getattr(change.before, self._field) for change in changes
            }
            self._after = {
                change.after.id: getattr(change.after, self._field) for change in changes
            }
            return [change.after for change in changes]

        self._redone = True
        self._write(run, lambda infos: self._done(infos, undone=False))

    def undo(self) -> None:
        def run() -> tuple[list[SessionInfo], list[str]]:
            return self._each(self._before, self._after)

        self._write(run, lambda result: self._done(*result, undone=True))

    def _done(self, infos: list[SessionInfo], refused: Sequence[str] = (), *,
              undone: bool) -> None:
        for info in infos:
            self.ctx.announce_session(info)
        self._changed()
        if refused:
            more = len(refused) - 1
            also = "" if not more else (
                f" The same for {_plural(more, 'more session')} of this "
                f"{'undo' if undone else 'redo'}: left as changed there.")
            self.ctx.report_error(refused[0] + also)
            return
        if self._field == "archived" and infos:
            self.ctx.status_reported.emit(_archive_sentence(infos, undone=undone))


def _archive_sentence(infos: Sequence[SessionInfo], *, undone: bool) -> str:
    """What the status bar says after sessions were archived or taken out of the archive
    (like Delete, archiving hides sessions, so it says where they went)."""
    archived = [i for i in infos if i.archived]
    them = "it" if len(infos) == 1 else "them"
    if len(archived) == len(infos):
        text = (f"Archived {_plural(len(infos), 'session')}; tick Archived above the list "
                f"to see {them}")
        text += "." if undone else f", or Edit → Undo (Ctrl+Z) brings {them} back."
        return text
    if undone:
        return f"Brought back {_plural(len(infos), 'session')} from the archive."
    return f"Took {_plural(len(infos), 'session')} out of the archive."
