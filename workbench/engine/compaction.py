"""Compaction of stored sessions (SPEC §4): preview, apply, undo, the model summarizer,
and auto-compaction before a send.

::

    plan = preview(ws, session_id)                 # a dry run: nothing is written
    plan.folded_ids, plan.kept, plan.summary, plan.tokens_before, plan.tokens_after
    result = apply(ws, plan, summary=edited_text)  # one transaction
    undo(ws, session_id)                           # the last compaction, exactly

``ws`` everywhere is an open :class:`~workbench.engine.workspace.Workspace`, and
``session`` a session id or anything :meth:`Workspace.find_session
<workbench.engine.workspace.Workspace.find_session>` accepts. Auto-compaction
(:func:`maybe_compact_before_send`) takes the store-backed
:class:`~workbench.engine.memory.Memory` about to send instead: the store changes under
its lock, and it is refreshed after.

The policy of a session is its agent's ``memory_policy["compaction"]`` overridden by the
session's ``overrides["compaction"]`` (see :class:`CompactionPolicy`). The request's
tokens before and after are counted by request assembly with the agent's instructions,
the long-term summary and the active history (no new prompt, no recalled memory).

The model summarizer sends the previous summary and the folded messages to a provider
and takes its reply as the new long-term summary. When the messages do not fit the
model's context window at once, they go in chunks, each call building on the summary the
previous one wrote. Any provider error becomes a :class:`CompactionError` that says why,
before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from datetime import datetime
from typing import Any

from workbench.core.assembly import RequestParts, assemble, summary_message_text
from workbench.core.compaction import (
    EXTRACTIVE,
    MODEL,
    REPLACE,
    SUMMARIZERS,
    CompactionPlan,
    CompactionPolicy,
    CompactionRecord,
    ExtractiveSummarizer,
    Summarizer,
    SummaryDraft,
    count_long_text,
    plan_compaction,
    shorten,
)
from workbench.core.conversation import Agent, Message, SessionInfo, utcnow
from workbench.core.gcpause import collector_paused
from workbench.core.message_table import MessageSelection
from workbench.core.provider import ChatRequest, Provider
from workbench.core.summarizers import CountedText, summary_lines
from workbench.core.tokens import TokenCounter, get_counter
from workbench.engine.memory import Memory
from workbench.engine.providers import ProviderSettings, build_provider
from workbench.engine.workspace import Workspace
from workbench.errors import (
    CompactionError,
    OperationCancelledError,
    ProviderError,
    WorkbenchError,
)
from workbench.store.compactions import (
    apply_plan,
    list_compactions,
    load_table,
    load_table_kept,
)
from workbench.store.compactions import undo_compaction as _undo_in_store
from workbench.store.repository import Repository
from workbench.store.summary_lines import keep_summary_lines as store_summary_lines

__all__ = [
    "DEFAULT_PROMPT",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionResult",
    "ModelSummarizer",
    "apply",
    "compact",
    "history",
    "keep_summary_lines",
    "maybe_compact_before_send",
    "policy_for",
    "preview",
    "request_tokens",
    "undo",
]

log = logging.getLogger(__name__)

#: The model summarizer's instructions unless the policy or the caller gives others.
DEFAULT_PROMPT = (
    "You keep the running summary of a conversation between a user and an assistant. "
    "You receive the summary so far and the messages that are now leaving the "
    "conversation. Write one updated summary that keeps what still matters from both: "
    "names, numbers, decisions, promises, open questions and the user's preferences. "
    "Write plain sentences, as short as the content allows. Reply with the summary only."
)

# The workbench's tokenizer is not the model's; leave this share of the window unused.
_WINDOW_MARGIN = 0.8


# -- sessions and policies ---------------------------------------------------------------------


def _session(repo: Repository, session: int | str) -> SessionInfo:
    if isinstance(session, int):
        return repo.get_session(session)
    return repo.find_session(session)


def _locked(memory: Memory | None) -> AbstractContextManager[object]:
    """The memory's lock, held while the store changes under it (nothing without one)."""
    return memory.lock if memory is not None else nullcontext()


