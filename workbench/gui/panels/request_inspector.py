"""The request inspector: the exact request the composer would send, as you type.

For the open session, the composer's prompt and the provider and model selected there,
the inspector shows the engine's preflight (:func:`~workbench.engine.chat.preflight_turn`,
the same client :func:`~workbench.engine.chat.stream_turn` builds): the provider's JSON
payload, highlighted; a stacked bar of the request's tokens per part (system, memory,
summary, history, prompt) against the model's context window, with the reply's reserve;
and the history messages left out, with the reason (activating one shows it in the
timeline). Secrets never appear: preflight redacts the HTTP headers and the payload
carries none.

Typing restarts a short timer (longer for sessions of thousands of messages); when it
fires the preflight runs on a worker. One runs at a time, and an answer is shown only if
nothing changed while it was computed: a change while it runs cancels it (it stops at its
next step instead of finishing work nobody will see) and the preflight runs again once
the timer fires. While the panel is hidden nothing runs; it catches up when shown.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QEvent,
    QModelIndex,
    QPoint,
    QRectF,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFontMetrics,
    QGuiApplication,
    QPainter,
    QPaintEvent,
    QPen,
    QShowEvent,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QListView,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from workbench.core.assembly import Budget, LeftOut, TokenBreakdown
from workbench.core.gcpause import collector_paused
from workbench.core.jsontext import indented, indented_excerpt
from workbench.engine.chat import (
    GAUGE_PREFLIGHT_LIMIT,
    left_out_previews,
    newest_left_out,
    preflight_turn,
)
from workbench.engine.workspace import Workspace
from workbench.errors import OperationCancelledError
from workbench.gui.context import AppContext
from workbench.gui.delegates.markdown import plain_tooltip, visible_text
from workbench.gui.delegates.visible import MarkedPlainTextEdit
from workbench.gui.errors import describe_error
from workbench.gui.models import ModelIndex
from workbench.gui.theme import is_dark, monospace_font, role_color, set_tone
from workbench.gui.workers import Job

REFRESH_DELAY_MS = 300
#: After a session of more than GAUGE_PREFLIGHT_LIMIT messages, typing waits longer
#: before building the request again: preflight then reads every message (a second for
#: 100,000), and the garbage collector's passes over them pause the UI thread too.
LONG_REFRESH_DELAY_MS = 1_500
#: A longer payload is shown as its beginning and its end (the system message and
#: summary, the latest messages and the prompt), this many characters each: showing and
#: colouring text costs the UI thread about 10 ms per 20,000 characters. "Copy Payload"
#: copies all of it.
PAYLOAD_HEAD_CHARS = PAYLOAD_TAIL_CHARS = 25_000
#: A line of the shown payload longer than this (one message's text: JSON holds no raw
#: line break) is shown as its beginning and end: the excerpt keeps whole messages, and
#: a 1 MB message as one line held the UI thread for seconds (laid out, then coloured).
PAYLOAD_LINE_CHARS = 10_000
#: At most this many left-out messages are listed: those nearest the request (a budget
#: cut of a long session leaves out tens of thousands; the label gives the count).
LEFT_OUT_ROWS = 1_000
#: The payload's colours are set this long per turn of the event loop.
COLOUR_SLICE_S = 0.003
PARTS = ("system", "memory", "summary", "history", "prompt")
_PART_COLOURS = {  # (light, dark)
    "system": ("#b8860b", "#e0b84c"),
    "memory": ("#00897b", "#4db6ac"),
    "summary": ("#8e44ad", "#c39bd3"),
    "history": ("#1f5fbf", "#6fa8ff"),
    "prompt": ("#1d7a46", "#5fcf8c"),
    "other": ("#8d8d8d", "#9e9e9e"),
}


def part_color(part: str, dark: bool | None = None) -> QColor:
    """The colour of a request part in the token bar and its legend."""
    if dark is None:
        dark = is_dark()
    light_hex, dark_hex = _PART_COLOURS.get(part, _PART_COLOURS["other"])
    return QColor(dark_hex if dark else light_hex)


# -- the payload's JSON -------------------------------------------------------------------


class JsonHighlighter(QSyntaxHighlighter):
    """Colours JSON as ``json.dumps(indent=2)`` writes it: keys, strings, numbers and the
    literals (one line at a time; JSON strings never span lines)."""

    # One pass from left to right: a string is taken whole (a key when a colon follows),
    # so digits and words inside strings are never taken for numbers or literals.
    _TOKEN = re.compile(
        r'(?P<string>"(?:[^"\\]|\\.)*")(?P<colon>\s*:)?'
        r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
        r"|(?P<literal>\b(?:true|false|null)\b)"
    )

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self._deferring = False
        # Blocks still to colour after new text came in (see show_text): the next one
        # by number, how many in all, and where the order starts (the first one shown).
        self._next = self._total = self._start = 0
        self._slices = QTimer(self)
        self._slices.setSingleShot(True)
        self._slices.setInterval(0)
        self._slices.timeout.connect(self._colour_slice)
        self.set_dark(is_dark())

    def show_text(self, put: Callable[[], None], first_shown: Callable[[], int]) -> None:
        """Let ``put`` change the document's text; its colours follow a few milliseconds
        at a time on the next turns of the event loop, from the block ``first_shown``
        names on, so a long payload never holds the UI thread for all of its lines."""
        self._deferring = True
        try:
            put()
        finally:
            self._deferring = False
        self._total = self.document().blockCount()
        self._start = max(0, min(first_shown(), self._total - 1))
        self._next = 0
        if self._total:
            self._slices.start()

    def pending(self) -> bool:
        """Whether some lines are still to be coloured."""
        return self._next < self._total

    def _colour_slice(self) -> None:
        started = time.perf_counter()
        document = self.document()
        while self._next < self._total and time.perf_counter() - started < COLOUR_SLICE_S:
            number = (self._start + self._next) % self._total
            self._next += 1
            block = document.findBlockByNumber(number)
            if block.isValid() and block.length() > 1:
                self.rehighlightBlock(block)
        if self._next < self._total:
            self._slices.start()

    def set_dark(self, dark: bool) -> None:
        def fmt(light: str, dark_hex: str, bold: bool = False) -> QTextCharFormat:
            f = QTextCharFormat()
            f.setForeground(QColor(dark_hex if dark else light))
            if bold:
                f.setFontWeight(600)
            return f

        self._formats = {
            "key": fmt("#1f4e9c", "#8cb4ff", bold=True),
            "string": fmt("#1d7a46", "#8fd6a8"),
            "number": fmt("#a45200", "#f0a85a"),
            "literal": fmt("#8e44ad", "#d7a0ee"),
        }
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt's name
        if not text or self._deferring:
            return
        formats = self._formats
        for match in self._TOKEN.finditer(text):
            kind = match.lastgroup
            if kind == "colon":
                start, end = match.span("string")
                self.setFormat(start, end - start, formats["key"])
            elif kind is not None:
                start, end = match.span()
                self.setFormat(start, end - start, formats[kind])


# -- the token bar ------------------------------------------------------------------------


class TokenBarWidget(QWidget):
    """A stacked bar of a request's tokens per part against the model's window.

    The parts (system, memory, summary, history, prompt) fill the bar from the left in
    their colours, tool definitions and message framing in grey after them; the reply's
    reserve is hatched at the right end of the window. A legend below names each part
    with its tokens.
    """

    BAR_HEIGHT = 20

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Request tokens by part")
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._parts: dict[str, int] = {}
        self._other = 0
        self._window: int | None = None
        self._reserved = 0

    def set_breakdown(self, parts: dict[str, int] | None, *, window: int | None = None,
                      reserved: int = 0, other: int = 0) -> None:
        """Show ``parts`` (tokens by part name; None: nothing) against ``window``."""
        self._parts = {name: int((parts or {}).get(name, 0)) for name in PARTS} if parts \
            else {}
        self._other = max(0, int(other)) if parts else 0
        self._window = window if window and window > 0 else None
        self._reserved = max(0, int(reserved)) if self._window else 0
        self.setToolTip(self.describe())
        self.setAccessibleDescription(self.describe())
        self.updateGeometry()
        self.update()

    def parts(self) -> dict[str, int]:
        """Tokens per part as shown (empty when nothing is)."""
        return dict(self._parts)

    @property
    def window(self) -> int | None:
        return self._window

    @property
    def used(self) -> int:
        return sum(self._parts.values()) + self._other

    def describe(self) -> str:
        if not self._parts:
            return "No request."
        pieces = [f"{name} {tokens:,}" for name, tokens in self._parts.items()]
        if self._other:
            pieces.append(f"tools and framing {self._other:,}")
        text = ", ".join(pieces) + f": {self.used:,} tokens"
        if self._window:
            text += f" of a {self._window:,}-token window"
            if self._reserved:
                text += f" ({self._reserved:,} kept for the reply)"
        return text + "."

    def _legend(self) -> list[tuple[str, str]]:
        items = [(name, f"{name} {tokens:,}") for name, tokens in self._parts.items()]
        if self._other:
            items.append(("other", f"tools/framing {self._other:,}"))
        if self._reserved:
            items.append(("reserve", f"reply reserve {self._reserved:,}"))
        return items

    def _legend_rows(self, width: int) -> list[list[tuple[str, str, int]]]:
        fm = QFontMetrics(self.font())
        swatch = fm.height() - 4
        rows: list[list[tuple[str, str, int]]] = [[]]
        x = 0
        for key, text in self._legend():
            w = swatch + 4 + fm.horizontalAdvance(text) + 12
            if rows[-1] and x + w > width:
                rows.append([])
                x = 0
            rows[-1].append((key, text, w))
            x += w
        return rows if rows[0] else []

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        fm = QFontMetrics(self.font())
        rows = len(self._legend_rows(max(1, width))) if self._parts else 1
        return self.BAR_HEIGHT + 6 + rows * (fm.height() + 2) + 2

    def sizeHint(self) -> QSize:
        return QSize(300, self.heightForWidth(300))

    def minimumSizeHint(self) -> QSize:
        return QSize(120, self.heightForWidth(120))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        palette = self.palette()
        dark = is_dark(palette)
        bar = QRectF(0.5, 0.5, self.width() - 1.0, self.BAR_HEIGHT - 1.0)
        painter.fillRect(bar, palette.base())
        scale_total = self._window or max(1, self.used)
        full = bar.width()

        def width_of(tokens: int) -> float:
            return full * tokens / scale_total if scale_total else 0.0

        x = bar.left()
        for name, tokens in [*self._parts.items(), ("other", self._other)]:
            if tokens <= 0:
                continue
            w = max(2.0, width_of(tokens))
            w = min(w, bar.right() - x)
            if w <= 0:
                break
            painter.fillRect(QRectF(x, bar.top(), w, bar.height()), part_color(name, dark))
            x += w
        if self._reserved:
            w = min(full, width_of(self._reserved))
            reserve = QRectF(bar.right() - w, bar.top(), w, bar.height())
            hatch = QColor(palette.text().color())
            hatch.setAlpha(110)
            painter.fillRect(reserve, QBrush(hatch, Qt.BrushStyle.BDiagPattern))
        over = self._window is not None and self.used > self._window - self._reserved
        painter.setPen(QPen(QColor("#c62828") if over else palette.mid().color(), 1))
        painter.drawRect(bar)

        fm = QFontMetrics(self.font())
        swatch = fm.height() - 4
        y = self.BAR_HEIGHT + 6
        painter.setPen(palette.windowText().color())
        for row in self._legend_rows(self.width()):
            x = 0
            for key, text, w in row:
                box = QRectF(x + 0.5, y + 2.5, swatch, swatch)
                if key == "reserve":
                    hatch = QColor(palette.text().color())
                    hatch.setAlpha(140)
                    painter.fillRect(box, QBrush(hatch, Qt.BrushStyle.BDiagPattern))
                    painter.drawRect(box)
                else:
                    painter.fillRect(box, part_color(key, dark))
                painter.drawText(int(x + swatch + 4), int(y + fm.ascent()), text)
                x += w
            y += fm.height() + 2
        painter.end()


# -- the messages left out ----------------------------------------------------------------


class LeftOutModel(QAbstractListModel):
    """History messages a request leaves out, with previews (see :data:`LEFT_OUT_ROWS`)."""

    LeftOutRole = Qt.ItemDataRole.UserRole + 1

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._items: list[LeftOut] = []
        self._previews: dict[int, tuple[str, str]] = {}

    def set_items(self, items: list[LeftOut], previews: dict[int, tuple[str, str]]) -> None:
        self.beginResetModel()
        self._items = list(items)
        self._previews = dict(previews)
        self.endResetModel()

    def items(self) -> list[LeftOut]:
        return list(self._items)

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._items):
            return None
        item = self._items[index.row()]
        preview = self._previews.get(int(item.position)) if item.position is not None else None
        number = f"#{int(item.position) + 1}" if item.position is not None else "#?"
        if role == Qt.ItemDataRole.DisplayRole:
            if preview is None:
                return f"{number} · {item.reason}"
            return visible_text(f"{number} {preview[0]}: {preview[1] or '(empty)'}")
        if role == Qt.ItemDataRole.ToolTipRole:
            head = f"Message {number} (id {item.message_id}): {item.reason}."
            return plain_tooltip(head + ("\n\n" + preview[1] if preview and preview[1] else ""))
        if role == Qt.ItemDataRole.ForegroundRole and preview is not None:
            return role_color(preview[0])
        if role == self.LeftOutRole:
            return item
        return None


# -- the panel ----------------------------------------------------------------------------


@dataclass
class InspectedRequest:
    """One preflight as the inspector shows it (built on a worker thread)."""

    session_id: int
    prompt: str
    provider: str | None
    model: str | None
    payload: dict[str, Any]  # the provider's JSON body
    tokens: TokenBreakdown
    budget: Budget
    endpoint: dict[str, Any]  # the preflight's provider note and HTTP description
    history_count: int  # history messages, carried or left out
    left_out_count: int
    shown_text: str  # what the panel shows (see PAYLOAD_HEAD_CHARS)
    listed: list[LeftOut]  # the left-out messages listed (the last LEFT_OUT_ROWS)
    previews: dict[int, tuple[str, str]]
    reasons: list[tuple[str, int]]  # why messages were left out, most frequent first

    @cached_property
    def payload_text(self) -> str:
        """All of the payload's text (written when first asked for: Copy Payload)."""
        return indented(self.payload)  # json.dumps(indent=2)'s text, without its slow path


