"""What a compaction panel needs around :mod:`workbench.engine.compaction`.

* :func:`read_policy` / :func:`save_policy` / :func:`clear_policy`: a session's compaction
  policy as fields, and its per-session overrides (only the settings that differ from
  the agent's are stored, so later changes to the agent still reach the others);
* :func:`preview_plan`: a preview with the fields as they are on screen (saved or not),
  whose model summarizer can be stopped with a :class:`~workbench.core.provider.CancelToken`;
* :func:`undo_applied` and :func:`redo_compaction`: the two directions an undo stack
  needs (undo a compaction unless it already is; apply an undone one again with its
  recorded summary, without calling a model);
* :func:`offline_window`: the model's context window when it is known without asking
  a server (the provider's configured value or the known-model table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from typing import Any

from workbench.core.compaction import (
    MODEL,
    CompactionPlan,
    CompactionPolicy,
    CompactionRecord,
    SummaryDraft,
)
from workbench.core.conversation import Agent, Message, SessionInfo
from workbench.core.provider import CancelToken, ChatRequest, ChatResponse, Provider
from workbench.engine import compaction
from workbench.engine.providers import ProviderSettings, build_provider
from workbench.engine.workspace import Workspace
from workbench.errors import CompactionError, NotFoundError, WorkbenchError
from workbench.providers.context import known_context_window
from workbench.store.compactions import load_active

__all__ = [
    "POLICY_FIELDS",
    "PolicyView",
    "clear_policy",
    "offline_window",
    "preview_plan",
    "read_policy",
    "redo_compaction",
    "save_agent_policy",
    "save_policy",
    "undo_applied",
]

#: The policy settings a panel edits (the rest keep the agent's values).
POLICY_FIELDS = (
    "max_messages",
    "keep_messages",
    "max_tokens",
    "summarizer",
    "provider",
    "model",
    "prompt",
    "auto",
)


@dataclass(frozen=True)
class PolicyView:
    """A session's compaction policy as a panel shows it.

    ``policy`` is in effect (the agent's with the session's overrides); ``agent_policy``
    is what the session would have without overrides; ``overrides`` are the session's
    stored compaction settings; ``providers`` the configured provider names and
    ``agent_provider`` the agent's; ``window`` the model's context window when known
    offline; ``default_prompt`` the model summarizer's instructions when none is set.
    """

    session_id: int
    policy: CompactionPolicy
    agent_policy: CompactionPolicy
    overrides: dict[str, Any] = field(default_factory=dict)
    providers: list[str] = field(default_factory=list)
    agent_provider: str | None = None
    window: int | None = None
    default_prompt: str = compaction.DEFAULT_PROMPT


def _agent_policy(
    ws: Workspace, session_id: int
) -> tuple[SessionInfo, Agent, CompactionPolicy]:
    info = ws.repo.get_session(session_id)
    agent = ws.repo.get_agent(info.agent_id)
    return info, agent, CompactionPolicy.from_dict((agent.memory_policy or {}).get("compaction"))


def offline_window(ws: Workspace, session_id: int) -> int | None:
    """The context window of the session's model without any network call: the chosen
    provider's configured window, else the known-model table; ``None`` when unknown."""
    info = ws.repo.get_session(session_id)
    agent = ws.repo.get_agent(info.agent_id)
    settings = ProviderSettings(ws.db)
    try:
        config = settings.get(settings.choose(None, agent.provider))
    except NotFoundError:
        return known_context_window(agent.model) if agent.model else None
    return config.context_window or known_context_window(agent.model or config.model)


def read_policy(ws: Workspace, session_id: int) -> PolicyView:
    """The session's compaction policy, its overrides and what the fields offer."""
    info, agent, agent_policy = _agent_policy(ws, session_id)
    overrides = dict((info.overrides or {}).get("compaction") or {})
    policy = CompactionPolicy.from_dict(
        (agent.memory_policy or {}).get("compaction"), overrides or None
    )
    providers = [config.name for config in ProviderSettings(ws.db).list()]
    return PolicyView(
        session_id=info.id,
        policy=policy,
        agent_policy=agent_policy,
        overrides=overrides,
        providers=providers,
        agent_provider=agent.provider,
        window=offline_window(ws, session_id),
    )


