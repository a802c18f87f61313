"""Undo commands for compactions: Apply (undone by the engine's undo) and "Undo last
compaction" (undone by applying the compaction again with the summary it recorded).

Both directions run on the database writer (:meth:`WorkerPool.write`). A compaction
applied again gets a new id; :class:`CompactionAliases` maps the old id to the new one,
so an older command on the stack still finds the compaction it stands for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtGui import QUndoCommand

from workbench.core.compaction import CompactionPlan, CompactionRecord
from workbench.engine import compaction
from workbench.engine.compaction_view import redo_compaction, undo_applied
from workbench.gui.context import AppContext


def _back(count: int) -> str:
    return f"{count:,} message is back." if count == 1 else f"{count:,} messages are back."


class CompactionAliases:
    """Compaction ids that were applied again under a new id (old -> new)."""

    def __init__(self) -> None:
        self._map: dict[int, int] = {}

    def add(self, old: int, new: int) -> None:
        if old != new:
            self._map[old] = new

    def resolve(self, ident: int) -> int:
        seen = set()
        while ident in self._map and ident not in seen:
            seen.add(ident)
            ident = self._map[ident]
        return ident


def _announce(ctx: AppContext, session_id: int, info: Any, sentence: str) -> None:
    """Tell the window a compaction changed the session: timeline, context, counts."""
    ctx.session_reloaded.emit(session_id)
    ctx.context_changed.emit(session_id)
    if info is not None:
        ctx.announce_session(info)
    if sentence:
        ctx.status_reported.emit(sentence)


class _CompactionCommand(QUndoCommand):
    def __init__(self, ctx: AppContext, session_id: int, text: str,
                 aliases: CompactionAliases,
                 on_changed: Callable[[], None] | None = None) -> None:
        super().__init__(text)
        self.ctx = ctx
        self.session_id = session_id
        self.aliases = aliases
        self._on_changed = on_changed

    def _write(self, fn: Callable[[], Any], done: Callable[[Any], None], doing: str,
               *, obsolete_on_error: bool = False) -> None:
        def failed(error: BaseException) -> None:
            self.ctx.report_error(error, doing=doing)
            if obsolete_on_error:
                # Nothing was written: the stack drops the command at its next step.
                self.setObsolete(True)
            # What is shown may no longer match the store: read it again.
            self.ctx.session_reloaded.emit(self.session_id)
            self._changed()

        self.ctx.workers.write(fn, name=doing, on_done=done, on_error=failed)

    def _changed(self) -> None:
        if self._on_changed is not None:
            self._on_changed()


class ApplyCompactionCommand(_CompactionCommand):
    """Apply a previewed plan with the (possibly edited) summary; undo calls the engine's
    undo of that compaction."""

    def __init__(self, ctx: AppContext, plan: CompactionPlan, summary: str,
                 aliases: CompactionAliases,
                 on_changed: Callable[[], None] | None = None) -> None:
        noun = "message" if plan.folded_count == 1 else "messages"
        super().__init__(ctx, int(plan.session_id or 0),
                         f"Compact {plan.folded_count} {noun}", aliases, on_changed)
        self.plan = plan
        self.summary = summary
        self.compaction_id: int | None = None  # set on the writer thread
        self.result: compaction.CompactionResult | None = None

    @property
    def applied(self) -> bool:
        """Whether the compaction this command made is in effect (as far as it knows)."""
        return self.compaction_id is not None

    def current_id(self) -> int | None:
        return None if self.compaction_id is None else self.aliases.resolve(self.compaction_id)

    def redo(self) -> None:
        ws, plan, summary, sid = self.ctx.workspace, self.plan, self.summary, self.session_id

        def run() -> tuple[compaction.CompactionResult, Any]:
            result = compaction.apply(ws, plan, summary=summary, only_if_smaller=True)
            self.compaction_id = result.compaction_id
            self.result = result
            return result, ws.get_session(sid)

        def done(value: tuple[compaction.CompactionResult, Any]) -> None:
            result, info = value
            _announce(self.ctx, sid, info, result.message)
            self._changed()

        self._write(run, done, "apply the compaction", obsolete_on_error=True)

    def undo(self) -> None:
        ws, sid = self.ctx.workspace, self.session_id

        def run() -> tuple[CompactionRecord | None, Any]:
            ident = self.current_id()
            if ident is None:  # the apply failed: nothing to take back
                return None, None
            record = undo_applied(ws, sid, ident)
            self.compaction_id = None
            return record, ws.get_session(sid)

        def done(value: tuple[CompactionRecord | None, Any]) -> None:
            record, info = value
            if info is not None:
                sentence = (f"Compaction {record.id} undone: {_back(record.folded_count)}"
                            if record is not None else "")
                _announce(self.ctx, sid, info, sentence)
            self._changed()

        self._write(run, done, "undo the compaction")


class UndoCompactionCommand(_CompactionCommand):
    """Undo the session's last compaction; undoing this applies it again (same messages,
    the summary it recorded)."""

    def __init__(self, ctx: AppContext, session_id: int, aliases: CompactionAliases,
                 on_changed: Callable[[], None] | None = None) -> None:
        super().__init__(ctx, session_id, "Undo last compaction", aliases, on_changed)
        self.record: CompactionRecord | None = None  # set on the writer thread
        self._current: int | None = None

    def redo(self) -> None:
        ws, sid = self.ctx.workspace, self.session_id

        def run() -> tuple[CompactionRecord, Any]:
            if self._current is None:
                record = compaction.undo(ws, sid)
            else:
                record = compaction.undo(ws, sid, self.aliases.resolve(self._current))
            self.record = record
            self._current = record.id
            return record, ws.get_session(sid)

        def done(value: tuple[CompactionRecord, Any]) -> None:
            record, info = value
            _announce(self.ctx, sid, info,
                      f"Compaction {record.id} undone: {_back(record.folded_count)}")
            self._changed()

        def failed(error: BaseException) -> None:
            self.ctx.report_error(error, doing="undo the last compaction")
            self.setObsolete(True)
            self._changed()

        self.ctx.workers.write(run, name="undo the last compaction", on_done=done,
                               on_error=failed)

    def undo(self) -> None:
        ws, sid = self.ctx.workspace, self.session_id

        def run() -> tuple[compaction.CompactionResult | None, Any]:
            record = self.record
            if record is None:  # the undo failed: nothing to apply again
                return None, None
            result = redo_compaction(ws, sid, record)
            if result.compaction_id is not None:
                self.aliases.add(self.aliases.resolve(record.id), result.compaction_id)
                self._current = result.compaction_id
            return result, ws.get_session(sid)

        def done(value: tuple[compaction.CompactionResult | None, Any]) -> None:
            result, info = value
            if result is not None:
                _announce(self.ctx, sid, info, result.message)
            self._changed()

        self._write(run, done, "apply the compaction again")
