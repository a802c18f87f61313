"""Undo commands for a session's context and its agent's memory entries.

Like :mod:`workbench.gui.commands`, ``redo`` and ``undo`` only queue work on the one
database writer; what the inverse needs is recorded inside the writer thread, so an undo
queued right after its redo always finds it. When a write lands,
:attr:`AppContext.context_changed` tells the panels (and the request inspector, whose
request carries the summary and the recalled entries) to read the context again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from PySide6.QtGui import QUndoCommand

from workbench.core.conversation import MemoryEntry, SessionContext, Task
from workbench.engine.session_context import (
    ContextChange,
    add_facts,
    add_memory_entry,
    add_task,
    change_context,
    dedupe_session_facts,
    delete_memory_entry,
    remove_fact,
    remove_task,
    restore_memory_entry,
    update_context,
)
from workbench.gui.context import AppContext


class _ContextCommand(QUndoCommand):
    """A command on one session's context whose directions are jobs on the writer."""

    def __init__(self, ctx: AppContext, session_id: int, text: str) -> None:
        super().__init__(text)
        self.ctx = ctx
        self.session_id = session_id

    def _write(self, fn: Callable[[], Any]) -> None:
        self.ctx.workers.write(fn, name=self.text().lower(), on_done=self._written,
                               on_error=self._failed)

    def _written(self, _result: Any) -> None:
        self.ctx.context_changed.emit(self.session_id)

    def _failed(self, error: BaseException) -> None:
        self.ctx.report_error(error, doing=self.text().lower())
        # What is shown may no longer match the store: read it again.
        self.ctx.context_changed.emit(self.session_id)


class _RestoringCommand(_ContextCommand):
    """A change whose undo writes back the fields as they were just before it
    (``_before``, filled by the change when it runs)."""

    _before: dict[str, Any] | None = None

    def undo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> ContextChange | None:
            if self._before is None:  # the change itself failed: nothing to put back
                return None
            return update_context(workspace, session_id, **copy.deepcopy(self._before))

        self._write(run)


class EditContextCommand(_RestoringCommand):
    """Replace fields of a session's context (facts, summary, tasks…); undo puts the
    values they had just before back."""

    def __init__(self, ctx: AppContext, session_id: int, text: str, **fields: Any) -> None:
        super().__init__(ctx, session_id, text)
        self._after = copy.deepcopy(fields)
        self._before = None

    def redo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> ContextChange:
            change = update_context(workspace, session_id, **copy.deepcopy(self._after))
            if self._before is None:
                self._before = {name: copy.deepcopy(getattr(change.before, name))
                                for name in self._after}
            return change

        self._write(run)


class ChangeContextCommand(_RestoringCommand):
    """Change the session's context with ``change``, run by the engine on the context as
    stored when the job runs (not as the panel last read it), so an edit or a delete
    made right after an add keeps the add. Undo puts back the ``fields`` as they were
    just before."""

    def __init__(self, ctx: AppContext, session_id: int, text: str,
                 change: Callable[[SessionContext], None], fields: tuple[str, ...]) -> None:
        super().__init__(ctx, session_id, text)
        self._change = change
        self._fields = fields
        self._before = None

    def redo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> ContextChange:
            result = change_context(workspace, session_id, self._change)
            self._before = {name: copy.deepcopy(getattr(result.before, name))
                            for name in self._fields}
            return result

        self._write(run)


class AddFactCommand(_ContextCommand):
    """Add one fact at the end of the list; the engine appends it to the facts stored
    when the job runs, so adds queued one after another all stay. Undo takes it out."""

    def __init__(self, ctx: AppContext, session_id: int, fact: str) -> None:
        super().__init__(ctx, session_id, "Add fact")
        self._fact = fact

    def redo(self) -> None:
        workspace, session_id, fact = self.ctx.workspace, self.session_id, self._fact
        self._write(lambda: add_facts(workspace, session_id, [fact]))

    def undo(self) -> None:
        workspace, session_id, fact = self.ctx.workspace, self.session_id, self._fact
        self._write(lambda: remove_fact(workspace, session_id, fact))