def _checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(settings) - set(POLICY_FIELDS))
    if unknown:
        raise CompactionError(
            f"The compaction panel has no setting {unknown[0]!r}; it edits "
            f"{', '.join(POLICY_FIELDS)}."
        )
    out = dict(settings)
    for key in ("provider", "model", "prompt"):
        if key in out and isinstance(out[key], str) and not out[key].strip():
            out[key] = None
    return out


def _write_overrides(
    ws: Workspace, info: SessionInfo, compaction_overrides: dict[str, Any]
) -> None:
    overrides = dict(info.overrides or {})
    if compaction_overrides:
        overrides["compaction"] = compaction_overrides
    else:
        overrides.pop("compaction", None)
    ws.repo.set_overrides(info.id, overrides)


def save_policy(ws: Workspace, session_id: int, settings: Mapping[str, Any]) -> PolicyView:
    """Store ``settings`` (any of :data:`POLICY_FIELDS`) as the session's compaction policy.

    The whole policy is checked first (a keep count above the trigger, an unknown
    summarizer… raise :class:`CompactionError` naming the setting, and nothing is
    written). Only settings that differ from the agent's policy are stored; settings not
    given keep the session's earlier overrides. Other overrides of the session (its memory
    policy) are left as they are.
    """
    info, agent, agent_policy = _agent_policy(ws, session_id)
    given = _checked_settings(settings)
    current = dict((info.overrides or {}).get("compaction") or {})
    merged = {**current, **given}
    # Checked as a whole before anything is written.
    CompactionPolicy.from_dict((agent.memory_policy or {}).get("compaction"), merged)
    base = agent_policy.to_dict()
    stored = {key: value for key, value in merged.items()
              if key not in base or base[key] != value}
    _write_overrides(ws, info, stored)
    return read_policy(ws, session_id)


def save_agent_policy(ws: Workspace, session_id: int, settings: Mapping[str, Any]) -> PolicyView:
    """Store ``settings`` (any of :data:`POLICY_FIELDS`) in the compaction policy of the
    session's agent: the default of every session of that agent without overrides.

    The agent's policy, and this session's with its overrides on top, are checked as a
    whole first (nothing is written on a :class:`CompactionError`). This session's
    overrides that now equal the agent's settings are dropped; its others stay, and so do
    other sessions' overrides. The agent's other memory settings are left as they are.
    """
    info, agent, _ = _agent_policy(ws, session_id)
    memory_policy = dict(agent.memory_policy or {})
    merged = {**dict(memory_policy.get("compaction") or {}), **_checked_settings(settings)}
    current = dict((info.overrides or {}).get("compaction") or {})
    base = CompactionPolicy.from_dict(merged).to_dict()
    CompactionPolicy.from_dict(merged, current)  # this session's policy stays valid too
    defaults = CompactionPolicy().to_dict()
    memory_policy["compaction"] = {key: value for key, value in merged.items()
                                   if defaults.get(key) != value}
    ws.repo.update_agent(agent.id, memory_policy=memory_policy)
    _write_overrides(ws, info, {key: value for key, value in current.items()
                                if base.get(key) != value})
    return read_policy(ws, session_id)


def clear_policy(ws: Workspace, session_id: int) -> PolicyView:
    """Drop the session's compaction overrides: the agent's policy applies again."""
    info = ws.repo.get_session(session_id)
    _write_overrides(ws, info, {})
    return read_policy(ws, session_id)


# -- a preview that can be stopped ---------------------------------------------------------------


class _StoppableProvider:
    """A provider whose calls all watch one cancel token (other attributes pass through)."""

    def __init__(self, inner: Provider, cancel: CancelToken):
        self._inner = inner
        self._cancel = cancel

    def complete(self, request: ChatRequest, cancel: CancelToken | None = None) -> ChatResponse:
        self._cancel.raise_if_cancelled()
        return self._inner.complete(request, cancel=self._cancel)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _StoppableModelSummarizer:
    """The model summarizer with its provider built when something folds, and stopped
    by ``cancel`` (the socket is closed, so a stalled server does not hold it)."""

    name = MODEL

    def __init__(self, ws: Workspace, session_id: int, policy: CompactionPolicy,
                 cancel: CancelToken):
        self._ws = ws
        self._session_id = session_id
        self._policy = policy
        self._cancel = cancel

    def _provider(self) -> Provider:
        info = self._ws.repo.get_session(self._session_id)
        agent = self._ws.repo.get_agent(info.agent_id)
        settings = ProviderSettings(self._ws.db)
        config = settings.get(settings.choose(self._policy.provider, agent.provider))
        if self._policy.model:
            config = dc_replace(config, model=self._policy.model)
        return build_provider(config)

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        self._cancel.raise_if_cancelled()
        try:
            provider = self._provider()
        except WorkbenchError as exc:
            raise CompactionError(
                f"The model summarizer cannot start: {exc} The session was left unchanged."
            ) from exc
        try:
            summarizer = compaction.ModelSummarizer(
                _StoppableProvider(provider, self._cancel),
                prompt=self._policy.prompt,
            )
            return summarizer.summarize(folded, previous)
        finally:
            closer = getattr(provider, "close", None)
            if callable(closer):
                closer()


