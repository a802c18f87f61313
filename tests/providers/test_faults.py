"""Each fault the protocol server can inject, and what the providers make of it: a retry
that succeeds, or the typed error with a sentence (never the key)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from protocol_server import Fault, ProtocolServer, anthropic_error, free_port, openai_error

from workbench.core.conversation import Message
from workbench.core.provider import CancelToken, ChatRequest, TextDelta
from workbench.errors import (
    AuthenticationError,
    ContextTooLongError,
    OperationCancelledError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
    UnknownModelError,
    UnreachableError,
)
from workbench.providers.anthropic import Anthropic
from workbench.providers.base import HttpProvider
from workbench.providers.http import RetryNotice, RetryPolicy, Timeouts
from workbench.providers.openai import OpenAICompatible

KINDS = ["openai", "anthropic"]
# Generous bound for "the call ended": only reached if stopping were broken.
LIVENESS_S = 20


class Waits:
    """Records the waits between retries instead of sleeping through them."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.notices: list[RetryNotice] = []

    def sleep(self, seconds: float, cancel: CancelToken) -> None:
        self.delays.append(seconds)

    def on_retry(self, notice: RetryNotice) -> None:
        self.notices.append(notice)


def make(kind: str, server: ProtocolServer, waits: Waits | None = None,
         api_key: str | None = None, **options: Any) -> HttpProvider:
    cls = OpenAICompatible if kind == "openai" else Anthropic
    if waits is not None:
        options.setdefault("sleep", waits.sleep)
        options.setdefault("on_retry", waits.on_retry)
    return cls(server.url, server.model, api_key, **options)


def chat(**fields: Any) -> ChatRequest:
    return ChatRequest([Message("user", "Hello there")], **fields)


def error_body(kind: str, message: str, type_: str, code: str | None = None) -> Any:
    return anthropic_error(message, type_) if kind == "anthropic" else openai_error(
        message, type_, code)


def _in_thread(target: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = target()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


# -- retried faults ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_429_with_retry_after_waits_as_told_then_succeeds(
    kind: str, server: ProtocolServer
) -> None:
    server.script(Fault("status", 429, error_body(kind, "Slow down", "rate_limit_error"),
                        {"Retry-After": "3"}))
    waits = Waits()
    reply = make(kind, server, waits).complete(chat())
    assert reply.text == "".join(server.reply_words)
    assert len(server.chat_requests()) == 2
    assert waits.delays == [3.0]  # the server's hint, not the backoff
    [notice] = waits.notices
    assert isinstance(notice.error, RateLimitError) and notice.error.retry_after == 3.0
    assert (notice.attempt, notice.attempts) == (2, RetryPolicy().attempts)


@pytest.mark.parametrize("kind", KINDS)
def test_500_then_success_is_retried_with_backoff(kind: str, server: ProtocolServer) -> None:
    server.script(Fault("status", 500, error_body(kind, "Oops", "api_error")),
                  Fault("status", 503, error_body(kind, "Busy", "overloaded_error")))
    waits = Waits()
    policy = RetryPolicy(attempts=4, base_delay=0.5, max_delay=20)
    events = list(make(kind, server, waits, retry=policy).stream(chat()))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(
        server.reply_words)
    assert len(server.chat_requests()) == 3
    # Exponential with jitter: the n-th wait lies in [base*2^(n-1)/2, base*2^(n-1)].
    assert 0.25 <= waits.delays[0] <= 0.5
    assert 0.5 <= waits.delays[1] <= 1.0


@pytest.mark.parametrize("status", [408, 409, 502, 529])
def test_other_retryable_statuses_are_retried(status: int, server: ProtocolServer) -> None:
    server.script(Fault("status", status, openai_error("Try later", "server_error")))
    waits = Waits()
    assert make("openai", server, waits).complete(chat()).text
    assert len(server.chat_requests()) == 2
    assert len(waits.delays) == 1