class AddTaskCommand(_ContextCommand):
    """Add one task at the end of the list, appended by the engine to the tasks stored
    when the job runs (like :class:`AddFactCommand`). Undo takes it out; redo puts the
    same task back."""

    def __init__(self, ctx: AppContext, session_id: int, description: str) -> None:
        super().__init__(ctx, session_id, "Add task")
        self._description = description
        self._task: Task | None = None  # set in the writer thread by the first redo

    def redo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> ContextChange:
            change, self._task = add_task(workspace, session_id,
                                          self._task or self._description)
            return change

        self._write(run)

    def undo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> ContextChange | None:
            if self._task is None:  # the add itself failed: nothing to take out
                return None
            return remove_task(workspace, session_id, self._task.id)

        self._write(run)


class DedupeFactsCommand(_ContextCommand):
    """Drop repeated facts (the engine's rule); undo brings the list back as it was."""

    def __init__(self, ctx: AppContext, session_id: int) -> None:
        super().__init__(ctx, session_id, "Remove repeated facts")
        self._before: list[str] | None = None
        self._after: list[str] | None = None
        self.removed: list[str] = []

    def redo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> ContextChange:
            if self._after is None:
                change = dedupe_session_facts(workspace, session_id)
                self._before = list(change.before.facts)
                self._after = list(change.after.facts)
                self.removed = list(change.removed)
                return change
            return update_context(workspace, session_id, facts=list(self._after))

        self._write(run)

    def _written(self, result: Any) -> None:
        super()._written(result)
        if isinstance(result, ContextChange) and result.removed:
            count = len(result.removed)
            noun = "fact" if count == 1 else "facts"
            self.ctx.status_reported.emit(f"Removed {count} repeated {noun}.")

    def undo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> ContextChange | None:
            if self._before is None:
                return None
            return update_context(workspace, session_id, facts=list(self._before))

        self._write(run)


class _MemoryEntryCommand(_ContextCommand):
    """A command that deletes one memory entry or stores it again. The steps run in the
    writer thread, where ``_stored`` (the entry is in the store for this command to
    delete) and ``_removed`` (this command deleted it) are kept."""

    def __init__(self, ctx: AppContext, session_id: int, text: str,
                 entry: MemoryEntry | None, *, stored: bool) -> None:
        super().__init__(ctx, session_id, text)
        self._entry = entry
        self._stored = stored
        self._removed = False

    def _delete_entry(self, workspace: Any) -> MemoryEntry | None:
        if self._entry is None or not self._stored:
            return None
        self._entry = delete_memory_entry(workspace, int(self._entry.id))
        self._stored, self._removed = False, True
        return self._entry

    def _restore_entry(self, workspace: Any) -> MemoryEntry | None:
        if self._entry is None or not self._removed:
            return self._entry
        self._entry = restore_memory_entry(workspace, self._entry)
        self._stored, self._removed = True, False
        return self._entry


class AddMemoryEntryCommand(_MemoryEntryCommand):
    """Add a long-term memory entry for the session's agent; undo deletes it again
    (unless the same entry was already stored, which the add then left alone)."""

    def __init__(self, ctx: AppContext, session_id: int, content: str, *, scope: str,
                 namespace: str | None) -> None:
        super().__init__(ctx, session_id, "Add memory entry", None, stored=False)
        self._content = content
        self._scope = scope
        self._namespace = namespace

    def redo(self) -> None:
        workspace, session_id = self.ctx.workspace, self.session_id

        def run() -> MemoryEntry | None:
            if self._entry is None:
                self._entry, self._stored = add_memory_entry(
                    workspace, session_id, self._content, scope=self._scope,
                    namespace=self._namespace)
                return self._entry
            return self._restore_entry(workspace)

        self._write(run)

    def undo(self) -> None:
        workspace = self.ctx.workspace
        self._write(lambda: self._delete_entry(workspace))


class DeleteMemoryEntryCommand(_MemoryEntryCommand):
    """Delete a memory entry; undo stores it again (with a new id)."""

    def __init__(self, ctx: AppContext, session_id: int, entry: MemoryEntry) -> None:
        super().__init__(ctx, session_id, "Delete memory entry", entry, stored=True)

    def redo(self) -> None:
        workspace = self.ctx.workspace
        self._write(lambda: self._delete_entry(workspace))

    def undo(self) -> None:
        workspace = self.ctx.workspace
        self._write(lambda: self._restore_entry(workspace))
