"""Painting one timeline row: a message bubble, a folded-run marker or a streaming reply.

A message shows a role badge and colour, the role (and name or tool call id), whether
it is folded or evicted, its time, token count and an importance star (click to
toggle), then its text rendered from Markdown (code in monospace on a tinted block).
An assistant's tool calls follow as named code blocks with their arguments; a tool
result shows its text as a code block. Long texts show their first lines with a
"show all" link (click to expand), so one huge tool output never costs more than a
screenful of layout.

A marker row stands for a run of folded or evicted messages; when a compaction folded
them it names the compaction, and expanded it shows the summary that compaction wrote
(its first lines) above the greyed messages. A message a compaction preview would fold
is tinted amber with a "will fold" note until the preview is applied or dropped.

Rendered documents are cached by message, revision, width and theme, so a row is laid
out once however often it is painted.
"""

from __future__ import annotations

import json
import re
import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QPointF,
    QRect,
    QRectF,
    QSize,
    Qt,
    QUrl,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QDesktopServices,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QHelpEvent,
    QMouseEvent,
    QPainter,
    QPalette,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolTip,
    QWidget,
)

from workbench.core.conversation import Message
from workbench.gui.controls import single_shot
from workbench.gui.delegates.code_lexing import lex_later
from workbench.gui.delegates.markdown import (
    CodeBlock,
    SafeDocument,
    highlight_code,
    link_targets,
    mark_invisible,
    plain_tooltip,
    render_markdown,
    visible_text,
    warm_up,
)
from workbench.gui.delegates.message_editor import MessageEditor
from workbench.gui.models import ModelIndex
from workbench.gui.models.timeline import (
    CompactionsRole,
    KeyRole,
    KindRole,
    MessageRole,
    RunRole,
    SummaryRole,
    WillFoldRole,
)
from workbench.gui.theme import ROLE_GLYPHS, ROLE_LABELS, is_dark, role_color

COLLAPSED_LINES = 24
COLLAPSED_CHARS = 2_400
LINE_CHARS = 100  # about one line of the timeline's text: never hidden alone
EXPANDED_CHARS = 200_000
DOC_CACHE = 300
COLOUR_BUDGET_S = 0.008  # highlighting per event-loop turn
COPY_LABEL = "Copy"
COPY_CODE_LABEL = "Copy code"
COPIED_LABEL = "Copied ✓"
COPIED_MS = 1_500  # how long a copy button says it copied
MARKER_SUMMARY_LINES = 12
MARKER_SUMMARY_CHARS = 1_500
WILL_FOLD_LIGHT = QColor("#e69500")
WILL_FOLD_DARK = QColor("#ffb74d")

_BACKTICK_RUNS = re.compile("`+")

MARGIN_X = 8
MARGIN_Y = 3
PAD = 8
BADGE = 24
GAP = 8


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks inside ``text``."""
    if "``" not in text:
        return "```"
    longest = max(len(run) for run in _BACKTICK_RUNS.findall(text))
    return "`" * max(3, longest + 1)


def _code_block(text: str, language: str = "") -> str:
    fence = _fence(text)
    return f"{fence}{language}\n{text}\n{fence}"


def _shorten(text: str, expanded: bool) -> tuple[str, bool, int]:
    """The part of ``text`` to show, whether it was cut, and its total line count."""
    lines = text.count("\n") + 1
    if expanded:
        return (text[:EXPANDED_CHARS], len(text) > EXPANDED_CHARS, lines)
    cut = text
    # "Show all" takes a line itself: a cut that would hide only a line is not made.
    if lines > COLLAPSED_LINES + 1:
        end = -1
        for _ in range(COLLAPSED_LINES):
            end = cut.find("\n", end + 1)
        cut = cut[:end]
    if len(cut) > COLLAPSED_CHARS + LINE_CHARS:
        # At a space near the limit, so the last word shown is a whole one.
        space = cut.rfind(" ", COLLAPSED_CHARS - LINE_CHARS, COLLAPSED_CHARS + 1)
        cut = cut[:space if space > 0 else COLLAPSED_CHARS].rstrip()
    return cut, len(cut) < len(text), lines


def _hidden_chars(message: Message) -> int:
    total = len(message.content or "")
    for part in message.parts or []:
        if isinstance(part, dict) and str(part.get("type", "")) in ("reasoning", "thinking"):
            total += len(str(part.get("text") or part.get("thinking") or ""))
    for call in message.tool_calls or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        total += len(_arguments_text(function.get("arguments", call.get("arguments", {}))))
    return total


def show_all_label(message: Message, expanded: bool) -> str:
    """The label of a long message's expander: how much there is when it is folded.

    A text cut by lines counts its lines; one cut by length (a long paragraph, a long
    single line) counts its characters, so it never says "1 lines".
    """
    if expanded:
        return "Show less ▴"
    lines = (message.content or "").count("\n") + 1
    if lines > COLLAPSED_LINES + 1:
        return f"Show all ▾ {lines:,} lines"
    total = _hidden_chars(message)
    return f"Show all ▾ {total:,} character{'' if total == 1 else 's'}"


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    try:
        return json.dumps(arguments, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def marker_summary_text(summary: str) -> str:
    """The first lines of a folded run's summary, as an expanded marker shows them."""
    text = summary.strip()
    if not text:
        return ""
    lines = text.splitlines()
    cut = "\n".join(lines[:MARKER_SUMMARY_LINES])
    if len(cut) > MARKER_SUMMARY_CHARS:
        cut = cut[:MARKER_SUMMARY_CHARS].rstrip()
    if len(cut) < len(text):
        more = len(lines) - MARKER_SUMMARY_LINES
        tail = f"{more:,} more lines" if more > 0 else "more"
        cut += f"\n… ({tail}: the whole summary is in the Context panel)"
    return cut


