"""Journeys where a person used to lose work without being asked (the new-user walk's
"lost work" findings), each driven as a person drives it: keys into the focus, clicks on
named controls, then what the database and the widgets show."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

from workbench.core.conversation import SessionInfo
from workbench.core.provider import ProviderConfig
from workbench.engine import compaction
from workbench.engine.chat import context_gauge
from workbench.engine.providers import ProviderSettings
from workbench.engine.session_context import read_session_context, update_context
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import KeyRole
from workbench.gui.panels.composer import ComposerPanel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from protocol_server import Fault, ProtocolServer, free_port  # noqa: E402

from tests.gui.journey import (  # noqa: E402
    click,
    click_into,
    focus,
    named,
    press,
    replace_text,
    type_text,
    with_modal_dialog,
)

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
REPLY = "Hello from the protocol server."


def _answer(qtbot: QtBot, text: str, asked: str) -> Callable[[QWidget], None]:
    """Click the button ``text`` of the question box, after checking it asks ``asked``."""
    def act(box: QWidget) -> None:
        assert asked in box.findChild(QLabel, "qt_msgbox_label").text()
        button = next(b for b in box.findChildren(QAbstractButton)
                      if b.text().replace("&", "") == text)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return act


def _text(edit: QWidget) -> str:
    return edit.toPlainText() if isinstance(edit, QPlainTextEdit) else edit.text()


def test_add_in_the_settings_dialogs_asks_before_dropping_typed_edits(
    qtbot: QtBot, workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(workspace)
    for open_it, field, typed, add in (
            (window.show_providers, "Provider name", "My server", "Add a provider"),
            (window.show_agents, "Instructions", "Always answer in French.", "Add an agent")):
        dialog = open_it()
        qtbot.waitUntil(lambda d=dialog: QApplication.activeWindow() is d)
        edit = named(dialog, field)
        target = edit.viewport() if isinstance(edit, QPlainTextEdit) else edit
        qtbot.mouseClick(target, Qt.MouseButton.LeftButton)
        type_text(qtbot, typed)
        # Add asks; Cancel goes back to the form with the text still there.
        with_modal_dialog(qtbot, lambda d=dialog, a=add: click(qtbot, d, a),
                          _answer(qtbot, "Cancel", "Discard the unsaved changes"))
        assert dialog.isVisible()
        assert typed in _text(edit)
        # Add again and Discard: a blank form, nothing stored.
        dialog.activateWindow()
        qtbot.waitUntil(lambda d=dialog: QApplication.activeWindow() is d)
        with_modal_dialog(qtbot, lambda d=dialog, a=add: click(qtbot, d, a),
                          _answer(qtbot, "Discard", "Discard the unsaved changes"))
        assert typed not in _text(edit)
        assert _text(named(dialog, "Provider name" if "provider" in add else "Agent name")
                     ) == ""
        # Unedited, Add asks nothing (a question would leave the dialog open here).
        click(qtbot, dialog, add)
        assert QApplication.activeModalWidget() in (None, dialog)
        dialog.close_without_asking()
    assert ProviderSettings(workspace.db).list() == []
    assert not workspace.repo.default_agent().instructions


def _hold_the_writer(window: MainWindow) -> threading.Event:
    """Keep the database writer busy until the returned event is set, so what is
    submitted meanwhile waits behind it (as when the person types faster than it runs)."""
    release = threading.Event()
    window.ctx.workers.write(lambda: release.wait(10), name="hold the writer")
    return release


def test_two_facts_and_two_tasks_added_quickly_are_both_stored(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Trip", [("user", "Plan a trip."), ("assistant", "Where?")])
    update_context(workspace, info.id, facts=["Old fact"])
    window = open_window(workspace)
    panel = window.context_panel
    window.context_dock.show()
    window.context_dock.raise_()
    window.open_session(info.id)
    qtbot.waitUntil(lambda: panel.overview is not None
                    and panel.overview.session_id == info.id, timeout=10_000)

    def stored() -> tuple[list[str], list[str]]:
        context = read_session_context(workspace, info.id).context
        return context.facts, [t.description for t in context.tasks]

    for field in ("New fact", "New task"):
        release = _hold_the_writer(window)
        click_into(qtbot, named(window, field))
        for text in ("A", "B"):
            type_text(qtbot, f"{field[4:]} {text}")
            press(qtbot, Qt.Key.Key_Return)
        release.set()
    qtbot.waitUntil(lambda: stored() == (["Old fact", "fact A", "fact B"],
                                         ["task A", "task B"]), timeout=10_000)
    qtbot.waitUntil(lambda: panel.facts() == ["Old fact", "fact A", "fact B"], timeout=10_000)
    qtbot.waitUntil(lambda: [panel.tasks_table.item(r, 0).text()
                             for r in range(panel.tasks_table.rowCount())
                             ] == ["task A", "task B"], timeout=10_000)
    # Undo takes out the last add only, then the one before.
    for expected in ((["Old fact", "fact A", "fact B"], ["task A"]),
                     (["Old fact", "fact A", "fact B"], []),
                     (["Old fact", "fact A"], []),
                     (["Old fact"], [])):
        window.ctx.undo_stack.undo()
        qtbot.waitUntil(lambda e=expected: stored() == e, timeout=10_000)
    window.ctx.undo_stack.redo()
    qtbot.waitUntil(lambda: stored() == (["Old fact", "fact A"], []), timeout=10_000)

    # A delete clicked before the add typed just before it has landed keeps the add.
    qtbot.waitUntil(lambda: panel.facts() == ["Old fact", "fact A"], timeout=10_000)
    settle(window)
    release = _hold_the_writer(window)
    click_into(qtbot, named(window, "New fact"))
    type_text(qtbot, "fact C")
    press(qtbot, Qt.Key.Key_Return)
    facts_list = named(window, "Facts", QListWidget)
    rect = facts_list.visualItemRect(facts_list.item(0))
    qtbot.mouseClick(facts_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    click(qtbot, window, "Delete facts")
    release.set()
    qtbot.waitUntil(lambda: stored() == (["fact A", "fact C"], []), timeout=10_000)
    window.ctx.undo_stack.undo()  # the delete
    qtbot.waitUntil(lambda: stored() == (["Old fact", "fact A", "fact C"], []),
                    timeout=10_000)


# -- regenerate: the earlier reply stays until a new one has arrived ------------------------

CHAT = [("user", "Earlier question"), ("assistant", "Earlier answer"),
        ("user", "Tell me something"), ("assistant", "The complete old reply.")]


def settle(window: MainWindow) -> None:
    """Let every worker job deliver its result and the queued events run."""
    QApplication.processEvents()
    assert window.ctx.workers.wait_idle(10), "workers did not finish"
    QApplication.processEvents()


EARLIER = [("user", "Earlier"), ("assistant", "Reply")]


def _chat_window(
    workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], messages: list[tuple[str, str]], *, name: str,
    base_url: str, model: str,
) -> tuple[MainWindow, ComposerPanel, SessionInfo]:
    """A window open on a new "Chat" session of ``messages``, talking to one provider."""
    ProviderSettings(workspace.db).add(ProviderConfig(
        name=name, kind="openai", base_url=base_url, model=model))
    info = make_session(workspace, "Chat", messages)
    window = open_window(workspace)
    window.open_session(info.id)
    settle(window)
    composer = window.composer
    assert composer is not None
    return window, composer, info


def _stored(ws: Workspace, session_id: int) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in ws.repo.list_messages(session_id)]


def _shown(window: MainWindow) -> list[str]:
    model = window.timeline.model
    return [model.message_at(p).content for p in range(model.message_count)]


def _last_key(window: MainWindow) -> object:
    """What the delegate caches the last row's rendering under (it must change with the
    message, or the old text would be painted for the new one)."""
    model = window.timeline.model
    return model.index(model.rowCount() - 1, 0).data(KeyRole)


def _regenerate_keys(qtbot: QtBot, window: MainWindow) -> None:
    click_into(qtbot, named(window, "Prompt"))
    press(qtbot, Qt.Key.Key_R, CTRL | SHIFT)


def test_regenerate_with_a_failing_provider_keeps_the_last_exchange(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    window, composer, info = _chat_window(
        workspace, make_session, open_window, CHAT, name="Dead local",
        base_url=f"http://127.0.0.1:{free_port()}/v1", model="some-model")
    assert composer.provider() == "Dead local"
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "my draft")
    undo_count = window.ctx.undo_stack.count()
    with qtbot.waitSignal(composer.turn_failed, timeout=30_000) as failed:
        _regenerate_keys(qtbot, window)
        # While it is asked, the old reply is still on screen (and stored).
        assert _shown(window) == [c for _, c in CHAT]
    settle(window)
    text = failed.args[0]
    assert "could not be reached" in text and "earlier reply was kept" in text
    assert named(window, "Chat error").text() == text
    assert _stored(workspace, info.id) == CHAT
    assert _shown(window) == [c for _, c in CHAT] and window.timeline.model.pending == []
    assert window.ctx.undo_stack.count() == undo_count  # nothing happened to undo
    assert "Deleted" not in window.statusBar().currentMessage()
    assert composer.prompt.toPlainText() == "my draft"


def test_regenerate_replaces_the_reply_only_when_the_new_one_is_whole_and_undo_swaps_back(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    window, composer, info = _chat_window(
        workspace, make_session, open_window, CHAT, name="local",
        base_url=server.url, model=server.model)

    # Stopped half way: the earlier reply is kept as it was.
    server.script(Fault("stall", after=2))
    pieces: list[str] = []
    composer.reply_grew.connect(pieces.append)
    _regenerate_keys(qtbot, window)
    qtbot.waitUntil(lambda: len(pieces) >= 2, timeout=10_000)
    assert server.stalling.wait(5)
    assert _stored(workspace, info.id) == CHAT
    with qtbot.waitSignal(composer.turn_failed, timeout=10_000) as failed:
        press(qtbot, Qt.Key.Key_Escape)
    assert "earlier reply was kept" in failed.args[0]
    settle(window)
    assert _stored(workspace, info.id) == CHAT
    assert _shown(window) == [c for _, c in CHAT] and window.timeline.model.pending == []

    # Whole: the new reply takes the old one's place; the request did not carry it.
    old_key = _last_key(window)
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        _regenerate_keys(qtbot, window)
    settle(window)
    new = [*CHAT[:3], ("assistant", REPLY)]
    assert _stored(workspace, info.id) == new
    assert _shown(window) == [c for _, c in new]
    sent = server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent] == [c for _, c in CHAT[:3]]
    assert "Ctrl+Z" in window.statusBar().currentMessage()
    new_key = _last_key(window)
    assert new_key != old_key

    # Ctrl+Z brings the earlier reply back, redo the new one. The gauge measures the
    # request again, and the line about Ctrl+Z goes.
    press(qtbot, Qt.Key.Key_0, CTRL)  # Go to Timeline (the prompt has its own Ctrl+Z)
    assert focus() is window.timeline.view
    before = context_gauge(workspace, info.id, provider="local", prompt="")
    qtbot.waitUntil(lambda: f"next request: {before.request_tokens:,} / "
                    in composer.gauge.format(), timeout=15_000)
    press(qtbot, Qt.Key.Key_Z, CTRL)
    settle(window)
    assert _stored(workspace, info.id) == CHAT
    fresh = context_gauge(workspace, info.id, provider="local", prompt="")
    assert fresh.request_tokens != before.request_tokens
    qtbot.waitUntil(lambda: f"next request: {fresh.request_tokens:,} / "
                    in composer.gauge.format(), timeout=15_000)
    assert "Ctrl+Z" not in window.statusBar().currentMessage()
    assert _shown(window) == [c for _, c in CHAT]
    assert _last_key(window) not in (old_key, new_key)
    window.ctx.undo_stack.redo()
    settle(window)
    assert _stored(workspace, info.id) == new
    assert _shown(window) == [c for _, c in new]
    assert _last_key(window) not in (old_key, new_key)
    window.ctx.undo_stack.undo()
    settle(window)
    assert _stored(workspace, info.id) == CHAT


# -- an in-place edit is saved before the session, the database or the window goes ---------


def _edit_in_place(qtbot: QtBot, window: MainWindow, typed: str) -> None:
    """Select the session's first message, F2, type ``typed`` at the end (unsaved)."""
    _activate(qtbot, window)
    view = window.timeline.view
    view.setFocus()
    view.setCurrentIndex(window.timeline.model.index(0, 0))
    press(qtbot, Qt.Key.Key_F2)
    assert focus().accessibleName() == "Message text"
    press(qtbot, Qt.Key.Key_End, CTRL)
    type_text(qtbot, typed)
    assert view.editing