class Superseded(OperationCancelledError):
    """A preflight stopped because what it was built from changed meanwhile (its job
    was cancelled, so the worker pool drops this error)."""


def inspect_request(ws: Workspace, session_id: int, prompt: str, *, provider: str | None,
                    model: str | None, window: int | None,
                    stop: threading.Event | None = None) -> InspectedRequest:
    """Preflight the composer's next send and prepare what the panel shows (worker).

    Only what the panel shows is kept: not the session's messages the preflight read.
    Once ``stop`` is set it raises :class:`Superseded` at its next step.
    """

    def check() -> None:
        if stop is not None and stop.is_set():
            raise Superseded

    check()
    with collector_paused():
        result = preflight_turn(ws, session_id, prompt, provider=provider, model=model,
                                window=window)
        check()
        # Runs of left-out messages, not one entry each: only the listed rows are read.
        ranges = result.left_out_ranges()
        listed = newest_left_out(ws, session_id, ranges, limit=LEFT_OUT_ROWS)
        counts: Counter[str] = Counter()
        for run in ranges:
            counts[run.reason] += run.count
        reasons = counts.most_common()
        history_count = len(result.assembled.history) + sum(counts.values())
    check()
    shown = shown_payload_of(result.payload)
    check()
    previews = left_out_previews(ws, session_id, listed, limit=LEFT_OUT_ROWS)
    return InspectedRequest(
        session_id, prompt, provider, model, payload=result.payload, tokens=result.tokens,
        budget=result.budget, endpoint={"provider": result.provider, "http": result.http},
        history_count=history_count, left_out_count=sum(count for _r, count in reasons),
        shown_text=shown, listed=listed, previews=previews, reasons=reasons)


