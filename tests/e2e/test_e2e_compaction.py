"""The model summarizer against a real llama.cpp server (issue 6).

The model is a small base model that writes nonsense, so these tests check mechanics
only: the request the summarizer sends (prompt, previous summary, folded messages, a
reply budget that fits the server's window), that the reply becomes the summary, that a
second compaction receives the first summary, and that undo restores everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from realllm import RunningServer

from workbench.cli import main
from workbench.core.conversation import Message, SessionContext
from workbench.core.provider import CancelToken, ChatRequest, ChatResponse
from workbench.core.tokens import fill_counts, get_counter
from workbench.engine import compaction
from workbench.engine.workspace import Workspace
from workbench.providers.openai import OpenAICompatible

CTX = 1024


class Recording:
    """A real provider that keeps the requests it was given."""

    def __init__(self, inner: OpenAICompatible):
        self.inner = inner
        self.kind = inner.kind
        self.model = inner.model
        self.requests: list[ChatRequest] = []

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        return self.inner.build_payload(request)

    def describe_request(self, request: ChatRequest) -> dict[str, Any]:
        return self.inner.describe_request(request)

    def stream(self, request: ChatRequest, cancel: CancelToken | None = None) -> Any:
        self.requests.append(request)
        return self.inner.stream(request, cancel)

    def complete(self, request: ChatRequest, cancel: CancelToken | None = None) -> ChatResponse:
        self.requests.append(request)
        return self.inner.complete(request, cancel)

    def context_window(self) -> int | None:
        return self.inner.context_window()


def snapshot(ws: Workspace, sid: int) -> tuple[Any, ...]:
    return (
        [(m.id, m.state, m.compaction_id) for m in ws.repo.list_messages(sid)],
        ws.repo.get_context(sid),
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Any:
    ws = Workspace.open(tmp_path / "e2e.db")
    try:
        yield ws
    finally:
        ws.close()


def session(ws: Workspace, count: int = 8) -> int:
    info = ws.repo.create_session("e2e compaction")
    messages = [Message("system", "You are a travel agent.")]
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append(Message(role, f"Message {i} about the trip to Porto on day {i}."))
    fill_counts(messages, get_counter())
    ws.repo.append_messages(info.id, messages)
    ws.repo.set_context(info.id, SessionContext(summary="The user plans a trip."))
    return info.id


def test_the_model_summarizer_builds_progressively_and_undoes(
    llama: RunningServer, workspace: Workspace
) -> None:
    sid = session(workspace)
    original = snapshot(workspace, sid)
    provider = Recording(OpenAICompatible(llama.url, llama.alias))

    first = compaction.preview(workspace, sid, keep=3, summarizer="model", provider=provider)
    # Keeping 3 starts with a reply: its question stays too, 4 of 8 fold.
    assert first.changed and first.folded_count == 4
    assert first.summary.strip() and first.summary_mode == "replace"
    (request,) = provider.requests
    system, user = request.messages
    assert system.role == "system" and system.content == compaction.DEFAULT_PROMPT
    assert "Summary so far:\nThe user plans a trip." in user.content
    assert "- user: Message 0 about the trip to Porto on day 0." in user.content
    assert request.max_tokens is not None and request.max_tokens <= CTX // 4
    compaction.apply(workspace, first)
    assert workspace.repo.get_context(sid).summary == first.summary
    after_first = snapshot(workspace, sid)

    second = compaction.compact(workspace, sid, keep=1, summarizer="model", provider=provider)
    assert second.changed and second.plan is not None and second.plan.folded_count == 2
    # The second call was given the summary the first one wrote.
    assert first.summary.strip() in provider.requests[-1].messages[1].content
    assert workspace.repo.get_context(sid).summary == second.plan.summary
    records = compaction.history(workspace, sid)
    assert [r.summarizer for r in records] == ["model", "model"]

    compaction.undo(workspace, sid)
    assert snapshot(workspace, sid) == after_first
    compaction.undo(workspace, sid)
    assert snapshot(workspace, sid) == original


def test_compact_with_the_model_summarizer_from_the_command_line(
    llama: RunningServer, workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = session(workspace)
    db = str(workspace.db_path)
    assert main(["providers", "add", "local", "--kind", "openai", "--base-url", llama.url,
                 "--model", llama.alias, "--db", db]) == 0
    capsys.readouterr()
    # --force: the base model's summary may well be longer than what it folds, and a
    # manual compaction that would not lower the request's tokens asks first.
    code = main(["compact", str(sid), "--keep", "2", "--summarizer", "model",
                 "--provider", "local", "--json", "--force", "--db", db])
    out = capsys.readouterr().out
    assert code == 0, out
    import json

    data = json.loads(out)
    assert data["changed"] is True and data["folded"] == 6 and data["kept"] == 2
    assert data["summary"].strip()
    assert bool(data["warning"]) is (data["tokens_after"] >= data["tokens_before"])
    assert workspace.repo.get_context(sid).summary == data["summary"]
    assert workspace.repo.message_count(sid, states=["active"]) == 3