def _activate(qtbot: QtBot, window: MainWindow) -> None:
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)


def test_switching_sessions_with_the_keyboard_saves_an_open_in_place_edit(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    older = make_session(workspace, "Older chat", [("user", "three"), ("assistant", "four")])
    edited = make_session(workspace, "Edited chat", [("user", "one"), ("assistant", "two")])
    make_session(workspace, "Newest chat", [("user", "five")])
    window = open_window(workspace)
    window.open_session(edited.id)
    settle(window)
    _edit_in_place(qtbot, window, " (edited)")
    # Ctrl+L, Down (into the list, on the open session), Down (the older one), Enter.
    qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
    press(qtbot, Qt.Key.Key_Down)
    press(qtbot, Qt.Key.Key_Down)
    press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.ctx.current_session_id == older.id)
    settle(window)
    assert [m.content for m in workspace.repo.list_messages(edited.id)] == [
        "one (edited)", "two"]
    assert [m.content for m in workspace.repo.list_messages(older.id)] == ["three", "four"]
    assert not window.timeline.view.editing
    assert focus() is window.browser.view  # the keys stay where the person is
    # Undo takes the saved edit back, as for any other edit.
    window.ctx.undo_stack.undo()
    settle(window)
    assert [m.content for m in workspace.repo.list_messages(edited.id)] == ["one", "two"]


