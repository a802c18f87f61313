"""``SummarizingMemory``: a memory whose oldest messages fold into its summary (seed 003).

It wraps any :class:`~workbench.engine.memory.Memory` (in memory or stored): after each
append, when more than ``max_messages`` non-system messages are active, the oldest fold
into the memory's long-term summary until ``keep_messages`` remain, with the rules of
compaction (system and important messages stay, a tool call stays with its results) and
its summarizers (extractive by default, no model and no database needed). Request
assembly then sends the summary before the kept history.

For a stored session the compaction engine (:mod:`workbench.engine.compaction`) does the
same with records and undo; this class is for scripts and in-memory conversations.
"""

from __future__ import annotations

from typing import Any

from workbench.core.compaction import CompactionPlan, CompactionPolicy, plan_compaction
from workbench.core.conversation import Message, MessageState, SessionContext, utcnow
from workbench.core.summarizers import ExtractiveSummarizer, Summarizer
from workbench.engine.memory import Memory
from workbench.errors import RequestError

__all__ = ["SummarizingMemory"]


class SummarizingMemory:
    """A :class:`Memory` that folds its oldest messages into its summary as it grows.

    Everything else (``messages()``, ``appended()``, ``context()``, …) is the wrapped
    memory's, so it can be given to ``Model.with_memory``' s callers through
    :attr:`memory`.
    """

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        max_messages: int = 20,
        keep_messages: int | None = None,
        summarizer: Summarizer | None = None,
    ):
        keep = max_messages if keep_messages is None else keep_messages
        if max_messages < 1 or keep < 0 or keep > max_messages:
            raise RequestError(
                "SummarizingMemory needs max_messages of at least 1 and keep_messages "
                "between 0 and max_messages."
            )
        self.memory = memory if memory is not None else Memory()
        self.policy = CompactionPolicy(max_messages=max_messages, keep_messages=keep,
                                       max_tokens=None)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer(
            self.policy.line_chars)
        self.last_plan: CompactionPlan | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)

    def __len__(self) -> int:
        return len(self.memory)

    @property
    def summary(self) -> str:
        """The long-term summary the folded messages went into."""
        return self.memory.context().summary

    def append(self, role: str, content: str | None = "", **fields: Any) -> Message:
        """Append like :meth:`Memory.append`, then fold if the memory grew too long."""
        message = self.memory.append(role, content, **fields)
        self.fold()
        return message

    def extend(self, messages: list[Message]) -> list[Message]:
        stored = self.memory.extend(messages)
        self.fold()
        return stored

    def fold(self) -> list[Message]:
        """Fold the oldest messages into the summary when more than ``max_messages``
        non-system messages are active; returns copies of the folded ones."""
        memory = self.memory
        with memory.lock:
            active = memory.view()
            context = memory.context()
            plan = plan_compaction(
                active, context, policy=self.policy, summarizer=self.summarizer,
                request_tokens=lambda _summary, _history: 0, now=utcnow(),
            )
            if not plan.folded_ids:
                return []
            self.last_plan = plan
            folded = memory.evict(plan.folded_ids, state=MessageState.FOLDED.value)

            def change(ctx: SessionContext) -> None:
                after = plan.context_after(ctx)
                ctx.summary, ctx.facts, ctx.tasks = after.summary, after.facts, after.tasks

            memory.update_context(change)
            return folded
