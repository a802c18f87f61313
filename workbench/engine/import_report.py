"""What an import did, and the progress callback imports and exports call.

Kept out of :mod:`workbench.engine.workspace` so that :mod:`workbench.engine.importing`
(which fills the report) and the workspace (which returns it) both import it, and
neither imports the other's importer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.core.conversation import ImportNote, SessionInfo, SkippedEntry
from workbench.store.repository import ImportOutcome

__all__ = ["ImportReport", "ProgressCallback"]

ProgressCallback = Callable[[int, int | None], bool | None]
"""Called with (conversations done, total if known); returning False cancels."""


@dataclass
class ImportReport:
    """What an import did: sessions stored (or found already stored) and entries skipped.

    ``sessions`` holds every session the import met, with True for those it created;
    ``updated`` those it changed (new turns appended, or replaced with ``replace``);
    ``reused_ids`` the created sessions whose source id a different stored
    conversation already has. The others of ``sessions`` were stored before, unchanged.
    """

    sessions: list[tuple[SessionInfo, bool]] = field(default_factory=list)  # (info, created)
    skipped: list[SkippedEntry] = field(default_factory=list)
    notes: list[ImportNote] = field(default_factory=list)
    """Entries imported with something changed (a replaced character), and what."""
    cancelled: bool = False
    updated: list[SessionInfo] = field(default_factory=list)
    reused_ids: list[SessionInfo] = field(default_factory=list)
    _updated_ids: set[int] = field(default_factory=set, repr=False, compare=False)

    def add(self, outcome: ImportOutcome) -> None:
        """Count one conversation the store took."""
        self.sessions.append((outcome.session, outcome.created))
        if outcome.status == "updated":
            self.updated.append(outcome.session)
            self._updated_ids.add(id(outcome.session))
        if outcome.reused_id:
            self.reused_ids.append(outcome.session)
        if outcome.note is not None:
            self.notes.append(outcome.note)

    def status_of(self, session: SessionInfo, created: bool) -> str:
        """``"created"``, ``"updated"`` or ``"unchanged"`` for one of ``sessions``."""
        if created:
            return "created"
        if len(self._updated_ids) != len(self.updated):  # ``updated`` filled by hand
            self._updated_ids = {id(s) for s in self.updated}
        return "updated" if id(session) in self._updated_ids else "unchanged"

    def counts(self) -> dict[str, int]:
        """How many sessions were created, updated, left unchanged; entries skipped."""
        statuses = [self.status_of(s, c) for s, c in self.sessions]
        return {
            "created": statuses.count("created"),
            "updated": statuses.count("updated"),
            "unchanged": statuses.count("unchanged"),
            "skipped": len(self.skipped),
        }

    def to_json(self) -> dict[str, Any]:
        reused = {id(s) for s in self.reused_ids}
        return {
            "sessions": [
                {
                    "id": s.id,
                    "title": s.title,
                    "messages": s.message_count,
                    "created": created,
                    "status": self.status_of(s, created),
                    **({"source_id_reused": True} if id(s) in reused else {}),
                }
                for s, created in self.sessions
            ],
            "counts": self.counts(),
            "skipped": [{"entry": s.entry, "reason": s.reason} for s in self.skipped],
            "notes": [{"entry": n.entry, "note": n.note} for n in self.notes],
        }
