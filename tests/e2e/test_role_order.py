"""Strict role order against a real llama.cpp server with Gemma's own chat template
(issue 15.2).

Gemma's template takes one leading system message, then demands user, assistant, user…
and raises "Conversation roles must alternate" otherwise. The workbench trims a long
session to the window, so the oldest kept message may be a reply; it leaves that reply
out (reported in ``left_out``), and because the server's ``/props`` shows the template
demands alternation, it merges consecutive same-role messages, the summary and the
instructions, and turns tool history into text in the payload only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import realllm

from workbench.cli import main
from workbench.core.assembly import REASON_LEADING_REPLY
from workbench.core.conversation import Message
from workbench.engine.workspace import Workspace

# Gemma 3's template as its authors publish it: strict alternation after one system.
STRICT_GEMMA = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}{%- set first_user_prefix = "" -%}{%- set loop_messages = messages -%}{%- endif -%}
{%- for message in loop_messages -%}
{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
{{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
{%- endif -%}
{%- set role = "model" if message['role'] == 'assistant' else message['role'] -%}
{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
{%- if message['content'] is string -%}{{ message['content'] | trim }}
{%- else -%}{{ raise_exception("Invalid content type") }}{%- endif -%}
{{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{'<start_of_turn>model\\n'}}{%- endif -%}
"""

CTX = 1024


@pytest.fixture(scope="module")
def strict_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[realllm.RunningServer]:
    install = realllm.ensure_installed()
    template = tmp_path_factory.mktemp("gemma") / "gemma3-strict.jinja"
    template.write_text(STRICT_GEMMA, encoding="utf-8")
    server = realllm.start_server(install, ctx=CTX, threads=2, n_predict=16,
                                  template=template)
    try:
        yield server
    finally:
        server.stop()


def _session(db: Path) -> None:
    """40 messages: long questions and short answers (so a cut falls on a question and
    the oldest kept message is an answer), then a tool group, a system note and two
    user messages in a row."""
    messages: list[Message] = []
    for i in range(19):
        messages.append(Message(role="user", content=f"Question {i}: " + "tell me more " * 40))
        messages.append(Message(role="assistant", content=f"Answer {i}."))
    messages += [
        Message(role="assistant", content=None, tool_calls=[{
            "id": "c1", "type": "function",
            "function": {"name": "clock", "arguments": "{}"}}]),
        Message(role="tool", content="10:00", tool_call_id="c1", name="clock"),
        Message(role="system", content="Keep answers short."),
        Message(role="user", content="First of two questions."),
    ]
    with Workspace.open(db) as ws:
        info = ws.repo.create_session("Long talk")
        ws.repo.append_messages(info.id, messages)
        ws.repo.update_agent(info.agent_id, instructions="Answer briefly.")


def test_a_trimmed_history_is_accepted_by_a_strict_gemma_template(
    strict_llama: realllm.RunningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "strict.db"
    _session(db)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*args, "--db", str(db)])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    assert run("providers", "add", "gemma", "--kind", "openai", "--base-url",
               strict_llama.url, "--model", strict_llama.alias)[0] == 0
    code, out, err = run("preflight", "Long talk", "Second question.", "--json",
                         "--max-tokens", "30")
    assert code == 0, err
    shown = json.loads(out)
    reasons = [item["reason"] for item in shown["left_out"]]  # one per run of messages
    assert REASON_LEADING_REPLY in reasons  # the cut fell before an answer
    sent = shown["payload"]["messages"]
    roles = [m["role"] for m in sent]
    assert roles[0] == "system" and roles.count("system") == 1
    assert roles[1:] == ["user", "assistant"] * ((len(roles) - 1) // 2) + ["user"] * (
        (len(roles) - 1) % 2)
    assert "First of two questions." in sent[-1]["content"]
    assert sent[-1]["content"].endswith("Second question.")

    # The template really is strict: the unshaped history is refused by the server.
    unshaped = [{"role": "system", "content": "Answer briefly."},
                {"role": "assistant", "content": "Answer 18."},
                {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    refused = httpx.post(f"{strict_llama.url}/v1/chat/completions", timeout=60,
                         json={"model": strict_llama.alias, "messages": unshaped,
                               "max_tokens": 4})
    assert refused.status_code >= 400

    code, out, err = run("chat", "Long talk", "Second question.", "--max-tokens", "30")
    assert code == 0, err
    code, out, _ = run("show", "Long talk", "--json")
    stored = json.loads(out)["messages"]
    # Memory is not merged: the two user messages stay apart, and the turn was added.
    assert [m["role"] for m in stored[-4:]] == ["system", "user", "user", "assistant"]
    assert len(stored) == 44
