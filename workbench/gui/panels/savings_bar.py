"""A picture of a compaction's effect: the request's tokens before and after, as two bars
against the model's context window, with the numbers written on them."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from workbench.gui.theme import is_dark

_LIGHT = {"before": "#c0562b", "after": "#2e8b57", "window": "#555555"}
_DARK = {"before": "#ff8a5c", "after": "#5fcf8c", "window": "#bbbbbb"}


class SavingsBarWidget(QWidget):
    """Two bars, before and after, scaled to the larger of the window and the counts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Request tokens before and after the compaction")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._before: int | None = None
        self._after: int | None = None
        self._window: int | None = None
        self._update_text()

    # -- values ------------------------------------------------------------------------

    @property
    def before(self) -> int | None:
        return self._before

    @property
    def after(self) -> int | None:
        return self._after

    @property
    def window(self) -> int | None:
        return self._window

    def set_values(self, before: int | None, after: int | None,
                   window: int | None = None) -> None:
        """Show ``before`` and ``after`` tokens against ``window`` (``None``: unknown)."""
        self._before, self._after = before, after
        self._window = window if window and window > 0 else None
        self._update_text()
        self.update()

    def clear(self) -> None:
        self.set_values(None, None, None)

    def summary_text(self) -> str:
        """The bars in words (also the widget's accessible description and tooltip)."""
        if self._before is None or self._after is None:
            return "No preview yet."
        saved = self._before - self._after
        share = f" ({saved * 100 / self._before:.0f} %)" if self._before > 0 else ""
        text = (f"Before: {self._before:,} tokens; after: {self._after:,} tokens; "
                f"saves {saved:,}{share}.")
        if self._window:
            text += f" The model's window is {self._window:,} tokens."
        else:
            text += " The model's window is not known."
        return text

    def _update_text(self) -> None:
        text = self.summary_text()
        self.setAccessibleDescription(text)
        self.setToolTip(text)

    # -- painting ----------------------------------------------------------------------

    def sizeHint(self) -> QSize:
        fm = self.fontMetrics()
        return QSize(320, 4 * fm.height() + 30)

    def minimumSizeHint(self) -> QSize:
        fm = self.fontMetrics()
        return QSize(180, 4 * fm.height() + 30)

    def paintEvent(self, _event: Any) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        palette = self.palette()
        colours = {k: QColor(v) for k, v in (_DARK if is_dark(palette) else _LIGHT).items()}
        fm = QFontMetrics(self.font())
        text_colour = palette.color(QPalette.ColorRole.Text)
        muted = palette.color(QPalette.ColorRole.PlaceholderText)
        rect = QRectF(self.rect()).adjusted(2, 2, -2, -2)
        label_width = max(fm.horizontalAdvance("Before"), fm.horizontalAdvance("After")) + 10
        top_line = fm.height() + 4  # room for the window's label
        bar_h = fm.height() + 6
        track_left = rect.left() + label_width
        track_width = max(10.0, rect.width() - label_width - 4)

        if self._before is None or self._after is None:
            painter.setPen(muted)
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter,
                             "Preview to see the tokens it saves.")
            return

        scale = max(self._window or 0, self._before, self._after, 1)

        def x_of(tokens: int) -> float:
            return track_left + track_width * min(tokens, scale) / scale

        rows = (("Before", self._before, colours["before"]),
                ("After", self._after, colours["after"]))
        track_fill = QColor(palette.color(QPalette.ColorRole.Mid))
        track_fill.setAlpha(45)
        for i, (label, value, colour) in enumerate(rows):
            y = rect.top() + top_line + i * (bar_h + 6)
            painter.setPen(text_colour)
            painter.drawText(QRectF(rect.left(), y, label_width, bar_h),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
            track = QRectF(track_left, y, track_width, bar_h)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(track_fill)
            painter.drawRoundedRect(track, 3, 3)
            filled = QRectF(track_left, y, max(2.0, x_of(value) - track_left), bar_h)
            painter.setBrush(colour)
            painter.drawRoundedRect(filled, 3, 3)
            number = f"{value:,}"
            width = fm.horizontalAdvance(number) + 8
            if filled.width() >= width + 4:
                painter.setPen(QColor("#ffffff") if not is_dark(palette) else QColor("#111111"))
                painter.drawText(filled.adjusted(0, 0, -4, 0),
                                 Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                                 number)
            else:
                painter.setPen(text_colour)
                painter.drawText(QRectF(filled.right() + 4, y, width, bar_h),
                                 Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                                 number)

        bars_bottom = rect.top() + top_line + 2 * (bar_h + 6) - 6
        if self._window:
            x = x_of(self._window)
            pen = QPen(colours["window"], 1.5, Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.drawLine(int(x), int(rect.top() + top_line - 2), int(x), int(bars_bottom + 2))
            label = f"window {self._window:,}"
            width = fm.horizontalAdvance(label) + 4
            left = min(max(track_left, x - width / 2), rect.right() - width)
            painter.setPen(colours["window"])
            painter.drawText(QRectF(left, rect.top(), width, fm.height()),
                             Qt.AlignmentFlag.AlignCenter, label)
        else:
            painter.setPen(muted)
            painter.drawText(QRectF(track_left, rect.top(), track_width, fm.height()),
                             Qt.AlignmentFlag.AlignRight, "window unknown")

        saved = self._before - self._after
        share = f" ({saved * 100 / self._before:.0f} %)" if self._before > 0 else ""
        caption = (f"Saves {saved:,} tokens{share}" if saved > 0
                   else "Saves nothing" if saved == 0
                   else f"Adds {-saved:,} tokens")
        painter.setPen(text_colour)
        painter.drawText(QRectF(track_left, bars_bottom + 6, track_width, fm.height() + 2),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, caption)
