"""Search results as rows: one per hit, with the session's title and a marked snippet."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import QModelIndex, Qt

from workbench.core.conversation import SearchHit
from workbench.core.markdown_text import markdown_marks_removed
from workbench.gui.delegates.markdown import plain_tooltip, visible_text
from workbench.gui.models.rows import ItemListModel

# Markers the search puts around matched words; control characters never occur in text
# people search, so a «» in a message is shown as it is.
MARK_START = "\x02"
MARK_END = "\x03"
HitRole = Qt.ItemDataRole.UserRole + 1
SnippetRole = Qt.ItemDataRole.UserRole + 2
TitleRole = Qt.ItemDataRole.UserRole + 3


@dataclass(frozen=True)
class ShownSnippet:
    """A snippet as a hit's row shows it: plain text (Markdown marks taken out,
    invisible characters named, lines joined) and the matched stretches, each as
    ``(start, length)`` in the UTF-16 units a ``QTextDocument`` counts. The text is
    never read as markup."""

    text: str
    marks: tuple[tuple[int, int], ...]


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def shown_snippet(snippet: str) -> ShownSnippet:
    """``snippet`` (with the search's match markers) as :class:`ShownSnippet`."""
    plain = markdown_marks_removed(snippet, transparent=MARK_START + MARK_END)
    plain = " ".join(line.strip() for line in plain.split("\n") if line.strip())
    text: list[str] = []
    marks: list[tuple[int, int]] = []
    at = 0
    for index, part in enumerate(plain.split(MARK_START)):
        inside, _, outside = part.partition(MARK_END) if index else ("", "", part)
        for piece, marked in ((inside, True), (outside.replace(MARK_END, ""), False)):
            shown = visible_text(piece)
            if marked and shown:
                marks.append((at, _units(shown)))
            text.append(shown)
            at += _units(shown)
    return ShownSnippet("".join(text), tuple(marks))


def plain_snippet(snippet: str) -> str:
    """``snippet`` as plain text: no match markers, no Markdown marks."""
    return shown_snippet(snippet).text


def hit_key(hit: SearchHit) -> tuple[str, int | None, int | None, int | None]:
    """What identifies a hit across two runs of the same search."""
    return (hit.kind, hit.session_id, hit.message_id, hit.memory_id)


@dataclass
class SearchOutcome:
    """Hits of one search with the titles of their sessions."""

    text: str
    hits: list[SearchHit]
    titles: dict[int, str]
    seconds: float


class SearchResultsModel(ItemListModel):
    """The hits of the last search."""

    item_role = HitRole

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._titles: dict[int, str] = {}

    def set_outcome(self, outcome: SearchOutcome | None) -> None:
        self.beginResetModel()
        self._items = list(outcome.hits) if outcome else []
        self._titles = dict(outcome.titles) if outcome else {}
        self.endResetModel()

    def rename_session(self, session_id: int, title: str) -> None:
        """Show a session's new title on its hits (the session's own hit included)."""
        rows = [r for r, h in enumerate(self._items) if h.session_id == session_id]
        if not rows:
            return
        self._titles[session_id] = title
        for row in rows:
            hit = self._items[row]
            if hit.kind == "session" and hit.title is not None:
                self._items[row] = replace(hit, title=title)
        self.dataChanged.emit(self.index(rows[0], 0), self.index(rows[-1], 0))

    def drop_session(self, session_id: int) -> int:
        """Remove the hits of a session that is gone; returns how many there were."""
        rows = [r for r, h in enumerate(self._items) if h.session_id == session_id]
        for row in reversed(rows):
            self.beginRemoveRows(QModelIndex(), row, row)
            del self._items[row]
            self.endRemoveRows()
        return len(rows)

    def row_of(self, key: tuple[str, int | None, int | None, int | None]) -> int:
        """The row of the hit with ``key`` (see :func:`hit_key`), or -1."""
        return next((r for r, h in enumerate(self._items) if hit_key(h) == key), -1)

    def hit_at(self, row: int) -> SearchHit:
        return self._items[row]

    def title_of(self, hit: SearchHit) -> str:
        if hit.kind == "session":
            return hit.title or self._titles.get(hit.session_id or 0, "")
        if hit.kind == "memory" and hit.session_id is None:
            return "Memory"
        return self._titles.get(hit.session_id or 0, f"Session {hit.session_id}")

    def item_data(self, hit: SearchHit, role: int) -> Any:
        if role == TitleRole:
            return visible_text(self.title_of(hit))
        if role == SnippetRole:
            return shown_snippet(hit.snippet)
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            what = hit.role or hit.kind
            return f"{visible_text(self.title_of(hit))}, {what}: {plain_snippet(hit.snippet)}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tooltip(plain_snippet(hit.snippet))
        return None
