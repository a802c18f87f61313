"""Turning a model server's error reply into a typed :class:`ProviderError` sentence.

One function, :func:`error_from_reply`, reads the error bodies the servers we speak to
actually send and picks the subclass a person can act on:

- OpenAI and its imitators: ``{"error": {"message", "type", "code"}}``; a prompt over
  the window is ``code: context_length_exceeded`` with the sizes only inside the text;
- llama.cpp: the same shape with ``type: exceed_context_size_error`` and the sizes as
  ``n_prompt_tokens`` / ``n_ctx``;
- Anthropic: ``{"type": "error", "error": {"type", "message"}}``; an oversized prompt says
  ``prompt is too long: N tokens > M maximum``;
- Ollama: ``{"error": "model 'x' not found"}``; vLLM/FastAPI: a top-level ``message``;
- anything else: the first few hundred characters of the body as text.

Every sentence passes through :func:`scrub`, so a key the server echoes back (OpenAI
quotes part of a wrong key) never reaches a message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from workbench.errors import (
    AuthenticationError,
    ContextTooLongError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    UnknownModelError,
)

REDACTED = "[redacted]"
_MESSAGE_LIMIT = 300
# Key shapes of the big hosted APIs (sk-…, sk-ant-…, sk-or-…), also when partly masked.
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}")
_CONTEXT_CODES = {"context_length_exceeded", "exceed_context_size_error", "context_too_long"}
_CONTEXT_WORDS = re.compile(
    r"context length|context window|context size|prompt is too long|too many tokens"
    r"|maximum context|exceeds the available context|input is too long",
    re.IGNORECASE,
)
_OPENAI_SIZES = re.compile(
    r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens",
    re.IGNORECASE | re.DOTALL,
)
_ANTHROPIC_SIZES = re.compile(r"(\d+) tokens\s*>\s*(\d+)(?: maximum)?", re.IGNORECASE)
_LLAMA_SIZES = re.compile(
    r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)",
    re.IGNORECASE,
)
_MODEL_MISSING = re.compile(
    r"model\b.*\b(not found|does not exist|not exist|unknown|no such|not available)"
    r"|(unknown|invalid) model",
    re.IGNORECASE | re.DOTALL,
)


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret, and anything shaped like an API key, replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return _KEY_LIKE.sub(REDACTED, text)


@dataclass
class ErrorBody:
    """What a server said in its error body, as far as it can be read."""

    message: str = ""
    type: str = ""
    code: str = ""
    prompt_tokens: int | None = None
    context_window: int | None = None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def read_error_body(body: bytes | str | Any) -> ErrorBody:
    """Pick the message, type, code and any context sizes out of an error body."""
    data: Any = body
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            data = json.loads(text)
        except ValueError:
            return ErrorBody(message=" ".join(text.split()))
    if not isinstance(data, dict):
        return ErrorBody(message=" ".join(str(data).split()))
    err = data.get("error", data)
    if isinstance(err, str):
        return ErrorBody(message=err)
    if not isinstance(err, dict):
        return ErrorBody(message=str(err))
    message = err.get("message") or data.get("message") or err.get("detail") or ""
    if not isinstance(message, str):
        message = json.dumps(message)
    return ErrorBody(
        message=" ".join(message.split()),
        type=str(err.get("type") or data.get("type") or ""),
        code=str(err.get("code") or ""),
        prompt_tokens=_int_or_none(err.get("n_prompt_tokens")),
        context_window=_int_or_none(err.get("n_ctx")),
    )


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The server's wait hint: ``retry-after-ms``, else ``Retry-After`` (seconds or a date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _context_sizes(info: ErrorBody) -> tuple[int | None, int | None]:
    if info.prompt_tokens is not None or info.context_window is not None:
        return info.prompt_tokens, info.context_window
    match = _LLAMA_SIZES.search(info.message)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = _OPENAI_SIZES.search(info.message)
    if match:
        return int(match.group(2)), int(match.group(1))
    match = _ANTHROPIC_SIZES.search(info.message)
    if match:
        return int(match.group(1)), int(match.group(2))
    return None, None


def is_context_error(info: ErrorBody) -> bool:
    """True when the body says the prompt does not fit the model's window."""
    return (
        info.code in _CONTEXT_CODES
        or info.type in _CONTEXT_CODES
        or bool(_CONTEXT_WORDS.search(info.message))
    )