def test_opening_another_database_or_closing_saves_an_open_in_place_edit(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    info = make_session(workspace, "Chat", [("user", "one"), ("assistant", "two")])
    path = workspace.db_path

    def first_message() -> str:
        reopened = Workspace.open(path)
        try:
            return reopened.repo.list_messages(info.id)[0].content
        finally:
            reopened.close()

    window = open_window(workspace)
    window.open_session(info.id)
    settle(window)
    _edit_in_place(qtbot, window, " before the switch")
    window.open_database(tmp_path / "other.db")  # on a worker: the window switches after
    qtbot.waitUntil(lambda: "other.db" in window.database_label.text(), timeout=10_000)
    settle(window)
    assert first_message() == "one before the switch"
    assert not window.timeline.view.editing

    window.open_database(path)
    qtbot.waitUntil(lambda: window.ctx.workspace.db_path == path, timeout=10_000)
    settle(window)
    window.open_session(info.id)
    settle(window)
    _edit_in_place(qtbot, window, ", then closed")
    press(qtbot, Qt.Key.Key_Q, CTRL)
    assert not window.isVisible()
    assert first_message() == "one before the switch, then closed"


# -- quitting while a reply streams in asks, and keeps what arrived -------------------------



def _sent_until_stalled(qtbot: QtBot, window: MainWindow, server: ProtocolServer,
                        prompt: str, *, after: int) -> list[str]:
    """Type ``prompt`` into the prompt box and send it (Ctrl+Enter) to a server that
    stalls after ``after`` pieces of the reply; returns the pieces shown so far (the
    list grows if the reply goes on)."""
    composer = window.composer
    assert composer is not None
    server.script(Fault("stall", after=after))
    pieces: list[str] = []
    composer.reply_grew.connect(pieces.append)
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, prompt)
    press(qtbot, Qt.Key.Key_Return, CTRL)
    qtbot.waitUntil(lambda: len(pieces) == after, timeout=10_000)
    assert server.stalling.wait(5)
    return pieces