def header_room(fm: QFontMetrics, right_rect: QRect, left: int, right_text: str) -> int:
    """The width a header's middle text may take from ``left`` up to the right-aligned
    ``right_text`` of ``right_rect`` (a gap kept between them)."""
    right_left = right_rect.right() - fm.horizontalAdvance(right_text) if right_text \
        else right_rect.right()
    return max(0, right_left - 12 - left)


def will_fold_color(dark: bool) -> QColor:
    """The tint of messages a compaction preview would fold."""
    return QColor(WILL_FOLD_DARK if dark else WILL_FOLD_LIGHT)


def message_markdown(message: Message, expanded: bool = False) -> tuple[str, bool, int]:
    """Markdown for a message's body: its text, then tool calls; and whether it was cut.

    Tool results are code blocks (they are program output, not prose).
    """
    content = message.content or ""
    body, truncated, lines = _shorten(content, expanded)
    pieces: list[str] = []
    if message.role == "tool":
        if body:
            pieces.append(_code_block(body))
    elif body:
        pieces.append(body)
    for part in message.parts or []:
        kind = str(part.get("type", "")) if isinstance(part, dict) else ""
        if kind in ("reasoning", "thinking"):
            text = str(part.get("text") or part.get("thinking") or "")
            short, cut, _ = _shorten(text, expanded)
            truncated = truncated or cut
            if short:
                pieces.insert(0, "> *Reasoning:* " + short.replace("\n", "\n> "))
        elif kind.startswith("image") or kind == "input_image":
            pieces.append("*[image]*")
    for call in message.tool_calls or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        name = str(function.get("name") or call.get("name") or "tool")
        arguments = _arguments_text(function.get("arguments", call.get("arguments", {})))
        short, cut, _ = _shorten(arguments, expanded)
        truncated = truncated or cut
        call_id = call.get("id") if isinstance(call, dict) else None
        label = f"**→ {name}**" + (f" `{call_id}`" if call_id else "")
        pieces.append(label + "\n\n" + _code_block(short, "json"))
    if not pieces:
        pieces.append("*(empty)*")
    return "\n\n".join(pieces), truncated, lines


_INPUT_KEYS = ("input_tokens", "prompt_tokens", "input")
_OUTPUT_KEYS = ("output_tokens", "completion_tokens", "output")