def preview_plan(
    ws: Workspace,
    session_id: int,
    settings: Mapping[str, Any] | None = None,
    *,
    keep: int | None = None,
    fold_range: tuple[int, int] | None = None,
    cancel: CancelToken | None = None,
) -> CompactionPlan:
    """A preview (nothing written) with ``settings`` (fields of :data:`POLICY_FIELDS`,
    saved or not) over the session's policy.

    ``keep`` or ``fold_range`` (positions, inclusive) make it manual; with neither the
    policy's triggers decide. With the model summarizer, ``cancel`` stops the provider's
    call (the preview then raises :class:`CompactionError`).
    """
    info, agent, _agent = _agent_policy(ws, session_id)
    stored = (info.overrides or {}).get("compaction")
    policy = CompactionPolicy.from_dict(
        (agent.memory_policy or {}).get("compaction"), stored,
        _checked_settings(settings or {}) or None,
    )
    summarizer: Any = None
    if policy.summarizer == MODEL:
        summarizer = _StoppableModelSummarizer(ws, session_id, policy, cancel or CancelToken())
    return compaction.preview(
        ws, session_id, keep=keep, fold_range=fold_range, summarizer=summarizer, policy=policy
    )


# -- undo and redo for an undo stack ---------------------------------------------------------------


def undo_applied(ws: Workspace, session_id: int, compaction_id: int) -> CompactionRecord | None:
    """Undo compaction ``compaction_id`` unless it is already undone (then ``None``).

    Raises :class:`CompactionError` when it cannot be undone (a newer compaction is
    applied on top of it).
    """
    for record in compaction.history(ws, session_id):
        if record.id == compaction_id and record.undone:
            return None
    return compaction.undo(ws, session_id, compaction_id)


class _RecordedSummary:
    """A summarizer that gives back what a compaction record says it wrote."""

    def __init__(self, record: CompactionRecord):
        self.name = record.summarizer
        self._record = record

    def summarize(self, folded: Sequence[Message], previous: str) -> SummaryDraft:
        mode = str(self._record.details.get("summary_mode") or "append")
        return SummaryDraft(self._record.summary, mode)


def redo_compaction(ws: Workspace, session_id: int,
                    record: CompactionRecord) -> compaction.CompactionResult:
    """Apply an undone compaction again: the same messages fold, with the summary it
    recorded (no model is called). A new record is written (its id is in the result).

    Raises :class:`CompactionError` when the same messages would no longer fold (the
    session changed since), and nothing is written.
    """
    wanted = record.folded_ids
    ranges = record.details.get("ranges") or []
    positions = [p for r in ranges for p in (r.get("first_position"), r.get("last_position"))
                 if p is not None]
    if not wanted or not positions:
        raise CompactionError(
            f"Compaction {record.id} does not say which messages it folded; it cannot be "
            "applied again."
        )
    # The folded messages may have moved (an insert above them): find them again.
    wanted_set = set(wanted)
    by_id = {m.id: m.position for m in load_active(ws.db, session_id) if m.id in wanted_set}
    if len(by_id) != len(wanted_set):
        raise CompactionError(
            f"Some messages compaction {record.id} folded are no longer active in session "
            f"{session_id}; it cannot be applied again. Preview a new compaction instead."
        )
    first = min(p for p in by_id.values() if p is not None)
    last = max(p for p in by_id.values() if p is not None)
    plan = compaction.preview(ws, session_id, fold_range=(first, last),
                              summarizer=_RecordedSummary(record))
    if sorted(plan.folded_ids) != sorted(wanted):
        raise CompactionError(
            f"Session {session_id} changed since compaction {record.id} (other messages "
            "would fold now); it was not applied again. Preview a new compaction instead."
        )
    plan.policy = record.policy
    return compaction.apply(ws, plan)
