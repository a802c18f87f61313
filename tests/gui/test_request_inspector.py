"""The request inspector against the tests' protocol server on 127.0.0.1: the payload it
shows is the body the composer then sends; the token bar and the messages left out are
the engine's preflight."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from workbench.core.conversation import SessionInfo
from workbench.core.provider import ProviderConfig
from workbench.engine.chat import preflight_turn
from workbench.engine.providers import ProviderSettings
from workbench.engine.session_context import add_memory_entry, update_context
from workbench.engine.workspace import Workspace
from workbench.gui.main_window import MainWindow
from workbench.gui.models.timeline import MessageRole
from workbench.gui.panels.request_inspector import (
    PARTS,
    PAYLOAD_LINE_CHARS,
    RequestInspectorPanel,
    shown_payload_of,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from protocol_server import ProtocolServer  # noqa: E402

from tests.gui.journey import click_into, focus, named, press, type_text  # noqa: E402

SECRET = "sk-test-0123456789abcdef"



def _add_provider(ws: Workspace, name: str, srv: ProtocolServer, model: str | None = None,
                  **extra: object) -> None:
    ProviderSettings(ws.db).add(ProviderConfig(
        name=name, kind="openai", base_url=srv.url, model=model or srv.model, **extra))


def _inspector(window: MainWindow) -> RequestInspectorPanel:
    inspector = window.request_inspector
    assert inspector is not None
    window.request_dock.show()
    window.request_dock.raise_()
    return inspector


def _wait_for(qtbot: QtBot, inspector: RequestInspectorPanel, prompt: str,
              provider: str | None = None) -> None:
    """Until the inspector shows the request for ``prompt`` with nothing newer pending."""

    def ready() -> bool:
        shown = inspector.shown
        return (shown is not None and not inspector.busy and shown.prompt == prompt
                and (provider is None or shown.provider == provider)
                and inspector.current_inputs()[1] == prompt)

    qtbot.waitUntil(ready, timeout=15_000)


def test_a_message_too_long_for_one_line_of_the_payload_view_shows_its_ends() -> None:
    # The excerpt keeps whole messages; a 1 MB message was one line of the view, which
    # held the UI thread for seconds to lay out and colour.
    long = "start" + "a" * 300_000 + "end"
    payload = {"model": "m", "messages": [{"role": "user", "content": long},
                                          {"role": "user", "content": "hi"}]}
    shown = shown_payload_of(payload)
    lines = shown.split("\n")
    assert max(map(len, lines)) < PAYLOAD_LINE_CHARS + 200
    cut = next(line for line in lines if "not shown here" in line)
    assert '"content": "start' in cut and cut.endswith('end"')
    hidden = int(cut.split(" … ")[1].split(" ")[0].replace(",", ""))
    whole = len('      "content": "' + long + '"')
    assert hidden + 2 * (PAYLOAD_LINE_CHARS // 2) == whole
    assert '"content": "hi"' in shown and '"model": "m"' in shown


def test_payload_shown_is_the_body_then_sent(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two providers on the same server; the composer's choice (the second, with its own
    # model, needing a key) is the one the inspector must build for.
    server.api_key = SECRET
    monkeypatch.setenv("WORKBENCH_TEST_KEY", SECRET)
    _add_provider(workspace, "first", server)
    _add_provider(workspace, "second", server, model="other-model",
                  api_key_env="WORKBENCH_TEST_KEY", max_output_tokens=256, temperature=0.3)
    agent = workspace.repo.default_agent()
    workspace.repo.update_agent(agent.id, instructions="You are a careful travel assistant.")
    info = make_session(workspace, "Trip", [("user", "Plan a weekend in Lisbon."),
                                            ("assistant", "Gladly. Trains or flights?"),
                                            ("user", "Trains, please.")])
    update_context(workspace, info.id, summary="The user prefers trains.",
                   facts=["Budget is 600 EUR."])
    add_memory_entry(workspace, info.id, "The user is vegetarian; suggest vegetarian food.")

    window = open_window(workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    composer.provider_box.setCurrentIndex(composer.provider_box.findData("second"))
    inspector = _inspector(window)
    composer.prompt.setFocus()
    qtbot.keyClicks(composer.prompt, "Which vegetarian food should I try?")
    _wait_for(qtbot, inspector, "Which vegetarian food should I try?", "second")
    shown = inspector.payload()
    assert shown is not None and shown["model"] == "other-model"
    assert shown["messages"][-1] == {"role": "user",
                                     "content": "Which vegetarian food should I try?"}
    # The request carries the summary and the recalled memory entry.
    texts = [m.get("content") or "" for m in shown["messages"]]
    assert any("The user prefers trains." in t for t in texts)
    assert any("suggest vegetarian food" in t for t in texts)
    assert shown["max_tokens"] == 256 and shown["temperature"] == 0.3
    assert inspector.bar.parts()["memory"] > 0
    # The highlighted text is the payload, and nothing secret is on screen.
    assert json.loads(inspector.payload_view.toPlainText()) == shown
    assert SECRET not in inspector.payload_view.toPlainText()
    assert SECRET not in inspector.endpoint_label.toolTip()
    assert "[redacted]" in inspector.endpoint_label.toolTip()
    assert f"POST {server.url}/v1/chat/completions" in inspector.endpoint_label.text()

    before = len(server.chat_requests())
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        qtbot.keyClick(composer.prompt, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    sent = server.chat_requests()
    assert len(sent) == before + 1
    assert sent[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert sent[-1].body == shown


def test_the_bar_shows_the_preflight_tokens_per_part(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    _add_provider(workspace, "local", server)
    agent = workspace.repo.default_agent()
    workspace.repo.update_agent(agent.id, instructions="Be brief.")
    info = make_session(workspace, "Chat", [("user", "Hello there."), ("assistant", "Hi!")])
    update_context(workspace, info.id, summary="They said hello.")
    window = open_window(workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    inspector = _inspector(window)
    qtbot.keyClicks(composer.prompt, "How are you?")
    _wait_for(qtbot, inspector, "How are you?")

    expected = preflight_turn(workspace, info.id, "How are you?", provider="local")
    parts = inspector.bar.parts()
    assert list(parts) == list(PARTS)
    assert parts == {name: getattr(expected.tokens, name) for name in PARTS}
    assert parts["system"] > 0 and parts["summary"] > 0 and parts["history"] > 0
    assert parts["prompt"] > 0 and parts["memory"] == 0
    assert inspector.bar.window == server.n_ctx == expected.budget.context_window
    assert f"of {server.n_ctx:,} tokens" in inspector.summary_label.text()

    # Typing changes the prompt's part only.
    qtbot.keyClicks(composer.prompt, " Tell me everything about your long day at work.")
    prompt = "How are you? Tell me everything about your long day at work."
    _wait_for(qtbot, inspector, prompt)
    grown = inspector.bar.parts()
    assert grown["prompt"] > parts["prompt"]
    assert {k: v for k, v in grown.items() if k != "prompt"} == \
        {k: v for k, v in parts.items() if k != "prompt"}


def test_left_out_messages_are_listed_with_the_reason_when_the_window_is_small(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    small = ProtocolServer(n_ctx=400).start()
    try:
        _add_provider(workspace, "tiny", small)
        history = [(("user", "assistant")[i % 2],
                    f"Message {i}: " + "a fairly long sentence about the trip " * 3)
                   for i in range(30)]
        info = make_session(workspace, "Long", history)
        window = open_window(workspace)
        window.open_session(info.id)
        composer = window.composer
        assert composer is not None
        inspector = _inspector(window)
        qtbot.keyClicks(composer.prompt, "Summarise.")
        _wait_for(qtbot, inspector, "Summarise.")

        expected = preflight_turn(workspace, info.id, "Summarise.", provider="tiny")
        assert expected.left_out, "the small window must leave history out"
        shown = inspector.left_out_model.items()
        assert [(i.message_id, i.reason) for i in shown] == \
            [(i.message_id, i.reason) for i in expected.left_out]
        assert f"{len(shown):,} messages left out" in inspector.left_out_label.text()
        assert "did not fit the token budget" in inspector.left_out_label.text()
        first = inspector.left_out_model.index(0, 0)
        assert first.data().startswith("#1 user: Message 0:")
        # The payload carries none of them.
        sent_texts = {m["content"] for m in inspector.payload()["messages"]}
        stored = {m.id: m.content for m in workspace.repo.list_messages(info.id)}
        assert not any(stored[i.message_id] in sent_texts for i in shown)

        # Activating a left-out message (Enter) shows it in the timeline.
        target = shown[3]
        inspector.left_out_view.setFocus()
        inspector.left_out_view.setCurrentIndex(inspector.left_out_model.index(3, 0))
        qtbot.keyClick(inspector.left_out_view, Qt.Key.Key_Return)
        view = window.timeline.view

        def current_id() -> int | None:
            message = view.currentIndex().data(MessageRole)
            return message.id if message is not None else None

        qtbot.waitUntil(lambda: current_id() == target.message_id, timeout=10_000)
    finally:
        small.stop()


def test_no_session_and_no_provider(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow],
) -> None:
    info = make_session(workspace, "Offline", [("user", "Hi")])
    window = open_window(workspace)
    inspector = _inspector(window)
    window.open_session(0)
    qtbot.waitUntil(lambda: inspector.shown is None and not inspector.busy, timeout=10_000)
    assert inspector.summary_label.text() == "No session is open."
    assert inspector.bar.parts() == {}

    # Without any provider the inspector still shows what an OpenAI-style body would be.
    window.open_session(info.id)
    _wait_for(qtbot, inspector, "")
    # (the empty prompt is no message of it: Send refuses an empty prompt)
    assert inspector.payload()["messages"][-1] == {"role": "user", "content": "Hi"}
    assert "assumed" in inspector.endpoint_label.text()


def test_typing_while_a_preflight_runs_cancels_it_and_one_runs_at_a_time(
    qtbot: QtBot, workspace: Workspace, make_session: Callable[..., SessionInfo],
    open_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from workbench.gui.panels import request_inspector as module

    info = make_session(workspace, "Busy", [("user", "Hello"), ("assistant", "Hi!")])
    real_preflight = module.preflight_turn
    real_listing = module.newest_left_out
    gate = threading.Event()
    entered = threading.Event()
    lock = threading.Lock()
    running = [0]
    most = [0]
    prompts: list[str] = []
    finished: list[int] = []

    def slow_preflight(*args: object, **kwargs: object) -> object:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            prompts.append(str(args[2]))
        try:
            entered.set()
            gate.wait(10)  # held until the test has typed on
            return real_preflight(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    def listing(*args: object, **kwargs: object) -> object:
        finished.append(1)  # the steps after the preflight: only an unstopped job gets here
        return real_listing(*args, **kwargs)

    monkeypatch.setattr(module, "preflight_turn", slow_preflight)
    monkeypatch.setattr(module, "newest_left_out", listing)
    window = open_window(workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    inspector = _inspector(window)
    shown: list[str] = []
    inspector.request_shown.connect(lambda r: shown.append(r.prompt) if r else None)
    qtbot.waitUntil(entered.is_set, timeout=10_000)  # the first preflight is running

    composer.prompt.setFocus()
    qtbot.keyClicks(composer.prompt, "Where to?")
    gate.set()
    _wait_for(qtbot, inspector, "Where to?")

    assert most[0] == 1  # never two preflights at once
    assert prompts[0] == "" and prompts[-1] == "Where to?"
    # The stale preflight stopped after its preflight step: only the last one went on
    # to list left-out messages and was shown.
    assert len(finished) == 1
    assert shown == ["Where to?"]
    assert inspector.payload()["messages"][-1] == {"role": "user", "content": "Where to?"}


def test_an_empty_prompt_is_left_out_of_the_payload_and_the_panel_says_so(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    _add_provider(workspace, "local", server)
    info = make_session(workspace, "Chat", [("user", "Hello there."), ("assistant", "Hi!")])
    window = open_window(workspace)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    inspector = _inspector(window)
    _wait_for(qtbot, inspector, "")
    shown = inspector.payload()
    assert shown is not None
    assert [(m["role"], m["content"]) for m in shown["messages"]
            if m["role"] != "system"] == [("user", "Hello there."), ("assistant", "Hi!")]
    assert inspector.bar.parts()["prompt"] == 0
    assert "the prompt is empty: shown without it" in inspector.summary_label.text()
    # A prompt typed is the request's last message.
    composer.prompt.setFocus()
    qtbot.keyClicks(composer.prompt, "And you?")
    _wait_for(qtbot, inspector, "And you?")
    shown = inspector.payload()
    assert shown is not None and shown["messages"][-1] == {"role": "user",
                                                           "content": "And you?"}
    assert "prompt is empty" not in inspector.summary_label.text()


def test_an_agents_provider_gone_is_shown_missing_and_nothing_is_sent_unasked(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    # The walk: the agent's provider 'local' removed, the composer quietly selected the
    # first other one, the Request panel showed its request and Send went there, where
    # `workbench chat` refuses ("never another server in its place, unasked").
    from PySide6.QtWidgets import QComboBox, QLabel, QProgressBar

    _add_provider(workspace, "local", server)
    _add_provider(workspace, "hosted", server, model="hosted-model")
    _add_provider(workspace, "other", server, model="other-model")
    info = make_session(workspace, "Trip", [("user", "Plan a weekend in Lisbon.")])
    workspace.repo.update_agent(info.agent_id, provider="local")
    ProviderSettings(workspace.db).remove("local")
    window = open_window(workspace)
    inspector = _inspector(window)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    refusal = ("The agent's provider 'local' is not configured any more: give the agent "
               "one in Settings → Agents…, or pick a provider in the selector to send to it.")
    summary = inspector.summary_label
    qtbot.waitUntil(lambda: summary.text() == refusal and not inspector.busy,
                    timeout=10_000)
    box = named(window, "Provider", QComboBox)
    assert box.currentText() == "local (missing)"
    assert inspector.payload() is None and inspector.payload_view.toPlainText() == ""
    gauge = named(window, "Context gauge", QProgressBar)
    qtbot.waitUntil(lambda: gauge.format() == "context: pick a provider", timeout=10_000)

    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "And the way back?")
    press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert named(window, "Chat error", QLabel).text() == refusal
    assert server.chat_requests() == []

    # Picking one with the keyboard is asking: the panel shows its request, Send sends it.
    box.setFocus()
    press(qtbot, Qt.Key.Key_Home)
    assert focus() is box and box.currentText() == "hosted"
    _wait_for(qtbot, inspector, "And the way back?", "hosted")
    shown = inspector.payload()
    assert shown is not None and shown["model"] == "hosted-model"
    click_into(qtbot, named(window, "Prompt"))
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert [r.body for r in server.chat_requests()] == [shown]


def test_the_composer_asks_for_the_agents_model_as_chat_does(
    qtbot: QtBot, workspace: Workspace, server: ProtocolServer,
    make_session: Callable[..., SessionInfo], open_window: Callable[..., MainWindow],
) -> None:
    # The walk: the Agents dialog said Model "agent-model" while the composer's model box
    # (and so the Request panel and Send) used the provider's "test-model"; the CLI's
    # chat asks for the agent's.
    from PySide6.QtWidgets import QComboBox

    _add_provider(workspace, "first", server)
    _add_provider(workspace, "second", server, model="second-model")
    info = make_session(workspace, "Trip", [("user", "Plan a weekend in Lisbon.")])
    workspace.repo.update_agent(info.agent_id, model="agent-model")
    expected = preflight_turn(workspace, info.id, "Hello", provider="first")
    assert expected.payload["model"] == "agent-model"  # the engine's choice, as chat's

    window = open_window(workspace)
    inspector = _inspector(window)
    window.open_session(info.id)
    composer = window.composer
    assert composer is not None
    assert named(window, "Provider", QComboBox).currentText() == "first"
    assert named(window, "Model", QComboBox).currentText() == "agent-model"
    click_into(qtbot, named(window, "Prompt"))
    type_text(qtbot, "Hello")
    _wait_for(qtbot, inspector, "Hello", "first")
    shown = inspector.payload()
    assert shown is not None and shown == expected.payload
    with qtbot.waitSignal(composer.turn_finished, timeout=15_000):
        press(qtbot, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert server.chat_requests()[-1].body["model"] == "agent-model"

    # An agent that names another provider keeps its model for that one only.
    workspace.repo.update_agent(info.agent_id, provider="second")
    other = make_session(workspace, "Other", [("user", "Hi")])
    window.open_session(other.id)
    box = named(window, "Provider", QComboBox)
    qtbot.waitUntil(lambda: box.currentText() == "second", timeout=5_000)
    assert named(window, "Model", QComboBox).currentText() == "agent-model"
    box.setFocus()
    press(qtbot, Qt.Key.Key_Home)
    assert box.currentText() == "first"
    assert named(window, "Model", QComboBox).currentText() == server.model
