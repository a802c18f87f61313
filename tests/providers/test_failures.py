"""Reading servers' error bodies into typed errors; wait hints; scrubbing keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from workbench.errors import (
    AuthenticationError,
    ContextTooLongError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    UnknownModelError,
)
from workbench.providers.failures import error_from_reply, retry_after_seconds, scrub
from workbench.providers.http import RetryPolicy


def reply(status: int, body: object, headers: dict[str, str] | None = None,
          **kw: object) -> ProviderError:
    return error_from_reply(status, body, headers or {}, where="The server at h:1",
                            model="m1", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (401, {"error": {"message": "bad key", "type": "invalid_request_error"}},
         AuthenticationError),
        (403, {"type": "error", "error": {"type": "permission_error", "message": "no"}},
         AuthenticationError),
        (404, {"error": "model 'llama9' not found"}, UnknownModelError),  # Ollama
        (400, {"object": "error", "message": "The model `x` does not exist.", "code": 400},
         UnknownModelError),  # vLLM
        (429, {"error": {"message": "slow", "type": "rate_limit_error"}}, RateLimitError),
        (408, "timeout", ProviderTimeoutError),
        (500, "<html>Internal Server Error</html>", ServerError),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
         ServerError),
        (413, {"error": {"message": "Input is too long for requested model."}},
         ContextTooLongError),
    ],
)
def test_status_and_body_pick_the_typed_error(status: int, body: object,
                                              kind: type[ProviderError]) -> None:
    error = reply(status, body)
    assert type(error) is kind
    assert error.status == status
    assert "The server at h:1" in str(error) or "m1" in str(error)


def test_plain_4xx_is_a_rejection_with_the_servers_words() -> None:
    error = reply(422, {"error": {"message": "temperature must be at most 2"}})
    assert type(error) is ProviderError and not error.retryable
    assert "temperature must be at most 2" in str(error) and "HTTP 422" in str(error)


def test_context_sizes_from_vllm_wording() -> None:
    error = reply(400, {"object": "error", "message": (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (4000 in the messages, 1000 in the completion).")})
    assert isinstance(error, ContextTooLongError)
    assert (error.prompt_tokens, error.context_window) == (5000, 4096)


def test_context_error_without_sizes_still_reads_well() -> None:
    error = reply(400, {"error": {"message": "context window exceeded",
                                  "code": "context_length_exceeded"}})
    assert isinstance(error, ContextTooLongError)
    assert error.prompt_tokens is None and error.context_window is None
    assert "context window exceeded" in str(error)


def test_long_server_messages_are_shortened() -> None:
    error = reply(400, {"error": {"message": "x" * 5000}})
    assert len(str(error)) < 500


def test_retry_after_in_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds({"retry-after": later}, now=now) == 30
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "-3"}) == 0


def test_rate_limit_error_carries_the_hint() -> None:
    error = reply(429, {"error": {"message": "slow"}}, {"retry-after": "12"})
    assert isinstance(error, RateLimitError) and error.retry_after == 12
    assert "12 s" in str(error)


def test_scrub_removes_given_secrets_and_key_shapes() -> None:
    text = "key abc-secret-123 and sk-proj-****************abcd and sk-ant-api03-XYZxyz12345"
    cleaned = scrub(text, ["abc-secret-123"])
    assert "abc-secret-123" not in cleaned
    assert "sk-proj" not in cleaned and "sk-ant" not in cleaned
    assert cleaned.count("[redacted]") == 3


def test_backoff_doubles_within_its_jitter_band_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    for retry in range(1, 8):
        ceiling = min(5.0, 2 ** (retry - 1))
        for _ in range(20):
            assert ceiling / 2 <= policy.backoff(retry) <= ceiling