def _left_out_note(hidden: int, count: int, key: str) -> str:
    return (f"… {hidden:,} of the {count:,} {key} are not shown here "
            "(Copy Payload copies all of it) …")


def shown_payload_of(payload: Any) -> str:
    """What the panel shows of ``payload``: its text, or when that is long, its beginning
    and end (whole entries of its messages) around a line saying how many are left out,
    written without writing the rest."""
    shown = indented_excerpt(payload, PAYLOAD_HEAD_CHARS, PAYLOAD_TAIL_CHARS, _left_out_note)
    return _cut_long_lines(shown if shown is not None else shown_payload(indented(payload)))


def _cut_long_lines(text: str) -> str:
    """``text`` with each line longer than :data:`PAYLOAD_LINE_CHARS` shown as its
    beginning and end around a note of what is left out."""
    if len(text) <= PAYLOAD_LINE_CHARS:
        return text
    lines = text.split("\n")
    if max(map(len, lines)) <= PAYLOAD_LINE_CHARS:
        return text
    half = PAYLOAD_LINE_CHARS // 2
    for number, line in enumerate(lines):
        if len(line) > PAYLOAD_LINE_CHARS:
            hidden = len(line) - 2 * half
            lines[number] = (f"{line[:half]} … {hidden:,} characters of this line are not "
                             f"shown here (Copy Payload copies all of it) … {line[-half:]}")
    return "\n".join(lines)