def test_500_every_time_gives_up_after_the_bounded_attempts(server: ProtocolServer) -> None:
    server.script(*[Fault("status", 500, openai_error("Down", "server_error"))] * 5)
    waits = Waits()
    with pytest.raises(ServerError) as caught:
        make("openai", server, waits, retry=RetryPolicy(attempts=3)).complete(chat())
    assert len(server.chat_requests()) == 3
    assert len(waits.delays) == 2
    assert caught.value.status == 500
    assert "HTTP 500" in str(caught.value) and "Down" in str(caught.value)


def test_retry_after_longer_than_allowed_fails_at_once_with_the_hint(
    server: ProtocolServer,
) -> None:
    server.script(Fault("status", 429, openai_error("Quota", "rate_limit_error"),
                        {"Retry-After": "600"}))
    waits = Waits()
    with pytest.raises(RateLimitError) as caught:
        make("openai", server, waits).complete(chat())
    assert caught.value.retry_after == 600
    assert "600 s" in str(caught.value)
    assert waits.delays == [] and len(server.chat_requests()) == 1


def test_connection_closed_before_any_reply_is_retried(server: ProtocolServer) -> None:
    server.script(Fault("hangup"))
    waits = Waits()
    assert make("openai", server, waits).complete(chat()).text
    assert len(server.chat_requests()) == 2
    # A kept-alive connection the server closed is retried at once, without a notice.
    assert waits.delays == [] and waits.notices == []


def test_repeated_hangups_back_off_after_the_first(server: ProtocolServer) -> None:
    server.script(Fault("hangup"), Fault("hangup"), Fault("hangup"))
    waits = Waits()
    assert make("openai", server, waits).complete(chat()).text
    assert len(server.chat_requests()) == 4
    assert len(waits.delays) == 2 and all(d > 0 for d in waits.delays)


def test_unreachable_server_is_retried_then_named(server: ProtocolServer) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    waits = Waits()
    provider = OpenAICompatible(url, "m", sleep=waits.sleep, retry=RetryPolicy(attempts=2))
    with pytest.raises(UnreachableError) as caught:
        provider.complete(chat())
    assert len(waits.delays) == 1
    assert "could not be reached" in str(caught.value)
    assert url.split("//")[1] in str(caught.value)


def test_real_wait_between_retries_is_cut_short_by_stop(server: ProtocolServer) -> None:
    server.script(Fault("status", 429, openai_error("Wait", "rate_limit_error"),
                        {"Retry-After": "50"}))
    cancel = CancelToken()
    waiting = threading.Event()
    provider = make("openai", server, on_retry=lambda notice: waiting.set())
    thread, outcome = _in_thread(lambda: provider.complete(chat(stream=False), cancel))
    assert waiting.wait(LIVENESS_S)
    cancel.cancel()  # during the 50 s wait
    thread.join(LIVENESS_S)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), OperationCancelledError)
    assert len(server.chat_requests()) == 1


# -- typed errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_401_is_an_authentication_error_without_the_key(
    kind: str, server: ProtocolServer, sentinel_key: str
) -> None:
    server.api_key = "the-right-key"
    waits = Waits()
    with pytest.raises(AuthenticationError) as caught:
        make(kind, server, waits, api_key=sentinel_key, key_hint="environment variable K"
             ).complete(chat())
    message = str(caught.value)
    assert sentinel_key not in message  # the server quoted it; the sentence must not
    assert "[redacted]" in message
    assert "HTTP 401" in message and "environment variable K" in message
    assert caught.value.status == 401 and not caught.value.retryable
    assert waits.delays == [] and len(server.chat_requests()) == 1


def test_401_without_a_key_says_none_was_sent(server: ProtocolServer) -> None:
    server.api_key = "needed"
    with pytest.raises(AuthenticationError, match="none was sent"):
        make("openai", server).complete(chat())


def test_openai_context_length_exceeded_gives_both_sizes(server: ProtocolServer) -> None:
    message = ("This model's maximum context length is 8192 tokens. However, your messages "
               "resulted in 9100 tokens. Please reduce the length of the messages.")
    server.script(Fault("status", 400, openai_error(message, "invalid_request_error",
                                                    "context_length_exceeded")))
    waits = Waits()
    with pytest.raises(ContextTooLongError) as caught:
        make("openai", server, waits).complete(chat())
    assert (caught.value.prompt_tokens, caught.value.context_window) == (9100, 8192)
    assert "9100" in str(caught.value) and "8192" in str(caught.value)
    assert waits.delays == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [True, False])
