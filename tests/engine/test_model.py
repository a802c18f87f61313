"""The model builder and the execute loop (issue 3 "Model builder", "Tools", "Failure
semantics", SPEC §3), against a scripted provider that records what it is sent."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.core.conversation import Message
from workbench.core.provider import CancelToken, TextDelta, Usage
from workbench.core.tools import tool
from workbench.engine.memory import Memory
from workbench.engine.model import (
    Model,
    ToolFinished,
    ToolStarted,
)
from workbench.engine.workspace import Workspace
from workbench.errors import (
    ContextBudgetError,
    OperationCancelledError,
    RateLimitError,
    RequestError,
    StreamInterruptedError,
    StructuredOutputError,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_provider import Reply, ScriptedProvider, call  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]


def roles(payload: dict[str, Any]) -> list[str]:
    return [m["role"] for m in payload["messages"]]


def stored_session(workspace: Workspace, **policy: Any) -> Memory:
    agent = workspace.repo.create_agent(f"agent {len(workspace.repo.list_agents())}",
                                        memory_policy=policy)
    info = workspace.repo.create_session("model test", agent_id=agent.id)
    return Memory.open(workspace, info.id)


# -- the seed examples -------------------------------------------------------------------------


def test_two_executes_with_auto_memory_leave_four_messages() -> None:
    memory = Memory()
    model = Model(ScriptedProvider(["Hello Ana.", "You said your name is Ana."]), memory=memory)
    first = model.execute("Hi, I am Ana.")
    second = model.execute("What is my name?")
    assert [(m.role, m.content) for m in memory.messages()] == [
        ("user", "Hi, I am Ana."),
        ("assistant", "Hello Ana."),
        ("user", "What is my name?"),
        ("assistant", "You said your name is Ana."),
    ]
    assert first.text == "Hello Ana." and second.text == "You said your name is Ana."
    assert [m.content for m in second.messages] == [
        "What is my name?",
        "You said your name is Ana.",
    ]
    assert second.appended


def test_a_window_of_twenty_after_a_hundred_executes(workspace: Workspace) -> None:
    info = workspace.repo.create_session("windowed")
    memory = Memory.open(workspace, info.id, max_messages=20)
    model = Model(ScriptedProvider(default="ok"), memory=memory)
    for i in range(100):
        model.execute(f"question {i}")
    assert len(memory) == 20
    assert memory.messages()[-2].content == "question 99"
    assert workspace.repo.message_count(info.id, states=("evicted",)) == 180
    assert workspace.repo.message_count(info.id) == 200


def test_manual_mode_appends_nothing(workspace: Workspace) -> None:
    memory = Memory()
    memory.append("user", "earlier")
    provider = ScriptedProvider(["one", "two"])
    reply = Model(provider).with_memory(memory, auto=False).execute("not kept")
    assert len(memory) == 1
    assert not reply.appended
    assert [m.content for m in reply.messages] == ["not kept", "one"]
    # The memory was still read: the request carried its history.
    assert [m["content"] for m in provider.payloads[0]["messages"]] == ["earlier", "not kept"]
    manual = stored_session(workspace, mode="manual")
    Model(provider, memory=manual).execute("policy says manual")
    assert len(manual) == 0


def test_preseeded_memory_is_sent_in_order_before_the_prompt() -> None:
    memory = Memory()
    memory.append("system", "You are a pirate.")
    memory.append("user", "Hello!")
    memory.append("assistant", "Arr, hello.")
    provider = ScriptedProvider(["Arr."])
    Model(provider, memory=memory).execute("Where is the treasure?")
    assert provider.payloads[0]["messages"] == [
        {"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Arr, hello."},
        {"role": "user", "content": "Where is the treasure?"},
    ]


def test_without_memory_the_model_is_stateless() -> None:
    provider = ScriptedProvider(["a", "b"])
    model = Model(provider, instructions="Be brief.")
    model.execute("first")
    reply = model.execute("second")
    assert provider.payloads[1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "second"},
    ]
    assert not reply.appended and [m.role for m in reply.messages] == ["user", "assistant"]


def test_with_memory_overrides_the_default_for_the_new_model() -> None:
    default, other = Memory(), Memory()
    model = Model(ScriptedProvider(default="ok"), memory=default)
    model.with_memory(other).execute("to the other")
    model.execute("to the default")
    assert [m.content for m in other.messages()] == ["to the other", "ok"]
    assert [m.content for m in default.messages()] == ["to the default", "ok"]


# -- builders ----------------------------------------------------------------------------------


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text


@tool
def clock() -> str:
    """The time."""
    return "noon"


def test_builders_are_immutable_and_compose_in_any_order() -> None:
    base = Model(ScriptedProvider(), instructions="x", tools=[echo])
    memory = Memory()
    one = base.with_tools([clock]).without_tools().with_memory(memory).with_context({"a": 1})
    two = base.with_context({"a": 1}).with_memory(memory).without_tools().with_tools([clock])
    for model in (one, two):
        assert [t.name for t in model.tools] == ["clock"]
        assert model.active_memory is memory
    assert [t.name for t in base.tools] == ["echo"]
    assert base.active_memory is None
    assert [t.name for t in base.with_tools([clock]).tools] == ["echo", "clock"]
    with pytest.raises(AttributeError):
        base.instructions = "changed"  # type: ignore[misc]
    with pytest.raises(RequestError, match="Two tools"):
        base.with_tools([clock]).with_tools([clock])
    with pytest.raises(RequestError, match="no option"):
        base.with_options(colour="red")


def test_context_is_sent_as_its_own_message() -> None:
    provider = ScriptedProvider(["ok"])
    Model(provider, instructions="Help.").with_context({"city": "Porto"}).execute("Weather?")
    messages = provider.payloads[0]["messages"]
    assert roles(provider.payloads[0]) == ["system", "system", "user"]
    assert '"city": "Porto"' in messages[1]["content"]


# -- tools -------------------------------------------------------------------------------------


def test_the_tool_loop_records_calls_results_usage_and_stats(workspace: Workspace) -> None:
    seen: list[str] = []

    @tool
    def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        seen.append(city)
        return {"city": city, "sky": "clear"}

    memory = stored_session(workspace)
    provider = ScriptedProvider(
        [
            Reply(tool_calls=[call("weather", {"city": "Porto"}, "w1")], usage=Usage(20, 5)),
            Reply(text="Clear skies in Porto.", usage=Usage(40, 6)),
        ]
    )
    events: list[Any] = []
    reply = Model(provider, tools=[weather], memory=memory).execute(
        "Weather in Porto?", on_event=events.append
    )
    assert seen == ["Porto"]
    assert reply.text == "Clear skies in Porto."
    assert reply.usage == Usage(60, 11)
    assert reply.steps == 2
    second = provider.payloads[1]
    assert roles(second) == ["user", "assistant", "tool"]
    assert second["messages"][1]["tool_calls"][0]["id"] == "w1"
    assert json.loads(second["messages"][2]["content"]) == {"city": "Porto", "sky": "clear"}
    assert second["tools"][0]["function"]["name"] == "weather"
    stored = memory.messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].tool_call_id == "w1"
    assert stored[1].metadata["usage"] == {"input_tokens": 20, "output_tokens": 5}
    assert stored[3].metadata["usage"] == {"input_tokens": 40, "output_tokens": 6}
    assert stored[3].metadata["finish_reason"] == "stop"
    context = memory.context()
    assert (context.token_usage.input_tokens, context.token_usage.output_tokens) == (60, 11)
    assert context.tool_stats.total_calls == 1
    assert context.tool_stats.by_tool == {"weather": 1}
    assert context.tool_stats.failures == 0
    assert [type(e) for e in events if isinstance(e, ToolStarted | ToolFinished)] == [
        ToolStarted,
        ToolFinished,
    ]
    assert [m.content for m in memory.appended()] == [m.content for m in stored]


def test_token_usage_sums_over_turns(workspace: Workspace) -> None:
    memory = stored_session(workspace)
    model = Model(ScriptedProvider([Reply("a", usage=Usage(3, 1)), Reply("b", usage=Usage(5, 2))]),
                  memory=memory)
    model.execute("one")
    model.execute("two")
    usage = memory.context().token_usage
    assert (usage.input_tokens, usage.output_tokens) == (8, 3)


def _tool_result_seen(provider: ScriptedProvider) -> str:
    return str(provider.payloads[1]["messages"][-1]["content"])


@pytest.mark.parametrize(
    ("calls", "fragment"),
    [
        ([call("explode", {})], "ValueError: the fuse was lit"),
        ([call("nowhere", {})], "there is no tool named 'nowhere'"),
        ([call("explode", "{not json")], "not a JSON object"),
        ([call("echo", {"text": 3})], "$.text: expected string"),
    ],
    ids=["raises", "unknown", "bad-json", "bad-arguments"],
)
def test_tool_failures_become_error_results_the_model_sees(
    workspace: Workspace, calls: list[dict[str, Any]], fragment: str
) -> None:
    @tool
    def explode() -> None:
        """Always fails."""
        raise ValueError("the fuse was lit")

    memory = stored_session(workspace)
    provider = ScriptedProvider([Reply(tool_calls=calls), "Sorry, that failed."])
    reply = Model(provider, tools=[explode, echo], memory=memory).execute("try it")
    assert fragment in _tool_result_seen(provider)
    assert _tool_result_seen(provider).startswith("Error:")
    assert reply.text == "Sorry, that failed."
    tool_message = memory.messages()[2]
    assert tool_message.role == "tool" and fragment in tool_message.metadata["error"]
    assert memory.context().tool_stats.failures == 1
    assert memory.context().tool_stats.total_calls == 1


def test_a_hanging_tool_times_out_into_an_error_result() -> None:
    release = threading.Event()

    @tool(timeout=0.2)
    def hang() -> str:
        """Never answers in time."""
        release.wait(30)
        return "too late"

    provider = ScriptedProvider([Reply(tool_calls=[call("hang")]), "It timed out."])
    memory = Memory()
    try:
        reply = Model(provider, tools=[hang], memory=memory).execute("go")
    finally:
        release.set()
    assert "did not finish within 0.2 seconds" in _tool_result_seen(provider)
    assert reply.tool_stats.failures == 1
    assert len(memory) == 4


def test_the_loop_stops_at_the_step_limit_with_every_call_answered() -> None:
    provider = ScriptedProvider(default=Reply(tool_calls=[call("clock")]))
    memory = Memory()
    reply = Model(provider, tools=[clock], memory=memory, max_steps=3).execute("loop forever")
    assert provider.calls == 3
    assert reply.step_limit_reached and reply.finish_reason == "step_limit"
    stored = memory.messages()
    assert [m.role for m in stored] == ["user"] + ["assistant", "tool"] * 3
    assert "step limit of 3" in stored[-1].content
    assert reply.tool_stats.total_calls == 2  # the third call was not run
    # What memory holds is a valid history: the next request pairs every call.
    provider.add("done")
    Model(provider, tools=[clock], memory=memory).execute("stop")
    last = provider.payloads[-1]["messages"]
    ids = [c["id"] for m in last if m.get("tool_calls") for c in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert ids == answered


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        RateLimitError("slow down", retry_after=3),
        Reply(text="partial answer", fail_after=1, failure=StreamInterruptedError("dropped")),
    ],
    ids=["before-reply", "mid-stream"],
)
def test_a_failed_call_appends_nothing(workspace: Workspace, failure: Any) -> None:
    memory = stored_session(workspace)
    memory.append("user", "before")
    before = memory.context()
    provider = ScriptedProvider([failure])
    with pytest.raises((RateLimitError, StreamInterruptedError)):
        Model(provider, memory=memory).execute("fails")
    assert [m.content for m in memory.messages()] == ["before"]
    assert memory.context() == before


def test_a_failure_after_a_tool_ran_appends_nothing(workspace: Workspace) -> None:
    memory = stored_session(workspace)
    provider = ScriptedProvider([Reply(tool_calls=[call("clock")]), RateLimitError("later")])
    with pytest.raises(RateLimitError):
        Model(provider, tools=[clock], memory=memory).execute("time?")
    assert len(memory) == 0
    assert memory.context().tool_stats.total_calls == 0


def test_a_stopped_stream_appends_nothing() -> None:
    memory = Memory()
    provider = ScriptedProvider([Reply(text="a long answer being typed", pieces=5, cancel_after=2)])
    with pytest.raises(OperationCancelledError):
        Model(provider, memory=memory).execute("tell me", cancel=CancelToken())
    assert len(memory) == 0


def test_a_stopped_stream_can_keep_its_partial_reply_marked_stopped() -> None:
    memory = Memory()
    provider = ScriptedProvider([Reply(text="a long answer being typed", pieces=5, cancel_after=2)])
    reply = Model(provider, memory=memory).execute(
        "tell me", cancel=CancelToken(), keep_partial=True
    )
    assert reply.stopped
    stored = memory.messages()
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].metadata["stopped"] is True
    assert "a long answer being typed".startswith(stored[1].content)
    assert 0 < len(stored[1].content) < len("a long answer being typed")


def test_an_impossible_budget_fails_before_calling_and_appends_nothing() -> None:
    memory = Memory()
    provider = ScriptedProvider(["never"], window=50)
    model = Model(provider, instructions="long rules " * 40, memory=memory)
    with pytest.raises(ContextBudgetError, match="cannot fit"):
        model.execute("hi")
    assert provider.calls == 0 and len(memory) == 0


# -- streaming -----------------------------------------------------------------------------------


def test_text_streams_to_callbacks_and_iterators() -> None:
    provider = ScriptedProvider([Reply("one two three", pieces=3), Reply("four five", pieces=2)])
    model = Model(provider)
    pieces: list[str] = []
    reply = model.execute("count", on_text=pieces.append)
    assert pieces and "".join(pieces) == "one two three" == reply.text
    run = model.stream_run("more")
    texts = [e.text for e in run if isinstance(e, TextDelta)]
    assert "".join(texts) == "four five"
    assert run.response is not None and run.response.text == "four five"


def test_a_non_streaming_model_uses_complete() -> None:
    provider = ScriptedProvider([Reply("whole", usage=Usage(1, 2))])
    reply = Model(provider, stream=False).execute("x")
    assert (reply.text, reply.usage) == ("whole", Usage(1, 2))
    assert provider.payloads[0]["stream"] is False


# -- preflight equals execute -------------------------------------------------------------------


def test_preflight_payload_is_what_execute_sends(workspace: Workspace) -> None:
    memory = stored_session(workspace, inject="context")
    memory.append("system", "Session rules.")
    memory.append("user", "earlier question")
    memory.append("assistant", "earlier answer")
    memory.long_term().remember("The user likes short answers.")
    provider = ScriptedProvider(["fine"], window=4000)
    model = Model(provider, instructions="Agent rules.", tools=[echo], memory=memory,
                  temperature=0.2).with_context({"k": "v"})
    preview = model.preflight("short answers please")
    model.execute("short answers please")
    assert preview.payload == provider.payloads[0]
    assert preview.to_json()["payload"] == provider.payloads[0]
    assert preview.http["headers"]["authorization"] == "Bearer [redacted]"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(
    history=st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]),
                               st.text(max_size=30)), max_size=12),
    prompt=st.text(max_size=30),
    window=st.integers(60, 400),
    instructions=st.text(max_size=20),
)
def test_preflight_equals_what_execute_sends_for_any_history(
    history: list[tuple[str, str]], prompt: str, window: int, instructions: str
) -> None:
    memory = Memory()
    for role, text in history:
        memory.append(role, text)
    provider = ScriptedProvider(["reply"], window=window)
    model = Model(provider, instructions=instructions or None, memory=memory)
    try:
        preview = model.preflight(prompt)
    except ContextBudgetError:
        with pytest.raises(ContextBudgetError):
            model.execute(prompt)
        return
    model.execute(prompt)
    assert provider.payloads[0] == preview.payload
    assert preview.tokens.total <= preview.budget.available  # type: ignore[operator]


# -- structured output -------------------------------------------------------------------------


class City(pydantic.BaseModel):
    name: str
    population: int


def test_structured_output_parses_into_the_pydantic_model() -> None:
    memory = Memory()
    provider = ScriptedProvider(['{"name": "Porto", "population": 232000}'])
    reply = Model(provider, memory=memory).execute_with_schema("Describe Porto.", City)
    assert reply.value == City(name="Porto", population=232000)
    assert reply.attempts == 1
    assert provider.payloads[0]["response_format"]["json_schema"]["schema"]["title"] == "City"
    assert [m.content for m in memory.messages()][0] == "Describe Porto."


def test_a_retry_replaces_the_prompt_and_memory_keeps_only_the_original(
    workspace: Workspace,
) -> None:
    memory = stored_session(workspace)
    memory.append("user", "earlier")
    provider = ScriptedProvider(
        [
            Reply('{"name": "Porto", "population": "many"}', usage=Usage(10, 3)),
            Reply('```json\n{"name": "Porto", "population": 232000}\n```', usage=Usage(12, 4)),
        ]
    )
    reply = Model(provider, memory=memory).execute_with_schema("Describe Porto.", City)
    assert reply.attempts == 2
    retry = provider.payloads[1]["messages"]
    assert [m["content"] for m in retry[:-1]] == ["earlier"]
    assert "Describe Porto." in retry[-1]["content"]
    assert "population" in retry[-1]["content"] and "not valid" in retry[-1]["content"]
    stored = memory.messages()
    assert [m.content for m in stored[:2]] == ["earlier", "Describe Porto."]
    assert len(stored) == 3 and stored[2].metadata["attempts"] == 2
    assert memory.context().token_usage.input_tokens == 22


def test_when_every_attempt_fails_memory_is_unchanged_and_the_error_says_why() -> None:
    memory = Memory()
    memory.append("user", "earlier")
    provider = ScriptedProvider(["not json", '{"name": 1}', "[]"])
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    with pytest.raises(StructuredOutputError) as err:
        Model(provider, memory=memory).execute_with_schema("Name?", schema, retries=2)
    assert provider.calls == 3
    assert "3 attempts" in str(err.value) and "expected object" in str(err.value)
    assert len(err.value.errors) == 3 and err.value.replies[0] == "not json"
    assert [m.content for m in memory.messages()] == ["earlier"]


def test_a_json_schema_reply_is_validated_and_returned_as_json() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 1}
    provider = ScriptedProvider(["[]", "[1, 2]"])
    reply = Model(provider).execute_with_schema("numbers", schema, retries=1)
    assert reply.value == [1, 2]
    assert "fewer than 1 items" in provider.payloads[1]["messages"][-1]["content"]


@pytest.mark.parametrize("schema", [42, "string", {"type": "strng"}, [1], Message])
def test_a_schema_that_is_not_a_schema_is_refused_before_calling(schema: Any) -> None:
    provider = ScriptedProvider(["{}"])
    memory = Memory()
    with pytest.raises(RequestError, match="not a"):
        Model(provider, memory=memory).execute_with_schema("x", schema)
    assert provider.calls == 0 and len(memory) == 0


# -- the package entry points -------------------------------------------------------------------


def test_memory_and_model_come_from_the_package_lazily() -> None:
    from workbench import Memory as PackageMemory
    from workbench import Model as PackageModel

    assert PackageMemory is Memory and PackageModel is Model
    probe = (
        "import sys, workbench; loaded = 'workbench.engine.model' in sys.modules; "
        "from workbench import Model; print(loaded, 'workbench.engine.model' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120, check=True)
    assert done.stdout.split() == ["False", "True"]