def context_error(
    info: ErrorBody, *, where: str, model: str, status: int | None, provider: str | None
) -> ContextTooLongError:
    """The sentence for a prompt that does not fit, with the sizes when known."""
    prompt, window = _context_sizes(info)
    if prompt is not None and window is not None:
        sizes = f"the prompt has {prompt} tokens but the context window is {window}"
    elif window is not None:
        sizes = f"the context window is {window} tokens"
    else:
        sizes = f"the server said: {info.message or 'no details'}"
    place = where[:1].lower() + where[1:]  # "The server at …" inside a sentence
    return ContextTooLongError(
        f"The conversation is too long for {model} ({place}): {sizes}. "
        "Compact the session or leave out older messages, then send again.",
        prompt_tokens=prompt,
        context_window=window,
        status=status,
        provider=provider,
    )


def error_from_reply(
    status: int,
    body: bytes | str | Any,
    headers: Mapping[str, str],
    *,
    where: str,
    model: str,
    provider: str | None = None,
    secrets: Iterable[str | None] = (),
    key_sent: bool = True,
    key_hint: str = "",
    in_stream: bool = False,
) -> ProviderError:
    """The typed error for an HTTP error reply (``status`` ≥ 400) or an in-stream error.

    ``where`` names the server for the sentence ("127.0.0.1:8080"), ``key_hint`` says
    where the key comes from ("the environment variable OPENAI_API_KEY"). With
    ``in_stream`` the error arrived as an event inside a reply that began with HTTP 200:
    ``status`` then only chooses the kind of error, and the sentence gives the event's
    type and message rather than a status the server never sent.
    """
    secrets = list(secrets)
    info = read_error_body(body)
    said = scrub(info.message, secrets)
    if len(said) > _MESSAGE_LIMIT:
        said = said[: _MESSAGE_LIMIT - 1] + "…"
    said = said.rstrip(" .")  # the sentence adds its own full stop
    tail = f": {said}" if said else ""
    kind = (info.type + " " + info.code).lower()
    if in_stream:
        shown_type = scrub(info.type or info.code, secrets)
        how = "an error event in the reply" + (f", type {shown_type}" if shown_type else "")
    else:
        how = f"HTTP {status}"

    if is_context_error(info):
        return context_error(info, where=where, model=model, status=status, provider=provider)
    kind_of_error: type[ProviderError] = ProviderError
    extra: dict[str, Any] = {}
    if status in (401, 403) or "authentication" in kind or "permission" in kind:
        if not key_sent:
            advice = "It needs an API key and none was sent; give the provider a key reference."
        else:
            advice = f"Check the key{' in ' + key_hint if key_hint else ''}."
        kind_of_error = AuthenticationError
        text = f"{where} refused the request ({how}){tail}. {advice}"
    elif info.code == "model_not_found" or (status in (400, 404) and _MODEL_MISSING.search(said)):
        kind_of_error = UnknownModelError
        text = (f"{where} does not serve the model {model!r} ({how}){tail}. "
                "Check the model name in the provider's settings.")
    elif status == 429 or "rate_limit" in kind:
        wait = retry_after_seconds(headers)
        hint = f"; it asks to wait {wait:g} s" if wait is not None else ""
        kind_of_error, extra = RateLimitError, {"retry_after": wait}
        text = f"{where} is limiting requests ({how}{hint}){tail}. Wait a moment and retry."
    elif status == 408:
        kind_of_error = ProviderTimeoutError
        text = f"{where} gave up waiting for the request ({how}){tail}."
    elif status >= 500 or status == 409 or "overloaded" in kind or "api_error" in kind:
        kind_of_error = ServerError
        text = f"{where} failed with {how}{tail}. Try again in a moment."
    elif status == 404:
        text = f"{where} has no such endpoint ({how}){tail}. Check the provider's base URL."
    else:
        text = f"{where} rejected the request ({how}){tail}."
    return kind_of_error(text, status=status, provider=provider, **extra)