def shown_payload(text: str) -> str:
    """``text`` itself, or its beginning and end around a line saying what is left out."""
    if len(text) <= PAYLOAD_HEAD_CHARS + PAYLOAD_TAIL_CHARS:
        return text
    head_end = text.rfind("\n", 0, PAYLOAD_HEAD_CHARS)
    head_end = head_end if head_end > 0 else PAYLOAD_HEAD_CHARS
    tail_start = text.find("\n", len(text) - PAYLOAD_TAIL_CHARS)
    tail_start = tail_start if tail_start > 0 else len(text) - PAYLOAD_TAIL_CHARS
    hidden = len(text[head_end:tail_start].encode("utf-8"))
    return (f"{text[:head_end]}\n\n    … {hidden:,} bytes of the payload are not shown here "
            f"(Copy Payload copies all of it) …\n{text[tail_start:]}")


class RequestInspectorPanel(QWidget):
    """The preflight of what the composer holds: payload, token bar, messages left out."""

    request_shown = Signal(object)  # the InspectedRequest now shown (None: none)

    def __init__(self, ctx: AppContext, composer: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.composer = composer
        self.setObjectName("RequestInspectorPanel")
        self.shown: InspectedRequest | None = None
        # The preflight running (key ``(self, "preflight")``: a newer one supersedes it
        # and waits until it has stopped, so two never run at once).
        self._job: Job | None = None
        self._dirty = True
        self._windows: dict[tuple[str, str | None], int] = {}

        self.summary_label = QLabel("No session is open.")
        self.summary_label.setAccessibleName("Request size")
        self.summary_label.setWordWrap(True)
        self.state_label = QLabel()
        self.state_label.setAccessibleName("Request inspector state")
        self.endpoint_label = QLabel()
        self.endpoint_label.setAccessibleName("Request endpoint")
        self.endpoint_label.setWordWrap(True)
        self.endpoint_label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse)
        self.bar = TokenBarWidget(self)

        self.payload_view = MarkedPlainTextEdit()  # a bidi control in a message reorders nothing
        self.payload_view.setObjectName("RequestPayload")
        self.payload_view.setAccessibleName("Request payload")
        self.payload_view.setReadOnly(True)
        self.payload_view.setFont(monospace_font())
        self.payload_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.payload_view.setPlaceholderText("The JSON body the provider would receive.")
        self.highlighter = JsonHighlighter(self.payload_view.document())

        self.left_out_label = QLabel()
        self.left_out_label.setAccessibleName("Messages left out")
        self.left_out_label.setWordWrap(True)
        # Model names, addresses and servers' error text are data, never markup.
        for label in (self.summary_label, self.state_label, self.endpoint_label,
                      self.left_out_label):
            label.setTextFormat(Qt.TextFormat.PlainText)
        self.left_out_model = LeftOutModel(self)
        self.left_out_view = QListView()
        self.left_out_view.setAccessibleName("Messages left out of the request")
        self.left_out_view.setModel(self.left_out_model)
        self.left_out_view.setUniformItemSizes(True)
        self.left_out_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.left_out_view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.left_out_view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.left_out_view.setToolTip("Activate a message (double-click or Enter) to show it "
                                      "in the timeline")
        self.left_out_view.activated.connect(self._left_out_activated)
        left_out = QWidget()
        left_out_layout = QVBoxLayout(left_out)
        left_out_layout.setContentsMargins(0, 4, 0, 0)
        left_out_layout.addWidget(self.left_out_label)
        left_out_layout.addWidget(self.left_out_view, 1)

        self.copy_button = QPushButton("Copy Payload")
        self.copy_button.setAccessibleName("Copy the request payload")
        self.copy_button.setToolTip("Copy the whole JSON payload to the clipboard")
        self.copy_button.clicked.connect(self.copy_payload)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setAccessibleName("Refresh the request")
        self.refresh_button.setToolTip("Build the request again now")
        self.refresh_button.clicked.connect(self.refresh)

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.payload_view)
        self.splitter.addWidget(left_out)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)

        top = QHBoxLayout()
        top.addWidget(self.summary_label, 1)
        top.addWidget(self.state_label)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.refresh_button)
        buttons.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(self.endpoint_label)
        layout.addWidget(self.bar)
        layout.addWidget(self.splitter, 1)
        layout.addLayout(buttons)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_DELAY_MS)
        self._timer.timeout.connect(self.refresh)

        if composer is not None:
            composer.prompt.textChanged.connect(self._input_changed)
            composer.provider_box.currentIndexChanged.connect(self._input_changed)
            composer.model_box.currentTextChanged.connect(self._input_changed)
            # The composer reads its providers again (one was added or changed): the
            # windows learned so far may be wrong now.
            composer.provider_box.model().rowsInserted.connect(
                lambda *_: self._windows.clear())
        for signal in (ctx.message_changed, ctx.message_inserted, ctx.message_removed,
                       ctx.messages_appended, ctx.session_reloaded, ctx.context_changed):
            signal.connect(lambda *_: self._input_changed())
        ctx.workspace_replaced.connect(self._workspace_replaced)
        self._show(None)

    # -- what the composer holds ----------------------------------------------------------

    def current_inputs(self) -> tuple[int, str, str | None, str | None]:
        """``(session, prompt, provider, model)`` exactly as the composer would send."""
        composer = self.composer
        prompt = composer.prompt.toPlainText().strip() if composer is not None else ""
        provider = composer.provider() if composer is not None else None
        model = composer.model_name() if composer is not None else None
        return self.ctx.current_session_id, prompt, provider, model

    def session_changed(self, _session_id: int) -> None:
        """Another session is open."""
        self._timer.setInterval(REFRESH_DELAY_MS)
        self._input_changed()

    def _workspace_replaced(self) -> None:
        self._windows.clear()
        self._input_changed()

    def _input_changed(self, *_args: Any) -> None:
        self._dirty = True
        self._cancel_job()  # the running preflight is stale: it stops at its next step
        if self.isVisible():
            self.state_label.setText("updating…")
            self._timer.start()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the theme changed
            self.highlighter.set_dark(is_dark(self.palette()))
            self.bar.update()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self._dirty:
            self._timer.start()

    def hideEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().hideEvent(event)
        self._timer.stop()

    # -- running the preflight ------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A preflight is running or waiting to run."""
        return self._job is not None or self._timer.isActive()

    def refresh(self) -> None:
        """Build the request now (on a worker); one being built is superseded (it stops
        at its next step and this one starts once it has)."""
        self._timer.stop()
        self._cancel_job()
        session_id, prompt, provider, model = self.current_inputs()
        self._dirty = False
        if not session_id:
            self._show(None)
            return
        refused = self.composer.missing_sentence() if self.composer is not None else ""
        if refused:
            # Chat refuses the session until a provider is picked: no request to show.
            self._show_nothing(refused, tone="bad")
            return
        key = (provider or "", model)
        window = self._windows.get(key) if provider else None
        self.state_label.setText("updating…")
        stop = threading.Event()

        def done(result: InspectedRequest) -> None:
            self._job = None
            if provider and result.budget.context_window:
                self._windows[key] = int(result.budget.context_window)
            self._show(result)

        def failed(error: BaseException) -> None:
            self._job = None
            self._show_nothing(describe_error(error, doing="build the request"), tone="bad")

        self._job = self.ctx.workers.network(
            inspect_request, self.ctx.workspace, session_id, prompt, provider=provider,
            model=model, window=window, stop=stop, name="build the request",
            key=(self, "preflight"), on_stop=stop.set, on_done=done, on_error=failed)

    def _cancel_job(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self._job = None

    # -- showing ----------------------------------------------------------------------------

    def payload(self) -> dict[str, Any] | None:
        """The payload shown (the provider's JSON body), or None."""
        return self.shown.payload if self.shown is not None else None

    def _show(self, result: InspectedRequest | None) -> None:
        if result is None:
            self._show_nothing("No session is open.")
            return
        self.shown = result
        self.state_label.setText("")
        set_tone(self.summary_label, None)
        long_session = result.history_count > GAUGE_PREFLIGHT_LIMIT
        self._timer.setInterval(LONG_REFRESH_DELAY_MS if long_session else REFRESH_DELAY_MS)
        tokens = result.tokens
        budget = result.budget
        parts = {name: int(getattr(tokens, name)) for name in PARTS}
        other = tokens.total - sum(parts.values()) + budget.tools
        window = budget.context_window
        self.bar.set_breakdown(parts, window=window, reserved=budget.reserved_output,
                               other=other)
        used = tokens.total + budget.tools
        if window:
            text = f"{used:,} of {window:,} tokens"
            if budget.reserved_output:
                text += f" ({budget.reserved_output:,} kept for the reply)"
        else:
            text = f"{used:,} tokens (no window known)"
        if not result.prompt:
            text += " · the prompt is empty: shown without it (Send needs a prompt)"
        self.summary_label.setText(text)
        self._show_endpoint(result.endpoint)
        self._show_payload(result.shown_text)
        count = result.left_out_count
        self.left_out_model.set_items(result.listed, result.previews)
        if count:
            why = "; ".join(f"{reason} ({n:,})" for reason, n in result.reasons)
            noun = "message" if count == 1 else "messages"
            text = f"{count:,} {noun} left out: {why}."
            if len(result.listed) < count:
                text += f" Listed: the {len(result.listed):,} nearest the request."
            self.left_out_label.setText(text)
        else:
            self.left_out_label.setText("No message is left out.")
        self.request_shown.emit(result)

    def _show_endpoint(self, endpoint: dict[str, Any]) -> None:
        note = endpoint.get("provider") or {}
        http = endpoint.get("http") or {}
        pieces = []
        if http.get("url"):
            pieces.append(f"{http.get('method', 'POST')} {http['url']}")
        model = note.get("model")
        if model:
            pieces.append(f"model {model}")
        text = " · ".join(pieces) or "No provider"
        if note.get("assumed"):
            text += " (assumed: no provider is selected)"
        self.endpoint_label.setText(text)
        headers = http.get("headers") or {}
        tip = "\n".join(f"{k}: {v}" for k, v in headers.items())
        if note.get("note"):
            tip = (tip + "\n\n" if tip else "") + str(note["note"])
        self.endpoint_label.setToolTip(tip)

    def _show_payload(self, text: str) -> None:
        if text == self.payload_view.text():
            return
        scroll = self.payload_view.verticalScrollBar()
        position = scroll.value()

        def put() -> None:
            self.payload_view.set_text(text)
            scroll.setValue(min(position, scroll.maximum()))

        self.highlighter.show_text(
            put, lambda: self.payload_view.cursorForPosition(QPoint(0, 0)).blockNumber())

    def _show_nothing(self, text: str, *, tone: str | None = None) -> None:
        """No request shown: ``text`` says why (an error in the ``bad`` tone)."""
        self.shown = None
        self.state_label.setText("")
        self.summary_label.setText(text)
        set_tone(self.summary_label, tone)
        self.endpoint_label.setText("")
        self.endpoint_label.setToolTip("")
        self.bar.set_breakdown(None)
        self.highlighter.show_text(self.payload_view.clear, lambda: 0)
        self.left_out_model.set_items([], {})
        self.left_out_label.setText("")
        self.request_shown.emit(None)

    def copy_payload(self) -> None:
        if self.shown is not None:
            QGuiApplication.clipboard().setText(self.shown.payload_text)
            self.ctx.status_reported.emit("Copied the request payload.")

    def _left_out_activated(self, index: QModelIndex) -> None:
        item = index.data(LeftOutModel.LeftOutRole)
        if item is not None and item.message_id is not None and self.shown is not None:
            self.ctx.open_session(self.shown.session_id, int(item.message_id))

    def shut_down(self) -> None:
        """The window closes: no more preflights."""
        self._timer.stop()
        self._cancel_job()