def _first_number(usage: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
    return None


def usage_text(usage: Any) -> str:
    """Billed usage as one line ("1,200 input + 85 output tokens"), or ``""``."""
    if not isinstance(usage, dict) or not usage:
        return ""
    used = _first_number(usage, _INPUT_KEYS)
    made = _first_number(usage, _OUTPUT_KEYS)
    pieces = []
    if used is not None:
        pieces.append(f"{used:,} input")
    if made is not None:
        pieces.append(f"{made:,} output")
    if pieces:
        return " + ".join(pieces) + " tokens"
    shown = [f"{k} {v:,}" for k, v in usage.items()
             if isinstance(v, int) and not isinstance(v, bool)]
    return ", ".join(shown)


def message_model(message: Message) -> str:
    """The model that wrote an assistant message, as its metadata names it (or ``""``)."""
    if message.role != "assistant":
        return ""
    meta = message.metadata or {}
    model = meta.get("model") or meta.get("resolved_model")
    return str(model) if model else ""


def message_time_text(message: Message) -> str:
    """The message's local time, or "time unknown" when it was stored without one."""
    if message.created_at is None:
        return "time unknown"
    return message.created_at.astimezone().strftime("%Y-%m-%d %H:%M")


def message_details(message: Message) -> str:
    """The hover text of a message header: model, finish reason, billed usage, time."""
    meta = message.metadata or {}
    lines = []
    model = message_model(message)
    if model:
        lines.append(f"Model: {model}")
    resolved = meta.get("resolved_model")
    if resolved and str(resolved) != model:
        lines.append(f"Resolved model: {resolved}")
    if message.role == "assistant":
        reason = meta.get("finish_reason")
        lines.append(f"Finish reason: {reason}" if reason else "Finish reason: not recorded")
        usage = usage_text(meta.get("usage"))
        lines.append(f"Billed usage: {usage}" if usage else "Billed usage: not recorded")
        if meta.get("stopped"):
            lines.append("Stopped before the reply was complete")
    if message.created_at is None:
        lines.append("Time: unknown (the source did not record one)")
    else:
        lines.append("Time: " + message_time_text(message))
    if message.token_count is not None:
        lines.append(f"Tokens in context: {message.token_count:,}")
    return "\n".join(lines)


def open_link(href: str) -> None:
    """Open a clicked link in the desktop's browser: web and mail links only.

    A local path or any other scheme is never opened from a message (a message is data).
    """
    url = QUrl(href)
    if url.scheme().lower() in ("http", "https", "mailto"):
        QDesktopServices.openUrl(url)


def message_details_line(message: Message) -> str:
    """The muted line under an assistant message's header: model, finish reason, usage.

    Empty when the message carries none of them (most imported user and tool messages).
    """
    if message.role != "assistant":
        return ""
    meta = message.metadata or {}
    pieces = []
    model = message_model(message)
    if model:
        pieces.append(model)
    reason = meta.get("finish_reason")
    if reason:
        pieces.append(f"finish: {reason}")
    usage = usage_text(meta.get("usage"))
    if usage:
        pieces.append(usage)
    return " · ".join(pieces)


def _code_header_height(fm: QFontMetrics) -> int:
    return fm.height() + 6


def _bubble_document(font: QFont) -> SafeDocument:
    """An empty document for a bubble's text in ``font``, without margins; long code lines
    and unbroken tokens wrap rather than run past the bubble."""
    doc = SafeDocument()
    doc.setDocumentMargin(0)
    doc.setDefaultFont(font)
    wrap = doc.defaultTextOption()
    wrap.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    doc.setDefaultTextOption(wrap)
    return doc


@dataclass
class _Rendered:
    doc: QTextDocument
    truncated: bool
    code_blocks: tuple[CodeBlock, ...]
    dark: bool = False
    coloured: bool = True  # False until its code blocks are highlighted


@dataclass
class _Geometry:
    bubble: QRect
    badge: QRect
    header: QRect
    star: QRect
    copy: QRect
    details: QRect | None
    doc_origin: QPointF
    more: QRect | None


class MessageDelegate(QStyledItemDelegate):
    """Paints timeline rows and edits messages in place (see the module docstring)."""

    importance_toggled = Signal(object)  # the Message whose star was clicked
    marker_toggled = Signal(int)  # the row of a folded-run marker that was clicked
    expansion_changed = Signal(object)  # the model index whose "show all" was clicked
    copied = Signal(str)  # text a copy button put on the clipboard
    link_activated = Signal(str)  # the target of a link that was clicked in a message
    # The key of a rendered document whose code was lexed on the lexing thread.
    _code_lexed = Signal(object)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._docs: OrderedDict[tuple[Any, ...], _Rendered] = OrderedDict()
        self._expanded: set[int] = set()
        self._to_colour: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._colour_timer = single_shot(self, 0, self._colour_pending)
        self._code_lexed.connect(self._colour_later)
        # The button last used to copy: (row key, "message" or a code block's first block).
        self._copied: tuple[Any, Any] | None = None
        self._copied_timer = single_shot(self, COPIED_MS, lambda: self._show_copied(None))
        self.link_activated.connect(open_link)
        warm_up()

    # -- documents ---------------------------------------------------------------------

    def is_expanded(self, message: Message) -> bool:
        return message.id is not None and int(message.id) in self._expanded

    def set_expanded(self, message: Message, expanded: bool) -> None:
        if message.id is None:
            return
        if expanded:
            self._expanded.add(int(message.id))
        else:
            self._expanded.discard(int(message.id))

    def copied_button(self) -> tuple[Any, Any] | None:
        """The copy button that says "Copied" now: (row key, "message" or the first block
        number of a code block), or None."""
        return self._copied

    def _show_copied(self, which: tuple[Any, Any] | None) -> None:
        self._copied = which
        if which is not None:
            self._copied_timer.start()
        view = self.parent()
        if isinstance(view, QAbstractItemView):
            view.viewport().update()

    def copy_to_clipboard(self, index: ModelIndex, text: str, which: Any = "message") -> None:
        """Put ``text`` on the clipboard; the button ``which`` of the row says "Copied"."""
        QGuiApplication.clipboard().setText(text)
        self._show_copied((index.data(KeyRole), which))
        self.copied.emit(text)

    def toggle_expanded(self, index: ModelIndex) -> bool:
        """Show all of a folded long message, or fold it again; whether it had a part to
        show or hide (a short message has none)."""
        message = index.data(MessageRole)
        if index.data(KindRole) != "message" or message is None:
            return False
        if not self.is_expanded(message) and not message_markdown(message, False)[1]:
            return False
        self.set_expanded(message, not self.is_expanded(message))
        self.expansion_changed.emit(QModelIndex(index))
        self.sizeHintChanged.emit(QModelIndex(index))
        return True

    @staticmethod
    def _whole_document(message: Message) -> tuple[SafeDocument, list[CodeBlock]]:
        doc = SafeDocument()
        text, _cut, _lines = message_markdown(message, expanded=True)
        # Read, not shown: its links and code as written, without the naming of invisible
        # characters (a message of 200,000 of them took seconds per context menu).
        blocks = render_markdown(doc, text, False, 0, highlight=False, name_invisible=False)
        return doc, blocks

    def code_blocks(self, message: Message) -> list[CodeBlock]:
        """The code blocks of a whole message (tool call arguments and results too)."""
        return self._whole_document(message)[1]

    def links(self, message: Message) -> list[str]:
        """The targets of a message's links and images, in order."""
        return link_targets(self._whole_document(message)[0])

    def clear_cache(self) -> None:
        self._docs.clear()
        self._to_colour.clear()

    def _document(self, index: ModelIndex, message: Message, width: int,
                  font: QFont, dark: bool) -> tuple[QTextDocument, bool]:
        entry = self._rendered(index, message, width, font, dark)
        return entry.doc, entry.truncated

    def _rendered(self, index: ModelIndex, message: Message, width: int,
                  font: QFont, dark: bool) -> _Rendered:
        expanded = self.is_expanded(message)
        key = (index.data(KeyRole), width, expanded, dark, font.key())
        cached = self._docs.get(key)
        if cached is not None:
            self._docs.move_to_end(key)
            return cached
        text, truncated, _lines = message_markdown(message, expanded)
        doc = _bubble_document(font)
        # Code is coloured after the paint (see _colour_pending): lexing costs more than
        # the rest of the row, and a screenful of new rows should not wait for it.
        blocks = render_markdown(doc, text, dark, _code_header_height(QFontMetrics(font)),
                                 highlight=False)
        doc.setTextWidth(max(40, width))
        to_colour = any(b.language for b in blocks)
        entry = _Rendered(doc, truncated, tuple(blocks), dark, coloured=not to_colour)
        if to_colour:
            # Lexed on a thread of its own (Pygments is pure Python: one block may take
            # 10 ms), then coloured here from the colours it left in code_colours' cache.
            lex_later(entry.code_blocks, dark, lambda key=key: self._announce_lexed(key))
        self._docs[key] = entry
        while len(self._docs) > DOC_CACHE:
            self._docs.popitem(last=False)
        return entry

    def _announce_lexed(self, key: tuple[Any, ...]) -> None:
        """On the lexing thread: the colours of ``key``'s code are ready."""
        try:
            self._code_lexed.emit(key)
        except RuntimeError:  # the delegate is gone (its view closed): nothing to colour
            pass

    def _colour_later(self, key: tuple[Any, ...]) -> None:
        self._to_colour[key] = None
        if not self._colour_timer.isActive():
            self._colour_timer.start()

    def _colour_pending(self) -> None:
        """Highlight the code of rendered rows, a few milliseconds' worth per turn."""
        started = time.perf_counter()
        coloured = False
        while self._to_colour and time.perf_counter() - started < COLOUR_BUDGET_S:
            key, _ = self._to_colour.popitem(last=False)
            entry = self._docs.get(key)
            if entry is None or entry.coloured:
                continue
            highlight_code(entry.doc, entry.code_blocks, entry.dark)
            entry.coloured = True
            coloured = True
        if self._to_colour:
            self._colour_timer.start()
        view = self.parent()
        if coloured and isinstance(view, QAbstractItemView):
            view.viewport().update()

    def is_coloured(self, index: ModelIndex) -> bool:
        """Whether every rendered document of the row at ``index`` has its code coloured."""
        key = index.data(KeyRole)
        return all(entry.coloured for k, entry in self._docs.items() if k[0] == key)

    def _summary_document(self, index: ModelIndex, width: int, font: QFont
                          ) -> QTextDocument | None:
        """The summary block of an expanded folded marker (None when there is none)."""
        run = index.data(RunRole)
        if run is None or not run.expanded or run.state != "folded":
            return None
        text = marker_summary_text(str(index.data(SummaryRole) or ""))
        if not text:
            return None
        key = ("marker-summary", index.data(KeyRole), width, font.key(), text)
        cached = self._docs.get(key)
        if cached is not None:
            self._docs.move_to_end(key)
            return cached.doc
        doc = _bubble_document(font)
        doc.setPlainText(text)
        mark_invisible(doc, is_dark())
        doc.setTextWidth(max(40, width))
        self._docs[key] = _Rendered(doc, False, ())
        while len(self._docs) > DOC_CACHE:
            self._docs.popitem(last=False)
        return doc

    @staticmethod
    def _summary_heading(index: ModelIndex) -> str:
        records = index.data(CompactionsRole) or []
        if not records:
            return "The session's summary"
        names = ", ".join(f"#{r.id}" for r in records)
        noun = "compaction" if len(records) == 1 else "compactions"
        return f"Summary written by {noun} {names}"

    @staticmethod
    def _marker_summary_width(width: int) -> int:
        return width - 4 * MARGIN_X - 2 * PAD - 6

    # -- geometry ----------------------------------------------------------------------

    @staticmethod
    def _header_height(fm: QFontMetrics) -> int:
        return fm.height() + 4

    def _geometry(self, rect: QRect, fm: QFontMetrics, doc_height: int,
                  truncated: bool, details: bool = False) -> _Geometry:
        bubble = rect.adjusted(MARGIN_X, MARGIN_Y, -MARGIN_X, -MARGIN_Y)
        badge = QRect(bubble.left() + PAD, bubble.top() + PAD, BADGE, BADGE)
        left = badge.right() + GAP
        header = QRect(left, bubble.top() + PAD - 2, bubble.right() - PAD - left,
                       self._header_height(fm))
        star_size = fm.height() + 2
        star = QRect(header.right() - star_size, header.top(), star_size, header.height())
        copy_width = max(fm.horizontalAdvance(COPY_LABEL), fm.horizontalAdvance(COPIED_LABEL)) + 10
        copy = QRect(star.left() - copy_width - 2, header.top(), copy_width, header.height())
        details_rect = None
        body_top = header.bottom() + 4
        if details:
            details_rect = QRect(left, header.bottom() + 1, header.width(), fm.height())
            body_top = details_rect.bottom() + 4
        doc_origin = QPointF(left, body_top)
        more = None
        if truncated:
            more = QRect(left, int(doc_origin.y()) + doc_height + 2,
                         fm.horizontalAdvance("Show all ▾ 000,000,000 characters") + 8,
                         fm.height() + 4)
        return _Geometry(bubble, badge, header, star, copy, details_rect, doc_origin, more)

    @staticmethod
    def _text_width(width: int) -> int:
        return width - 2 * MARGIN_X - 2 * PAD - BADGE - GAP

    def sizeHint(self, option: QStyleOptionViewItem, index: ModelIndex) -> QSize:
        width = option.rect.width() if option.rect.width() > 0 else 600
        fm = QFontMetrics(option.font)
        kind = index.data(KindRole)
        if kind == "marker":
            lines = str(index.data(Qt.ItemDataRole.DisplayRole) or "").count("\n") + 1
            height = lines * fm.height() + 14
            doc = self._summary_document(index, self._marker_summary_width(width), option.font)
            if doc is not None:
                height += int(doc.size().height()) + 2 * PAD + fm.height() + 6
            return QSize(width, height)
        message = index.data(MessageRole)
        if message is None:
            return QSize(width, fm.height() * 2 + 2 * PAD)
        doc, truncated = self._document(index, message, self._text_width(width), option.font,
                                        is_dark(option.palette))
        height = (MARGIN_Y * 2 + PAD + self._header_height(fm) + 4 + int(doc.size().height())
                  + PAD)
        if message_details_line(message):
            height += fm.height() + 1
        if truncated:
            height += fm.height() + 6
        return QSize(width, max(height, BADGE + 2 * PAD + 2 * MARGIN_Y))

    # -- painting ----------------------------------------------------------------------

    def paint_key(self, option: QStyleOptionViewItem, index: ModelIndex) -> Hashable | None:
        """Everything the picture of the row at ``index`` painted with ``option`` depends
        on, for a view that keeps pictures of rows and paints a row again only when this
        changes; None for a row to paint every time (a reply still arriving, a message
        still being read)."""
        kind = index.data(KindRole)
        key = index.data(KeyRole)
        if key is None or kind not in ("message", "marker"):
            return None
        copied = self._copied if self._copied is not None and self._copied[0] == key else None
        common = (key, option.rect.width(), option.rect.height(), option.state.value,
                  option.palette.cacheKey(), option.font.key(), copied)
        if kind == "marker":
            return (*common, str(index.data(SummaryRole) or ""), is_dark())
        message = index.data(MessageRole)
        if message is None:
            return None
        rendered = self._rendered(index, message, self._text_width(option.rect.width()),
                                  option.font, is_dark(option.palette))
        # The header's pieces too: a count or a time can arrive without a new key.
        return (*common, message.role, message.name, message.tool_call_id, message.state,
                message.important, message.token_count, message.created_at,
                message_details_line(message), bool(message.metadata.get("stopped")),
                self.is_expanded(message), bool(index.data(WillFoldRole)),
                rendered.coloured)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: ModelIndex) -> None:
        kind = index.data(KindRole)
        painter.save()
        try:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
            if kind == "marker":
                self._paint_marker(painter, option, index)
            else:
                self._paint_message(painter, option, index, pending=kind == "pending")
        finally:
            painter.restore()

    def _paint_marker(self, painter: QPainter, option: QStyleOptionViewItem,
                      index: ModelIndex) -> None:
        run = index.data(RunRole)
        palette = option.palette
        fm = QFontMetrics(option.font)
        text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        arrow = "▾ " if run is not None and run.expanded else "▸ "
        lines = (arrow + text).split("\n")
        rect = option.rect
        width = min(max(fm.horizontalAdvance(line) for line in lines) + 24,
                    rect.width() - 4 * MARGIN_X)
        lines = [fm.elidedText(line, Qt.TextElideMode.ElideRight, width - 16) for line in lines]
        pill = QRect(rect.center().x() - width // 2, rect.top() + 4, width,
                     len(lines) * fm.height() + 6)
        colour = palette.color(QPalette.ColorRole.Mid)
        if option.state & QStyle.StateFlag.State_Selected:
            colour = palette.color(QPalette.ColorRole.Highlight)
        painter.setPen(colour)
        line_y = pill.center().y()
        painter.drawLine(rect.left() + MARGIN_X * 2, line_y, pill.left() - 6, line_y)
        painter.drawLine(pill.right() + 6, line_y, rect.right() - MARGIN_X * 2, line_y)
        fill = QColor(colour)
        fill.setAlpha(40)
        painter.setBrush(fill)
        radius = min(pill.height() / 2, fm.height() / 2 + 3)
        painter.drawRoundedRect(QRectF(pill), radius, radius)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.setFont(option.font)
        painter.drawText(pill, Qt.AlignmentFlag.AlignCenter, "\n".join(lines))
        doc = self._summary_document(index, self._marker_summary_width(rect.width()),
                                     option.font)
        if doc is None:
            return
        # The summary the folded messages became, in a box under the pill.
        box = QRect(rect.left() + MARGIN_X * 2, pill.bottom() + 6,
                    rect.width() - MARGIN_X * 4,
                    int(doc.size().height()) + 2 * PAD + fm.height())
        fill = QColor(palette.color(QPalette.ColorRole.Mid))
        fill.setAlpha(28)
        painter.setBrush(fill)
        painter.setPen(palette.color(QPalette.ColorRole.Mid))
        painter.drawRoundedRect(QRectF(box).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        heading = QFont(option.font)
        heading.setBold(True)
        painter.setFont(heading)
        painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
        painter.drawText(QRect(box.left() + PAD, box.top() + PAD // 2, box.width() - 2 * PAD,
                               fm.height() + 2),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         self._summary_heading(index))
        painter.save()
        origin = QPointF(box.left() + PAD + 3, box.top() + PAD // 2 + fm.height() + 4)
        painter.translate(origin)
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette = QPalette(palette)
        doc.documentLayout().draw(painter, context)
        painter.restore()

    def _paint_message(self, painter: QPainter, option: QStyleOptionViewItem, index: ModelIndex,
                       *, pending: bool) -> None:
        message: Message | None = index.data(MessageRole)
        palette = option.palette
        fm = QFontMetrics(option.font)
        dark = is_dark(palette)
        if message is None:
            painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(option.rect.adjusted(PAD * 2, 0, 0, 0),
                             Qt.AlignmentFlag.AlignVCenter, "Loading…")
            return
        rendered = self._rendered(index, message, self._text_width(option.rect.width()),
                                  option.font, dark)
        doc, truncated = rendered.doc, rendered.truncated
        details = message_details_line(message)
        geo = self._geometry(option.rect, fm, int(doc.size().height()), truncated, bool(details))
        colour = role_color(message.role, dark)
        greyed = message.state != "active"
        will_fold = bool(index.data(WillFoldRole)) and not pending
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        if greyed:
            painter.setOpacity(0.55)

        tint = QColor(colour)
        tint.setAlpha(34 if dark else 20)
        if selected:
            tint = QColor(palette.color(QPalette.ColorRole.Highlight))
            tint.setAlpha(80 if dark else 55)
        # Plain rectangles: an antialiased rounded fill of a tall bubble costs far more
        # than the rest of the row, and only the exposed part is filled this way.
        exposed = geo.bubble.intersected(painter.clipBoundingRect().toAlignedRect()) \
            if painter.hasClipping() else geo.bubble
        painter.fillRect(exposed, tint)
        stripe = QRect(geo.bubble.left(), geo.bubble.top(), 3, geo.bubble.height())
        painter.fillRect(stripe, colour)
        if will_fold:
            amber = will_fold_color(dark)
            wash = QColor(amber)
            wash.setAlpha(52 if dark else 40)
            painter.fillRect(exposed, wash)
            painter.fillRect(QRect(geo.bubble.left(), geo.bubble.top(), 6, geo.bubble.height()),
                             amber)
        if option.state & QStyle.StateFlag.State_HasFocus:
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(palette.color(QPalette.ColorRole.Highlight))
            painter.drawRect(geo.bubble.adjusted(0, 0, -1, -1))

        # Role badge: a filled circle with the role's letter.
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawEllipse(geo.badge)
        badge_font = QFont(option.font)
        badge_font.setBold(True)
        painter.setFont(badge_font)
        painter.setPen(QColor("#101010") if dark else QColor("#ffffff"))
        painter.drawText(geo.badge, Qt.AlignmentFlag.AlignCenter,
                         ROLE_GLYPHS.get(message.role, "?"))

        # Header: role and name on the left; time, tokens and star on the right.
        header_font = QFont(option.font)
        header_font.setBold(True)
        painter.setFont(header_font)
        painter.setPen(colour)
        title = ROLE_LABELS.get(message.role, message.role)
        painter.drawText(geo.header, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         title)
        x = geo.header.left() + QFontMetrics(header_font).horizontalAdvance(title) + 8
        painter.setFont(option.font)
        muted = palette.color(QPalette.ColorRole.PlaceholderText)
        painter.setPen(muted)
        extras = []
        if message.name:
            extras.append(message.name)
        if message.role == "tool" and message.tool_call_id:
            extras.append(f"result of {message.tool_call_id}")
        if greyed:
            extras.append(message.state)
        if will_fold:
            extras.append("will fold")
        if pending:
            extras.append(str(message.metadata.get("note", "receiving…")))
        elif message.metadata.get("stopped"):
            extras.append("stopped")
        right = []
        if message.created_at is not None:
            right.append(message.created_at.astimezone().strftime("%Y-%m-%d %H:%M"))
        elif message.id is not None:
            right.append("time unknown")  # the source gave none; none is made up
        if message.token_count is not None:
            right.append(f"{message.token_count:,} tok")
        right_rect = geo.header.adjusted(0, 0, -geo.star.width() - geo.copy.width() - 8, 0)
        if extras:
            # Up to the time and tokens on the right, elided there: never drawn over them.
            room = header_room(fm, right_rect, x, "  ·  ".join(right))
            painter.drawText(QRect(x, geo.header.top(), room, geo.header.height()),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             fm.elidedText(visible_text(" · ".join(extras)),
                                           Qt.TextElideMode.ElideRight, room))
        painter.drawText(right_rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                         "  ·  ".join(right))
        if not pending:
            hovered = bool(option.state & QStyle.StateFlag.State_MouseOver)
            if message.important:
                painter.setPen(QColor("#e0a800"))
                painter.drawText(geo.star, Qt.AlignmentFlag.AlignCenter, "★")
            elif hovered or selected:
                painter.setPen(muted)
                painter.drawText(geo.star, Qt.AlignmentFlag.AlignCenter, "☆")
            copied = self._copied == (index.data(KeyRole), "message")
            if hovered or copied:
                self._paint_button(painter, geo.copy, COPIED_LABEL if copied else COPY_LABEL,
                                   palette)

        if geo.details is not None:
            painter.setPen(muted)
            painter.setFont(option.font)
            painter.drawText(geo.details,
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             fm.elidedText(details, Qt.TextElideMode.ElideRight,
                                           geo.details.width()))
        self._paint_code_headers(painter, option, geo, rendered, dark, index.data(KeyRole))

        # Body.
        painter.save()
        painter.translate(geo.doc_origin)
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette = QPalette(palette)
        context.palette.setColor(QPalette.ColorRole.Text, palette.color(QPalette.ColorRole.Text))
        clip = QRectF(option.rect).translated(-geo.doc_origin)
        context.clip = clip
        painter.setClipRect(clip)
        doc.documentLayout().draw(painter, context)
        painter.restore()

        if geo.more is not None:
            painter.setPen(palette.color(QPalette.ColorRole.Link))
            painter.setFont(option.font)
            painter.drawText(geo.more, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             show_all_label(message, self.is_expanded(message)))

    @staticmethod
    def _paint_button(painter: QPainter, rect: QRect, label: str, palette: QPalette) -> None:
        painter.save()
        fill = QColor(palette.color(QPalette.ColorRole.Button))
        painter.setBrush(fill)
        painter.setPen(palette.color(QPalette.ColorRole.Mid))
        painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 1.5, -0.5, -1.5), 4, 4)
        painter.setPen(palette.color(QPalette.ColorRole.ButtonText))
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, label)
        painter.restore()

    @staticmethod
    def _code_regions(rendered: _Rendered, geo: _Geometry, fm: QFontMetrics
                      ) -> list[tuple[CodeBlock, QRect, QRect]]:
        """Each code block's header strip and copy button, in view coordinates."""
        doc = rendered.doc
        header = _code_header_height(fm)
        regions = []
        width = int(doc.textWidth())
        for code in rendered.code_blocks:
            block = doc.findBlockByNumber(code.first)
            if not block.isValid() or block.layout() is None:
                continue
            top = block.layout().position().y() - header
            strip = QRect(int(geo.doc_origin.x()), int(geo.doc_origin.y() + top), width,
                          header)
            label_width = max(fm.horizontalAdvance(COPY_CODE_LABEL),
                              fm.horizontalAdvance(COPIED_LABEL)) + 12
            button = QRect(strip.right() - label_width - 2, strip.top() + 1, label_width,
                           strip.height() - 2)
            regions.append((code, strip, button))
        return regions

    def _paint_code_headers(self, painter: QPainter, option: QStyleOptionViewItem,
                            geo: _Geometry, rendered: _Rendered, dark: bool, key: Any) -> None:
        if not rendered.code_blocks:
            return
        fm = QFontMetrics(option.font)
        palette = option.palette
        strip_colour = QColor(255, 255, 255, 34) if dark else QColor(0, 0, 0, 26)
        painter.save()
        painter.setClipRect(option.rect)
        painter.setFont(option.font)
        for code, strip, button in self._code_regions(rendered, geo, fm):
            if not strip.intersects(option.rect):
                continue
            painter.fillRect(strip, strip_colour)
            label_colour = QColor(palette.color(QPalette.ColorRole.Text))
            label_colour.setAlpha(175)  # quieter than the code, readable in both themes
            painter.setPen(label_colour)
            painter.drawText(strip.adjusted(6, 0, -button.width() - 8, 0),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             fm.elidedText(code.language or "code", Qt.TextElideMode.ElideRight,
                                           max(0, strip.width() - button.width() - 14)))
            label = COPIED_LABEL if self._copied == (key, code.first) else COPY_CODE_LABEL
            self._paint_button(painter, button, label, palette)
        painter.restore()

    def hit_regions(self, option: QStyleOptionViewItem, index: ModelIndex) -> dict[str, Any]:
        """Where a message row's controls are, in view coordinates (None when absent).

        ``copy`` is the copy-message button, ``star`` the importance star, ``code`` a list
        of (code block, copy button) pairs, ``header`` the header line.
        """
        message = index.data(MessageRole)
        if index.data(KindRole) != "message" or message is None:
            return {}
        fm = QFontMetrics(option.font)
        rendered = self._rendered(index, message, self._text_width(option.rect.width()),
                                  option.font, is_dark(option.palette))
        geo = self._geometry(option.rect, fm, int(rendered.doc.size().height()),
                             rendered.truncated, bool(message_details_line(message)))
        return {
            "copy": geo.copy,
            "star": geo.star,
            "header": geo.header,
            "details": geo.details,
            "more": geo.more,
            "code": [(code, button) for code, _strip, button
                     in self._code_regions(rendered, geo, fm)],
            "doc_origin": geo.doc_origin,
            "doc": rendered.doc,
        }

    # -- clicks ------------------------------------------------------------------------

    def editorEvent(self, event: QEvent, model: QAbstractItemModel,
                    option: QStyleOptionViewItem, index: ModelIndex) -> bool:
        if event.type() != QEvent.Type.MouseButtonRelease:
            return super().editorEvent(event, model, option, index)
        assert isinstance(event, QMouseEvent)
        if event.button() != Qt.MouseButton.LeftButton:
            return False
        kind = index.data(KindRole)
        if kind == "marker":
            self.marker_toggled.emit(index.row())
            return True
        if kind != "message":
            return False
        message = index.data(MessageRole)
        if message is None:
            return False
        regions = self.hit_regions(option, index)
        point = event.position().toPoint()
        if regions["star"].contains(point):
            self.importance_toggled.emit(message)
            return True
        if regions["copy"].contains(point):
            self.copy_to_clipboard(index, message.content or "")
            return True
        for code, button in regions["code"]:
            if button.contains(point):
                self.copy_to_clipboard(index, code.text, code.first)
                return True
        href = regions["doc"].documentLayout().anchorAt(QPointF(point) - regions["doc_origin"])
        if href:
            self.link_activated.emit(href)
            return True
        more = regions["more"]
        if more is not None and more.contains(point):
            return self.toggle_expanded(index)
        return False

    def helpEvent(self, event: QHelpEvent, view: QAbstractItemView,  # noqa: N802 - Qt's name
                  option: QStyleOptionViewItem, index: ModelIndex) -> bool:
        regions = self.hit_regions(option, index)
        message = index.data(MessageRole)
        if not regions or message is None or event is None:
            return super().helpEvent(event, view, option, index)
        point = event.pos()
        tip = ""
        if regions["copy"].contains(point):
            tip = "Copy the message's text"
        elif any(button.contains(point) for _code, button in regions["code"]):
            tip = "Copy the code block"
        elif regions["header"].contains(point) or (
                regions["details"] is not None and regions["details"].contains(point)):
            tip = message_details(message)
        else:
            tip = regions["doc"].documentLayout().anchorAt(
                QPointF(point) - regions["doc_origin"])
        if not tip:
            QToolTip.hideText()
            return super().helpEvent(event, view, option, index)
        QToolTip.showText(event.globalPos(), plain_tooltip(tip),
                          view.viewport() if view else None)
        return True

    # -- editing -----------------------------------------------------------------------

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,
                     index: ModelIndex) -> QWidget:
        editor = MessageEditor(parent)
        editor.committed.connect(lambda: self._finish(editor, commit=True))
        editor.cancelled.connect(lambda: self._finish(editor, commit=False))
        return editor

    def _finish(self, editor: MessageEditor, *, commit: bool) -> None:
        if commit:
            self.commitData.emit(editor)
        self.closeEditor.emit(editor, QStyledItemDelegate.EndEditHint.NoHint)

    def setEditorData(self, editor: QWidget, index: ModelIndex) -> None:
        message = index.data(MessageRole)
        if isinstance(editor, MessageEditor) and message is not None:
            editor.set_message(message.role, message.content or "",
                               has_tool_calls=bool(message.tool_calls))
            editor.focus_text()

    def setModelData(self, editor: QWidget, model: QAbstractItemModel, index: ModelIndex) -> None:
        # An empty message is refused (the editor says why); one saved on the way out
        # (another session, another database) keeps what it was.
        if isinstance(editor, MessageEditor) and not editor.refusal():
            model.setData(index, (editor.role(), editor.text()), Qt.ItemDataRole.EditRole)

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem,
                             index: ModelIndex) -> None:
        editor.setGeometry(option.rect.adjusted(MARGIN_X, MARGIN_Y, -MARGIN_X, -MARGIN_Y))

    def eventFilter(self, editor: Any, event: QEvent) -> bool:
        # The base class commits on Return and on focus loss; a message editor is
        # multi-line and commits only on Save or Ctrl+Enter.
        if event.type() == QEvent.Type.KeyPress:
            return False
        if event.type() == QEvent.Type.FocusOut:
            return False
        return super().eventFilter(editor, event)
