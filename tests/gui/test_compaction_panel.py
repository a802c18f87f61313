"""The Compaction panel over a real temporary database: preview (the folded range tinted
in the timeline, the counts, the token bar), Apply with an edited summary, Undo through
the button and through Ctrl+Z, the timeline's compaction marker, "nothing to compact",
the per-session policy, and a model summary that is cancelled against the tests'
protocol server."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QWidget
from pytestqt.qtbot import QtBot

from tests.gui.conftest import settle
from workbench.core.compaction import REASON_RECENT, REASON_TURN, CompactionPolicy
from workbench.core.conversation import SessionInfo
from workbench.core.provider import ProviderConfig
from workbench.core.tokens import get_counter
from workbench.engine import compaction
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import (
    CompactionsRole,
    KindRole,
    StateRole,
    SummaryRole,
    TimelineModel,
    WillFoldRole,
)
from workbench.gui.panels.compaction import CompactionPanel, kept_words
from workbench.store.summary_lines import LINES_KEPT_SETTING

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from protocol_server import Fault, ProtocolServer  # noqa: E402

TIMEOUT = 15_000
EDITED = "The user and the assistant planned the kitchen: induction hob, oak worktop."


def _long_session(ws: Workspace, make_session: Callable[..., SessionInfo], count: int = 60,
                  title: str = "Kitchen") -> SessionInfo:
    messages = [(("user", "assistant")[i % 2],
                 f"Message {i}: " + "notes on the cabinets, the worktop and the hob " * 6)
                for i in range(count)]
    return make_session(ws, title, messages)


def _open(window: MainWindow, qtbot: QtBot, session_id: int) -> CompactionPanel:
    panel = window.compaction_panel
    window.compaction_dock.show()
    window.compaction_dock.raise_()
    with qtbot.waitSignal(panel.policy_loaded, timeout=TIMEOUT):
        window.open_session(session_id)
    qtbot.waitUntil(lambda: panel.session_id == session_id and window.ctx.workers.idle,
                    timeout=TIMEOUT)
    return panel


def _preview(qtbot: QtBot, panel: CompactionPanel, keep: int | None = None) -> None:
    if keep is not None:
        panel.keep_count_spin.setValue(keep)
    with qtbot.waitSignal(panel.preview_shown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.preview_button, Qt.MouseButton.LeftButton)


def _tinted_ids(model: TimelineModel) -> list[int]:
    ids = []
    for row in range(model.rowCount()):
        index = model.index(row, 0)
        if index.data(WillFoldRole):
            ids.append(int(model.message_at(model.position_at(row)).id))
    return ids


def _states(model: TimelineModel) -> list[str]:
    return [model.index(r, 0).data(StateRole) for r in range(model.rowCount())]


def _applied(ws: Workspace, session_id: int) -> list[compaction.CompactionRecord]:
    return [r for r in compaction.history(ws, session_id) if not r.undone]


def test_preview_tints_the_folded_range_and_draws_the_tokens_of_the_plan(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _long_session(workspace, make_session)
    other = _long_session(workspace, make_session, 5, "Other")
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    model = window.timeline.model
    assert _tinted_ids(model) == []

    _preview(qtbot, panel, keep=20)
    plan = panel.plan
    assert plan is not None and plan.changed
    # The same dry run through the engine: the panel shows the engine's plan.
    expected = compaction.preview(workspace, info.id, keep=20)
    assert plan.folded_ids == expected.folded_ids
    ids = [m.id for m in workspace.repo.list_messages(info.id)]
    assert plan.folded_ids == ids[:40]

    # The folded range is tinted in the timeline, and only it.
    assert _tinted_ids(model) == ids[:40]
    assert model.fold_preview == frozenset(ids[:40])
    # The panel's counts and range.
    assert "Folds 40 messages" in panel.result_label.text().replace("<b>", "").replace(
        "</b>", "")
    assert "keeps 20 messages" in panel.result_label.text()
    assert panel.ranges_label.text() == (
        f"Folded: messages 1–40 (ids {ids[0]}–{ids[39]}, 40 messages).")
    assert panel.kept_label.text() == "Kept: 20 recent."
    # The token bar holds the plan's numbers, equal to the engine's.
    assert (panel.token_bar.before, panel.token_bar.after) == (
        expected.tokens_before, expected.tokens_after)
    assert expected.tokens_after < expected.tokens_before
    assert f"{expected.tokens_before:,}" in panel.token_bar.accessibleDescription()
    assert panel.summary_edit.toPlainText() == expected.summary
    assert panel.apply_button.isEnabled()

    # The timeline scrolled to the first message that would fold.
    first_row = model.row_for_message(ids[0])
    assert first_row is not None and first_row in window.timeline.view.visible_rows()

    # Another session: the preview and the tint go.
    window.open_session(other.id)
    qtbot.waitUntil(lambda: panel.session_id == other.id, timeout=TIMEOUT)
    assert panel.plan is None and model.fold_preview == frozenset()
    assert not panel.apply_button.isEnabled()
    assert (panel.token_bar.before, panel.token_bar.after) == (None, None)
    # Nothing was written by the preview.
    assert compaction.history(workspace, info.id) == []


def test_edited_summary_is_applied_and_the_marker_names_the_compaction(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _long_session(workspace, make_session)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    model = window.timeline.model
    _preview(qtbot, panel, keep=20)
    folded = list(panel.plan.folded_ids)

    panel.summary_edit.setFocus()
    panel.summary_edit.selectAll()
    qtbot.keyClicks(panel.summary_edit, EDITED)
    assert panel.summary_edit.toPlainText() == EDITED
    assert panel.summary_note.text().startswith("Edited")
    with qtbot.waitSignal(panel.history_loaded, timeout=TIMEOUT,
                          check_params_cb=lambda records: len(records) == 1):
        qtbot.mouseClick(panel.apply_button, Qt.MouseButton.LeftButton)

    # The edited text is what the engine stored, as the compaction's summary and as the
    # session's long-term summary.
    records = _applied(workspace, info.id)
    assert len(records) == 1 and records[0].summary == EDITED
    assert records[0].folded_ids == folded
    assert workspace.repo.get_context(info.id).summary == EDITED
    # The tokens after were counted for the edited text.
    agent = workspace.repo.get_agent(info.agent_id)
    active = [m for m in workspace.repo.list_messages(info.id) if m.state == "active"]
    assert records[0].tokens_after == compaction.request_tokens(
        agent.instructions or None, EDITED, active, get_counter(model=agent.model))

    # The timeline: one marker for the 40 folded messages, then the 20 kept; no tint.
    qtbot.waitUntil(lambda: model.rowCount() == 21, timeout=TIMEOUT)
    assert model.index(0, 0).data(KindRole) == "marker"
    assert model.fold_preview == frozenset()
    label = model.index(0, 0).data(Qt.ItemDataRole.DisplayRole)
    assert label.startswith(f"Compaction #{records[0].id} · ")
    assert f"{records[0].tokens_saved:,} tokens saved" in label
    assert "40 messages folded into the summary" in label
    assert [r.id for r in model.index(0, 0).data(CompactionsRole)] == [records[0].id]
    assert EDITED in model.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)
    # Expanded, the marker shows the summary above the folded messages.
    model.toggle_run(0)
    assert model.index(0, 0).data(SummaryRole) == EDITED
    assert model.rowCount() == 61
    assert window.timeline.view.row_height(0) > window.timeline.view.row_height(1) // 4

    # The history lists it.
    rows = panel.history_rows()
    assert len(rows) == 1
    assert rows[0]["#"] == str(records[0].id)
    assert rows[0]["Folded"] == "40"
    assert rows[0]["Saved"] == f"{records[0].tokens_saved:,}"
    assert rows[0]["Policy"] == "keep 20" and rows[0]["State"] == "applied"
    assert panel.undo_button.isEnabled()


def test_undo_last_compaction_restores_the_timeline(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _long_session(workspace, make_session)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    model = window.timeline.model
    before_rows = model.rowCount()
    assert before_rows == 60
    # A compaction made elsewhere (the command line, auto-compaction): the button
    # undoes it too.
    compaction.compact(workspace, info.id, keep=10)
    window.ctx.session_reloaded.emit(info.id)
    qtbot.waitUntil(lambda: model.rowCount() == 11 and panel.undo_button.isEnabled(),
                    timeout=TIMEOUT)

    with qtbot.waitSignal(panel.history_loaded, timeout=TIMEOUT,
                          check_params_cb=lambda records: all(r.undone for r in records)):
        qtbot.mouseClick(panel.undo_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: model.rowCount() == before_rows, timeout=TIMEOUT)
    assert _states(model) == ["active"] * before_rows
    assert all(m.state == "active" for m in workspace.repo.list_messages(info.id))
    assert workspace.repo.get_context(info.id).summary == ""
    assert panel.history_rows()[0]["State"].startswith("undone")
    assert not panel.undo_button.isEnabled()

    # Ctrl+Z takes the undo back: the same compaction applies again.
    window.undo_action.trigger()
    qtbot.waitUntil(lambda: model.rowCount() == 11, timeout=TIMEOUT)
    assert len(_applied(workspace, info.id)) == 1


def test_ctrl_z_undoes_an_apply_and_redo_applies_it_again(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _long_session(workspace, make_session)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    model = window.timeline.model
    _preview(qtbot, panel, keep=20)
    panel.summary_edit.setPlainText(EDITED)
    panel.apply()
    qtbot.waitUntil(lambda: model.rowCount() == 21, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: panel.result_label.text().startswith("Applied: 40 messages"))

    window.timeline.view.setFocus()
    qtbot.keyClick(window.timeline.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: model.rowCount() == 60, timeout=TIMEOUT)
    assert _states(model) == ["active"] * 60
    # The panel no longer claims the compaction is applied.
    qtbot.waitUntil(lambda: panel.result_label.text().startswith("Undone: 40 messages"))
    assert workspace.repo.get_context(info.id).summary == ""
    assert _applied(workspace, info.id) == []

    window.redo_action.trigger()
    qtbot.waitUntil(lambda: model.rowCount() == 21, timeout=TIMEOUT)
    assert workspace.repo.get_context(info.id).summary == EDITED
    # The button now undoes the redone apply through the undo stack.
    qtbot.waitUntil(lambda: panel.undo_button.isEnabled(), timeout=TIMEOUT)
    qtbot.mouseClick(panel.undo_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: model.rowCount() == 60, timeout=TIMEOUT)
    assert window.ctx.undo_stack.canRedo()


def test_a_small_session_says_there_is_nothing_to_compact(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _long_session(workspace, make_session, 4)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    assert panel.keep_count_spin.value() == 30  # the policy's keep count
    _preview(qtbot, panel)
    text = panel.result_label.text()
    assert text.startswith("Nothing to compact: ")
    assert "4 active messages" in text and text.endswith(".")
    assert not panel.apply_button.isEnabled()
    assert not panel.summary_edit.isVisible()
    assert _tinted_ids(window.timeline.model) == []
    assert panel.token_bar.before == panel.token_bar.after is not None

    # As the triggers decide: within the policy, also nothing, said as a sentence.
    panel.mode_combo.setCurrentIndex(panel.mode_combo.findData("policy"))
    _preview(qtbot, panel)
    assert panel.result_label.text().startswith("Nothing to compact: ")
    assert "within the policy" in panel.result_label.text()


def test_policy_fields_persist_for_the_session(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="local", kind="openai", base_url="http://127.0.0.1:9/v1", model="small"))
    info = _long_session(workspace, make_session, 6)
    other = _long_session(workspace, make_session, 6, "Other")
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    assert not panel.provider_combo.isEnabled()  # extractive: no provider to choose

    panel.max_messages_spin.setValue(40)
    panel.keep_spin.setValue(12)
    panel.tokens_trigger_check.setChecked(False)
    panel.auto_check.setChecked(True)
    panel.summarizer_combo.setCurrentIndex(panel.summarizer_combo.findData("model"))
    assert panel.provider_combo.isEnabled() and panel.prompt_edit.isEnabled()
    panel.provider_combo.setCurrentIndex(panel.provider_combo.findData("local"))
    qtbot.keyClicks(panel.model_edit, "tiny-summarizer")
    panel.prompt_edit.setPlainText("Summarize tersely.")
    with qtbot.waitSignal(panel.policy_saved, timeout=TIMEOUT):
        qtbot.mouseClick(panel.save_button, Qt.MouseButton.LeftButton)

    expected = CompactionPolicy(max_messages=40, keep_messages=12, max_tokens=None,
                                summarizer="model", provider="local", model="tiny-summarizer",
                                prompt="Summarize tersely.", auto=True)
    assert compaction.policy_for(workspace, info.id) == expected
    assert compaction.policy_for(workspace, other.id) == CompactionPolicy()
    assert "overrides" in panel.policy_status.text()

    # Away and back: the fields are read from the store again.
    _open(window, qtbot, other.id)
    assert panel.keep_spin.value() == 30 and panel.tokens_trigger_check.isChecked()
    _open(window, qtbot, info.id)
    assert panel.max_messages_spin.value() == 40
    assert panel.keep_spin.value() == 12
    assert not panel.tokens_trigger_check.isChecked()
    assert panel.auto_check.isChecked()
    assert panel.summarizer_combo.currentData() == "model"
    assert panel.provider_combo.currentData() == "local"
    assert panel.model_edit.text() == "tiny-summarizer"
    assert panel.prompt_edit.toPlainText() == "Summarize tersely."

    # A keep count above the trigger is refused with a sentence; nothing is written.
    panel.keep_spin.setValue(45)
    qtbot.mouseClick(panel.save_button, Qt.MouseButton.LeftButton)
    window.ctx.workers.wait_idle()
    assert "'keep_messages' must not exceed 'max_messages'" in panel.policy_status.text()
    assert compaction.policy_for(workspace, info.id) == expected

    # Use Agent Defaults drops the overrides.
    with qtbot.waitSignal(panel.policy_saved, timeout=TIMEOUT):
        qtbot.mouseClick(panel.reset_button, Qt.MouseButton.LeftButton)
    assert compaction.policy_for(workspace, info.id) == CompactionPolicy()
    assert workspace.repo.get_session(info.id).overrides.get("compaction") is None
    assert panel.keep_spin.value() == 30

    # Save for the Agent: every session of the agent without overrides follows.
    panel.keep_spin.setValue(20)
    with qtbot.waitSignal(panel.policy_saved, timeout=TIMEOUT):
        qtbot.mouseClick(panel.save_agent_button, Qt.MouseButton.LeftButton)
    assert compaction.policy_for(workspace, other.id).keep_messages == 20
    assert compaction.policy_for(workspace, info.id).keep_messages == 20
    assert workspace.repo.get_session(info.id).overrides.get("compaction") is None
    assert panel.policy_status.text().startswith("Saved for the agent.")
    _open(window, qtbot, other.id)
    assert panel.keep_spin.value() == 20



def test_model_summary_shows_progress_and_cancel_stops_it(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="local", kind="openai", base_url=server.url, model=server.model))
    info = _long_session(workspace, make_session, 30)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    panel.summarizer_combo.setCurrentIndex(panel.summarizer_combo.findData("model"))
    panel.keep_count_spin.setValue(10)

    server.script(Fault("stall_headers"))
    qtbot.mouseClick(panel.preview_button, Qt.MouseButton.LeftButton)
    assert server.stalling.wait(10), "the summary request did not reach the server"
    assert panel.busy and not panel.busy_row.isHidden()
    assert panel.cancel_button.isEnabled() and not panel.preview_button.isEnabled()
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    assert server.hung_up.wait(10), "cancel did not close the model's connection"
    assert not panel.busy and panel.busy_row.isHidden()
    assert panel.result_label.text() == "Preview cancelled; nothing was changed."
    assert panel.plan is None and window.timeline.model.fold_preview == frozenset()
    window.ctx.workers.wait_idle()
    assert panel.plan is None  # the cancelled job's late answer is ignored
    assert compaction.history(workspace, info.id) == []

    # Without the fault the model's reply is the summary to apply.
    _preview(qtbot, panel)
    assert panel.plan is not None and panel.plan.summarizer == "model"
    assert panel.summary_edit.toPlainText() == "Hello from the protocol server."
    sent = server.chat_requests()[-1].body
    assert "Messages leaving the conversation" in sent["messages"][-1]["content"]
    assert len(_tinted_ids(window.timeline.model)) == 20


def test_preview_compaction_has_a_shortcut_in_the_help(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _long_session(workspace, make_session, 40)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    window.search_dock.raise_()
    with qtbot.waitSignal(panel.preview_shown, timeout=TIMEOUT):
        qtbot.keyClick(window.timeline.view, Qt.Key.Key_K,
                       Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert panel.isVisible()
    assert panel.plan is not None and panel.plan.folded_count == 10  # keeps the policy's 30
    dialog = window.show_shortcuts()
    assert any(name == "Preview Compaction" for name, _keys in dialog.rows())
    dialog.close()


def test_preview_compaction_from_the_prompt_puts_the_keyboard_in_the_panel(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    from PySide6.QtWidgets import QApplication

    from tests.gui.journey import click_into, focus, named, press

    info = _long_session(workspace, make_session, 40)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    window.search_dock.raise_()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    assert click_into(qtbot, named(window, "Prompt")) is window.composer.prompt
    with qtbot.waitSignal(panel.preview_shown, timeout=TIMEOUT):
        press(qtbot, Qt.Key.Key_K,
              Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert panel.isVisible()
    assert panel.isAncestorOf(focus()), focus()


def test_what_a_left_session_was_reading_never_lands(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The policy, history and preview of a session still being read when another is
    opened are dropped (the jobs' keys), not shown over the new session's."""
    import threading

    from workbench.gui.panels import compaction as module

    first = _long_session(workspace, make_session, 30, "First")
    second = _long_session(workspace, make_session, 6, "Second")
    window = open_window(workspace)
    panel = _open(window, qtbot, second.id)
    # Held on the reader threads (two): the first session's policy read and preview.
    held = {"policy": threading.Event(), "preview": threading.Event()}
    entered = {name: threading.Event() for name in held}
    heard: list[str] = []
    panel.policy_loaded.connect(lambda view: heard.append(f"policy {view.session_id}"))
    panel.history_loaded.connect(lambda records: heard.append(f"history {len(records)}"))
    panel.preview_shown.connect(lambda _plan: heard.append("preview"))

    def holding(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def run(ws: Workspace, session_id: int, *args: object, **kwargs: object) -> object:
            if session_id == first.id:
                entered[name].set()
                assert held[name].wait(10), "the test never released the job"
            return real(ws, session_id, *args, **kwargs)
        return run

    monkeypatch.setattr(module, "read_policy", holding("policy", module.read_policy))
    monkeypatch.setattr(module, "preview_plan", holding("preview", module.preview_plan))
    window.open_session(first.id)
    assert entered["policy"].wait(10)
    panel.preview()
    assert entered["preview"].wait(10)
    assert heard == []

    window.open_session(second.id)  # the first session's reads are still held
    for event in held.values():
        event.set()
    assert window.ctx.workers.wait_idle()
    # Only the second session's policy and (empty) history arrived.
    assert sorted(heard) == ["history 0", f"policy {second.id}"]
    assert panel.session_id == second.id and panel.plan is None and not panel.busy


def test_a_database_written_before_summary_lines_gets_them_while_the_window_is_open(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # Imported sessions, as a database written before summary lines were kept has them.
    infos = [_long_session(workspace, make_session, title=f"Kitchen {k}") for k in range(3)]
    first = {info.id: compaction.preview(workspace, info.id, keep=20) for info in infos}
    assert all(plan.unkept_lines == 60 for plan in first.values())
    window = open_window(workspace)
    # The window's workspace keeps them on the engine's own thread, none of the workers.
    upkeep = window.ctx.workspace.keep_summary_lines()
    qtbot.waitUntil(upkeep.finished.is_set, timeout=TIMEOUT)
    assert upkeep.report.complete and upkeep.report.lines == 180
    panel = _open(window, qtbot, infos[1].id)
    _preview(qtbot, panel, keep=20)
    assert panel.plan is not None and panel.plan.unkept_lines == 0
    assert panel.summary_edit.toPlainText() == first[infos[1].id].summary
    assert panel.plan.tokens_after == first[infos[1].id].tokens_after
    assert compaction.history(workspace, infos[1].id) == []  # nothing else was written


def test_a_preview_has_the_summary_lines_the_session_lacks_kept_for_the_next(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # Lines missing although the database was found keeping every line (the background
    # upkeep does not run again): the panel keeps them after a preview that met them.
    workspace.repo.set_setting(LINES_KEPT_SETTING, True)
    info = _long_session(workspace, make_session)
    first = compaction.preview(workspace, info.id, keep=20)
    assert first.unkept_lines == 60
    window = open_window(workspace)
    upkeep = window.ctx.workspace.keep_summary_lines()
    qtbot.waitUntil(upkeep.finished.is_set, timeout=TIMEOUT)
    assert upkeep.report.skipped
    panel = _open(window, qtbot, info.id)

    _preview(qtbot, panel, keep=20)
    assert panel.plan is not None and panel.plan.unkept_lines == 60
    assert window.ctx.workers.wait_idle()
    # Kept by the writer thread after the preview: the next one reads them, alike.
    again = compaction.preview(workspace, info.id, keep=20)
    assert again.unkept_lines == 0
    assert again.summary == first.summary and again.tokens_after == first.tokens_after
    _preview(qtbot, panel, keep=20)
    assert panel.plan is not None and panel.plan.unkept_lines == 0
    assert panel.summary_edit.toPlainText() == first.summary
    assert compaction.history(workspace, info.id) == []  # nothing else was written


def _overlaps(box: QWidget) -> list[str]:
    """Pairs of shown controls of ``box`` (its direct children) that cover each other."""
    shown = [w for w in box.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
             if w.isVisible() and not w.isWindow()]
    found = []
    for i, one in enumerate(shown):
        for other in shown[i + 1:]:
            if one.geometry().intersects(other.geometry()):
                found.append(f"{one.accessibleName() or type(one).__name__} {one.geometry()} "
                             f"covers {other.accessibleName() or type(other).__name__} "
                             f"{other.geometry()}")
    return found


@pytest.mark.parametrize("size", [(1024, 700), (1280, 800), (1920, 1080)],
                         ids=["1024x700", "1280x800", "1920x1080"])
def test_after_a_preview_no_control_of_the_panel_covers_another(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], size: tuple[int, int],
) -> None:
    # The policy's buttons wrap onto two lines in the dock; after a preview the content
    # grows past the dock and the form used to give the button row the height of one
    # line: "Use Agent Defaults" lay under the policy text.
    info = _long_session(workspace, make_session)
    window = open_window(workspace, size=size)
    panel = _open(window, qtbot, info.id)
    _preview(qtbot, panel)
    QApplication.processEvents()
    assert window.ctx.workers.wait_idle(10)
    QApplication.processEvents()
    policy_box = panel.reset_button.parentWidget()
    assert _overlaps(policy_box) == []
    assert _overlaps(panel.preview_button.parentWidget()) == []
    status = panel.policy_status.geometry()
    assert panel.reset_button.geometry().bottom() < status.top()
    assert panel.save_button.geometry().bottom() < status.top()
    # The status shows its whole text at the width it has.
    assert status.height() >= panel.policy_status.heightForWidth(status.width())


def test_a_preview_that_folds_nothing_but_tidies_the_context_says_so(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    # The walk: the sample session (12 messages, a completed task) previewed with
    # Ctrl+Shift+K read "Folds 0 messages into the summary and keeps 0 messages",
    # "Folded: ." and "Kept: none.", over an empty summary box.
    sample = workspace.ensure_sample_session()
    assert sample is not None
    window = open_window(workspace)
    window.open_session(sample.id)
    settle(window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    panel = window.compaction_panel
    with qtbot.waitSignal(panel.preview_shown, timeout=TIMEOUT):
        qtbot.keyClick(window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier
                       | Qt.KeyboardModifier.ShiftModifier)
    plan = panel.plan
    assert plan is not None and plan.changed and plan.folded_ids == []
    said = panel.result_label.text()
    assert said.startswith("Nothing folds: the session has ")
    assert "Folds 0" not in said and "keeps 0" not in said
    assert "Applying only tidies the session's context" in said
    assert panel.ranges_label.text() == "" and panel.kept_label.text() == ""
    assert "completed task" in panel.context_label.text()
    assert not panel.summary_edit.isVisible()
    assert not panel.show_button.isEnabled()
    # Apply does what it says: the context is tidied, every message stays active.
    active = [m.id for m in workspace.repo.list_messages(sample.id) if m.state == "active"]
    qtbot.mouseClick(panel.apply_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(_applied(workspace, sample.id)) == 1, timeout=TIMEOUT)
    assert [m.id for m in workspace.repo.list_messages(sample.id)
            if m.state == "active"] == active


def test_ctrl_shift_k_in_a_low_window_shows_the_result_and_apply(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk at 1024x700: Ctrl+Shift+K planned the compaction below the policy,
    # out of sight, with the keyboard on the policy's first check box.
    from tests.gui.journey import click_into, focus, named, press

    info = _long_session(workspace, make_session, 40)
    window = open_window(workspace, size=(1024, 700))
    panel = _open(window, qtbot, info.id)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    click_into(qtbot, named(window, "Prompt"))
    with qtbot.waitSignal(panel.preview_shown, timeout=TIMEOUT):
        press(qtbot, Qt.Key.Key_K,
              Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    QApplication.processEvents()
    viewport = panel.scroll.viewport()

    def shown(widget: QWidget) -> bool:
        top = widget.mapTo(viewport, widget.rect().topLeft()).y()
        return 0 <= top and top + widget.height() <= viewport.height()

    assert shown(panel.result_label)
    assert focus() is panel.preview_button
    # Tab goes on through the result to Apply, each scrolled into sight.
    for _ in range(12):
        press(qtbot, Qt.Key.Key_Tab)
        if focus() is panel.apply_button:
            break
    assert focus() is panel.apply_button and shown(panel.apply_button)


def test_an_undone_compaction_stays_readable_after_a_switch_to_the_dark_theme(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: after View → Theme → Dark the undone row of Past compactions kept the
    # light theme's grey: near-black on the dark table.
    from PySide6.QtGui import QPalette

    info = _long_session(workspace, make_session, 40)
    compaction.apply(workspace, compaction.preview(workspace, info.id, keep=10))
    record = compaction.undo(workspace, info.id)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    table = panel.history_table
    qtbot.waitUntil(lambda: table.rowCount() == 1 and table.item(0, 6) is not None
                    and table.item(0, 6).text() == "undone", timeout=TIMEOUT)
    assert table.item(0, 0).text() == str(record.id)
    try:
        window.theme_actions["dark"].trigger()
        QApplication.processEvents()
        base = table.palette().color(QPalette.ColorRole.Base)
        for column in range(table.columnCount()):
            shown = table.item(0, column).foreground().color()
            assert abs(shown.lightness() - base.lightness()) >= 80, (
                column, shown.name(), base.name())
    finally:
        window.theme_actions["light"].trigger()


def test_the_note_under_the_summary_shows_only_once_the_summary_is_edited(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    from tests.gui.journey import click_into, type_text

    info = _long_session(workspace, make_session, 40)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    _preview(qtbot, panel, keep=10)
    assert panel.summary_edit.isVisible()
    assert not panel.summary_note.isVisible()  # empty: no gap under the summary
    click_into(qtbot, panel.summary_edit)
    type_text(qtbot, " Also: oak.")
    assert panel.summary_note.isVisible()
    assert panel.summary_note.text().startswith("Edited:")


def test_apply_by_keyboard_leaves_the_keys_on_the_panels_preview_button(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: Ctrl+Shift+K, Tab to Apply, Space: Apply went grey and the keys fell onto
    # the panel's scroll area, where nothing answers them.
    from tests.gui.journey import focus, press

    info = _long_session(workspace, make_session)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    with qtbot.waitSignal(panel.preview_shown, timeout=TIMEOUT):
        press(qtbot, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier
              | Qt.KeyboardModifier.ShiftModifier)
    for _ in range(5):
        if focus() is panel.apply_button:
            break
        press(qtbot, Qt.Key.Key_Tab)
    assert focus() is panel.apply_button
    press(qtbot, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: len(_applied(workspace, info.id)) == 1 and window.ctx.workers.idle,
                    timeout=TIMEOUT)
    assert focus() is panel.preview_button and panel.preview_button.isEnabled()
    press(qtbot, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: _applied(workspace, info.id) == [], timeout=TIMEOUT)


def test_a_keep_count_inside_a_turn_shows_the_question_that_stays(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    """Keeping 19 of 60 would start the kept history with a reply: its question stays
    too, and the panel says why it is kept."""
    info = _long_session(workspace, make_session)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    _preview(qtbot, panel, keep=19)
    ids = [m.id for m in workspace.repo.list_messages(info.id)]
    assert panel.plan is not None and panel.plan.folded_ids == ids[:40]
    assert _tinted_ids(window.timeline.model) == ids[:40]
    assert "keeps 20 messages" in panel.result_label.text()
    assert panel.kept_label.text() == "Kept: 19 recent, 1 question of a kept reply."


def test_the_kept_words_name_a_turn_kept_for_its_reply() -> None:
    assert kept_words(REASON_RECENT, 1_200) == "1,200 recent"
    assert kept_words(REASON_TURN, 1) == "1 question of a kept reply"
    assert kept_words(REASON_TURN, 4) == (
        "4 of a kept reply's turn (its question and what followed it)")


def test_nothing_to_fold_counts_the_messages_as_the_window_does_or_says_why_not(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: the sample session (a system message and 8 others) said "the session has
    # 8 active messages" under a status bar saying "9 messages".
    info = make_session(workspace, "Trip", [("system", "Be brief.")] + [
        (("user", "assistant")[i % 2], f"Message {i}") for i in range(8)])
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    qtbot.waitUntil(lambda: any(label.text().startswith("9 messages")
                                for label in window.statusBar().findChildren(QLabel)))
    _preview(qtbot, panel)
    text = panel.result_label.text()
    assert "8 active messages (system messages aside), no more than the 30 to keep." in text


def test_the_panel_names_the_session_as_it_is_renamed_here_or_elsewhere(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    from tests.gui.journey import focus, named, press, type_text

    info = _long_session(workspace, make_session, 10)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    title = named(window, "Session being compacted")
    assert title.full_text() == "Kitchen"
    # F2 in the session list, a new title, Enter.
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    qtbot.keyClick(window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    press(qtbot, Qt.Key.Key_Down)
    press(qtbot, Qt.Key.Key_F2)
    assert focus().accessibleName() == "Session title"
    press(qtbot, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    type_text(qtbot, "Kitchen, renamed")
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: workspace.repo.get_session(info.id).title == "Kitchen, renamed",
                    timeout=TIMEOUT)
    qtbot.waitUntil(lambda: title.full_text() == "Kitchen, renamed", timeout=TIMEOUT)
    # Renamed by another window: what the database watcher says then.
    workspace.repo.rename_session(info.id, "Kitchen, from elsewhere")
    window.ctx.sessions_changed.emit()
    window.ctx.session_reloaded.emit(info.id)
    qtbot.waitUntil(lambda: title.full_text() == "Kitchen, from elsewhere", timeout=TIMEOUT)
    assert panel.session_id == info.id


def test_a_keep_count_typed_then_enter_previews_it(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    from tests.gui.journey import focus, named, press, type_text

    info = _long_session(workspace, make_session, 12)
    window = open_window(workspace)
    panel = _open(window, qtbot, info.id)
    field = named(window, "Newest messages to keep")
    field.setFocus()
    qtbot.waitUntil(lambda: focus() is field or field.isAncestorOf(focus()))
    press(qtbot, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    type_text(qtbot, "4")
    with qtbot.waitSignal(panel.preview_shown, timeout=TIMEOUT) as shown:
        press(qtbot, Qt.Key.Key_Return)
    plan = shown.args[0]
    assert len(plan.folded_ids) == 8
    assert compaction.history(workspace, info.id) == []  # a preview changes nothing
