"""The search panel: a query with role, session, date and state filters, and its hits.

Searches run on a reader thread; a newer search makes the answer of an older one be
ignored. Activating a hit opens its session scrolled to the message.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from PySide6.QtCore import (
    QDate,
    QEvent,
    QModelIndex,
    QObject,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QColor,
    QFontMetrics,
    QKeyEvent,
    QPainter,
    QPalette,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QGridLayout,
    QLabel,
    QListView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from workbench.core.conversation import ROLES, SearchHit
from workbench.engine.workspace import SearchQuery, Workspace
from workbench.errors import NotFoundError
from workbench.gui.context import AppContext
from workbench.gui.controls import filter_field, named, single_shot
from workbench.gui.models import ModelIndex
from workbench.gui.models.search_results import (
    MARK_END,
    MARK_START,
    HitRole,
    SearchOutcome,
    SearchResultsModel,
    ShownSnippet,
    SnippetRole,
    TitleRole,
    hit_key,
)
from workbench.gui.theme import ROLE_LABELS, is_dark, role_color

SEARCH_DELAY_MS = 250
MATCH_HIGHLIGHT = "#ffe58a"  # a matched word's background (black text on it)
RESULT_LIMIT = 100


def run_search(workspace: Workspace, query: SearchQuery) -> SearchOutcome:
    """Search and look up the titles of the sessions hit (runs on a reader thread)."""
    started = time.perf_counter()
    hits = workspace.search(query)
    titles: dict[int, str] = {}
    for hit in hits:
        if hit.session_id is not None and hit.session_id not in titles:
            try:
                titles[hit.session_id] = workspace.get_session(hit.session_id).title
            except Exception:  # a session deleted meanwhile: the hit keeps its id
                titles[hit.session_id] = f"Session {hit.session_id}"
    return SearchOutcome(query.text, hits, titles, time.perf_counter() - started)


def snippet_document(snippet: ShownSnippet, text_colour: QColor,
                     highlight: QColor | None = None) -> QTextDocument:
    """A document showing ``snippet`` as plain text in ``text_colour`` (its content is
    never read as markup), the matched stretches on ``highlight`` in black."""
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    doc.setPlainText(snippet.text)
    cursor = QTextCursor(doc)
    cursor.select(QTextCursor.SelectionType.Document)
    base = QTextCharFormat()
    base.setForeground(text_colour)
    cursor.mergeCharFormat(base)
    mark = QTextCharFormat()
    mark.setBackground(highlight or QColor(MATCH_HIGHLIGHT))
    mark.setForeground(QColor("#000000"))
    for start, length in snippet.marks:
        cursor.setPosition(start)
        cursor.setPosition(start + length, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(mark)
    return doc


class SearchHitDelegate(QStyledItemDelegate):
    """A hit: session title and role on one line, the snippet (matches marked) below."""

    LINES = 3

    def sizeHint(self, option: QStyleOptionViewItem, index: ModelIndex) -> QSize:
        fm = QFontMetrics(option.font)
        # No width of its own: the row is as wide as the list, which never scrolls sideways
        # (the width of the rect asked about once stuck after the dock narrowed).
        return QSize(1, fm.lineSpacing() * self.LINES + 12)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: ModelIndex) -> None:
        hit: SearchHit | None = index.data(HitRole)
        if hit is None:
            return
        painter.save()
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = option.widget.style() if option.widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, option.widget)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        palette = option.palette
        text_colour = palette.color(QPalette.ColorRole.HighlightedText if selected
                                    else QPalette.ColorRole.Text)
        fm = QFontMetrics(option.font)
        rect = option.rect.adjusted(6, 4, -6, -4)
        title_font = painter.font()
        title_font.setBold(True)
        painter.setFont(title_font)
        painter.setPen(text_colour)
        label = ROLE_LABELS.get(hit.role or "", hit.kind.title())
        label_width = fm.horizontalAdvance(label) + 12
        title_rect = rect.adjusted(0, 0, -label_width, 0)
        title_rect.setHeight(fm.lineSpacing())
        painter.drawText(title_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         QFontMetrics(title_font).elidedText(str(index.data(TitleRole)),
                                                             Qt.TextElideMode.ElideRight,
                                                             title_rect.width()))
        painter.setFont(option.font)
        # On the selection the role takes the selection's text colour: a role's colour
        # (green, blue…) is made for the list's background and hardly reads on it.
        painter.setPen(role_color(hit.role, is_dark(palette)) if hit.role and not selected
                       else text_colour)
        painter.drawText(rect.adjusted(0, 0, 0, -(rect.height() - fm.lineSpacing())),
                         Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, label)
        doc = snippet_document(index.data(SnippetRole), text_colour)
        doc.setDefaultFont(option.font)
        doc.setTextWidth(rect.width())
        painter.translate(rect.left(), rect.top() + fm.lineSpacing() + 2)
        clip_height = fm.lineSpacing() * (self.LINES - 1)  # whole lines only
        painter.setClipRect(0, 0, rect.width(), clip_height)
        doc.drawContents(painter)
        painter.restore()


class SearchPanel(QWidget):
    """Query, filters and results (see the module docstring)."""

    hit_activated = Signal(object)  # the SearchHit to open
    search_finished = Signal(object)  # the SearchOutcome shown

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("SearchPanel")
        self.query_edit = filter_field(self, "Search text", "Search words, \"a phrase\", prefix*")
        self.scope_box = named(QComboBox(self), "Search scope")
        self.scope_box.addItem("All sessions", "all")
        self.scope_box.addItem("This session", "session")
        self.role_box = named(QComboBox(self), "Role filter")
        self.role_box.addItem("Any role", None)
        for role in ROLES:
            self.role_box.addItem(ROLE_LABELS[role], role)
        self.from_box, self.from_date = self._date_filter(
            "From", "Only messages from a date", "From date", QDate.currentDate().addMonths(-1))
        self.to_box, self.to_date = self._date_filter(
            "To", "Only messages up to a date", "To date", QDate.currentDate())
        self.hidden_box = QCheckBox("Include folded and evicted", self)
        self.hidden_box.setChecked(True)
        self.hidden_box.setAccessibleName("Include folded and evicted messages")

        self.model = SearchResultsModel(self)
        self.results = QListView(self)
        self.results.setModel(self.model)
        self.results.setItemDelegate(SearchHitDelegate(self.results))
        self.results.setUniformItemSizes(True)
        self.results.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.results.setAccessibleName("Search results")
        self.status_label = QLabel(self)
        self.status_label.setAccessibleName("Search status")
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)

        filters = QGridLayout()
        filters.setContentsMargins(0, 0, 0, 0)
        filters.addWidget(self.scope_box, 0, 0)
        filters.addWidget(self.role_box, 0, 1)
        filters.addWidget(self.from_box, 1, 0)
        filters.addWidget(self.from_date, 1, 1)
        filters.addWidget(self.to_box, 2, 0)
        filters.addWidget(self.to_date, 2, 1)
        filters.addWidget(self.hidden_box, 3, 0, 1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addWidget(self.query_edit)
        layout.addLayout(filters)
        layout.addWidget(self.results, 1)
        layout.addWidget(self.status_label)

        self._timer = single_shot(self, SEARCH_DELAY_MS, self.search)
        self.query_edit.textChanged.connect(lambda _t: self._timer.start())
        self.query_edit.returnPressed.connect(self.search)
        for box in (self.scope_box, self.role_box):
            box.currentIndexChanged.connect(lambda _i: self._timer.start())
        for check, editor in ((self.from_box, self.from_date), (self.to_box, self.to_date)):
            check.toggled.connect(editor.setEnabled)
            check.toggled.connect(lambda _c: self._timer.start())
            editor.dateChanged.connect(lambda _d: self._timer.start())
        self.hidden_box.toggled.connect(lambda _c: self._timer.start())
        self.results.activated.connect(self._activated)
        self.results.clicked.connect(self._activated)
        self.query_edit.installEventFilter(self)
        # The hits follow the database: a renamed session's title changes on them at
        # once, a deleted session's hits go at once, and any change to sessions or
        # messages runs the search again shortly (keeping the current hit).
        self._rerun_timer = single_shot(self, SEARCH_DELAY_MS, self._search_again)
        ctx.session_updated.connect(
            lambda info: self.model.rename_session(int(info.id), info.title))
        ctx.session_hidden.connect(self._session_gone)
        for signal in (ctx.sessions_changed, ctx.session_reloaded, ctx.message_changed,
                       ctx.message_inserted, ctx.message_removed, ctx.messages_appended,
                       ctx.workspace_replaced):
            signal.connect(lambda *_: self._schedule_again())

    def _date_filter(self, text: str, box_name: str, date_name: str,
                     start: QDate) -> tuple[QCheckBox, QDateEdit]:
        """A check box turning a date limit on, and the date (off until it is)."""
        box = named(QCheckBox(text, self), box_name)
        date = named(QDateEdit(self), date_name)
        date.setCalendarPopup(True)
        date.setDisplayFormat("yyyy-MM-dd")
        date.setDate(start)
        date.setEnabled(False)
        return box, date

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        # Down or Page Down in the query box goes to the results, as in the session
        # filter; Enter there opens the current hit.
        if (watched is self.query_edit and event.type() == QEvent.Type.KeyPress
                and isinstance(event, QKeyEvent)
                and event.key() in (Qt.Key.Key_Down, Qt.Key.Key_PageDown)
                and self.model.rowCount()):
            self.focus_results()
            return True
        return super().eventFilter(watched, event)

    def focus_results(self) -> None:
        """Put the keyboard focus on the results, the first hit current if none was."""
        if self._timer.isActive():  # what was typed is the query to land in
            self.search()
        if not self.results.currentIndex().isValid() and self.model.rowCount():
            self.results.setCurrentIndex(self.model.index(0, 0))
        self.results.setFocus(Qt.FocusReason.OtherFocusReason)

    # -- searching ---------------------------------------------------------------------

    def focus_query(self, scope: str = "all") -> None:
        """Put the cursor in the query box, searching everything or the open session."""
        index = self.scope_box.findData(scope)
        if index >= 0:
            self.scope_box.setCurrentIndex(index)
        self.query_edit.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.query_edit.selectAll()

    def build_query(self) -> SearchQuery | None:
        text = self.query_edit.text().strip()
        if not text:
            return None
        role = self.role_box.currentData()
        session_id = None
        if self.scope_box.currentData() == "session":
            session_id = self.ctx.current_session_id or None
        date_from = date_to = None
        if self.from_box.isChecked():
            date_from = _day_start(self.from_date.date())
        if self.to_box.isChecked():
            date_to = _day_start(self.to_date.date()) + timedelta(days=1)
        states = None if self.hidden_box.isChecked() else ["active"]
        return SearchQuery(
            text=text, roles=[role] if role else None, session_id=session_id,
            date_from=date_from, date_to=date_to, states=states, limit=RESULT_LIMIT,
            highlight=(MARK_START, MARK_END),
        )

    def _schedule_again(self) -> None:
        if self.model.rowCount() or self.query_edit.text().strip():
            self._rerun_timer.start()

    def _search_again(self) -> None:
        if not self._timer.isActive() and self.query_edit.text().strip():
            self.search()

    def _session_gone(self, session_id: int) -> None:
        if self.model.drop_session(session_id):
            self._show_count(self.model.rowCount())
        self._schedule_again()

    def _show_count(self, count: int, seconds: float | None = None) -> None:
        more = "+" if count >= RESULT_LIMIT else ""
        noun = "result" if count == 1 else "results"
        took = f" in {seconds * 1000:.0f} ms" if seconds is not None else ""
        self.status_label.setText(f"{count}{more} {noun}{took}")

    def search(self) -> None:
        """Run the query now (typing runs it after a short pause)."""
        self._timer.stop()
        self._rerun_timer.stop()
        query = self.build_query()
        key = (self, "search")  # a newer search supersedes the one under way
        if query is None:
            self.ctx.workers.cancel(key)
            self.model.set_outcome(None)
            self.status_label.setText("")
            return
        self.status_label.setText("Searching…")

        def done(outcome: SearchOutcome) -> None:
            hidden = self.ctx.trash.hidden()
            outcome.hits = [h for h in outcome.hits if h.session_id not in hidden]
            current = self.results.currentIndex().data(HitRole)
            self.model.set_outcome(outcome)
            if current is not None:  # the same search again: stay on the same hit
                row = self.model.row_of(hit_key(current))
                if row >= 0:
                    self.results.setCurrentIndex(self.model.index(row, 0))
            self._show_count(len(outcome.hits), outcome.seconds)
            self.search_finished.emit(outcome)

        def failed(error: BaseException) -> None:
            self.status_label.setText("The search failed.")
            self.ctx.report_error(error, doing="search")

        self.ctx.workers.read(run_search, self.ctx.workspace, query, name="search", key=key,
                              on_done=done, on_error=failed)

    def _activated(self, index: QModelIndex) -> None:
        hit = index.data(HitRole)
        if hit is not None:
            self.open_hit(hit)

    def open_hit(self, hit: SearchHit) -> None:
        if hit.session_id is not None and not self._session_exists(hit.session_id):
            self.model.drop_session(hit.session_id)
            text = ("The session of that result has been deleted, so it cannot be opened; "
                    "its results are gone from the list.")
            self.status_label.setText(text)
            self.ctx.status_reported.emit(text)
            self._schedule_again()
            return
        self.hit_activated.emit(hit)
        if hit.session_id is not None:
            self.ctx.open_session(hit.session_id, hit.message_id)

    def _session_exists(self, session_id: int) -> bool:
        if session_id in self.ctx.trash:
            return False
        try:
            self.ctx.workspace.get_session(session_id)
        except NotFoundError:
            return False
        return True

    def hits(self) -> list[SearchHit]:
        return [self.model.hit_at(row) for row in range(self.model.rowCount())]


def _day_start(date: QDate) -> datetime:
    local = datetime(date.year(), date.month(), date.day()).astimezone()
    return local.astimezone(UTC)