def test_llama_cpp_exceed_context_size_error_gives_both_sizes(
    kind: str, stream: bool, server: ProtocolServer
) -> None:
    server.script(Fault("status", 400, openai_error(
        "request (5000 tokens) exceeds the available context size (4096 tokens), try "
        "increasing it", "exceed_context_size_error", 400, n_prompt_tokens=5000, n_ctx=4096)))
    with pytest.raises(ContextTooLongError) as caught:
        make(kind, server).complete(chat(stream=stream))
    assert (caught.value.prompt_tokens, caught.value.context_window) == (5000, 4096)
    assert caught.value.status == 400
    assert "Compact" in str(caught.value)


def test_anthropic_prompt_too_long_gives_both_sizes(server: ProtocolServer) -> None:
    server.script(Fault("status", 400, anthropic_error(
        "prompt is too long: 210000 tokens > 200000 maximum", "invalid_request_error")))
    with pytest.raises(ContextTooLongError) as caught:
        make("anthropic", server).complete(chat())
    assert (caught.value.prompt_tokens, caught.value.context_window) == (210000, 200000)


def test_unknown_model_is_named(server: ProtocolServer) -> None:
    server.script(Fault("status", 404, openai_error(
        "The model `gpt-9` does not exist or you do not have access to it.",
        "invalid_request_error", "model_not_found")))
    with pytest.raises(UnknownModelError) as caught:
        make("openai", server).complete(chat())
    assert server.model in str(caught.value)


def test_wrong_base_url_is_not_taken_for_an_unknown_model(server: ProtocolServer) -> None:
    provider = OpenAICompatible(server.url + "/wrong/v1", "m")
    with pytest.raises(ProviderError) as caught:
        provider.complete(chat())
    assert type(caught.value) is ProviderError
    assert "base URL" in str(caught.value)


# -- faults inside a stream ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_stall_mid_stream_times_out_after_what_arrived(kind: str, server: ProtocolServer) -> None:
    server.script(Fault("stall", after=2))
    provider = make(kind, server, Waits(), timeouts=Timeouts(connect=5, read=0.5, total=60))
    received: list[str] = []
    with pytest.raises(ProviderTimeoutError) as caught:
        for event in provider.stream(chat()):
            if isinstance(event, TextDelta):
                received.append(event.text)
    assert received == server.reply_words[:2]
    assert "sent nothing for 0.5 s" in str(caught.value)
    assert len(server.chat_requests()) == 1  # never retried once the reply has begun


@pytest.mark.parametrize("kind", KINDS)
def test_dropped_connection_mid_stream_is_interrupted_not_retried(
    kind: str, server: ProtocolServer
) -> None:
    server.script(Fault("drop", after=3))
    received: list[str] = []
    with pytest.raises(StreamInterruptedError) as caught:
        for event in make(kind, server, Waits()).stream(chat()):
            if isinstance(event, TextDelta):
                received.append(event.text)
    assert received == server.reply_words[:3]
    assert "broke while the reply was streaming" in str(caught.value)
    assert len(server.chat_requests()) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_event_data_is_a_server_error(kind: str, server: ProtocolServer) -> None:
    server.script(Fault("malformed", after=1))
    with pytest.raises(ServerError, match="not valid JSON"):
        make(kind, server, Waits()).complete(chat())
    assert len(server.chat_requests()) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_line_that_is_no_sse_field_is_ignored(kind: str, server: ProtocolServer) -> None:
    server.script(Fault("junk", after=2))
    assert make(kind, server).complete(chat()).text == "".join(server.reply_words)


@pytest.mark.parametrize("kind", KINDS)
def test_error_event_inside_the_stream_is_typed(kind: str, server: ProtocolServer) -> None:
    server.script(Fault("error_event", after=1))
    with pytest.raises(ServerError):
        make(kind, server, Waits()).complete(chat())


