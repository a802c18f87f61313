"""Both providers against the protocol server: payloads, streaming, whole replies, tools,
usage, the context window, and the request description for preflight."""

from __future__ import annotations

import json
from typing import Any

import pytest
from protocol_server import ProtocolServer

from workbench.core.conversation import Message
from workbench.core.provider import (
    ChatRequest,
    Finished,
    Provider,
    TextDelta,
    ToolCallDelta,
    ToolCallReady,
    ToolSpec,
    UsageReport,
    collect,
)
from workbench.providers.anthropic import Anthropic
from workbench.providers.base import HttpProvider
from workbench.providers.openai import OpenAICompatible

KINDS = ["openai", "anthropic"]
WEATHER = ToolSpec(
    "weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def make(kind: str, server: ProtocolServer, api_key: str | None = None,
         **options: Any) -> HttpProvider:
    cls = OpenAICompatible if kind == "openai" else Anthropic
    return cls(server.url, server.model, api_key, **options)


def chat(text: str = "Hi there", **fields: Any) -> ChatRequest:
    return ChatRequest([Message("system", "Be brief."), Message("user", text)], **fields)


@pytest.mark.parametrize("kind", KINDS)
def test_provider_satisfies_the_protocol(kind: str, server: ProtocolServer) -> None:
    provider = make(kind, server)
    assert isinstance(provider, Provider)
    assert provider.kind == kind


@pytest.mark.parametrize("kind", KINDS)
def test_streamed_reply_arrives_as_text_deltas_then_usage_and_finish(
    kind: str, server: ProtocolServer
) -> None:
    events = list(make(kind, server).stream(chat()))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == server.reply_words
    usage = [e.usage for e in events if isinstance(e, UsageReport)]
    assert usage and usage[-1].output_tokens == len(server.reply_words)
    assert usage[-1].input_tokens == len("Be brief. Hi there".split())
    assert isinstance(events[-1], Finished)
    assert events[-1].reason in ("stop", "end_turn")
    assert events[-1].model == server.model


@pytest.mark.parametrize("kind", KINDS)
def test_the_body_sent_is_exactly_build_payload(kind: str, server: ProtocolServer) -> None:
    provider = make(kind, server)
    request = chat(max_tokens=3, temperature=0.2, stop=["END"])
    list(provider.stream(request))
    sent = server.chat_requests()[-1].body
    assert sent == provider.build_payload(request)
    assert provider.describe_request(request)["json"] == sent


@pytest.mark.parametrize("kind", KINDS)
def test_max_tokens_cuts_the_reply_and_says_why(kind: str, server: ProtocolServer) -> None:
    reply = make(kind, server).complete(chat(max_tokens=2))
    assert reply.text == "".join(server.reply_words[:2])
    assert reply.finish_reason in ("length", "max_tokens")


@pytest.mark.parametrize("kind", KINDS)
def test_non_streamed_complete_returns_text_usage_and_reason(
    kind: str, server: ProtocolServer
) -> None:
    reply = make(kind, server).complete(chat(stream=False))
    assert server.chat_requests()[-1].body["stream"] is False
    assert reply.text == "".join(server.reply_words)
    assert reply.usage is not None and reply.usage.output_tokens == len(server.reply_words)
    assert reply.finish_reason in ("stop", "end_turn")
    assert not reply.stopped


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stream", [True, False])
def test_tool_calls_come_back_whole_in_the_openai_shape(
    kind: str, stream: bool, server: ProtocolServer
) -> None:
    server.tool_call = {"name": "weather", "arguments": {"city": "Porto", "days": 2}}
    provider = make(kind, server)
    request = chat("Rain in Porto?", tools=[WEATHER], stream=stream)
    if stream:
        events = list(provider.stream(request))
        assert any(isinstance(e, ToolCallDelta) for e in events)
        ready = [e.call for e in events if isinstance(e, ToolCallReady)]
        reply = collect(events)
        assert ready == reply.tool_calls
    else:
        reply = provider.complete(request)
    [call] = reply.tool_calls
    assert call["type"] == "function"
    assert call["id"]
    assert call["function"]["name"] == "weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Porto", "days": 2}
    assert reply.finish_reason in ("tool_calls", "tool_use")


