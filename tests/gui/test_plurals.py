"""Counts of one read as one: "1 entry was skipped", "1 message is back", "1 session"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from workbench.core.conversation import SessionInfo
from workbench.engine import compaction
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.export_progress import ExportProgressDialog
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import CompactionsRole
from workbench.gui.panels.compaction_commands import CompactionAliases, UndoCompactionCommand


def test_undoing_a_compaction_of_one_message_says_it_is_back(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # A greeting first: it folds alone (a reply kept first would keep its question).
    info = make_session(workspace, "Short", [("assistant", "first"), ("user", "second"),
                                             ("assistant", "third")])
    compaction.compact(workspace, info.id, keep=2)
    window = open_window(workspace)
    window.open_session(info.id)
    window.ctx.workers.wait_idle()
    model = window.timeline.model
    qtbot.waitUntil(lambda: any(model.index(r, 0).data(CompactionsRole)
                                for r in range(model.rowCount())))
    marker = next(r for r in range(model.rowCount()) if model.index(r, 0).data(CompactionsRole))
    assert ": 1 message folded" in model.index(marker, 0).data(Qt.ItemDataRole.ToolTipRole)
    with qtbot.waitSignal(window.ctx.status_reported, timeout=10_000,
                          check_params_cb=lambda text: "undone" in text) as said:
        window.ctx.undo_stack.push(UndoCompactionCommand(window.ctx, info.id,
                                                         CompactionAliases()))
    assert said.args[0].endswith(": 1 message is back.")


def test_exporting_one_session_counts_one_session(
    workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    info = make_session(workspace, "One", [("user", "hello")])
    window = open_window(workspace)
    dialog = ExportProgressDialog(window.ctx, [info.id], "markdown", tmp_path / "one.md",
                                  window)
    dialog.show_progress(0, 1)
    assert dialog.label.text() == "Exporting to one.md: 0 of 1 session read…"
    dialog.reject()