def _refresh(memory: Memory | None) -> None:
    if memory is not None:
        memory.refresh()


def policy_for(ws: Workspace, session: int | str) -> CompactionPolicy:
    """The session's compaction policy: its agent's ``memory_policy["compaction"]``
    overridden by the session's ``overrides["compaction"]``."""
    repo = ws.repo
    info = _session(repo, session)
    return _policy(repo.get_agent(info.agent_id), info)


def _policy(agent: Agent, info: SessionInfo) -> CompactionPolicy:
    return CompactionPolicy.from_dict(
        (agent.memory_policy or {}).get("compaction"), (info.overrides or {}).get("compaction")
    )


# -- tokens ------------------------------------------------------------------------------------


def request_tokens(
    instructions: str | None,
    summary: str | None,
    history: Sequence[Message],
    counter: TokenCounter,
    *,
    counted_tail: CountedText | None = None,
) -> int:
    """Tokens of the request a session would send now: the instructions, the summary and
    the active history, unfitted (no budget), without a new prompt.

    Request assembly counts the system message and the history, so the figure is the one
    preflight shows for those parts. When ``history`` is a :class:`MessageSelection`,
    only its whole rows go through assembly and the plain rows' cached costs are added:
    with no budget, assembly keeps every plain message at its cost, and they take no
    part in its tool groups, so the sum is the same.

    The summary message is counted here, the way assembly builds it, because a summary
    of thousands of lines is worth counting on several threads (:func:`count_long_text`,
    exact). When the summary ends with a summarizer's ``counted_tail`` (its new lines,
    counted while they were written), only the text before it is counted.
    """
    plain = 0
    if isinstance(history, MessageSelection):
        history, plain = _split_plain(history, counter)
    parts = RequestParts(instructions=instructions, history=history, strict_order=False)
    total = assemble(parts, counter=counter).tokens.total + plain
    text = (summary or "").strip()
    if text:
        total += counter.count_message(Message(role="system"))
        full = summary_message_text(text)
        tail = counted_tail.text if counted_tail is not None else ""
        if (
            tail.startswith("-")
            and len(tail) < len(full)
            and full.endswith(tail)
            and full[-len(tail) - 1] == "\n"
        ):
            assert counted_tail is not None
            total += count_long_text(counter, full[: -len(tail)]) + counted_tail.tokens
        else:
            total += count_long_text(counter, full)
    return total


def _split_plain(selection: MessageSelection, counter: TokenCounter) -> tuple[list[Message], int]:
    """The selection's whole messages in order, and the summed cost of its plain rows
    (cached costs where the table has them in the counter's encoding, else counted)."""
    table = selection.table
    whole = table.whole
    indices = selection.indices
    costs = table.costs
    if len(indices) == len(costs):  # every row (the request as the session stands)
        wholes = list(whole.values())
        if table.encoding == counter.encoding_name and None not in costs:
            known: Sequence[int] = costs  # type: ignore[assignment]  # no None: checked
            return wholes, sum(known) - sum(known[i] for i in whole)
        plain_rows = [i for i in range(len(costs)) if i not in whole]
    else:
        wholes = [whole[i] for i in indices if i in whole]
        plain_rows = [i for i in indices if i not in whole]
    if table.encoding != counter.encoding_name:
        missing = plain_rows
        total = 0
    else:
        found = [costs[i] for i in plain_rows]
        if None not in found:
            return wholes, sum(found)  # type: ignore[arg-type]
        missing = [i for i, cost in zip(plain_rows, found, strict=True) if cost is None]
        total = sum(cost for cost in found if cost is not None)
    if missing:
        total += sum(counter.count_messages([table.message(i) for i in missing]))
    return wholes, total


class _TailRecorder:
    """Passes a summarizer through, keeping the counted tail of its last draft."""

    def __init__(self, inner: Summarizer):
        self.inner = inner
        self.name = inner.name
        self.counted_tail: CountedText | None = None

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        draft = self.inner.summarize(folded, previous)
        self.counted_tail = draft.counted_tail
        return draft