def _answer_quit(qtbot: QtBot, text: str, note: str) -> Callable[[QWidget], None]:
    def act(box: QWidget) -> None:
        assert "A reply is still arriving" in box.findChild(QLabel, "qt_msgbox_label").text()
        assert note in box.findChild(QLabel, "qt_msgbox_informativelabel").text()
        button = next(b for b in box.findChildren(QAbstractButton)
                      if b.text().replace("&", "") == text)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return act


def test_quitting_while_a_reply_arrives_asks_and_keeps_what_arrived(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    window, composer, info = _chat_window(
        workspace, make_session, open_window, EARLIER, name="local",
        base_url=server.url, model=server.model)
    pieces = _sent_until_stalled(qtbot, window, server, "Tell me a long story.", after=3)

    # Cancel: the window stays and the reply keeps arriving.
    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Q, CTRL),
                      _answer_quit(qtbot, "Cancel", "marked as stopped"))
    assert window.isVisible() and composer.streaming
    # Stop and Quit: everything that had arrived is stored, marked stopped.
    _activate(qtbot, window)
    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Q, CTRL),
                      _answer_quit(qtbot, "Stop and Quit", "marked as stopped"))
    assert not window.isVisible()
    messages = workspace.repo.list_messages(info.id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Earlier"), ("assistant", "Reply"),
        ("user", "Tell me a long story."), ("assistant", pieces[-1])]
    assert messages[-1].metadata.get("stopped") is True
    assert len(pieces[-1]) > len(pieces[0])


