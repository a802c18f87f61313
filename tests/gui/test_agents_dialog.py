"""Settings → Agents: instructions, provider and model, memory policy and built-in tools,
edited in the dialog and read back through the engine."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QComboBox, QMessageBox
from pytestqt.qtbot import QtBot

import workbench.gui.dialogs.settings_form as settings_form
from tests.gui.journey import click, focus, named, replace_text
from workbench.core.conversation import Agent
from workbench.core.policy import MemoryPolicy
from workbench.core.provider import ProviderConfig
from workbench.engine.builtin_tools import tools_for_agent
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.gui.dialogs.agents import AgentsDialog
from workbench.gui.main_window import MainWindow


def _add_providers(ws: Workspace) -> None:
    settings = ProviderSettings(ws.db)
    settings.add(ProviderConfig(name="local", kind="openai", base_url="http://127.0.0.1:9/v1",
                                model="local-model"))
    settings.add(ProviderConfig(name="claude", kind="anthropic",
                                base_url="https://api.anthropic.com", model="claude-sonnet-4"))


def _open(window: MainWindow, qtbot: QtBot) -> AgentsDialog:
    window.agents_action.trigger()
    dialog = window._agents_dialog
    assert isinstance(dialog, AgentsDialog)
    qtbot.waitExposed(dialog)
    window.ctx.workers.wait_idle()
    return dialog


def _save(qtbot: QtBot, dialog: AgentsDialog) -> Agent:
    with qtbot.waitSignal(dialog.agent_saved, timeout=10_000) as saved:
        dialog.save_button.click()
    return saved.args[0]


def test_editing_an_agent_persists_every_field(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    _add_providers(workspace)
    default = workspace.repo.default_agent()
    # A compaction section the form does not show must survive the save.
    workspace.repo.update_agent(default.id, memory_policy={"compaction": {"keep": 12}},
                                tools=["my_own_tool"])
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    assert dialog.names() == [default.name]
    assert [dialog.provider_box.itemText(i) for i in range(dialog.provider_box.count())] == [
        "(none: the one chosen in the composer)", "claude", "local"]

    dialog.instructions_edit.clear()
    qtbot.keyClicks(dialog.instructions_edit, "You are a travel agent. Answer in one line.")
    dialog.provider_box.setCurrentIndex(dialog.provider_box.findData("claude"))
    assert "claude-sonnet-4" in dialog.model_edit.placeholderText()
    qtbot.keyClicks(dialog.model_edit, "claude-opus-4")
    dialog.mode_box.setCurrentIndex(dialog.mode_box.findData("manual"))
    dialog.window_spin.setValue(40)
    dialog.capture_box.setCurrentIndex(dialog.capture_box.findData("conversation"))
    dialog.inject_box.setCurrentIndex(dialog.inject_box.findData("context"))
    dialog.max_entries_spin.setValue(8)
    dialog.scope_box.setCurrentIndex(dialog.scope_box.findData("session"))
    dialog.namespace_edit.clear()
    qtbot.keyClicks(dialog.namespace_edit, "travel")
    dialog.tool_boxes["current_time"].click()
    dialog.tool_boxes["remember_fact"].click()
    saved = _save(qtbot, dialog)
    window.ctx.workers.wait_idle()

    agent = workspace.repo.get_agent(default.id)
    assert agent == saved
    assert agent.instructions == "You are a travel agent. Answer in one line."
    assert (agent.provider, agent.model) == ("claude", "claude-opus-4")
    policy = MemoryPolicy.from_dict(agent.memory_policy)
    assert (policy.mode, policy.max_messages, policy.capture, policy.inject,
            policy.max_entries, policy.scope, policy.namespace) == (
        "manual", 40, "conversation", "context", 8, "session", "travel")
    assert agent.memory_policy["compaction"] == {"keep": 12}
    assert agent.tools == ["my_own_tool", "remember_fact", "current_time"]
    # The engine gives the agent exactly the built-in tools ticked.
    assert [t.name for t in tools_for_agent(agent, workspace.repo, session_id=1)] == [
        "remember_fact", "current_time"]
    assert "Saved agent" in dialog.status_label.text()

    # Reopening shows what was stored; unticking a tool and clearing the window persists.
    dialog.reject()
    dialog = _open(window, qtbot)
    assert dialog.instructions_edit.toPlainText() == agent.instructions
    assert dialog.provider_box.currentData() == "claude"
    assert dialog.window_spin.value() == 40 and dialog.namespace_edit.text() == "travel"
    assert [n for n, box in dialog.tool_boxes.items() if box.isChecked()] == [
        "remember_fact", "current_time"]
    dialog.tool_boxes["current_time"].click()
    dialog.window_spin.setValue(0)
    dialog.provider_box.setCurrentIndex(dialog.provider_box.findData(None))
    dialog.model_edit.clear()
    _save(qtbot, dialog)
    agent = workspace.repo.get_agent(default.id)
    assert agent.tools == ["my_own_tool", "remember_fact"]
    assert (agent.provider, agent.model) == (None, None)
    assert MemoryPolicy.from_dict(agent.memory_policy).max_messages is None


def test_a_new_agent_is_created_and_a_nameless_one_refused(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    _add_providers(workspace)
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    before = {a.name for a in workspace.repo.list_agents()}
    dialog.add_button.click()
    assert dialog.name_edit.text() == "" and not any(
        box.isChecked() for box in dialog.tool_boxes.values())
    dialog.save_button.click()
    assert dialog.status_label.text() == "An agent needs a name."

    qtbot.keyClicks(dialog.name_edit, "Researcher")
    qtbot.keyClicks(dialog.instructions_edit, "Cite your sources.")
    dialog.provider_box.setCurrentIndex(dialog.provider_box.findData("local"))
    dialog.tool_boxes["search_conversations"].click()
    created = _save(qtbot, dialog)
    assert {a.name for a in workspace.repo.list_agents()} == before | {"Researcher"}
    stored = workspace.repo.get_agent(created.id)
    assert (stored.instructions, stored.provider, stored.model, stored.tools) == (
        "Cite your sources.", "local", None, ["search_conversations"])
    assert MemoryPolicy.from_dict(stored.memory_policy) == MemoryPolicy()
    assert "Researcher" in dialog.names()
    assert dialog.list.currentItem().text() == "Researcher"

    # A second agent with a taken name is refused in words; nothing changes.
    dialog.add_button.click()
    qtbot.keyClicks(dialog.name_edit, "Researcher")
    dialog.save_button.click()
    qtbot.waitUntil(lambda: "already exists" in dialog.status_label.text(), timeout=10_000)
    assert [a.name for a in workspace.repo.list_agents()].count("Researcher") == 1


def test_removing_an_agent_takes_its_memories_and_refuses_one_with_sessions(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = workspace.repo
    default = repo.default_agent()
    spare = repo.create_agent("Spare")
    repo.add_memory_entry(spare.id, "The user prefers window seats.")
    busy = repo.create_agent("Busy")
    repo.create_session(title="Busy's session", agent_id=busy.id)
    answers = iter([QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes,
                    QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.Yes])
    monkeypatch.setattr(settings_form, "message_box", lambda *a, **k: next(answers))
    window = open_window(workspace)
    dialog = _open(window, qtbot)

    assert dialog.select("Spare")
    dialog.remove_button.click()  # answered No: nothing happens
    window.ctx.workers.wait_idle()
    assert "Spare" in dialog.names()
    dialog.remove_button.click()
    qtbot.waitUntil(lambda: "Spare" not in dialog.names(), timeout=5_000)
    assert "1 memory entries" in dialog.status_label.text()
    assert {a.name for a in repo.list_agents()} == {default.name, "Busy"}
    assert repo.list_memory_entries(agent_id=spare.id) == []

    for name, why in (("Busy", "still has 1 session"), (default.name, "default agent")):
        assert dialog.select(name)
        dialog.remove_button.click()
        qtbot.waitUntil(lambda why=why: why in dialog.status_label.text(), timeout=5_000)
        assert name in dialog.names()
    assert len(repo.list_agents()) == 2


def test_switching_agents_with_unsaved_edits_asks_first(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = workspace.repo
    default = repo.default_agent()
    repo.create_agent("Other", instructions="Other's instructions.")
    asked: list[str] = []
    answers = iter([QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Discard])

    def question(_parent: object, _title: str, text: str, *_a: object) -> object:
        asked.append(text)
        return next(answers)

    monkeypatch.setattr(settings_form, "message_box",
                        lambda parent, _icon, title, text, *a: question(parent, title, text))
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    assert dialog.select(default.name)
    assert dialog.select("Other") and asked == []  # nothing edited: no question
    qtbot.keyClicks(dialog.instructions_edit, " More.")
    dialog.select(default.name)  # Cancel: the edited form stays
    assert len(asked) == 1 and "'Other'" in asked[0]
    assert dialog.name_edit.text() == "Other"
    assert "More." in dialog.instructions_edit.toPlainText()
    assert dialog.list.currentItem().text() == "Other"
    dialog.select(default.name)  # Discard: the other agent is shown, nothing stored
    assert dialog.name_edit.text() == default.name
    assert {a.name: a.instructions for a in repo.list_agents()}["Other"] == (
        "Other's instructions.")


def test_an_agent_without_a_provider_names_the_one_its_sessions_use(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    # The walk: the Agents dialog said Provider "(none)" while the composer sent the
    # agent's sessions to the only provider configured.
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="local", kind="openai", base_url="http://127.0.0.1:9/v1", model="local-model"))
    window = open_window(workspace)
    assert window.composer is not None
    assert window.composer.provider_box.currentText() == "local"
    dialog = _open(window, qtbot)
    box = named(dialog, "Provider", QComboBox)
    assert box.currentText() == "(none: the only provider, local)"
    assert box.currentData() is None
    stored = _save(qtbot, dialog)
    assert stored.provider is None  # naming it is still the person's choice
    dialog.close_without_asking()


def test_saving_an_agent_stores_only_the_settings_the_form_changed(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    # The walk: Save on the default agent, after typing only its instructions, wrote
    # mode, window, capture and namespace into its policy, defaults nobody chose.
    default = workspace.repo.default_agent()
    before = dict(default.memory_policy)
    window = open_window(workspace)
    dialog = _open(window, qtbot)
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
    replace_text(qtbot, dialog, "Instructions", "Answer in one line.")
    with qtbot.waitSignal(dialog.agent_saved, timeout=10_000):
        click(qtbot, dialog, "Save the agent")
    agent = workspace.repo.get_agent(default.id)
    assert agent.instructions == "Answer in one line."
    assert agent.memory_policy == before

    # A setting changed with the keyboard is stored, and only it.
    capture = named(dialog, "Memory capture", QComboBox)
    capture.setFocus()
    wanted = capture.findData("conversation")
    while capture.currentIndex() != wanted:
        qtbot.keyClick(focus(), Qt.Key.Key_Down)
    with qtbot.waitSignal(dialog.agent_saved, timeout=10_000):
        click(qtbot, dialog, "Save the agent")
    agent = workspace.repo.get_agent(default.id)
    assert agent.memory_policy == {**before, "capture": "conversation"}
    assert MemoryPolicy.from_dict(agent.memory_policy).capture == "conversation"


def test_a_provider_given_to_the_agent_is_the_one_the_composer_sends_to(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., object],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: the Agents dialog saved Provider "local" for the open session's agent,
    # but the composer kept "claude" selected, so Send (and the Request panel) went on
    # using it where `workbench chat` now uses "local".
    _add_providers(workspace)
    info = make_session(workspace, "Trip", [("user", "Hi")])
    window = open_window(workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    selector = named(window, "Provider", QComboBox)
    assert selector.currentText() == "claude"  # several, none named: the first
    dialog = _open(window, qtbot)
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5_000)
    box = named(dialog, "Provider", QComboBox)
    box.setFocus()
    while box.currentData() != "local":
        qtbot.keyClick(focus(), Qt.Key.Key_Down)
    with qtbot.waitSignal(dialog.agent_saved, timeout=10_000):
        click(qtbot, dialog, "Save the agent")
    assert workspace.repo.get_agent(info.agent_id).provider == "local"
    qtbot.waitUntil(lambda: selector.currentText() == "local", timeout=5_000)
    assert named(window, "Model", QComboBox).currentText() == "local-model"

    # A pick in the composer stays when providers change for another reason.
    dialog.close_without_asking()
    selector.setCurrentIndex(selector.findData("claude"))
    window.ctx.providers_changed.emit()
    assert selector.currentText() == "claude"


def test_reopened_the_dialog_starts_on_the_list_not_where_it_was_closed(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    from tests.gui.journey import press

    window = open_window(workspace)
    for _ in range(2):
        press(qtbot, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier
              | Qt.KeyboardModifier.ShiftModifier)
        dialog = window._agents_dialog
        qtbot.waitUntil(lambda d=dialog: QApplication.activeWindow() is d)
        window.ctx.workers.wait_idle()
        assert focus().accessibleName() == "Agents"
        # Shift+Tab to Close, then Esc closes the dialog.
        press(qtbot, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
        assert focus().text().replace("&", "") == "Close"
        press(qtbot, Qt.Key.Key_Escape)
        assert not dialog.isVisible()
        window.activateWindow()  # the window manager's part once a dialog closes
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
