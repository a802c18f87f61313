"""Importing parsed conversations into the store: token counts, transactions, progress.

Conversations are stored in batches through the repository's fast path (one
transaction per batch, full-text index filled in one pass). If a batch fails, its
conversations are stored one by one so that only the bad one is reported and skipped:
every conversation is stored whole or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from workbench.core.conversation import Conversation, SkippedEntry
from workbench.core.tokens import TokenCounter, fill_counts, get_counter
from workbench.errors import WorkbenchError
from workbench.store.repository import Repository

if TYPE_CHECKING:
    from workbench.engine.workspace import ImportReport, ProgressCallback

BATCH_CONVERSATIONS = 500
BATCH_MESSAGES = 20_000


def import_conversations(
    repo: Repository,
    items: Iterable[Conversation | SkippedEntry],
    *,
    replace: bool = False,
    progress: ProgressCallback | None = None,
    counter: TokenCounter | None = None,
) -> ImportReport:
    """Store every conversation of ``items``, counting tokens first.

    Entries the format skipped, and conversations the store refuses, land in
    ``skipped`` with their reason. ``progress`` is called after each conversation read
    with the number read so far; returning False stops the import there (the
    conversations read until then are stored whole, nothing after them).
    """
    from workbench.engine.workspace import ImportReport

    report = ImportReport()
    counter = counter or get_counter()
    agent_id = repo.default_agent().id
    batch: list[Conversation] = []
    batch_messages = 0

    def flush() -> None:
        nonlocal batch, batch_messages
        if batch:
            _store_batch(repo, batch, agent_id, replace, report)
        batch, batch_messages = [], 0

    read = 0
    for item in items:
        if isinstance(item, SkippedEntry):
            report.skipped.append(item)
            continue
        fill_counts(item.messages, counter)
        batch.append(item)
        batch_messages += len(item.messages)
        read += 1
        if len(batch) >= BATCH_CONVERSATIONS or batch_messages >= BATCH_MESSAGES:
            flush()
        if progress is not None and progress(read, None) is False:
            # Whole conversations only: what was read so far is stored, nothing after.
            report.cancelled = True
            break
    flush()
    return report


def _store_batch(
    repo: Repository,
    batch: list[Conversation],
    agent_id: int,
    replace: bool,
    report: ImportReport,
) -> None:
    try:
        outcomes = repo.import_many(batch, agent_id=agent_id, replace=replace)
    except (WorkbenchError, SQLAlchemyError):
        outcomes = None
    if outcomes is not None:
        report.sessions.extend((o.session, o.created) for o in outcomes)
        return
    for conv in batch:
        try:
            outcome = repo.import_conversation(conv, agent_id=agent_id, replace=replace)
        except (WorkbenchError, SQLAlchemyError) as exc:
            label = conv.source_id or conv.title
            reason = str(getattr(exc, "orig", None) or exc)
            report.skipped.append(SkippedEntry(entry=str(label), reason=reason))
            continue
        report.sessions.append((outcome.session, outcome.created))