def test_openai_payload_carries_tools_schema_and_tool_history(server: ProtocolServer) -> None:
    call = {"id": "call_1", "type": "function",
            "function": {"name": "weather", "arguments": {"city": "Porto"}}}
    request = ChatRequest(
        [
            Message("system", "Be brief."),
            Message("user", "Rain?", name="ana"),
            Message("assistant", "", tool_calls=[call]),
            Message("tool", "Sunny", tool_call_id="call_1"),
            Message("user", "And tomorrow?", name="not a valid name"),
        ],
        tools=[WEATHER],
        response_schema={"type": "object"},
        stream=False,
    )
    payload = make("openai", server).build_payload(request)
    messages = payload["messages"]
    assert messages[1] == {"role": "user", "content": "Rain?", "name": "ana"}
    assert messages[2]["content"] is None
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Porto"}'
    assert messages[3] == {"role": "tool", "content": "Sunny", "tool_call_id": "call_1"}
    assert "name" not in messages[4]  # OpenAI refuses names with spaces
    assert payload["tools"] == [WEATHER.to_openai()]
    assert payload["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert "stream_options" not in payload


def test_anthropic_payload_hoists_system_and_converts_tool_turns(server: ProtocolServer) -> None:
    calls = [
        {"id": "call_1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Porto"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Braga"}'}},
    ]
    request = ChatRequest(
        [
            Message("system", "Be brief."),
            Message("user", "Rain?"),
            Message("assistant", "Let me look.", tool_calls=calls),
            Message("tool", "Sunny", tool_call_id="call_1"),
            Message("tool", "Rain", tool_call_id="call_2"),
            Message("system", "Answer in one line."),
        ],
        tools=[WEATHER],
    )
    payload = make("anthropic", server).build_payload(request)
    assert payload["system"] == "Be brief.\n\nAnswer in one line."
    assert payload["max_tokens"] == 4096  # the API requires one
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert payload["messages"][0]["content"] == "Rain?"
    assistant = payload["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Let me look."}
    assert assistant[1] == {"type": "tool_use", "id": "call_1", "name": "weather",
                            "input": {"city": "Porto"}}
    results = payload["messages"][2]["content"]
    assert [(r["type"], r["tool_use_id"], r["content"]) for r in results] == [
        ("tool_result", "call_1", "Sunny"), ("tool_result", "call_2", "Rain")]
    assert payload["tools"][0]["input_schema"] == WEATHER.parameters


def test_base_urls_are_normalised_per_api(server: ProtocolServer) -> None:
    assert OpenAICompatible("http://h:1", "m").base_url == "http://h:1/v1"
    assert OpenAICompatible("https://openrouter.ai/api/v1/", "m").base_url == (
        "https://openrouter.ai/api/v1")
    assert Anthropic("https://api.anthropic.com/v1", "m", "k").base_url == (
        "https://api.anthropic.com")
    described = Anthropic(server.url, "m", "k").describe_request(chat())
    assert described["url"] == server.url + "/v1/messages"


@pytest.mark.parametrize("kind", KINDS)
def test_key_is_sent_but_redacted_from_description_and_repr(
    kind: str, server: ProtocolServer, sentinel_key: str
) -> None:
    server.api_key = sentinel_key
    provider = make(kind, server, sentinel_key, extra_headers={"X-Trace": "on"})
    assert provider.complete(chat()).text
    sent = server.chat_requests()[-1].headers
    header = "x-api-key" if kind == "anthropic" else "authorization"
    assert sentinel_key in sent[header]
    assert sent["x-trace"] == "on"
    described = provider.describe_request(chat())
    assert sentinel_key not in json.dumps(described)
    assert described["headers"][header] == "[redacted]"
    assert described["headers"]["X-Trace"] == "on"
    assert sentinel_key not in repr(provider)


@pytest.mark.parametrize("kind", KINDS)
def test_context_window_comes_from_props_then_models_then_table_then_user(
    kind: str, server: ProtocolServer
) -> None:
    server.n_ctx = 2048
    assert make(kind, server).context_window_info() == (2048, "server")

    server.serve_props = False
    server.n_ctx = 3072
    assert make(kind, server).context_window_info() == (3072, "server")

    server.n_ctx = None
    server.model = "gpt-4o-mini"
    assert make(kind, server).context_window_info() == (128_000, "known model")

    server.model = "house-model"
    assert make(kind, server, context_window=5000).context_window_info() == (5000, "configured")
    assert make(kind, server).context_window() is None


def test_context_window_is_asked_only_once(server: ProtocolServer) -> None:
    provider = make("openai", server)
    assert provider.context_window() == provider.context_window() == server.n_ctx
    assert [r.path for r in server.requests].count("/props") == 1


def test_list_models_reads_the_models_endpoint(server: ProtocolServer) -> None:
    assert make("openai", server).list_models() == [server.model]


def test_openai_itself_gets_max_completion_tokens() -> None:
    request = chat(max_tokens=5)
    official = OpenAICompatible("https://api.openai.com/v1", "o3-mini", "k")
    assert official.build_payload(request)["max_completion_tokens"] == 5
    assert "max_tokens" not in official.build_payload(request)
    local = OpenAICompatible("http://127.0.0.1:8080", "llama")
    assert local.build_payload(request)["max_tokens"] == 5


def test_no_repr_shows_the_key(sentinel_key: str) -> None:
    provider = OpenAICompatible("http://127.0.0.1:9", "m", sentinel_key)
    assert sentinel_key not in repr(provider) + repr(vars(provider))
