"""Both providers and the memory engine against a real llama.cpp server.

The model is a small base model, so the tests check mechanics (streaming, usage, status
codes, context errors, stopping, history), never the wording of a reply. Every request
sets ``max_tokens``: a base model rarely stops by itself.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from realllm import RunningServer

from workbench.cli import main
from workbench.core.conversation import Message
from workbench.core.provider import (
    CancelToken,
    ChatRequest,
    Finished,
    TextDelta,
    ToolSpec,
    UsageReport,
)
from workbench.engine.memory import Memory
from workbench.engine.model import Model
from workbench.engine.workspace import Workspace
from workbench.errors import ContextTooLongError, OperationCancelledError
from workbench.providers.anthropic import Anthropic
from workbench.providers.base import HttpProvider
from workbench.providers.openai import OpenAICompatible

KINDS = ["openai", "anthropic"]
CTX = 1024


def make(kind: str, llama: RunningServer) -> HttpProvider:
    cls = OpenAICompatible if kind == "openai" else Anthropic
    return cls(llama.url, llama.alias)


def chat(text: str = "Name three colours.", **fields: Any) -> ChatRequest:
    fields.setdefault("max_tokens", 8)
    return ChatRequest([Message("system", "Answer briefly."), Message("user", text)], **fields)


@pytest.mark.parametrize("kind", KINDS)
def test_context_window_is_read_from_the_server(kind: str, llama: RunningServer) -> None:
    assert make(kind, llama).context_window_info() == (CTX, "server")


@pytest.mark.parametrize("kind", KINDS)
def test_streamed_reply_with_usage(kind: str, llama: RunningServer) -> None:
    events = list(make(kind, llama).stream(chat(max_tokens=8)))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) >= 2  # it really streamed, piece by piece
    [usage] = [e.usage for e in events if isinstance(e, UsageReport)]
    assert usage.input_tokens > 5
    assert 1 <= usage.output_tokens <= 8
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.reason in ("length", "max_tokens", "stop", "end_turn")
    assert finished.model


@pytest.mark.parametrize("kind", KINDS)
def test_whole_reply_with_usage(kind: str, llama: RunningServer) -> None:
    reply = make(kind, llama).complete(chat(max_tokens=6, stream=False))
    assert reply.usage is not None
    assert reply.usage.input_tokens > 5 and 1 <= reply.usage.output_tokens <= 6
    assert reply.finish_reason in ("length", "max_tokens", "stop", "end_turn")
    assert not reply.stopped


def test_a_request_with_tools_is_accepted(llama: RunningServer) -> None:
    tool = ToolSpec("clock", "The current time.", {"type": "object", "properties": {}})
    reply = make("openai", llama).complete(chat(tools=[tool], max_tokens=4))
    assert reply.usage is not None and reply.usage.output_tokens >= 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [True, False])
def test_too_long_prompt_gives_the_context_error_with_both_sizes(
    kind: str, stream: bool, llama: RunningServer
) -> None:
    with pytest.raises(ContextTooLongError) as caught:
        make(kind, llama).complete(chat("hello " * 1500, stream=stream))
    assert caught.value.context_window == CTX
    assert caught.value.prompt_tokens is not None and caught.value.prompt_tokens > CTX
    assert str(CTX) in str(caught.value) and str(caught.value.prompt_tokens) in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_stop_mid_stream_ends_the_call_and_frees_the_server(
    kind: str, llama: RunningServer
) -> None:
    provider = make(kind, llama)
    cancel = CancelToken()
    received: list[str] = []
    outcome: dict[str, Any] = {}

    def consume() -> None:
        try:
            for event in provider.stream(chat("Tell a long story.", max_tokens=400), cancel):
                if isinstance(event, TextDelta):
                    received.append(event.text)
                    if len(received) == 3:
                        cancel.cancel()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), OperationCancelledError)
    assert len(received) == 3  # nothing was yielded after the stop
    # The server's only slot was given back: the next request is answered at once.
    reply = provider.complete(chat(max_tokens=3, stream=False))
    assert reply.usage is not None and reply.usage.output_tokens >= 1


@pytest.mark.parametrize("stream", [True, False])
def test_chat_through_the_model_builder_with_memory(
    stream: bool, llama: RunningServer, tmp_path: Path
) -> None:
    with Workspace.open(tmp_path / "e2e.db") as ws:
        session = ws.repo.create_session("e2e chat")
        memory = Memory.open(ws, session.id)
        model = Model(make("openai", llama), instructions="Answer briefly.", max_tokens=6,
                      stream=stream).with_memory(memory, auto=True)
        inputs: list[int] = []
        for turn, prompt in enumerate(["Hello!", "What is two plus two?", "Thanks."], 1):
            response = model.execute(prompt)
            assert len(memory) == 2 * turn  # history grows by two a turn
            assert response.usage is not None
            inputs.append(response.usage.input_tokens)
            reply = memory.messages()[-1]
            assert reply.role == "assistant"
            assert reply.metadata["usage"] == response.usage.to_json()
        # Each request carried the earlier turns, so the prompt grew.
        assert inputs == sorted(inputs) and inputs[0] < inputs[-1]
        stored = ws.repo.list_messages(session.id)
        assert [m.role for m in stored] == ["user", "assistant"] * 3
        usage = ws.repo.get_context(session.id).token_usage
        assert usage.input_tokens == sum(inputs)
        assert usage.output_tokens == sum(
            m.metadata["usage"]["output_tokens"] for m in stored if m.role == "assistant")


def test_command_line_chat_against_the_server(
    llama: RunningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "cli.db")

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, "--db", db])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    assert run("providers", "add", "llama", "--kind", "anthropic", "--base-url", llama.url,
               "--model", llama.alias)[0] == 0
    code, out, _ = run("providers", "test", "llama")
    assert code == 0 and f"context window {CTX:,} tokens (from the server)" in out
    code, out, err = run("chat", "cli chat", "Hello there", "--new", "--max-tokens", "5")
    assert code == 0, err
    assert out.strip()
    assert "out; finish:" in err
    code, out, _ = run("show", "cli chat", "--json")
    messages = json.loads(out)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["metadata"]["usage"]["output_tokens"] <= 5


