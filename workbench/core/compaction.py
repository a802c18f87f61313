"""Compaction planning (SPEC §4): which messages fold into the summary, and what changes.

Everything here is pure: :func:`plan_compaction` takes a session's messages and context
and returns a :class:`CompactionPlan` without touching a database or a network. The
engine (:mod:`workbench.engine.compaction`) loads the session, runs this, shows the plan
as a preview, and applies it in one transaction.

**Policy** (:class:`CompactionPolicy`). Counts are of *active non-system* messages:

* more than ``max_messages`` (50): fold the oldest until ``keep_messages`` (30) remain;
* a request of more than ``max_tokens`` (100,000) tokens: fold the oldest half;
* manual, at any time: a keep count (fold all but the newest N) or a chosen range of
  positions.

**What never folds**: a system message, a message marked important (or ``pinned`` in
its metadata), and half of a tool-call group (an assistant message with tool calls and
the tool results answering it). A group that would be cut keeps all its members, so the
cut moves back to keep it whole. Everything newer than the cut stays as *recent*.
Because of this the plan may keep more than the keep count; it never keeps fewer.

**Summarizers** (:mod:`workbench.core.summarizers`, re-exported here) share
:class:`Summarizer`: ``summarize(folded, previous)`` returns a :class:`SummaryDraft`
that is either *appended* to the long-term summary or *replaces* it.
:class:`ExtractiveSummarizer` writes one ``- role: text`` line per folded message under
the ``Previous conversation summary:`` heading (appended; a summary that already ends
with such a block is continued under the same heading); the model summarizer of the
engine rewrites the whole summary with the previous one as its input.

**Context clean-up**: facts are de-duplicated on their normalised text (case, spacing
and final punctuation ignored), the first spelling kept, the order kept; tasks are
pruned: only completed tasks whose last update is more than ``task_retention_hours``
(24) old leave.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timedelta
from itertools import compress
from typing import Any

from workbench.core.assembly import tool_units
from workbench.core.conversation import (
    Message,
    SessionContext,
    Task,
    TaskStatus,
    as_utc,
    format_time,
)
from workbench.core.message_table import MessageSelection, MessageTable
from workbench.core.policy import merge_settings, whole_setting
from workbench.core.records import FieldsJson
from workbench.core.summarizers import (
    APPEND,
    EXTRACTIVE,
    MIN_LINE_CHARS,
    MODEL,
    REPLACE,
    SUMMARIZERS,
    SUMMARY_HEADING,
    ExtractiveSummarizer,
    Summarizer,
    SummaryDraft,
    combine_summary,
    count_long_text,
    message_line,
    shorten,
)
from workbench.errors import CompactionError

__all__ = [
    "APPEND",
    "EXTRACTIVE",
    "MIN_LINE_CHARS",
    "MODEL",
    "REASON_IMPORTANT",
    "REASON_OUTSIDE_RANGE",
    "REASON_RECENT",
    "REASON_SYSTEM",
    "REASON_TOOL_GROUP",
    "REASON_TURN",
    "REPLACE",
    "SUMMARIZERS",
    "SUMMARY_HEADING",
    "TRIGGER_KEEP",
    "TRIGGER_MESSAGES",
    "TRIGGER_NONE",
    "TRIGGER_RANGE",
    "TRIGGER_TOKENS",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionRecord",
    "ExtractiveSummarizer",
    "FoldRange",
    "KeptMessage",
    "MessageSelection",
    "MessageTable",
    "RequestTokens",
    "Summarizer",
    "SummaryDraft",
    "combine_summary",
    "count_long_text",
    "dedupe_facts",
    "fold_ranges",
    "is_protected",
    "message_line",
    "normalize_fact",
    "plan_compaction",
    "prune_tasks",
    "shorten",
]


TRIGGER_MESSAGES = "messages"
TRIGGER_TOKENS = "tokens"
TRIGGER_KEEP = "keep"
TRIGGER_RANGE = "range"
TRIGGER_NONE = "none"

REASON_RECENT = "recent"
REASON_IMPORTANT = "important"
REASON_TOOL_GROUP = "tool group"
REASON_SYSTEM = "system"
REASON_OUTSIDE_RANGE = "outside the chosen range"
REASON_TURN = "the question of a kept reply"

# Swaps the planner's per-row flags: folded rows become kept rows and back.
_INVERT = bytes.maketrans(b"\x00\x01", b"\x01\x00")


# -- policy ----------------------------------------------------------------------------------


def _whole(key: str, value: Any, *, optional: bool, minimum: int) -> int | None:
    return whole_setting(f"Compaction setting {key!r}", value, optional=optional,
                         minimum=minimum, error=CompactionError)


@dataclass(frozen=True)
class CompactionPolicy:
    """When and how a session compacts; an agent's default, a session's override.

    ``max_messages`` / ``keep_messages``: more than this many active non-system messages
    fold the oldest until ``keep_messages`` remain (``None`` turns the trigger off).
    ``max_tokens``: a request of more tokens folds the oldest half (``None``: off).
    ``summarizer`` is ``extractive`` or ``model``; the model summarizer uses the provider
    named ``provider`` (else the agent's), ``model`` to override the provider's model,
    and ``prompt`` instead of the default instructions. ``auto`` compacts before a send
    when a trigger fires. ``line_chars`` bounds each extractive line, and
    ``summary_chars`` the whole extractive summary: when many messages fold, each line
    gets a share of it (never fewer than :data:`MIN_LINE_CHARS` characters), so folding
    thousands of messages still gives a summary a model can read.
    ``task_retention_hours`` is how long completed tasks stay after their last update.
    """

    max_messages: int | None = 50
    keep_messages: int = 30
    max_tokens: int | None = 100_000
    summarizer: str = EXTRACTIVE
    provider: str | None = None
    model: str | None = None
    prompt: str | None = None
    auto: bool = False
    line_chars: int = 160
    summary_chars: int = 60_000
    task_retention_hours: float = 24.0

    def __post_init__(self) -> None:
        _whole("max_messages", self.max_messages, optional=True, minimum=1)
        _whole("keep_messages", self.keep_messages, optional=False, minimum=0)
        _whole("max_tokens", self.max_tokens, optional=True, minimum=1)
        _whole("line_chars", self.line_chars, optional=False, minimum=20)
        _whole("summary_chars", self.summary_chars, optional=False, minimum=1000)
        if self.max_messages is not None and self.keep_messages > self.max_messages:
            raise CompactionError(
                f"Compaction keeps {self.keep_messages} messages but triggers above "
                f"{self.max_messages}; 'keep_messages' must not exceed 'max_messages'."
            )
        if self.summarizer not in SUMMARIZERS:
            raise CompactionError(
                f"Compaction summarizer {self.summarizer!r} is not one of "
                f"{', '.join(SUMMARIZERS)}."
            )
        if not isinstance(self.auto, bool):
            raise CompactionError("Compaction setting 'auto' must be true or false.")
        hours = self.task_retention_hours
        if isinstance(hours, bool) or not isinstance(hours, int | float) or hours < 0:
            raise CompactionError(
                f"Compaction setting 'task_retention_hours' is {hours!r}; it must be a number "
                "of hours, 0 or more."
            )
        for key in ("provider", "model", "prompt"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise CompactionError(f"Compaction setting {key!r} must be text or null.")

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any] | None, *overrides: Mapping[str, Any] | None
    ) -> CompactionPolicy:
        """A policy from an agent's ``compaction`` JSON, later mappings overriding earlier.

        An unknown key raises :class:`CompactionError` naming it. ``None`` in an override
        turns a trigger off (``max_messages``, ``max_tokens``) or clears a name
        (``provider``, ``model``, ``prompt``); for the other keys it means "not set".
        """
        return cls(**merge_settings(
            "compaction policy", (data, *overrides), {f.name for f in fields(cls)},
            nullable=("max_messages", "max_tokens", "provider", "model", "prompt"),
            error=CompactionError))

    def to_dict(self) -> dict[str, Any]:
        """The policy as JSON (what an agent or a session override stores)."""
        return asdict(self)

    def replace(self, **changes: Any) -> CompactionPolicy:
        """A copy with some settings changed (checked like a new policy)."""
        return CompactionPolicy(**{**asdict(self), **changes})

    def trigger(self, active_count: int, request_tokens: int) -> tuple[str, int] | None:
        """The trigger that fires for a session, with how many messages to keep.

        The message trigger runs first (fold down to ``keep_messages``); the token
        trigger then folds the oldest half of what is left while the request is still
        over ``max_tokens`` (seed 002), which the planner checks on the kept messages.
        ``None`` when neither fires.
        """
        if self.max_messages is not None and active_count > self.max_messages:
            return TRIGGER_MESSAGES, self.keep_messages
        if self.max_tokens is not None and request_tokens > self.max_tokens:
            return TRIGGER_TOKENS, active_count - active_count // 2
        return None

    def describe(self) -> str:
        """The triggers in words."""
        parts = []
        if self.max_messages is not None:
            parts.append(
                f"more than {self.max_messages} active messages fold down to "
                f"{self.keep_messages}"
            )
        if self.max_tokens is not None:
            parts.append(f"a request over {self.max_tokens} tokens folds the oldest half")
        return "; ".join(parts) if parts else "no automatic trigger"


# -- helpers on messages -------------------------------------------------------------------


def is_protected(message: Message) -> bool:
    """Whether a message never folds by itself: system, important or pinned."""
    if message.role == "system" or message.important:
        return True
    meta = message.metadata
    return bool(meta) and bool(meta.get("important") or meta.get("pinned"))


# -- facts and tasks -----------------------------------------------------------------------

_TRAILING = re.compile(r"[\s.!;:,]+$")


def normalize_fact(fact: str) -> str:
    """The form two facts are compared in: case-folded, spacing collapsed, no final
    punctuation."""
    return _TRAILING.sub("", " ".join(str(fact).split()).casefold())


def dedupe_facts(facts: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(kept, removed)``: the first spelling of each fact in order, and the later
    repeats (and empty facts) that go."""
    seen: set[str] = set()
    kept: list[str] = []
    removed: list[str] = []
    for fact in facts:
        key = normalize_fact(fact)
        if not key or key in seen:
            removed.append(fact)
            continue
        seen.add(key)
        kept.append(fact)
    return kept, removed


def tidy_facts(facts: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(kept, removed)`` as compaction leaves the facts (seed 002: "Sort facts,
    Remove duplicates"): duplicates (compared normalized, the first spelling kept)
    and empty facts go, and the rest are sorted by their normalized text."""
    kept, removed = dedupe_facts(facts)
    return sorted(kept, key=lambda fact: (normalize_fact(fact), fact)), removed


def prune_tasks(
    tasks: Sequence[Task], now: datetime, retention_hours: float = 24.0
) -> tuple[list[Task], list[Task]]:
    """``(kept, pruned)``: completed tasks last updated more than ``retention_hours``
    before ``now`` are pruned; every other task stays (one with no time at all too,
    since its age is unknown)."""
    limit = as_utc(now) - timedelta(hours=retention_hours)
    kept: list[Task] = []
    pruned: list[Task] = []
    for task in tasks:
        stamp = task.updated_at or task.created_at
        if (
            str(task.status).casefold() == TaskStatus.COMPLETED.value
            and stamp is not None
            and as_utc(stamp) < limit
        ):
            pruned.append(task)
        else:
            kept.append(task)
    return kept, pruned


# -- the plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FoldRange(FieldsJson):
    """A run of folded messages that are next to each other among the active ones."""

    first_position: int | None
    last_position: int | None
    first_id: int | None
    last_id: int | None
    count: int


@dataclass(frozen=True)
class KeptMessage(FieldsJson):
    """An active message that stays, and why (recent, important, tool group, system,
    outside the chosen range)."""

    id: int | None
    position: int | None
    role: str
    reason: str


def fold_ranges(table: MessageTable, kept: Sequence[int]) -> list[FoldRange]:
    """The runs of folded rows of ``table``, given the rows that stay (ascending): every
    row is either kept or folded, so the runs are the gaps between kept rows."""
    ids, positions = table.ids, table.positions
    ranges: list[FoldRange] = []
    previous = -1
    for k in (*kept, len(table)):
        if k - previous > 1:
            first, last = previous + 1, k - 1
            ranges.append(
                FoldRange(positions[first], positions[last], ids[first], ids[last],
                          last - first + 1)
            )
        previous = k
    return ranges


@dataclass
class CompactionPlan:
    """What a compaction would do: a preview, and exactly what applying it writes.

    ``folded_ids`` fold (state ``folded``, the compaction's id); ``kept`` lists every
    active message that stays with its reason. ``summary`` is this compaction's summary
    text (editable before applying) and ``summary_mode`` how it joins ``previous_summary``
    into ``new_summary``. ``facts_after`` / ``tasks_after`` replace the context's facts
    and tasks. ``tokens_before`` / ``tokens_after`` are the request's tokens (system
    message, summary and history, without a new prompt). ``*_before`` fields record the
    state the plan was made from, so applying a plan to a session that changed since is
    refused. ``reason`` says why nothing would change when :attr:`changed` is false.
    """

    session_id: int | None
    trigger: str
    policy: str
    summarizer: str
    created_at: datetime
    folded_ids: list[int] = field(default_factory=list)
    ranges: list[FoldRange] = field(default_factory=list)
    kept: list[KeptMessage] = field(default_factory=list)
    summary: str = ""
    summary_mode: str = APPEND
    previous_summary: str = ""
    facts_before: list[str] = field(default_factory=list)
    facts_after: list[str] = field(default_factory=list)
    facts_removed: list[str] = field(default_factory=list)
    tasks_before: list[Task] = field(default_factory=list)
    tasks_after: list[Task] = field(default_factory=list)
    tasks_pruned: list[Task] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    active_before: int = 0
    reason: str = ""
    auto: bool = False
    #: Active messages that had no kept summary line when the plan was made (a database
    #: written before lines were kept): the store can keep them for the next previews.
    unkept_lines: int = 0

    @property
    def changed(self) -> bool:
        """Whether applying the plan changes anything: something folds, or the facts
        are tidied (sorted, duplicates removed) or old completed tasks pruned, which
        every compaction does even when nothing folds (seed 002)."""
        return bool(
            self.folded_ids
            or self.facts_after != self.facts_before
            or self.tasks_pruned
        )

    @property
    def folded_count(self) -> int:
        return len(self.folded_ids)

    @property
    def active_after(self) -> int:
        """Active non-system messages left after applying."""
        return self.active_before - len(self.folded_ids)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def lowers_tokens(self) -> bool:
        """Whether applying makes the request smaller (auto-compaction needs it)."""
        return self.tokens_after < self.tokens_before

    @property
    def warning(self) -> str:
        """A sentence when folding would not make the request smaller, else ``""``:
        a manual compaction shows it before applying."""
        if not self.folded_ids or self.lowers_tokens:
            return ""
        n = len(self.folded_ids)
        return (
            f"Folding {n} message{'s' if n != 1 else ''} would not lower the request's "
            f"tokens ({self.tokens_before} before, {self.tokens_after} after): the summary "
            "costs as much as what it replaces."
        )

    @property
    def new_summary(self) -> str:
        """The long-term summary after applying."""
        if not self.folded_ids:
            return self.previous_summary
        return combine_summary(self.previous_summary, self.summary, self.summary_mode)

    def with_summary(self, summary: str, tokens_after: int | None = None) -> CompactionPlan:
        """A copy whose summary the user edited (``tokens_after`` recounted by the caller)."""
        return replace(
            self,
            summary=summary,
            tokens_after=self.tokens_after if tokens_after is None else tokens_after,
        )

    def context_after(self, context: SessionContext) -> SessionContext:
        """``context`` with this plan's summary, facts and tasks."""
        out = context.copy()
        if self.changed:
            out.summary = self.new_summary
            out.facts = list(self.facts_after)
            out.tasks = [replace(t) for t in self.tasks_after]
        return out

    def details(self) -> dict[str, Any]:
        """What the compaction record keeps beside its columns (for undo and the GUI)."""
        return {
            "trigger": self.trigger,
            "auto": self.auto,
            "folded_ids": list(self.folded_ids),
            "ranges": [r.to_json() for r in self.ranges],
            "summary_mode": self.summary_mode,
            "facts_removed": list(self.facts_removed),
            "tasks_pruned": [t.to_json() for t in self.tasks_pruned],
            "active_before": self.active_before,
            "active_after": self.active_after,
        }

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON: the command line's keys first, then the whole preview."""
        return {
            "changed": self.changed,
            "folded": self.folded_count,
            "kept": self.active_after,
            "summary": self.summary if self.changed else "",
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "reason": self.reason,
            "session_id": self.session_id,
            "trigger": self.trigger,
            "policy": self.policy,
            "summarizer": self.summarizer,
            "summary_mode": self.summary_mode,
            "new_summary": self.new_summary,
            "folded_ids": list(self.folded_ids),
            "ranges": [r.to_json() for r in self.ranges],
            "kept_messages": [k.to_json() for k in self.kept],
            "facts_after": list(self.facts_after),
            "facts_removed": list(self.facts_removed),
            "tasks_pruned": [t.to_json() for t in self.tasks_pruned],
            "created_at": format_time(self.created_at),
        }


RequestTokens = Callable[[str, Sequence[Message]], int]
"""``(summary, history) -> tokens`` of the request a session would send."""


def _nothing(
    base: dict[str, Any], reason: str, trigger: str = TRIGGER_NONE, policy: str = ""
) -> CompactionPlan:
    """A plan that folds nothing; the facts and tasks are still tidied (when they
    change, the plan changes something and ``reason`` says why nothing folds)."""
    plan = CompactionPlan(**base, trigger=trigger, policy=policy or trigger)
    plan.reason = "Nothing to compact: " + reason
    if plan.changed:
        plan.reason = "Nothing folds: " + reason
    plan.tokens_after = plan.tokens_before
    return plan


def _halve_while_over(
    table: MessageTable,
    systems: Sequence[int],
    n: int,
    keep_n: int,
    policy: CompactionPolicy,
    previous: str,
    request_tokens: RequestTokens,
) -> int:
    """The keep count after the token step: while the request with the system rows and
    the newest ``keep_n`` non-system rows is over ``policy.max_tokens``, the oldest half
    of those rows folds too (at least one row stays)."""
    if policy.max_tokens is None or keep_n >= n:
        return keep_n
    others = list(range(len(table)))
    for i in reversed(systems):  # ascending: deleting from the last keeps the others' places
        del others[i]
    while keep_n > 1:
        staying = sorted([*systems, *others[len(others) - keep_n:]])
        if request_tokens(previous, table.select(staying)) <= policy.max_tokens:
            break
        keep_n -= keep_n // 2
    return keep_n


def _tool_groups(whole: dict[int, Message]) -> list[tuple[list[int], bool]]:
    """The whole rows' tool-call groups and protected messages, as row indices, each with
    whether a member is protected: the units of planning that may keep rows back (a
    message of its own that is not protected folds like any other)."""
    rows = list(whole)
    groups = []
    for unit in tool_units(list(whole.values())):
        members = [rows[k] for k in unit]
        protected = any(is_protected(whole[i]) for i in members)
        if len(members) > 1 or protected:
            groups.append((members, protected))
    return groups


def _keep_the_question(flags: bytearray, roles: Sequence[str], reasons: dict[int, str]) -> None:
    """Unfold the turn the first kept reply belongs to, back to its user message.

    A request's history starts with a user message (assembly's strict order): assistant
    and tool messages in front of the first kept question reach no request. Folded, they
    are in the summary; kept with their question, they are sent as they are. So when the
    first staying message but system ones is not a user message, the folded messages
    before it, back to the nearest folded user message, stay too (the newest ones asked
    to stay all stay). Without such a user message (the session's history starts with
    replies) nothing changes: those replies reached no request before either.
    """
    size = len(flags)
    first = 0
    while first < size and (flags[first] or roles[first] == "system"):
        first += 1
    if first == size or roles[first] == "user":
        return
    start = first - 1
    while start >= 0 and not (flags[start] and roles[start] == "user"):
        start -= 1
    if start < 0:
        return
    for i in range(start, first):
        if flags[i]:
            flags[i] = 0
            reasons[i] = REASON_TURN


def plan_compaction(
    messages: Sequence[Message] | MessageTable,
    context: SessionContext,
    *,
    policy: CompactionPolicy,
    summarizer: Summarizer,
    request_tokens: RequestTokens,
    now: datetime,
    keep: int | None = None,
    fold_range: tuple[int, int] | None = None,
    session_id: int | None = None,
    auto: bool = False,
    _depth: int = 0,
    _tokens_before: int | None = None,
    _groups: list[tuple[list[int], bool]] | None = None,
) -> CompactionPlan:
    """Plan a compaction of a session (see the module documentation).

    ``messages`` are the session's messages in order (only the active ones are looked
    at), or a :class:`MessageTable` of its active messages (what the store loads for a
    long session: see :mod:`workbench.core.message_table`). ``keep`` folds all but the
    newest ``keep`` active non-system messages; ``fold_range`` (first and last position,
    inclusive) folds the messages inside it; with neither, the policy's triggers decide.
    ``request_tokens`` counts the request for a summary and a history. The summarizer
    runs only when something folds; its errors propagate and nothing is planned. Both
    receive their messages as a :class:`MessageSelection` of the table (a sequence of
    messages).
    """
    if keep is not None and fold_range is not None:
        raise CompactionError("Give a keep count or a range to fold, not both.")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise CompactionError(f"The keep count must be a whole number, 0 or more, not {keep!r}.")
    table = messages if isinstance(messages, MessageTable) else MessageTable.from_messages(messages)
    size = len(table)
    roles = table.roles
    whole = table.whole
    # Only whole rows can be system messages, protected or in a tool group.
    systems = [i for i in whole if roles[i] == "system"]
    n = size - len(systems)
    # The counts are of non-system messages; the window's counts include the system ones.
    aside = " (system messages aside)" if systems else ""
    previous = context.summary or ""
    facts_after, facts_removed = tidy_facts(context.facts)
    tasks_after, tasks_pruned = prune_tasks(context.tasks, now, policy.task_retention_hours)
    base: dict[str, Any] = {
        "session_id": session_id,
        "summarizer": summarizer.name,
        "created_at": now,
        "previous_summary": previous,
        "facts_before": list(context.facts),
        "facts_after": facts_after,
        "facts_removed": facts_removed,
        "tasks_before": [replace(t) for t in context.tasks],
        "tasks_after": tasks_after,
        "tasks_pruned": tasks_pruned,
        "tokens_before": (
            request_tokens(previous, table.everything())
            if _tokens_before is None
            else _tokens_before  # counted by the plan this one refines
        ),
        "active_before": n,
        "auto": auto,
    }

    # -- which rows are candidates (a flag per row) ------------------------------------------
    flags = bytearray(size)
    oldest: int | None = None  # the candidates are the rows before it (but system rows)
    outside_reason = REASON_RECENT
    if fold_range is not None:
        first, last = fold_range
        if first > last:
            first, last = last, first
        trigger, label = TRIGGER_RANGE, f"range {first}-{last}"
        outside_reason = REASON_OUTSIDE_RANGE
        for i, position in enumerate(table.positions):
            if first <= (-1 if position is None else position) <= last and roles[i] != "system":
                flags[i] = 1
        if not any(flags):
            return _nothing(
                base, f"no active message lies between positions {first} and {last}.",
                trigger, label,
            )
    else:
        if keep is not None:
            trigger, keep_n, label = TRIGGER_KEEP, keep, f"keep {keep}"
        else:
            fired = policy.trigger(n, base["tokens_before"])
            if fired is None:
                return _nothing(
                    base,
                    f"{n} active message{'s' if n != 1 else ''}{aside} and "
                    f"{base['tokens_before']} request tokens are within the policy "
                    f"({policy.describe()}).",
                )
            trigger, keep_n = fired
            label = (
                f"over {policy.max_messages} messages, keep {keep_n}"
                if trigger == TRIGGER_MESSAGES
                else f"over {policy.max_tokens} tokens, keep {keep_n} (the newer half)"
            )
            halved = _halve_while_over(table, systems, n, keep_n, policy, previous,
                                       request_tokens)
            if halved != keep_n:
                label += (
                    f", then over {policy.max_tokens} tokens, keep {halved} (halved "
                    "while over)"
                )
                keep_n = halved
        if auto:
            label = "auto: " + label
        if n <= keep_n:
            return _nothing(
                base,
                f"the session has {n} active message{'s' if n != 1 else ''}{aside}, no "
                f"more than the {keep_n} to keep.",
                trigger, label,
            )
        # The oldest n - keep_n non-system rows: the rows before ``end``, but the system
        # rows among them.
        end = n - keep_n
        for i in systems:
            if i >= end:
                break
            end += 1
        flags[:end] = b"\x01" * end
        for i in systems:
            if i >= end:
                break
            flags[i] = 0
        oldest = end

    # -- groups and protected messages (whole rows; no system row is a candidate) -----------
    reasons: dict[int, str] = {}
    groups = _groups if _groups is not None else _tool_groups(whole)
    for members, protected in groups:
        if oldest is not None:
            # The candidates are the rows before ``oldest`` but the system rows, and no
            # system row is in a group of several (members ascend): most groups lie
            # wholly on one side of it.
            if members[0] >= oldest:
                continue  # none of it is a candidate
            if members[-1] < oldest and len(members) > 1 and not protected:
                continue  # the whole group folds
        inside = [i for i in members if flags[i]]
        if not inside:
            continue
        if len(inside) == len(members) > 1 and not protected:
            continue  # the whole group folds
        for i in inside:
            if is_protected(whole[i]):
                reasons[i] = REASON_IMPORTANT
            elif len(members) > 1:
                reasons[i] = REASON_TOOL_GROUP
            else:
                continue  # a message of its own, not protected: it folds
            flags[i] = 0

    _keep_the_question(flags, roles, reasons)
    folded = list(compress(range(size), flags))
    if not folded:
        return _nothing(
            base,
            "every message that would fold is important, a system message, part of a "
            "tool-call group that must stay whole or the question of a kept reply.",
            trigger, label,
        )
    folded_ids = list(compress(table.ids, flags))
    if None in folded_ids:
        raise CompactionError("Only stored messages (with ids) can be compacted.")
    staying = list(compress(range(size), flags.translate(_INVERT)))
    ids, positions = table.ids, table.positions
    kept: list[KeptMessage] = []
    for i in staying:
        reason = reasons.get(i)
        if reason is None:
            reason = REASON_SYSTEM if roles[i] == "system" else outside_reason
        kept.append(KeptMessage(ids[i], positions[i], roles[i], reason))

    draft = summarizer.summarize(table.select(folded), previous)
    plan = CompactionPlan(
        **base,
        trigger=trigger,
        policy=label,
        folded_ids=folded_ids,  # type: ignore[arg-type]  # no None: checked above
        ranges=fold_ranges(table, staying),
        kept=kept,
        summary=draft.text,
        summary_mode=draft.mode,
    )
    plan.tokens_after = request_tokens(plan.new_summary, table.select(staying))
    if (
        keep is None
        and fold_range is None
        and policy.max_tokens is not None
        and plan.tokens_after > policy.max_tokens
        and plan.active_after > 1
        and _depth < 32
    ):
        # Still over the token trigger with the new summary: the oldest half of what
        # stays folds too, until the session ends below it (seed 002).
        smaller = plan.active_after - plan.active_after // 2
        again = plan_compaction(
            table, context, policy=policy, summarizer=summarizer,
            request_tokens=request_tokens, now=now, keep=smaller, session_id=session_id,
            auto=auto, _depth=_depth + 1, _tokens_before=plan.tokens_before,
            _groups=groups,
        )
        if again.folded_ids:
            again.trigger = trigger
            again.policy = (label if ", then over" in label else label + (
                f", then over {policy.max_tokens} tokens")) + f", keep {smaller}"
            return again
    return plan


# -- records -------------------------------------------------------------------------------


@dataclass
class CompactionRecord:
    """One applied compaction as the store keeps it (the GUI's timeline marker)."""

    id: int
    session_id: int
    created_at: datetime
    policy: str
    summarizer: str
    tokens_before: int
    tokens_after: int
    folded_count: int
    summary: str
    undone_at: datetime | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def undone(self) -> bool:
        return self.undone_at is not None

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def folded_ids(self) -> list[int]:
        return [int(i) for i in self.details.get("folded_ids", [])]

    @property
    def marker_position(self) -> int | None:
        """Where the timeline shows the marker: the last folded message's position."""
        ranges = self.details.get("ranges") or []
        positions = [r.get("last_position") for r in ranges if r.get("last_position") is not None]
        return max(positions) if positions else None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "created_at": format_time(self.created_at),
            "policy": self.policy,
            "summarizer": self.summarizer,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "folded": self.folded_count,
            "summary": self.summary,
            "undone_at": format_time(self.undone_at),
            "marker_position": self.marker_position,
        }

