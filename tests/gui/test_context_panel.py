"""The Context panel: facts, summary, tasks, usage and memory entries of the open session,
edited through real widgets and read back through the engine."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QComboBox, QLineEdit, QListWidget
from pytestqt.qtbot import QtBot

from tests.gui.journey import focus, named, press, type_text
from workbench.core.conversation import SessionInfo, Task, TokenUsage, ToolStats
from workbench.engine.session_context import (
    add_memory_entry,
    memory_entries_for,
    read_session_context,
    update_context,
)
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.panels.context_panel import ContextPanel

FACTS = ["The user lives in Porto.", "The user likes trains.", "Budget is 600 EUR."]


def _session(ws: Workspace, make_session: Callable[..., SessionInfo], title: str = "Trip",
             **context: object) -> SessionInfo:
    info = make_session(ws, title, [("user", "Plan a trip for me."),
                                    ("assistant", "Where would you like to go?")])
    if context:
        update_context(ws, info.id, **context)
    return info


def _open(window: MainWindow, qtbot: QtBot, session_id: int) -> ContextPanel:
    panel = window.context_panel
    window.context_dock.show()
    window.context_dock.raise_()
    window.open_session(session_id)
    qtbot.waitUntil(lambda: panel.overview is not None
                    and panel.overview.session_id == session_id, timeout=10_000)
    return panel


def _stored_facts(ws: Workspace, session_id: int) -> list[str]:
    return read_session_context(ws, session_id).context.facts


def test_editing_a_fact_in_place_persists_and_undo_restores_it(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _session(workspace, make_session, facts=list(FACTS))
    other = _session(workspace, make_session, "Other")
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    assert panel.facts() == FACTS

    item = panel.facts_list.item(1)
    panel.facts_list.setCurrentItem(item)
    panel.facts_list.editItem(item)
    editor = panel.facts_list.viewport().findChild(QLineEdit)
    assert editor is not None and editor.text() == FACTS[1]
    editor.selectAll()
    qtbot.keyClicks(editor, "The user prefers night trains.")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    edited = [FACTS[0], "The user prefers night trains.", FACTS[2]]
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == edited, timeout=10_000)

    # Re-opening the session reads the edited fact back.
    _open(window, qtbot, other.id)
    assert panel.facts() == []
    _open(window, qtbot, info.id)
    assert panel.facts() == edited

    window.ctx.undo_stack.undo()
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == FACTS, timeout=10_000)
    qtbot.waitUntil(lambda: panel.facts() == FACTS, timeout=10_000)


def test_adding_and_deleting_facts(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _session(workspace, make_session, facts=list(FACTS))
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    qtbot.keyClicks(panel.fact_edit, "The user is vegetarian")
    qtbot.keyClick(panel.fact_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == [*FACTS,
                                                                   "The user is vegetarian"],
                    timeout=10_000)
    qtbot.waitUntil(lambda: len(panel.facts()) == 4, timeout=10_000)
    panel.facts_list.setCurrentRow(0)
    qtbot.mouseClick(panel.delete_fact_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == [*FACTS[1:],
                                                                   "The user is vegetarian"],
                    timeout=10_000)


def test_ctrl_4_on_a_session_without_facts_says_so_and_typing_adds_one(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    """Ctrl+4 on a session with no facts: the panel says there are none yet and the
    keyboard is in the field that adds one, so what is typed becomes a fact. Deleting
    the last one (Del) says so again, with the keyboard back in that field."""
    info = _session(workspace, make_session)
    window = open_window(workspace)
    window.context_dock.hide()
    window.open_session(info.id)
    panel = window.context_panel
    qtbot.waitUntil(lambda: panel.overview is not None, timeout=10_000)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    press(qtbot, Qt.Key.Key_4, Qt.KeyboardModifier.ControlModifier)
    assert named(window, "No facts").text().startswith("No facts yet")
    assert focus().accessibleName() == "New fact"
    assert not panel.delete_fact_button.isEnabled() and not panel.dedupe_button.isEnabled()
    type_text(qtbot, "The user is vegetarian")
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == ["The user is vegetarian"],
                    timeout=10_000)
    qtbot.waitUntil(lambda: panel.facts() == ["The user is vegetarian"], timeout=10_000)
    facts = named(window, "Facts", QListWidget)
    assert not panel.no_facts_label.isVisible()
    assert panel.delete_fact_button.isEnabled()

    facts.setFocus()
    facts.setCurrentRow(0)
    press(qtbot, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == [], timeout=10_000)
    qtbot.waitUntil(lambda: panel.no_facts_label.isVisible(), timeout=10_000)
    assert not facts.isVisible()
    assert focus().accessibleName() == "New fact"


def test_summary_edit_persists_and_survives_reopening(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _session(workspace, make_session, summary="The user wants a weekend trip.")
    other = _session(workspace, make_session, "Other")
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    assert panel.summary_edit.toPlainText() == "The user wants a weekend trip."
    assert not panel.save_summary_button.isEnabled()

    panel.summary_edit.moveCursor(panel.summary_edit.textCursor().MoveOperation.End)
    qtbot.keyClicks(panel.summary_edit, " Lisbon was chosen.")
    assert panel.summary_dirty and panel.save_summary_button.isEnabled()
    qtbot.mouseClick(panel.save_summary_button, Qt.MouseButton.LeftButton)
    expected = "The user wants a weekend trip. Lisbon was chosen."
    qtbot.waitUntil(lambda: read_session_context(workspace, info.id).context.summary
                    == expected, timeout=10_000)
    qtbot.waitUntil(lambda: not panel.summary_dirty, timeout=10_000)

    _open(window, qtbot, other.id)
    assert panel.summary_edit.toPlainText() == ""
    _open(window, qtbot, info.id)
    assert panel.summary_edit.toPlainText() == expected


def test_unsaved_summary_edit_is_kept_when_the_context_is_read_again(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _session(workspace, make_session, summary="Old summary.", facts=["A fact."])
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    panel.summary_edit.selectAll()
    qtbot.keyClicks(panel.summary_edit, "Half-written new summary")
    # Something else changes the context meanwhile (a fact is added elsewhere).
    update_context(workspace, info.id, facts=["A fact.", "Another fact."])
    window.ctx.context_changed.emit(info.id)
    qtbot.waitUntil(lambda: panel.facts() == ["A fact.", "Another fact."], timeout=10_000)
    assert panel.summary_edit.toPlainText() == "Half-written new summary"
    assert panel.summary_dirty


def test_remove_repeats_dedupes_facts_and_undo_brings_them_back(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    facts = ["Water is wet.", "The sky is blue.", "the  sky is BLUE", "Water is wet",
             "Grass is green."]
    info = _session(workspace, make_session, facts=list(facts))
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    qtbot.mouseClick(panel.dedupe_button, Qt.MouseButton.LeftButton)
    kept = ["Water is wet.", "The sky is blue.", "Grass is green."]
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == kept, timeout=10_000)
    qtbot.waitUntil(lambda: panel.facts() == kept, timeout=10_000)
    window.ctx.undo_stack.undo()
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == facts, timeout=10_000)
    window.ctx.undo_stack.redo()
    qtbot.waitUntil(lambda: _stored_facts(workspace, info.id) == kept, timeout=10_000)


def test_task_status_and_progress_edits_persist(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    tasks = [Task(id="book", description="Book a guesthouse", status="running", progress=0.5),
             Task(id="weather", description="Check the weather", status="pending")]
    info = _session(workspace, make_session, tasks=tasks)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    table = panel.tasks_table
    assert [table.item(r, 0).text() for r in range(table.rowCount())] == [
        "Book a guesthouse", "Check the weather"]

    # The status column edits with a combo box: pick "completed" from the keyboard.
    table.setCurrentCell(0, 1)
    table.edit(table.model().index(0, 1))
    combo = table.viewport().findChild(QComboBox)
    assert combo is not None and combo.currentText() == "running"
    while combo.currentText() != "completed":
        qtbot.keyClick(combo, Qt.Key.Key_Down)

    def stored() -> list[Task]:
        return read_session_context(workspace, info.id).context.tasks

    qtbot.waitUntil(lambda: stored()[0].status == "completed", timeout=10_000)
    assert stored()[0].progress == 0.5 and stored()[1].status == "pending"
    assert stored()[0].updated_at is not None

    qtbot.waitUntil(lambda: table.item(0, 1).text() == "completed", timeout=10_000)
    table.setCurrentCell(1, 2)
    table.edit(table.model().index(1, 2))
    spin = table.viewport().findChild(QLineEdit)
    assert spin is not None
    spin.selectAll()
    qtbot.keyClicks(spin, "40")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: stored()[1].progress == 0.4, timeout=10_000)

    qtbot.keyClicks(panel.task_edit, "Buy train tickets")
    qtbot.mouseClick(panel.add_task_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(stored()) == 3, timeout=10_000)
    assert stored()[2].description == "Buy train tickets" and stored()[2].status == "pending"


def test_usage_shows_local_count_beside_provider_billed_tokens(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _session(workspace, make_session)
    context = workspace.repo.get_context(info.id)
    context.token_usage = TokenUsage(input_tokens=1840, output_tokens=412)
    context.tool_stats = ToolStats(total_calls=3, by_tool={"get_forecast": 2, "search": 1},
                                   failures=1)
    workspace.repo.set_context(info.id, context)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    local = workspace.repo.token_total(info.id)
    assert local > 0
    assert panel.local_tokens_label.text() == f"{local:,} tokens in 2 active messages"
    assert panel.billed_label.text() == "1,840 in · 412 out · 2,252 total"
    assert panel.tools_label.text().splitlines() == ["3 (1 failed)", "get_forecast: 2",
                                                      "search: 1"]


def test_memory_entries_add_and_delete_persist(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _session(workspace, make_session)
    other = _session(workspace, make_session, "Other")
    add_memory_entry(workspace, info.id, "The user is vegetarian.", scope="agent")
    add_memory_entry(workspace, other.id, "Only about the other session.", scope="session")
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    # The other session's own entry is not recalled here, so it is not listed.
    assert [e.content for e in panel.entries()] == ["The user is vegetarian."]

    qtbot.keyClicks(panel.memory_edit, "Prefers window seats")
    panel.memory_scope_box.setCurrentIndex(panel.memory_scope_box.findData("session"))
    qtbot.keyClicks(panel.memory_namespace_edit, "travel")
    qtbot.mouseClick(panel.add_memory_button, Qt.MouseButton.LeftButton)

    def stored() -> list[tuple[str, str, str, int | None]]:
        return sorted((e.content, e.scope, e.namespace, e.session_id)
                      for e in memory_entries_for(workspace, info.id))

    qtbot.waitUntil(lambda: ("Prefers window seats", "session", "travel", info.id)
                    in stored(), timeout=10_000)
    qtbot.waitUntil(lambda: len(panel.entries()) == 2, timeout=10_000)
    row = next(r for r in range(panel.memory_table.rowCount())
               if panel.memory_table.item(r, 0).text() == "Prefers window seats")
    assert panel.memory_table.item(row, 1).text() == "session"
    assert panel.memory_table.item(row, 2).text() == "travel"

    # Delete the older entry; undo stores it again; redo deletes it again.
    row = next(r for r in range(panel.memory_table.rowCount())
               if panel.memory_table.item(r, 0).text() == "The user is vegetarian.")
    panel.memory_table.selectRow(row)
    qtbot.mouseClick(panel.delete_memory_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: [s[0] for s in stored()] == ["Prefers window seats"],
                    timeout=10_000)
    qtbot.waitUntil(lambda: len(panel.entries()) == 1, timeout=10_000)
    window.ctx.undo_stack.undo()
    qtbot.waitUntil(lambda: ("The user is vegetarian.", "agent", "default", None) in stored(),
                    timeout=10_000)
    window.ctx.undo_stack.redo()
    qtbot.waitUntil(lambda: [s[0] for s in stored()] == ["Prefers window seats"],
                    timeout=10_000)
    # Undoing the add removes the entry it stored.
    window.ctx.undo_stack.undo()
    window.ctx.undo_stack.undo()
    qtbot.waitUntil(lambda: [s[0] for s in stored()] == ["The user is vegetarian."],
                    timeout=10_000)


def test_no_session_leaves_the_panel_empty_and_disabled(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    panel = window.context_panel
    window.context_dock.raise_()
    window.open_session(0)
    qtbot.waitUntil(lambda: panel.overview is None, timeout=10_000)
    assert panel.title_label.text() == "No session is open."
    assert not panel.facts_box.isEnabled() and panel.facts() == []
