"""The Anthropic messages provider (``POST {base}/v1/messages``).

Converting at the edge, so the rest of the workbench keeps OpenAI-shaped tool calls:

- system messages go to the top-level ``system`` field (joined by blank lines, in order);
- assistant tool calls become ``tool_use`` blocks (arguments parsed to ``input``), tool
  results become ``tool_result`` blocks in a user turn; consecutive turns of one role are
  merged, as the API wants all results of one step in one user turn;
- a turn that is plain text is sent as a string, anything else as content blocks.

Streaming reads the API's event types: ``message_start`` (model, input usage),
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``,
``thinking_delta``) / ``content_block_stop``, ``message_delta`` (stop reason, output
usage), ``message_stop``, ``ping``, and ``error``. Usage counts cached input tokens
(``cache_read_input_tokens``, ``cache_creation_input_tokens``) as input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

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
from workbench.errors import ServerError, StreamInterruptedError
from workbench.providers.base import HttpProvider, tool_call_json
from workbench.providers.sse import SSEDecoder

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
# The HTTP status each in-stream error type stands for, to pick the typed error.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def _tool_input(call: Mapping[str, Any]) -> Any:
    arguments = (call.get("function") or {}).get("arguments") or "{}"
    if not isinstance(arguments, str):
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}  # keep what the model wrote rather than drop it
    return value if isinstance(value, dict) else {"value": value}


def anthropic_messages(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` in the messages API's shape."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            role = "user"
            blocks.append({"type": "tool_result", "tool_use_id": message.tool_call_id or "",
                           "content": message.content})
        else:
            role = "assistant" if message.role == "assistant" else "user"
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            calls = message.tool_calls if role == "assistant" else None
            for call in calls or ():
                shaped = tool_call_json(call)
                blocks.append({"type": "tool_use", "id": shaped["id"],
                               "name": shaped["function"]["name"], "input": _tool_input(call)})
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        content = turn["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            turn["content"] = content[0]["text"]
    return ("\n\n".join(system) if system else None), turns


def usage_from_anthropic(data: Mapping[str, Any], output: int | None = None) -> Usage:
    """A :class:`Usage` from an Anthropic ``usage`` object (cached input included)."""
    input_tokens = sum(
        int(data.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    if output is None:
        output = int(data.get("output_tokens") or 0)
    return Usage(input_tokens, output)


class Anthropic(HttpProvider):
    """A client for one model behind the Anthropic messages API.

    ``api_key`` goes in ``x-api-key``; ``max_tokens`` is required by the API, so a request
    without one uses ``max_output_tokens`` or 4096 (a turn the engine builds asks for the
    tokens its budget reserved for the reply instead, so that it fits the window).
    """

    kind = "anthropic"
    default_max_tokens = 4096

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 version: str = ANTHROPIC_VERSION,
                 **options: Any) -> None:
        self.version = version
        super().__init__(base_url, model, api_key, **options)

    @staticmethod
    def normalize_base_url(base_url: str) -> str:
        base = (base_url.strip() or DEFAULT_BASE_URL).rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base

    def chat_path(self) -> str:
        return "v1/messages"

    def models_path(self) -> str:
        return "v1/models"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self.version}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        """The messages API body for ``request`` (exactly what is sent)."""
        system, messages = anthropic_messages(request.messages)
        payload: dict[str, Any] = {"model": self.model, "max_tokens": self._max_tokens(request)}
        if system is not None:
            payload["system"] = system
        payload["messages"] = messages
        temperature = self._temperature(request)
        if temperature is not None:
            payload["temperature"] = temperature
        if request.stop:
            payload["stop_sequences"] = list(request.stop)
        if request.tools:
            payload["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        payload["stream"] = bool(request.stream)
        return payload

    def _events(self, chunks: Iterator[bytes], cancel: CancelToken) -> Iterator[StreamEvent]:
        decoder = SSEDecoder()
        loads = json.loads
        blocks: dict[int, dict[str, Any]] = {}
        tool_count = 0
        start_usage: Mapping[str, Any] = {}
        output_tokens: int | None = None
        stop_reason: str | None = None
        model: str | None = None
        done = False
        for chunk in chunks:
            for sse in decoder.feed(chunk):
                try:
                    obj = loads(sse.data)
                except ValueError:
                    raise self._malformed(sse.data) from None
                if not isinstance(obj, dict):
                    raise self._malformed(sse.data)
                kind = obj.get("type") or sse.event
                if kind == "content_block_delta":
                    delta = obj.get("delta") or {}
                    dtype = delta.get("type")
                    if dtype == "text_delta":
                        if delta.get("text"):
                            yield TextDelta(delta["text"])
                    elif dtype == "input_json_delta":
                        block = blocks.get(obj.get("index", -1))
                        piece = delta.get("partial_json") or ""
                        if block is not None and piece:
                            block["json"].append(piece)
                            yield ToolCallDelta(index=block["tool_index"], arguments=piece)
                    elif dtype == "thinking_delta":
                        if delta.get("thinking"):
                            yield ReasoningDelta(delta["thinking"])
                elif kind == "content_block_start":
                    block = obj.get("content_block") or {}
                    entry: dict[str, Any] = {"type": block.get("type")}
                    if block.get("type") == "tool_use":
                        entry.update(tool_index=tool_count, id=block.get("id"),
                                     name=block.get("name") or "", json=[],
                                     input=block.get("input"))
                        tool_count += 1
                        yield ToolCallDelta(index=entry["tool_index"], id=entry["id"],
                                            name=entry["name"])
                    elif block.get("type") == "text" and block.get("text"):
                        yield TextDelta(block["text"])
                    blocks[obj.get("index", len(blocks))] = entry
                elif kind == "content_block_stop":
                    entry = blocks.get(obj.get("index", -1)) or {}
                    if entry.get("type") == "tool_use":
                        arguments = "".join(entry["json"]) or json.dumps(entry["input"] or {})
                        yield ToolCallReady({
                            "id": entry["id"] or f"call_{entry['tool_index']}",
                            "type": "function",
                            "function": {"name": entry["name"], "arguments": arguments},
                        })
                elif kind == "message_start":
                    message = obj.get("message") or {}
                    model = message.get("model") or model
                    start_usage = message.get("usage") or {}
                elif kind == "message_delta":
                    delta = obj.get("delta") or {}
                    stop_reason = delta.get("stop_reason") or stop_reason
                    usage = obj.get("usage") or {}
                    if usage.get("output_tokens") is not None:
                        output_tokens = int(usage["output_tokens"])
                    if usage.get("input_tokens"):
                        start_usage = {**start_usage, **usage}
                elif kind == "message_stop":
                    done = True
                    break
                elif kind == "error":
                    error = obj.get("error") or {}
                    status = _ERROR_STATUS.get(str(error.get("type")), 500)
                    raise self._stream_error(obj, status)
                # ping and unknown event types are ignored, as the API asks.
            if done:
                break
        if done:
            self._drain(chunks)
        else:
            raise StreamInterruptedError(
                f"{self._http.where} ended the stream before the reply was complete.",
                provider=self.name,
            )
        yield UsageReport(usage_from_anthropic(start_usage, output_tokens))
        yield Finished(stop_reason, model)

    def _parse_reply(self, data: Any) -> ChatResponse:
        if not isinstance(data, dict):
            raise ServerError(f"{self._http.where} sent a reply that is not a JSON object.",
                              provider=self.name)
        if data.get("type") == "error":
            error = data.get("error") or {}
            raise self._stream_error(data, _ERROR_STATUS.get(str(error.get("type")), 500))
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in data.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text.append(str(block.get("text") or ""))
            elif block.get("type") == "thinking":
                reasoning.append(str(block.get("thinking") or ""))
            elif block.get("type") == "tool_use":
                calls.append({
                    "id": str(block.get("id") or f"call_{len(calls)}"),
                    "type": "function",
                    "function": {"name": str(block.get("name") or ""),
                                 "arguments": json.dumps(block.get("input") or {})},
                })
        usage = data.get("usage")
        return ChatResponse(
            text="".join(text),
            tool_calls=calls,
            usage=usage_from_anthropic(usage) if isinstance(usage, dict) else None,
            finish_reason=data.get("stop_reason"),
            model=data.get("model"),
            reasoning="".join(reasoning),
        )
