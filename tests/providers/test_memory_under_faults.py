"""Every fault, seen through the memory engine: a retried call appends its turn once; a
failed or stopped call leaves memory (messages and token usage) exactly as it was."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from protocol_server import Fault, ProtocolServer, anthropic_error, free_port, openai_error

from workbench.core.provider import CancelToken, TextDelta
from workbench.engine.memory import Memory
from workbench.engine.model import Model
from workbench.errors import (
    AuthenticationError,
    ContextTooLongError,
    OperationCancelledError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
    UnreachableError,
)
from workbench.providers.anthropic import Anthropic
from workbench.providers.base import HttpProvider
from workbench.providers.http import RetryPolicy, Timeouts
from workbench.providers.openai import OpenAICompatible

KINDS = ["openai", "anthropic"]


def no_wait(seconds: float, cancel: CancelToken) -> None:
    return None


def make(kind: str, server: ProtocolServer, **options: Any) -> HttpProvider:
    cls = OpenAICompatible if kind == "openai" else Anthropic
    options.setdefault("sleep", no_wait)
    options.setdefault("timeouts", Timeouts(connect=5, read=0.5, total=60))
    return cls(server.url, server.model, None, **options)


def snapshot(memory: Memory) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    messages = [(m.role, m.content) for m in memory.messages()]
    return messages, memory.context().token_usage.to_json()


@pytest.fixture
def memory() -> Memory:
    mem = Memory()
    mem.append("user", "Earlier question")
    mem.append("assistant", "Earlier answer")
    return mem


def model_for(kind: str, server: ProtocolServer, memory: Memory, stream: bool = True,
              **options: Any) -> Model:
    return Model(make(kind, server, **options), instructions="Be brief.",
                 stream=stream).with_memory(memory, auto=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "fault",
    [
        Fault("status", 429, openai_error("slow", "rate_limit_error"), {"Retry-After": "1"}),
        Fault("status", 500, openai_error("oops", "server_error")),
        Fault("hangup"),
        Fault("junk", after=1),
    ],
    ids=["429-retry-after", "500", "hangup-before-reply", "junk-line"],
)
def test_retried_or_harmless_faults_append_the_turn_once(
    kind: str, fault: Fault, server: ProtocolServer, memory: Memory
) -> None:
    server.script(fault)
    before, _ = snapshot(memory)
    response = model_for(kind, server, memory).execute("New question")
    after, usage = snapshot(memory)
    assert after == before + [("user", "New question"),
                              ("assistant", "".join(server.reply_words))]
    assert response.usage is not None
    assert usage["total_output"] == len(server.reply_words)
    assert memory.messages()[-1].metadata["usage"]["output_tokens"] == len(server.reply_words)


CONTEXT_LLAMA = openai_error("request (9000 tokens) exceeds the available context size "
                             "(4096 tokens)", "exceed_context_size_error", 400,
                             n_prompt_tokens=9000, n_ctx=4096)


_FAILURES = [
    ("401", Fault("status", 401, openai_error("bad key", "authentication_error")),
     AuthenticationError),
    ("context", Fault("status", 400, CONTEXT_LLAMA), ContextTooLongError),
    ("429-too-long", Fault("status", 429, openai_error("quota", "rate_limit_error"),
                           {"Retry-After": "3600"}), RateLimitError),
    ("stall", Fault("stall", after=2), ProviderTimeoutError),
    ("drop", Fault("drop", after=2), StreamInterruptedError),
    ("malformed", Fault("malformed", after=2), ServerError),
    ("error-event", Fault("error_event", after=2), ServerError),
]
# Faults in the reply's body only exist for streamed replies; status faults for both.
_CASES = [
    pytest.param(fault, error, stream, id=f"{name}-{'stream' if stream else 'whole'}")
    for name, fault, error in _FAILURES
    for stream in ((True, False) if fault.kind == "status" else (True,))
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("fault", "error", "stream"), _CASES)
def test_failed_calls_leave_memory_unchanged(
    kind: str, stream: bool, fault: Fault, error: type[ProviderError],
    server: ProtocolServer, memory: Memory,
) -> None:
    server.script(fault)
    before = snapshot(memory)
    with pytest.raises(error):
        model_for(kind, server, memory, stream=stream).execute("New question")
    assert snapshot(memory) == before


def test_exhausted_retries_leave_memory_unchanged(server: ProtocolServer,
                                                  memory: Memory) -> None:
    server.script(*[Fault("status", 503, anthropic_error("busy", "overloaded_error"))] * 3)
    before = snapshot(memory)
    with pytest.raises(ServerError):
        model_for("anthropic", server, memory, retry=RetryPolicy(attempts=3)).execute("Hi")
    assert len(server.chat_requests()) == 3
    assert snapshot(memory) == before


def test_unreachable_server_leaves_memory_unchanged(memory: Memory) -> None:
    provider = OpenAICompatible(f"http://127.0.0.1:{free_port()}", "m", sleep=no_wait)
    before = snapshot(memory)
    with pytest.raises(UnreachableError):
        Model(provider).with_memory(memory, auto=True).execute("Hi")
    assert snapshot(memory) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("keep_partial", [False, True])
def test_stop_mid_stream_appends_nothing_or_the_marked_partial(
    kind: str, keep_partial: bool, server: ProtocolServer, memory: Memory
) -> None:
    server.script(Fault("stall", after=2))
    cancel = CancelToken()
    model = model_for(kind, server, memory, timeouts=Timeouts(connect=5, read=300, total=600))
    before, usage_before = snapshot(memory)
    seen: list[str] = []
    two = threading.Event()

    def on_event(event: Any) -> None:
        if isinstance(event, TextDelta):
            seen.append(event.text)
            if len(seen) == 2:
                two.set()

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["response"] = model.execute("New question", on_event=on_event,
                                                cancel=cancel, keep_partial=keep_partial)
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert two.wait(20)
    cancel.cancel()
    worker.join(20)
    assert not worker.is_alive()
    after, usage_after = snapshot(memory)
    if keep_partial:
        assert outcome["response"].stopped
        assert after == before + [("user", "New question"),
                                  ("assistant", "".join(server.reply_words[:2]))]
        assert memory.messages()[-1].metadata.get("stopped") is True
    else:
        assert isinstance(outcome.get("error"), OperationCancelledError)
        assert after == before and usage_after == usage_before
    assert server.hung_up.wait(20)