# -- the model summarizer ------------------------------------------------------------------------


class ModelSummarizer:
    """Summaries written by a model through a provider.

    The request is ``prompt`` as the system message and one user message holding the
    previous summary and the folded messages (one ``- role: text`` line each, cut to
    ``line_chars``). The reply replaces the long-term summary. When the lines do not fit
    the provider's context window at once, they are sent in chunks (at most
    ``max_calls``; beyond that the oldest lines are left out with a note), each call
    receiving the summary the previous one wrote.
    """

    name = MODEL

    def __init__(
        self,
        provider: Provider,
        *,
        prompt: str | None = None,
        max_tokens: int = 512,
        temperature: float | None = 0.2,
        line_chars: int = 500,
        max_calls: int = 16,
        counter: TokenCounter | None = None,
    ):
        self.provider = provider
        self.prompt = (prompt or "").strip() or DEFAULT_PROMPT
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.line_chars = line_chars
        self.max_calls = max(1, max_calls)
        self.counter = counter or get_counter()
        self.calls = 0

    def build_request(
        self, lines: Sequence[str], previous: str, max_tokens: int | None = None
    ) -> ChatRequest:
        """The request for one call: the prompt, the summary so far, the messages."""
        body = (
            "Summary so far:\n"
            + (previous.strip() or "(none yet)")
            + "\n\nMessages leaving the conversation:\n"
            + "\n".join(lines)
        )
        return ChatRequest(
            messages=[Message(role="system", content=self.prompt), Message("user", body)],
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
            stream=False,
        )

    def _window(self) -> int | None:
        try:
            return self.provider.context_window()
        except ProviderError:
            return None

    def reply_tokens(self, window: int | None) -> int:
        """Tokens asked for each reply: ``max_tokens``, at most a quarter of the window."""
        if window is None:
            return self.max_tokens
        return min(self.max_tokens, max(32, window // 4))

    def _chunks(
        self, lines: list[str], previous: str, window: int | None, reply: int
    ) -> list[list[str]]:
        if window is None:
            return [lines]
        usable = int(window * _WINDOW_MARGIN)
        bare = self.counter.count_request(self.build_request([], "").messages)
        fixed = self.counter.count_request(self.build_request([], previous).messages) + reply
        # The first call carries the previous summary; each later call carries the
        # summary the call before it wrote, which is at most one reply long.
        first_room = usable - fixed
        later_room = usable - bare - 2 * reply
        if first_room < 32:
            raise CompactionError(
                f"The model's context window ({window} tokens) has no room for the messages "
                f"after the prompt, the previous summary and the reply ({fixed} tokens); "
                "the session was left unchanged. Use the extractive summarizer or a model "
                "with a larger window."
            )
        later_room = max(later_room, 32)
        sizes = self.counter.count_texts([line + "\n" for line in lines])
        chunks: list[list[str]] = []
        current: list[str] = []
        used = 0
        room = first_room
        for line, size in zip(lines, sizes, strict=True):
            if size > min(room, later_room):
                # One very long line: cut it to about what fits (3 characters a token).
                line = shorten(line, max(40, min(room, later_room) * 3))
                size = self.counter.count_text(line + "\n")
            if current and used + size > room:
                chunks.append(current)
                current, used, room = [], 0, later_room
            current.append(line)
            used += size
        if current:
            chunks.append(current)
        if len(chunks) > self.max_calls:
            dropped = sum(len(c) for c in chunks[: len(chunks) - self.max_calls])
            chunks = chunks[len(chunks) - self.max_calls :]
            chunks[0] = [f"({dropped} earlier messages left out for length)", *chunks[0]]
        return chunks

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        lines = summary_lines(folded, self.line_chars)
        summary = previous
        try:
            window = self._window()
            reply_tokens = self.reply_tokens(window)
            for chunk in self._chunks(lines, previous, window, reply_tokens):
                reply = self.provider.complete(self.build_request(chunk, summary, reply_tokens))
                self.calls += 1
                text = (reply.text or "").strip()
                if not text:
                    raise CompactionError(
                        "The model summarizer returned an empty summary; the session was "
                        "left unchanged."
                    )
                summary = text
        except (ProviderError, OperationCancelledError) as exc:
            raise CompactionError(
                f"The model summarizer failed: {exc} The session was left unchanged."
            ) from exc
        return SummaryDraft(summary, REPLACE)


class _LazyModelSummarizer:
    """Builds the provider only when something is to be summarized, so a session with
    nothing to compact never needs a configured provider."""

    name = MODEL

    def __init__(self, make: Callable[[], tuple[Provider, bool]], options: dict[str, Any]):
        self._make = make
        self._options = options
        self._provider: Provider | None = None
        self._owned = False

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        if self._provider is None:
            try:
                self._provider, self._owned = self._make()
            except WorkbenchError as exc:
                raise CompactionError(
                    f"The model summarizer cannot start: {exc} The session was left unchanged."
                ) from exc
        return ModelSummarizer(self._provider, **self._options).summarize(folded, previous)

    def close(self) -> None:
        if self._owned and self._provider is not None:
            closer = getattr(self._provider, "close", None)
            if callable(closer):
                closer()


def _configured_provider(
    repo: Repository, agent: Agent, name: str | None, model: str | None
) -> tuple[Provider, bool]:
    settings = ProviderSettings(repo.db)
    chosen = settings.choose(name, agent.provider)
    config = settings.get(chosen)
    if model:
        config = dc_replace(config, model=model)
    return build_provider(config), True


def _summarizer(
    kind: str | Summarizer | None,
    *,
    policy: CompactionPolicy,
    repo: Repository,
    agent: Agent,
    provider: Provider | None,
    provider_name: str | None,
    prompt: str | None,
    counter: TokenCounter,
) -> Summarizer:
    if kind is not None and not isinstance(kind, str):
        return kind
    name = kind or policy.summarizer
    if name not in SUMMARIZERS:
        raise CompactionError(
            f"There is no summarizer {name!r}; choose one of {', '.join(SUMMARIZERS)}."
        )
    if name == EXTRACTIVE:
        return ExtractiveSummarizer(policy.line_chars, policy.summary_chars, counter=counter)
    options: dict[str, Any] = {"prompt": prompt or policy.prompt, "counter": counter}
    if provider is not None and not provider_name:
        given = provider
        return _LazyModelSummarizer(lambda: (given, False), options)
    wanted = provider_name or policy.provider
    return _LazyModelSummarizer(
        lambda: _configured_provider(repo, agent, wanted, policy.model), options
    )


# -- preview, apply, undo ------------------------------------------------------------------------


@dataclass
class CompactionResult:
    """What a compaction did: whether anything changed, the plan, the new record's id,
    and a sentence (why nothing changed, or what did)."""

    changed: bool
    plan: CompactionPlan | None
    compaction_id: int | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"changed", "folded", "kept", "summary", "tokens_before", "tokens_after", …}``."""
        data: dict[str, Any] = self.plan.to_json() if self.plan is not None else {
            "changed": False, "folded": 0, "kept": None, "summary": "",
            "tokens_before": None, "tokens_after": None,
        }
        data["changed"] = self.changed
        data["compaction_id"] = self.compaction_id
        data["message"] = self.message
        return data


def preview(
    ws: Workspace,
    session: int | str,
    *,
    keep: int | None = None,
    fold_range: tuple[int, int] | None = None,
    summarizer: str | Summarizer | None = None,
    provider: Provider | None = None,
    provider_name: str | None = None,
    prompt: str | None = None,
    policy: CompactionPolicy | None = None,
    counter: TokenCounter | None = None,
    now: datetime | None = None,
    auto: bool = False,
) -> CompactionPlan:
    """Plan a compaction of a stored session without writing anything (a dry run).

    ``keep`` / ``fold_range`` make it manual; otherwise the policy's triggers decide.
    ``summarizer`` is ``"extractive"``, ``"model"`` or a :class:`Summarizer` (default:
    the policy's). The model summarizer uses ``provider`` when given, else the provider
    configured as ``provider_name``, the policy's or the agent's. Raises
    :class:`CompactionError` when the model summarizer fails.
    """
    return _preview(
        ws.repo,
        None,
        session,
        keep=keep,
        fold_range=fold_range,
        summarizer=summarizer,
        provider=provider,
        provider_name=provider_name,
        prompt=prompt,
        policy=policy,
        counter=counter,
        now=now,
        auto=auto,
    )


def _preview(
    repo: Repository,
    memory: Memory | None,
    session: int | str,
    *,
    keep: int | None,
    fold_range: tuple[int, int] | None,
    summarizer: str | Summarizer | None,
    provider: Provider | None,
    provider_name: str | None,
    prompt: str | None,
    policy: CompactionPolicy | None,
    counter: TokenCounter | None,
    now: datetime | None,
    auto: bool,
) -> CompactionPlan:
    info = _session(repo, session)
    agent = repo.get_agent(info.agent_id)
    policy = policy or _policy(agent, info)
    counter = counter or get_counter(model=agent.model)
    instructions = agent.instructions or None
    with collector_paused():  # ten thousand rows and lines: see core.gcpause
        with _locked(memory):
            messages = load_table_kept(repo.db, info.id, counter.encoding_name)
            context = repo.get_context(info.id)
        chosen = _summarizer(
            summarizer,
            policy=policy,
            repo=repo,
            agent=agent,
            provider=provider,
            provider_name=provider_name,
            prompt=prompt,
            counter=counter,
        )
        recorder = _TailRecorder(chosen)
        try:
            plan = plan_compaction(
                messages,
                context,
                policy=policy,
                summarizer=recorder,
                request_tokens=lambda summary, history: request_tokens(
                    instructions, summary, history, counter,
                    counted_tail=recorder.counted_tail,
                ),
                now=now or utcnow(),
                keep=keep,
                fold_range=fold_range,
                session_id=info.id,
                auto=auto,
            )
        finally:
            closer = getattr(chosen, "close", None)
            if callable(closer):
                closer()
    lines = messages.lines
    plan.unkept_lines = lines.count(None) if lines is not None else len(messages)
    return plan


def keep_summary_lines(ws: Workspace, session: int | str) -> int:
    """Write the summary lines a session's messages lack (a database written before lines
    were kept, see :mod:`workbench.store.summary_lines`), so that its next previews read
    them instead of writing and counting every line. Returns how many were written; a
    preview's :attr:`CompactionPlan.unkept_lines` says whether it is worth calling.
    """
    repo = ws.repo
    return store_summary_lines(repo.db, _session(repo, session).id)


def apply(
    ws: Workspace,
    plan: CompactionPlan,
    *,
    summary: str | None = None,
    counter: TokenCounter | None = None,
    only_if_smaller: bool = False,
) -> CompactionResult:
    """Apply a plan in one transaction, with its summary replaced by ``summary`` if given.

    A plan that changes nothing returns ``changed=False`` with the reason. A session that
    changed since the plan was made raises :class:`CompactionError` and is left as it is.
    With ``only_if_smaller`` a plan that folds messages without lowering the request's
    tokens (counted again for an edited summary) raises :class:`CompactionError` and
    changes nothing: a compaction never "saves" a negative number of tokens unasked.
    """
    return _apply(ws.repo, None, plan, summary=summary, counter=counter,
                  only_if_smaller=only_if_smaller)


def _apply(
    repo: Repository,
    memory: Memory | None,
    plan: CompactionPlan,
    *,
    summary: str | None = None,
    counter: TokenCounter | None = None,
    only_if_smaller: bool = False,
) -> CompactionResult:
    if not plan.changed:
        return CompactionResult(False, plan, None, plan.reason or "Nothing to compact.")
    if plan.session_id is None:
        raise CompactionError("The plan is not for a stored session.")
    if summary is not None and summary != plan.summary:
        plan = _edited(repo, plan, summary, counter)
    if only_if_smaller and plan.folded_ids and not plan.lowers_tokens:
        raise CompactionError(f"Nothing was applied: {plan.warning} Keep fewer messages "
                              "(or shorten the summary) and preview again.")
    with _locked(memory):
        compaction_id = apply_plan(repo.db, plan)
    _refresh(memory)
    return CompactionResult(
        True,
        plan,
        compaction_id,
        f"Folded {plan.folded_count:,} message{'s' if plan.folded_count != 1 else ''} into the "
        f"summary; the request went from {plan.tokens_before:,} to {plan.tokens_after:,} tokens.",
    )


def _edited(
    repo: Repository, plan: CompactionPlan, summary: str, counter: TokenCounter | None
) -> CompactionPlan:
    """``plan`` with the user's summary and the request's tokens counted for it."""
    info = repo.get_session(plan.session_id)  # type: ignore[arg-type]
    agent = repo.get_agent(info.agent_id)
    counter = counter or get_counter(model=agent.model)
    folded = set(plan.folded_ids)
    table = load_table(repo.db, info.id, counter.encoding_name)
    remaining = table.select([i for i, mid in enumerate(table.ids) if mid not in folded])
    edited = plan.with_summary(summary)
    tokens = request_tokens(agent.instructions or None, edited.new_summary, remaining, counter)
    return edited.with_summary(summary, tokens)


def compact(ws: Workspace, session: int | str, **options: Any) -> CompactionResult:
    """Preview and apply in one call (``options`` as for :func:`preview`)."""
    plan = preview(ws, session, **options)
    return apply(ws, plan, counter=options.get("counter"))


def undo(ws: Workspace, session: int | str, compaction_id: int | None = None) -> CompactionRecord:
    """Undo the session's last compaction still applied (or ``compaction_id``, which
    must be that one): messages, summary, facts and tasks come back exactly. Repeated
    calls walk back through earlier compactions.

    Raises :class:`CompactionError` when there is none left or it was already undone.
    """
    repo = ws.repo
    return _undo_in_store(repo.db, _session(repo, session).id, compaction_id)


def history(ws: Workspace, session: int | str) -> list[CompactionRecord]:
    """Every compaction of a session, oldest first (the timeline's markers)."""
    repo = ws.repo
    return list_compactions(repo.db, _session(repo, session).id)


# -- auto-compaction -----------------------------------------------------------------------------


def maybe_compact_before_send(
    memory: Memory,
    *,
    provider: Provider | None = None,
    counter: TokenCounter | None = None,
    now: datetime | None = None,
) -> CompactionResult | None:
    """Compact ``memory``'s session before a send when it opted in and a trigger fires.

    The store changes under the memory's lock and the memory is refreshed after.
    Returns ``None`` when auto-compaction is off for the session (or the memory is not
    stored); otherwise a result whose ``changed`` says whether it compacted. The model
    summarizer uses the policy's provider, else ``provider`` (the one about to be sent
    to). A failure is not raised: the send may go on, so the result carries the reason
    and nothing changed.
    """
    repo = memory.repository
    sid = memory.session_id
    if repo is None or sid is None:
        return None
    info = repo.get_session(sid)
    agent = repo.get_agent(info.agent_id)
    try:
        policy = _policy(agent, info)
    except CompactionError as exc:
        # A broken policy must not stop the send; say why nothing was compacted.
        log.warning("Auto-compaction of session %s is off: %s", sid, exc)
        return CompactionResult(False, None, None, str(exc))
    if not policy.auto:
        return None
    try:
        plan = _preview(
            repo,
            memory,
            sid,
            keep=None,
            fold_range=None,
            summarizer=None,
            provider=provider if not policy.provider else None,
            provider_name=None,
            prompt=None,
            policy=policy,
            counter=counter,
            now=now,
            auto=True,
        )
        if plan.folded_ids and not plan.lowers_tokens:
            # Not applied automatically: the send would carry as many tokens or more.
            return CompactionResult(False, plan, None, "Auto-compaction skipped: " + (
                plan.warning or "it would not lower the request's tokens."))
        result = _apply(repo, memory, plan, counter=counter)
    except CompactionError as exc:
        log.warning("Auto-compaction of session %s did not run: %s", sid, exc)
        return CompactionResult(False, None, None, str(exc))
    return result