@pytest.mark.parametrize("kind", KINDS)
def test_error_event_inside_a_200_stream_gives_the_servers_message_not_a_status(
    kind: str, server: ProtocolServer
) -> None:
    body = (
        anthropic_error("Shard 4 lost its GPU", "overloaded_error")
        if kind == "anthropic"
        else openai_error("Shard 4 lost its GPU", "server_error")
    )
    server.script(Fault("error_event", after=1, body=body))
    with pytest.raises(ServerError) as caught:
        make(kind, server, Waits()).complete(chat())
    text = str(caught.value)
    # The reply began with HTTP 200: no status is invented; the event's words are shown.
    assert "HTTP" not in text
    assert "Shard 4 lost its GPU" in text
    assert ("overloaded_error" if kind == "anthropic" else "server_error") in text


def test_stream_ending_without_its_end_event_is_interrupted(server: ProtocolServer) -> None:
    server.script(Fault("truncate", after=2))
    with pytest.raises(StreamInterruptedError, match="ended the stream"):
        make("anthropic", server).complete(chat())


# -- stopping --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_stop_mid_stream_closes_the_connection_and_keeps_what_arrived(
    kind: str, server: ProtocolServer
) -> None:
    server.script(Fault("stall", after=2))
    cancel = CancelToken()
    provider = make(kind, server)
    got_two = threading.Event()
    received: list[str] = []

    def consume() -> Any:
        for event in provider.stream(chat(), cancel):
            if isinstance(event, TextDelta):
                received.append(event.text)
                if len(received) == 2:
                    got_two.set()

    thread, outcome = _in_thread(consume)
    assert got_two.wait(LIVENESS_S)
    cancel.cancel()
    thread.join(LIVENESS_S)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), OperationCancelledError)
    assert received == server.reply_words[:2]
    # The server saw the client hang up while it was still stalling: the socket was closed.
    assert server.hung_up.wait(LIVENESS_S)


def test_complete_returns_the_partial_reply_marked_stopped(server: ProtocolServer) -> None:
    server.script(Fault("stall", after=3))
    cancel = CancelToken()
    provider = make("openai", server)
    thread, outcome = _in_thread(lambda: provider.complete(chat(), cancel))
    assert server.stalling.wait(LIVENESS_S)
    cancel.cancel()
    thread.join(LIVENESS_S)
    reply = outcome["value"]
    assert reply.stopped
    assert reply.usage is None and reply.finish_reason is None
    # Whatever had arrived by the stop, and nothing past the three words sent.
    assert "".join(server.reply_words[:3]).startswith(reply.text)


@pytest.mark.parametrize("kind", KINDS)
def test_stop_before_the_headers_arrive_ends_the_call(kind: str, server: ProtocolServer) -> None:
    server.script(Fault("stall_headers"))
    cancel = CancelToken()
    provider = make(kind, server)
    thread, outcome = _in_thread(lambda: provider.complete(chat(stream=False), cancel))
    assert server.stalling.wait(LIVENESS_S)
    cancel.cancel()
    thread.join(LIVENESS_S)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), OperationCancelledError)
    assert server.hung_up.wait(LIVENESS_S)


def test_a_cancelled_token_sends_nothing(server: ProtocolServer) -> None:
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(OperationCancelledError):
        list(make("openai", server).stream(chat(), cancel))
    assert server.chat_requests() == []


# -- the key never leaks ---------------------------------------------------------------------


def test_sentinel_key_reaches_no_log_and_no_error(
    server: ProtocolServer, sentinel_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(Fault("status", 429, openai_error(f"Slow down {sentinel_key}",
                                                    "rate_limit_error"), {"Retry-After": "0"}))
    provider = make("openai", server, Waits(), api_key=sentinel_key)
    server.api_key = sentinel_key
    assert provider.complete(chat()).text
    server.api_key = "another"
    with pytest.raises(AuthenticationError) as caught:
        provider.complete(chat())
    texts = [record.getMessage() for record in caplog.records]
    assert texts, "the retry should have been logged"
    assert all(sentinel_key not in text for text in texts)
    assert sentinel_key not in str(caught.value)
    assert sentinel_key not in repr(caught.value)
