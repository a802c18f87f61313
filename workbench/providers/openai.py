"""The OpenAI-compatible chat completions provider.

Speaks ``POST {base}/chat/completions`` as OpenAI, llama.cpp's server, Ollama's ``/v1``,
vLLM, LM Studio and OpenRouter do. A base URL without a path gets ``/v1`` appended
(``http://127.0.0.1:8080`` → ``http://127.0.0.1:8080/v1``); one with a path is used as
given (``https://openrouter.ai/api/v1``).

Streaming reads ``chat.completion.chunk`` events: ``delta.content`` (text),
``delta.reasoning_content`` or ``delta.reasoning`` (visible reasoning), ``delta.tool_calls``
(pieces joined into whole calls at the end), ``finish_reason``, and the ``usage`` chunk
that ``stream_options.include_usage`` asks for; ``data: [DONE]`` ends the stream. An
``error`` object inside the stream becomes the matching typed error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from workbench.core.conversation import Message
from workbench.core.provider import (
    CancelToken,
    ChatRequest,
    ChatResponse,
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallReady,
    Usage,
    UsageReport,
)
from workbench.errors import ProviderError, ServerError, StreamInterruptedError
from workbench.providers.base import _DISCOVERY_LIMITS as DISCOVERY_LIMITS
from workbench.providers.base import HttpProvider, server_root, tool_call_json
from workbench.providers.sse import SSEDecoder

# OpenAI accepts ``name`` only in this shape; other names are left out rather than refused.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def openai_message(message: Message) -> dict[str, Any]:
    """One workbench message as a chat completions message."""
    out: dict[str, Any] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [tool_call_json(c) for c in message.tool_calls]
    else:
        out["content"] = message.content
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id or ""
    elif message.name and _NAME.match(message.name):
        out["name"] = message.name
    return out


def usage_from_openai(data: Mapping[str, Any]) -> Usage:
    """A :class:`Usage` from an OpenAI ``usage`` object."""
    return Usage(
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        parts = [p for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(str(p.get("text", "")) for p in parts)
    return ""


class OpenAICompatible(HttpProvider):
    """A client for one model behind an OpenAI-compatible chat completions API.

    ``api_key`` (optional: local servers need none) goes in ``Authorization: Bearer``.
    ``include_usage`` asks streamed replies for their token usage. ``max_tokens_field``
    names the reply-length field: ``max_completion_tokens`` for OpenAI itself,
    ``max_tokens`` for everything else, unless given.
    """

    kind = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 include_usage: bool = True, max_tokens_field: str | None = None,
                 **options: Any) -> None:
        self.include_usage = include_usage
        super().__init__(base_url, model, api_key, **options)
        if max_tokens_field is None:
            # OpenAI itself has deprecated max_tokens (its reasoning models refuse it);
            # the servers that imitate it know only max_tokens.
            host = urlsplit(self.base_url).hostname or ""
            official = host == "api.openai.com" or host.endswith(".openai.azure.com")
            max_tokens_field = "max_completion_tokens" if official else "max_tokens"
        self.max_tokens_field = max_tokens_field
        self._alternation: bool | None = None

    def needs_alternation(self) -> bool:
        """Whether the server's chat template demands strictly alternating user and
        assistant turns (llama.cpp tells its template in ``/props``; Gemma's raises
        "Conversation roles must alternate"). Asked once; a server that does not say
        needs none."""
        with self._window_lock:
            if self._alternation is None:
                try:
                    data = self._http.request_json(
                        "GET", server_root(self.base_url) + "/props", retries=False,
                        timeouts=DISCOVERY_LIMITS,
                    )
                except ProviderError:
                    data = None
                template = data.get("chat_template") if isinstance(data, dict) else None
                self._alternation = isinstance(template, str) and (
                    "must alternate" in template.lower()
                )
            return self._alternation

    @staticmethod
    def normalize_base_url(base_url: str) -> str:
        base = base_url.strip().rstrip("/")
        if not urlsplit(base).path:
            base += "/v1"
        return base

    def chat_path(self) -> str:
        return "chat/completions"

    def models_path(self) -> str:
        return "models"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        """The chat completions body for ``request`` (exactly what is sent)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [openai_message(m) for m in request.messages],
        }
        max_tokens = self._max_tokens(request)
        if max_tokens:
            payload[self.max_tokens_field] = max_tokens
        temperature = self._temperature(request)
        if temperature is not None:
            payload["temperature"] = temperature
        if request.stop:
            payload["stop"] = list(request.stop)
        if request.tools:
            payload["tools"] = [tool.to_openai() for tool in request.tools]
        if request.response_schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.response_schema},
            }
        payload["stream"] = bool(request.stream)
        if request.stream:
            self._stream_options(payload)
        return payload

    def _stream_options(self, payload: dict[str, Any]) -> None:
        if self.include_usage:
            payload["stream_options"] = {"include_usage": True}

    def _events(self, chunks: Iterator[bytes], cancel: CancelToken) -> Iterator[StreamEvent]:
        decoder = SSEDecoder()
        loads = json.loads
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        model: str | None = None
        done = False
        for chunk in chunks:
            for sse in decoder.feed(chunk):
                data = sse.data
                if data == "[DONE]":
                    done = True
                    break
                try:
                    obj = loads(data)
                except ValueError:
                    raise self._malformed(data) from None
                if not isinstance(obj, dict):
                    raise self._malformed(data)
                if "error" in obj:
                    err = obj["error"]
                    code = err.get("code") if isinstance(err, dict) else None
                    raise self._stream_error(obj, code if isinstance(code, int) else 500)
                model = obj.get("model") or model
                for choice in obj.get("choices") or ():
                    if choice.get("index", 0) != 0:
                        continue
                    delta = choice.get("delta")
                    if delta:
                        content = delta.get("content")
                        if content:
                            yield TextDelta(content)
                        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                        if reasoning:
                            yield ReasoningDelta(reasoning)
                        tool_calls = delta.get("tool_calls")
                        if tool_calls:
                            yield from self._tool_deltas(tool_calls, calls)
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                usage = obj.get("usage")
                if usage:
                    yield UsageReport(usage_from_openai(usage))
            if done:
                break
        if done:
            self._drain(chunks)
        elif finish is None:
            raise StreamInterruptedError(
                f"{self._http.where} ended the stream before the reply was complete.",
                provider=self.name,
            )
        for index in sorted(calls):
            call = calls[index]
            yield ToolCallReady({
                "id": call["id"] or f"call_{index}",
                "type": "function",
                "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
            })
        yield Finished(finish, model)

    @staticmethod
    def _tool_deltas(pieces: list[Any], calls: dict[int, dict[str, Any]]
                     ) -> Iterator[ToolCallDelta]:
        for piece in pieces:
            if not isinstance(piece, dict):
                continue
            index = int(piece.get("index", len(calls)))
            function = piece.get("function") or {}
            call = calls.setdefault(index, {"id": None, "name": "", "arguments": []})
            if piece.get("id"):
                call["id"] = piece["id"]
            name = function.get("name") or None
            if name:
                call["name"] += name
            arguments = function.get("arguments") or ""
            if arguments:
                call["arguments"].append(arguments)
            yield ToolCallDelta(index=index, id=piece.get("id"), name=name, arguments=arguments)

    def _parse_reply(self, data: Any) -> ChatResponse:
        if not isinstance(data, dict):
            raise ServerError(f"{self._http.where} sent a reply that is not a JSON object.",
                              provider=self.name)
        if "error" in data:
            raise self._stream_error(data)
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            raise ServerError(f"{self._http.where} sent a reply without choices.",
                              provider=self.name)
        choice = choices[0]
        message = choice.get("message") or {}
        usage = data.get("usage")
        return ChatResponse(
            text=_text_of(message.get("content")),
            tool_calls=[tool_call_json(c) for c in message.get("tool_calls") or []],
            usage=usage_from_openai(usage) if isinstance(usage, dict) else None,
            finish_reason=choice.get("finish_reason"),
            model=data.get("model"),
            reasoning=str(message.get("reasoning_content") or message.get("reasoning") or ""),
        )