def test_a_reply_that_ends_while_the_quit_question_is_open_changes_the_question(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    window, composer, info = _chat_window(
        workspace, make_session, open_window, EARLIER, name="local",
        base_url=server.url, model=server.model)
    server.script(Fault("pause", after=2))
    pieces: list[str] = []
    composer.reply_grew.connect(pieces.append)
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Tell me a long story.")
    press(qtbot, Qt.Key.Key_Return, CTRL)
    qtbot.waitUntil(lambda: len(pieces) == 2, timeout=10_000)
    assert server.stalling.wait(5)

    def reply_ends_then_quit(box: QWidget) -> None:
        label = box.findChild(QLabel, "qt_msgbox_label")
        assert "A reply is still arriving" in label.text()
        server.release.set()  # the rest of the reply arrives while the box is open
        qtbot.waitUntil(lambda: not composer.streaming, timeout=10_000)
        assert "The reply has arrived" in label.text()
        texts = [b.text().replace("&", "") for b in box.findChildren(QAbstractButton)]
        assert "Stop and Quit" not in texts and "Quit" in texts
        button = next(b for b in box.findChildren(QAbstractButton)
                      if b.text().replace("&", "") == "Quit")
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)

    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Q, CTRL), reply_ends_then_quit)
    assert not window.isVisible()
    messages = workspace.repo.list_messages(info.id)
    assert [(m.role, m.content) for m in messages][2:] == [
        ("user", "Tell me a long story."), ("assistant", REPLY)]
    assert not messages[-1].metadata.get("stopped")


