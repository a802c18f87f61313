"""The composer against the tests' protocol server on 127.0.0.1: stream, store, stop."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from workbench.core.conversation import SessionInfo
from workbench.core.provider import ProviderConfig
from workbench.engine.providers import ProviderSettings
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from protocol_server import Fault, ProtocolServer  # noqa: E402

from tests.gui.conftest import settle  # noqa: E402
from tests.gui.journey import (  # noqa: E402
    click,
    click_into,
    named,
    press,
    replace_text,
    type_text,
)

REPLY = "Hello from the protocol server."



@pytest.fixture
def chat_workspace(workspace: Workspace, server: ProtocolServer) -> Workspace:
    ProviderSettings(workspace.db).add(ProviderConfig(
        name="local", kind="openai", base_url=server.url, model=server.model))
    return workspace


def stored(ws: Workspace, session_id: int) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in ws.repo.list_messages(session_id)]


def test_new_session_then_prompt_streams_in_and_two_messages_are_stored(
    qtbot: QtBot, chat_workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(chat_workspace)
    composer = window.composer
    assert composer is not None and composer.provider() == "local"
    window.new_session_action.trigger()
    window.ctx.workers.wait_idle()
    session_id = window.ctx.current_session_id
    assert session_id and stored(chat_workspace, session_id) == []

    pieces: list[str] = []
    composer.reply_grew.connect(pieces.append)
    composer.prompt.setPlainText("Say hello, please.")
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000) as finished:
        qtbot.keyClick(composer.prompt, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        assert composer.streaming
        # The turn is on screen before anything is stored: prompt and growing reply.
        assert [m.role for m in window.timeline.model.pending] == ["user", "assistant"]
    response = finished.args[0]
    assert response.text == REPLY

    # The reply arrived piece by piece, each piece extending the last.
    assert len(pieces) > 2 and pieces[-1] == REPLY
    assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(pieces, pieces[1:],
                                                                  strict=False))
    window.ctx.workers.wait_idle()
    assert stored(chat_workspace, session_id) == [("user", "Say hello, please."),
                                                 ("assistant", REPLY)]
    model = window.timeline.model
    assert model.pending == []
    assert model.rowCount() == 2
    assert [model.message_at(p).content for p in range(2)] == ["Say hello, please.", REPLY]
    assert composer.prompt.toPlainText() == ""
    sent = server.chat_requests()[-1].body
    assert sent["messages"][-1] == {"role": "user", "content": "Say hello, please."}


def test_stop_keeps_the_prompt_and_the_partial_reply_marked_stopped(
    qtbot: QtBot, chat_workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    """The default, as in every chat app: type, Ctrl+Enter, Esc mid-reply; the prompt and
    what had arrived are stored, the reply marked stopped."""
    info = make_session(chat_workspace, "Chat", [("user", "Earlier"), ("assistant", "Reply")])
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None and composer.keep_stopped_action.isChecked()
    server.script(Fault("stall", after=2))
    pieces: list[str] = []
    composer.reply_grew.connect(pieces.append)
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Tell me a long story.")
    press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: pieces[-1:] == ["Hello from"], timeout=10_000)
    assert server.stalling.wait(5)
    with qtbot.waitSignal(composer.turn_finished, timeout=10_000) as finished:
        press(qtbot, Qt.Key.Key_Escape)
    assert finished.args[0].stopped
    assert server.hung_up.wait(5), "the connection was not closed on stop"
    window.ctx.workers.wait_idle()
    assert stored(chat_workspace, info.id) == [
        ("user", "Earlier"), ("assistant", "Reply"),
        ("user", "Tell me a long story."), ("assistant", "Hello from")]
    kept = chat_workspace.repo.list_messages(info.id)[-1]
    assert kept.metadata.get("stopped") is True
    model = window.timeline.model
    qtbot.waitUntil(lambda: model.rowCount() == 4)
    assert model.pending == []
    assert model.message_at(3).metadata.get("stopped") is True
    assert composer.prompt.toPlainText() == ""
    assert not composer.streaming and composer.send_button.isEnabled()


def test_stop_mid_stream_stores_nothing_when_stopped_replies_are_not_kept(
    qtbot: QtBot, chat_workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(chat_workspace, "Chat", [("user", "Earlier"), ("assistant", "Reply")])
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    composer.keep_stopped_action.trigger()  # Edit → Keep Stopped Replies, off
    assert not composer.keep_stopped_action.isChecked()
    server.script(Fault("stall", after=2))
    pieces: list[str] = []
    composer.reply_grew.connect(pieces.append)
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Tell me a long story.")
    click(qtbot, window, "Send prompt")
    qtbot.waitUntil(lambda: pieces[-1:] == ["Hello from"], timeout=10_000)
    assert server.stalling.wait(5)
    with qtbot.waitSignal(composer.turn_failed, timeout=10_000) as failed:
        click(qtbot, window, "Stop reply")
    assert "Stopped" in failed.args[0]
    assert server.hung_up.wait(5), "the connection was not closed on stop"
    window.ctx.workers.wait_idle()
    assert stored(chat_workspace, info.id) == [("user", "Earlier"), ("assistant", "Reply")]
    assert window.timeline.model.pending == []
    assert window.timeline.model.rowCount() == 2
    # The prompt is kept for another try, and a new turn can start.
    assert composer.prompt.toPlainText() == "Tell me a long story."
    assert not composer.streaming and composer.send_button.isEnabled()
    # The choice is remembered by the next window.
    window.close()
    again = open_window(chat_workspace)
    assert again.composer is not None and not again.composer.keep_stopped_action.isChecked()


def test_manual_memory_shows_the_reply_without_storing_it(
    qtbot: QtBot, chat_workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(chat_workspace, "Chat", [("user", "Earlier")])
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    composer.auto_box.setChecked(False)
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        composer.send("Hello?")
    window.ctx.workers.wait_idle()
    assert stored(chat_workspace, info.id) == [("user", "Earlier")]
    pending = window.timeline.model.pending
    assert [m.content for m in pending] == ["Hello?", REPLY]
    assert all("not saved" in m.metadata["note"] for m in pending)


def test_provider_error_is_a_sentence_with_the_next_step(
    qtbot: QtBot, chat_workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(chat_workspace, "Chat", [("user", "Earlier")])
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    server.script(Fault("status", status=400, body={"error": {
        "message": "This model's maximum context length is 4096 tokens. However, your "
                   "messages resulted in 9000 tokens.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}}))
    with qtbot.waitSignal(composer.turn_failed, timeout=15_000) as failed:
        composer.send("A very long question")
    text = failed.args[0]
    assert "Compact the session" in text
    assert composer.error_label.isVisible() or composer.error_label.text() == text
    window.ctx.workers.wait_idle()
    assert stored(chat_workspace, info.id) == [("user", "Earlier")]


def test_regenerate_replaces_the_last_reply(
    qtbot: QtBot, chat_workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(chat_workspace, "Chat", [("user", "Hi"), ("assistant", "Old reply")])
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        composer.regenerate()
    window.ctx.workers.wait_idle()
    assert stored(chat_workspace, info.id) == [("user", "Hi"), ("assistant", REPLY)]


def test_gauge_measures_the_request_against_the_window(
    qtbot: QtBot, chat_workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(chat_workspace, "Chat", [("user", "Hi there"), ("assistant", "Hello")])
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    with qtbot.waitSignal(composer.gauge_changed, timeout=15_000) as changed:
        composer.refresh_gauge()
    gauge = changed.args[0]
    assert gauge.window == server.n_ctx
    assert 0 < gauge.request_tokens < server.n_ctx
    assert composer.gauge.format() == (f"next request: {gauge.request_tokens:,} / "
                                       f"{server.n_ctx:,} tokens")
    # The status bar names its own figure: the session's messages, not the request.
    info = chat_workspace.get_session(info.id)
    assert window.tokens_label.text() == f"{info.token_count:,} tokens in the session"


def test_sending_without_an_open_session_creates_one(
    qtbot: QtBot, chat_workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(chat_workspace)
    composer = window.composer
    assert composer is not None
    window.open_session(0)
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        assert composer.send("Plan a picnic\nfor Saturday")
    window.ctx.workers.wait_idle()
    session_id = window.ctx.current_session_id
    info = chat_workspace.repo.get_session(session_id)
    assert info.title == "Plan a picnic"
    assert stored(chat_workspace, session_id) == [("user", "Plan a picnic\nfor Saturday"),
                                                 ("assistant", REPLY)]


def test_an_auto_compaction_before_the_send_reloads_the_timeline_with_its_marker(
    qtbot: QtBot, chat_workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # Messages long enough that folding them into summary lines lowers the request.
    turns = [(role, f"{role} message {i}: " + "about the trip and its trains " * 8)
             for i in range(6) for role in ("user", "assistant")]
    info = make_session(chat_workspace, "Long chat", turns)
    chat_workspace.repo.set_overrides(info.id, {
        "compaction": {"auto": True, "max_messages": 8, "keep_messages": 4}})
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    with qtbot.waitSignal(window.ctx.session_reloaded, timeout=15_000) as reloaded:
        assert composer.send("And now?")
    assert reloaded.args == [info.id]
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: len(window.timeline.model.compactions()) == 1, timeout=5_000)
    # Eight messages folded before the send; the four kept and the new turn stay active.
    states = [m.state for m in chat_workspace.repo.list_messages(info.id)]
    assert states.count("folded") == 8 and states.count("active") == 6
    # The status line names the compaction (issue 15.3).
    qtbot.waitUntil(lambda: "Auto-compaction" in window.statusBar().currentMessage(),
                    timeout=5_000)
    assert "Folded 8 messages" in window.statusBar().currentMessage()


def test_each_session_keeps_its_own_draft_across_restarts(
    qtbot: QtBot, chat_workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    first = make_session(chat_workspace, "First", [("user", "Hi")])
    second = make_session(chat_workspace, "Second", [("user", "Hello")])
    window = open_window(chat_workspace)
    window.open_session(first.id)
    prompt = named(window, "Prompt")
    click_into(qtbot, prompt)
    type_text(qtbot, "half a thought for the first")
    window.open_session(second.id)
    assert prompt.toPlainText() == ""  # not carried into another session
    click_into(qtbot, prompt)
    type_text(qtbot, "second's own draft")
    window.open_session(first.id)
    assert prompt.toPlainText() == "half a thought for the first"
    window.close()

    again = open_window(chat_workspace)
    again.open_session(second.id)
    assert named(again, "Prompt").toPlainText() == "second's own draft"
    again.open_session(first.id)
    assert named(again, "Prompt").toPlainText() == "half a thought for the first"


def test_sending_with_no_session_titles_it_from_the_plain_text(
    qtbot: QtBot, chat_workspace: Workspace, open_window: Callable[..., MainWindow],
) -> None:
    window = open_window(chat_workspace)
    composer = window.composer
    assert composer is not None and not window.ctx.current_session_id
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "# **Plan** a [trip](https://example.com) to `Paris`")
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    window.ctx.workers.wait_idle()
    [info] = chat_workspace.list_sessions()
    assert info.title == "Plan a trip to Paris"
    assert stored(chat_workspace, info.id)[0][1].startswith("# **Plan**")
    assert composer.prompt.toPlainText() == ""


def test_stop_before_any_reply_in_a_new_session_leaves_no_empty_session(
    qtbot: QtBot, chat_workspace: Workspace, server: ProtocolServer,
    open_window: Callable[..., MainWindow],
) -> None:
    server.script(Fault("stall_headers"))
    window = open_window(chat_workspace)
    composer = window.composer
    assert composer is not None
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Where to next?")
    press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    # The session is created, then the prompt goes out (both need the event loop).
    qtbot.waitUntil(server.stalling.is_set, timeout=10_000)
    assert composer.streaming
    with qtbot.waitSignal(composer.turn_failed, timeout=10_000) as failed:
        click(qtbot, window, "Stop reply")
    assert "nothing was added" in failed.args[0]
    window.ctx.workers.wait_idle()
    qtbot.waitUntil(lambda: not window.ctx.current_session_id)
    qtbot.waitUntil(lambda: window.browser.model.rowCount() == 0)  # the session went back
    assert chat_workspace.list_sessions() == [] or all(
        s.id in window.ctx.trash for s in chat_workspace.list_sessions())
    assert composer.prompt.toPlainText() == "Where to next?"  # nothing typed is lost


def test_regenerate_is_disabled_until_the_session_holds_a_prompt(
    qtbot: QtBot, chat_workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    empty = make_session(chat_workspace, "Empty")
    full = make_session(chat_workspace, "Full", [("user", "Hi"), ("assistant", "Hello")])
    window = open_window(chat_workspace)
    regenerate = named(window, "Regenerate last reply")
    assert not regenerate.isEnabled()  # no session open
    window.open_session(empty.id)
    window.ctx.workers.wait_idle()
    assert not regenerate.isEnabled()
    window.open_session(full.id)
    qtbot.waitUntil(regenerate.isEnabled)
    with qtbot.waitSignal(window.composer.turn_finished, timeout=15_000):
        click(qtbot, window, "Regenerate last reply")
    window.ctx.workers.wait_idle()
    assert stored(chat_workspace, full.id) == [("user", "Hi"), ("assistant", REPLY)]


def _chat_with_a_dead_server(
    workspace: Workspace, make_session: Callable[..., SessionInfo]
) -> SessionInfo:
    """A provider on a port nothing listens on, and a session to chat in."""
    from protocol_server import free_port

    ProviderSettings(workspace.db).add(ProviderConfig(
        name="gone", kind="openai", base_url=f"http://127.0.0.1:{free_port()}/v1",
        model="m"))
    return make_session(workspace, "Chat", [("user", "Earlier")])


def test_an_unreachable_server_is_told_once_with_the_gui_step(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = _chat_with_a_dead_server(workspace, make_session)
    window = open_window(workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Hello?")
    with qtbot.waitSignal(composer.turn_failed, timeout=30_000) as failed:
        press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    text = failed.args[0]
    assert "could not be reached" in text
    assert text.lower().count("running") == 1, text
    assert "workbench providers" not in text  # a GUI step, not a command line
    assert named(window, "Chat error").text() == text


def test_with_no_provider_the_error_points_to_the_settings(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Chat", [("user", "Earlier")])
    window = open_window(workspace)
    window.open_session(info.id)
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Hello?")
    press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    text = named(window, "Chat error").text()
    assert "Settings → Providers" in text and "--kind" not in text
    assert stored(workspace, info.id) == [("user", "Earlier")]
    assert named(window, "Prompt").toPlainText() == "Hello?"


def test_the_no_provider_error_goes_once_a_provider_is_saved(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], server: ProtocolServer,
) -> None:
    # The walk: Ctrl+Enter with no provider, then Settings → Providers, a server added
    # and saved; back in the window the red line still said no server was set up.
    info = make_session(workspace, "Chat", [("user", "Earlier")])
    window = open_window(workspace)
    window.open_session(info.id)
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Hello?")
    press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert named(window, "Chat error").isVisible()

    dialog = window.show_providers()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog)
    replace_text(qtbot, dialog, "Provider name", "local")
    replace_text(qtbot, dialog, "Base URL", server.url)
    replace_text(qtbot, dialog, "Model", server.model)
    with qtbot.waitSignal(dialog.provider_saved, timeout=10_000):
        click(qtbot, dialog, "Save the provider")
    assert [c.name for c in ProviderSettings(workspace.db).list()] == ["local"]
    dialog.close()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)

    qtbot.waitUntil(lambda: window.composer.provider() == "local")
    assert not window.composer.error_label.isVisible()
    click_into(qtbot, named(window, "Prompt"))
    press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: stored(workspace, info.id)[-1] == ("assistant", REPLY),
                    timeout=10_000)
    assert stored(workspace, info.id)[1] == ("user", "Hello?")


def test_an_error_line_in_a_low_window_squeezes_no_control(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk at 1024x700: the three-line "could not be reached" sentence took its
    # room from the prompt and the buttons (Send, Stop and Regenerate 13 px high).
    info = _chat_with_a_dead_server(workspace, make_session)
    window = open_window(workspace, size=(1024, 700))
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Hello?")
    with qtbot.waitSignal(composer.turn_failed, timeout=30_000):
        press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    error = named(window, "Chat error")
    controls = [named(window, name) for name in ("Send prompt", "Stop reply",
                                                 "Regenerate last reply", "Prompt")]

    def squeezed() -> list[str]:
        return [f"{c.accessibleName()} {c.height()} < {c.minimumSizeHint().height()}"
                for c in controls if c.height() < c.minimumSizeHint().height()]

    settle(window)
    qtbot.waitUntil(lambda: error.height() >= error.heightForWidth(error.width())
                    and not squeezed(), timeout=3_000)
    assert squeezed() == []
    # The window did not grow past the screen's 700 pixels to make the room.
    assert window.height() <= 700


def test_a_draft_stays_with_its_database_when_another_is_opened(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], tmp_path: Path,
) -> None:
    # The walk: a prompt left in session 1 of one database showed up in the new
    # session 1 of the database opened next (it was saved there on the switch).
    first = make_session(workspace, "Lisbon", [("user", "Hi")])
    window = open_window(workspace)
    window.open_session(first.id)
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Still there?")
    home = workspace.location

    window.open_database(tmp_path / "other.db")
    qtbot.waitUntil(lambda: "other.db" in window.database_label.text(), timeout=10_000)
    settle(window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    press(qtbot, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)  # New Session
    qtbot.waitUntil(lambda: window.ctx.current_session_id != 0, timeout=10_000)
    settle(window)
    assert window.ctx.current_session_id == first.id  # the same id, in another database
    assert named(window, "Prompt").toPlainText() == ""

    window.open_database(home)
    qtbot.waitUntil(lambda: window.ctx.workspace.location == home, timeout=10_000)
    settle(window)
    window.open_session(first.id)
    settle(window)
    assert named(window, "Prompt").toPlainText() == "Still there?"


def test_the_gauges_tooltip_fits_on_the_screen(
    qtbot: QtBot, chat_workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    # The walk: hovering the gauge showed its explanation as one line running off the
    # screen; the window's source, at its end, could not be read.
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtGui import Qt as GuiQt  # mightBeRichText lives in QtGui's Qt
    from PySide6.QtWidgets import QApplication

    info = make_session(chat_workspace, "Chat", [("user", "Hi there"), ("assistant", "Hello")])
    window = open_window(chat_workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    with qtbot.waitSignal(composer.gauge_changed, timeout=15_000):
        composer.refresh_gauge()
    gauge = composer.gauge
    centre = gauge.rect().center()
    QApplication.sendEvent(gauge, QHelpEvent(QEvent.Type.ToolTip, centre,
                                             gauge.mapToGlobal(centre)))
    tips = [w for w in QApplication.topLevelWidgets()
            if w.inherits("QLabel") and w.isVisible() and "context window" in w.text()]
    assert len(tips) == 1
    screen = gauge.screen().availableGeometry()
    assert tips[0].width() <= screen.width() // 2
    # Qt wraps a rich-text tip everywhere; a plain one only when wider than the screen
    # (under X11 it ran 1,300 px and more, off a 1280-pixel screen).
    assert GuiQt.mightBeRichText(gauge.toolTip()) and tips[0].wordWrap()
    assert screen.contains(tips[0].geometry())
    assert "is detected from the server" in tips[0].text()


def test_a_new_session_takes_the_title_of_its_first_prompt(
    qtbot: QtBot, chat_workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: Ctrl+N and a chat left each session called "New session"; the list held
    # several of them, told apart by nothing. A send without a session titled it already.
    from tests.gui.journey import focus, press, type_text
    from workbench.gui.models.sessions import SessionRole

    window = open_window(chat_workspace)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    composer = window.composer
    assert composer is not None
    press(qtbot, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.ctx.current_session_id != 0 and focus() is composer.prompt)
    session_id = window.ctx.current_session_id
    assert chat_workspace.get_session(session_id).title == "New session"
    type_text(qtbot, "Book a table in Porto")
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    window.ctx.workers.wait_idle()
    assert chat_workspace.get_session(session_id).title == "Book a table in Porto"
    assert window.timeline.title_label.full_text() == "Book a table in Porto"
    assert window.windowTitle().startswith("Book a table in Porto")
    qtbot.waitUntil(lambda: [window.browser.model.index(r, 0).data(SessionRole).title
                             for r in range(window.browser.model.rowCount())]
                    == ["Book a table in Porto"])
    # A second turn, and a session named on purpose, keep their titles.
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        assert composer.send("And a taxi back")
    named_one = make_session(chat_workspace, "My notes", [])
    window.open_session(named_one.id)
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        assert composer.send("First words here")
    window.ctx.workers.wait_idle()
    assert chat_workspace.get_session(session_id).title == "Book a table in Porto"
    assert chat_workspace.get_session(named_one.id).title == "My notes"


def test_auto_memory_starts_from_the_agents_memory_mode_as_chat_does(
    qtbot: QtBot, chat_workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    # The walk: the Agents dialog said Mode "Manual: store nothing" while the composer's
    # Auto memory stayed ticked and Send stored the turn.
    manual = chat_workspace.repo.create_agent("notes", memory_policy={"mode": "manual"})
    info = chat_workspace.repo.create_session("Quiet", agent_id=manual.id)
    other = make_session(chat_workspace, "Kept", [("user", "Earlier")])
    window = open_window(chat_workspace)
    box = named(window, "Automatic memory")
    window.open_session(info.id)
    assert not box.isChecked()
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Hello?")
    composer = window.composer
    assert composer is not None
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    settle(window)
    assert stored(chat_workspace, info.id) == []
    # A session of an agent in auto mode ticks it again.
    window.open_session(other.id)
    assert box.isChecked()