def test_quitting_while_a_reply_is_regenerated_keeps_the_earlier_one(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    window, composer, info = _chat_window(
        workspace, make_session, open_window, CHAT, name="local",
        base_url=server.url, model=server.model)
    server.script(Fault("stall", after=2))
    pieces: list[str] = []
    composer.reply_grew.connect(pieces.append)
    _regenerate_keys(qtbot, window)
    qtbot.waitUntil(lambda: len(pieces) == 2, timeout=10_000)
    assert window.timeline.model.pending[-1].metadata["note"].startswith("new reply")
    with_modal_dialog(qtbot, lambda: press(qtbot, Qt.Key.Key_Q, CTRL),
                      _answer_quit(qtbot, "Stop and Quit", "keeps the earlier reply"))
    assert not window.isVisible()
    assert _stored(workspace, info.id) == CHAT


def test_opening_another_database_while_a_reply_arrives_asks_and_says_what_was_kept(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer, tmp_path: Path,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    window, composer, info = _chat_window(
        workspace, make_session, open_window, EARLIER, name="local",
        base_url=server.url, model=server.model)
    pieces = _sent_until_stalled(qtbot, window, server, "Tell me a long story.", after=3)
    other = tmp_path / "other.db"

    # File → Open Database with the file chosen: Cancel keeps the database and the reply.
    with_modal_dialog(qtbot, lambda: window.open_database(other),
                      _answer_quit(qtbot, "Cancel", "marked as stopped"))
    assert composer.streaming and window.ctx.workspace.db_path == workspace.db_path
    # Stop and Open: what had arrived is stored in the first database, and the status
    # bar says so after the switch.
    _activate(qtbot, window)
    with_modal_dialog(qtbot, lambda: window.open_database(other),
                      _answer_quit(qtbot, "Stop and Open", "marked as stopped"))
    qtbot.waitUntil(lambda: window.ctx.workspace.db_path == other, timeout=10_000)
    settle(window)
    status = window.statusBar().currentMessage()
    assert "Opened" in status and "partial reply were kept" in status
    messages = workspace.repo.list_messages(info.id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Earlier"), ("assistant", "Reply"),
        ("user", "Tell me a long story."), ("assistant", pieces[-1])]
    assert messages[-1].metadata.get("stopped") is True


# -- the prompt of a turn leaves the box once stored, and only it ----------------------------


def test_what_is_typed_while_a_reply_arrives_stays_in_the_box(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    window, composer, info = _chat_window(
        workspace, make_session, open_window, EARLIER, name="local",
        base_url=server.url, model=server.model)
    pieces = _sent_until_stalled(qtbot, window, server, "First question?", after=2)
    # The next question, typed while the reply arrives; then Esc keeps the reply so far.
    type_text(qtbot, " And a follow-up")
    with qtbot.waitSignal(composer.turn_finished, timeout=10_000):
        press(qtbot, Qt.Key.Key_Escape)
    settle(window)
    assert _stored(workspace, info.id)[2:] == [("user", "First question?"),
                                               ("assistant", pieces[-1])]
    assert named(window, "Prompt").toPlainText() == "And a follow-up"


def test_switching_sessions_while_a_reply_arrives_keeps_each_sessions_draft(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    other = make_session(workspace, "Other chat", [("user", "Hi")])
    window, composer, info = _chat_window(
        workspace, make_session, open_window, EARLIER, name="local",
        base_url=server.url, model=server.model)
    prompt = named(window, "Prompt")
    # The other session holds a half-written draft.
    window.open_session(other.id)
    settle(window)
    click_into(qtbot, prompt)
    type_text(qtbot, "half a thought")
    window.open_session(info.id)
    settle(window)
    assert prompt.toPlainText() == ""

    pieces = _sent_until_stalled(qtbot, window, server, "Tell me a long story.", after=2)
    # Ctrl+L, Down (into the list, on the open session), Down (the other one): the reply
    # stops, kept as it was.
    with qtbot.waitSignal(composer.turn_finished, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_L, CTRL)
        press(qtbot, Qt.Key.Key_Down)
        press(qtbot, Qt.Key.Key_Down)
        qtbot.waitUntil(lambda: window.ctx.current_session_id == other.id)
    settle(window)
    messages = workspace.repo.list_messages(info.id)
    assert [(m.role, m.content) for m in messages][2:] == [
        ("user", "Tell me a long story."), ("assistant", pieces[-1])]
    assert messages[-1].metadata.get("stopped") is True
    # The other session's draft is still there.
    assert prompt.toPlainText() == "half a thought"
    # Back in the chat, the prompt that was stored is not offered again as a draft.
    press(qtbot, Qt.Key.Key_Up)
    qtbot.waitUntil(lambda: window.ctx.current_session_id == info.id)
    settle(window)
    assert prompt.toPlainText() == ""
    press(qtbot, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: window.ctx.current_session_id == other.id)
    assert prompt.toPlainText() == "half a thought"


# -- a compaction that would make the request bigger is not applied -------------------------


def test_a_compaction_that_saves_nothing_cannot_be_applied_and_is_never_negative(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Short", [("user", "Hi"), ("assistant", "Hello!"),
                                             ("user", "Ok"), ("assistant", "Fine."),
                                             ("user", "Bye")])
    window = open_window(workspace)
    panel = window.compaction_panel
    window.compaction_dock.show()
    window.compaction_dock.raise_()
    with qtbot.waitSignal(panel.policy_loaded, timeout=10_000):
        window.open_session(info.id)
    settle(window)
    # Keep 3: the oldest turn folds (keeping 4 would keep "Hi" as the question of
    # "Hello!", and nothing would fold).
    replace_text(qtbot, window, "Newest messages to keep", "3")
    with qtbot.waitSignal(panel.preview_shown, timeout=10_000) as shown:
        click(qtbot, window, "Preview the compaction")
    plan = shown.args[0]
    assert plan.folded_ids and plan.tokens_after >= plan.tokens_before  # it would grow
    result = named(window, "Preview result", QLabel).text()
    assert "Saves nothing" in result and "Apply is off" in result
    assert f"{plan.tokens_before} before, {plan.tokens_after} after" in result
    assert not named(window, "Apply the compaction").isEnabled()
    assert compaction.history(workspace, info.id) == []

    # Applied anyway outside the panel (the engine's API allows it): the marker and the
    # history say it saved nothing, never a negative number.
    compaction.apply(workspace, plan)
    window.open_session(0)
    with qtbot.waitSignal(panel.history_loaded, timeout=10_000):
        window.open_session(info.id)
    settle(window)
    model = window.timeline.model
    label = model.index(0, 0).data(Qt.ItemDataRole.DisplayRole)
    assert "no tokens saved" in label and "-" not in label.split("·")[2]
    assert panel.history_rows()[0]["Saved"] == "none"
