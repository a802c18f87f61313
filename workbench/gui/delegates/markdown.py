"""Message Markdown as a document that shows its content and never obeys it.

A message's text is data from a model, a user or an imported file. It is rendered as
GitHub-flavoured Markdown with every piece of raw HTML shown as the text it is (so a
``<script>``, ``<style>`` or 40 px red ``<span>`` hides nothing after it). The document
never reads a file or a URL: :class:`SafeDocument` refuses every resource, and images
become visible links naming their target (the user may open a web link; nothing is
fetched to paint it). A link shows its target after its text when the two differ, and a
link reference definition (which Markdown would swallow) stays a visible line, and
entity text (``&amp;``) stays the text it is. Characters that show nothing or reorder
what follows them (bidi controls such as U+202E, zero-width characters, other format and
control characters) are shown as small marked names, ``⟨U+202E⟩``, and never act: nothing
the model receives is invisible in the timeline, and nothing is shown out of order.

Code blocks get a tinted background, Pygments highlighting (colours set on the text
that is already in the document: content is never re-parsed as markup) and room for a
header strip that the delegate paints with the language and a copy button. Tables get
borders, padding and a bold, shaded header row.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from PySide6.QtCore import QByteArray, QUrl
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QImage,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextOption,
    QTextTable,
    QTextTableCellFormat,
    QTextTableFormat,
)

HIGHLIGHT_CHARS = 20_000  # longer code blocks are shown without colours
_IMAGE_ALT = getattr(QTextFormat.Property, "ImageAltText", None)
_IMAGE_TITLE = getattr(QTextFormat.Property, "ImageTitle", None)
_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value
    | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_REFERENCE = re.compile(r"^( {0,3})\[([^\]\n]+)\]:")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_BACKTICKS = re.compile(r"`+")
# Characters that show nothing or act on the text around them: C0/C1 controls (but tab
# and line breaks), every format character (Unicode category Cf: bidi controls and
# isolates, zero-width space and joiners, word joiner, soft hyphen, byte-order mark,
# invisible operators, tag characters), the blank "filler" letters, and variation
# selectors that select nothing (a run of them after one character hides data).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c"
    "\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef]"
)
_JOINERS = "\u200c\u200d"
_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


class SafeDocument(QTextDocument):
    """A text document that never loads a resource (no file, no URL, no data).

    Qt asks :meth:`loadResource` for every image it lays out; the answer is always an
    empty 1×1 image. (Not ``None``: given no image, Qt's image handler reads the file
    named by the image itself, which is how ``/dev/zero`` used to exhaust memory.)
    ``refused`` counts the requests (for tests and curiosity).
    """

    refused = 0

    def loadResource(self, kind: int, name: QUrl) -> Any:  # noqa: N802 - Qt's name
        SafeDocument.refused += 1
        if int(getattr(kind, "value", kind)) != QTextDocument.ResourceType.ImageResource.value:
            return QByteArray()
        image = QImage(1, 1, QImage.Format.Format_ARGB32)
        image.fill(0)
        return image


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block of a rendered document: its blocks, language and text."""

    first: int  # block number of its first line
    last: int  # block number of its last line
    language: str
    text: str  # the code as written (what "Copy code" copies)
    shown: str = ""  # the code as shown, when invisible characters were named in it


def _blocks_text(doc: QTextDocument, code: CodeBlock) -> str:
    return "\n".join(doc.findBlockByNumber(n).text() for n in range(code.first, code.last + 1))


def _escape_entities(line: str) -> str:
    """``line`` with the ``&`` of each entity escaped, except inside code spans."""
    if "&" not in line:
        return line
    runs = list(_BACKTICKS.finditer(line))
    out: list[str] = []
    at = 0
    i = 0
    while i < len(runs):
        opening = runs[i]
        closing = next((j for j in range(i + 1, len(runs))
                        if len(runs[j].group()) == len(opening.group())), None)
        if closing is None:
            i += 1
            continue
        out.append(_ENTITY.sub(r"\\&", line[at:opening.start()]))
        out.append(line[opening.start():runs[closing].end()])  # a code span: literal already
        at = runs[closing].end()
        i = closing + 1
    out.append(_ENTITY.sub(r"\\&", line[at:]))
    return "".join(out)


def keep_visible(markdown: str) -> str:
    """``markdown`` with what Markdown would swallow escaped so it stays on screen: link
    reference definitions, and entities (``&amp;`` shows as written, not as ``&``).

    Fenced and indented code is left alone (Markdown shows it literally already).
    """
    references = "]:" in markdown
    entities = "&" in markdown and _ENTITY.search(markdown) is not None
    if not references and not entities:
        return markdown
    out: list[str] = []
    fence = ""
    previous_blank = True
    indented = False
    for line in markdown.split("\n"):
        opened = _FENCE.match(line)
        blank = not line.strip()
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
        elif opened:
            fence = opened.group(1)
        elif not blank and line.expandtabs(4).startswith("    ") and (previous_blank
                                                                     or indented):
            indented = True  # an indented code block's line
        elif not blank:
            indented = False
            if references:
                line = _REFERENCE.sub(r"\1\\[\2]:", line)
            if entities:
                line = _escape_entities(line)
        previous_blank = blank
        out.append(line)
    return "\n".join(out)


LONG_WORD = 1_000
"""A text with a run of more characters than this between spaces wraps anywhere, not
only between words: Qt looks for a word break along the whole run for each line it
wraps, which grows with the run's square (200,000 characters: two seconds a layout; a
million in a text box: over a minute)."""


def longest_word(text: str) -> int:
    """The length of the longest run of ``text`` without whitespace."""
    return max(map(len, text.split()), default=0)


def wrap_mode_for(text: str) -> QTextOption.WrapMode:
    """How a document or text box showing ``text`` wraps (see :data:`LONG_WORD`)."""
    if longest_word(text) > LONG_WORD:
        return QTextOption.WrapMode.WrapAnywhere
    return QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere


TABLE_CELLS = 1_500
TABLE_COLUMNS = 40
"""A table with more cells (or columns) than this is shown as the text it is, in a code
block: Qt's Markdown reader and layout take time that grows faster than the cells (a
table of 30,000 rows held the window for over a minute), and such a table is not
readable as a grid in a timeline row anyway."""


def _delimiter_cells(line: str) -> int:
    """The number of columns of a table's delimiter row (``|---|:--:|``), or 0 when
    ``line`` is not one. Plain string tests, no pattern that could backtrack."""
    row = line.strip()
    if "-" not in row or ("|" not in row and not row.startswith("-")):
        return 0
    row = row.removeprefix("|").removesuffix("|")
    cells = row.split("|")
    for cell in cells:
        cell = cell.strip().removeprefix(":").removesuffix(":")
        if not cell or cell.strip("-"):
            return 0
    return len(cells)


def plain_big_tables(markdown: str) -> str:
    """``markdown`` with each table larger than :data:`TABLE_CELLS` cells or wider than
    :data:`TABLE_COLUMNS` columns put in a code block, so it shows as the text it is."""
    if "|" not in markdown or "-" not in markdown:
        return markdown
    lines = markdown.split("\n")
    out: list[str] = []
    fence = ""
    i = 0
    changed = False
    while i < len(lines):
        line = lines[i]
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
        elif opened:
            fence = opened.group(1)
        elif "|" in line and i + 1 < len(lines):
            columns = _delimiter_cells(lines[i + 1])
            if columns:
                end = i + 2
                while end < len(lines) and lines[end].strip() and not _FENCE.match(lines[end]):
                    end += 1
                if columns > TABLE_COLUMNS or columns * (end - i - 1) > TABLE_CELLS:
                    table = "\n".join(lines[i:end])
                    runs = [len(r) for r in _BACKTICKS.findall(table)]
                    marks = "`" * max(3, max(runs, default=0) + 1)
                    out.extend([marks, table, marks])
                    changed = True
                else:
                    out.extend(lines[i:end])
                i = end
                continue
        out.append(line)
        i += 1
    return "\n".join(out) if changed else markdown


def invisible_spans(text: str) -> list[tuple[int, str]]:
    """Where ``text`` has characters that would show nothing or reorder the text around
    them, each with its visible name (``⟨U+202E⟩``).

    A zero-width joiner or non-joiner between two letters or symbols of a non-Latin
    script is left alone: it is how emoji sequences and Persian words are written; so is
    one variation selector right after a visible character (an emoji's presentation).
    """
    found: list[tuple[int, str]] = []
    for match in _INVISIBLE.finditer(text):
        at = match.start()
        ch = match.group()
        if ch in _JOINERS and 0 < at < len(text) - 1 and _joins(text[at - 1]) \
                and _joins(text[at + 1]):
            continue
        if _SELECTORS.match(ch) and at > 0 and not _INVISIBLE.match(text[at - 1]):
            continue
        found.append((at, f"⟨U+{ord(ch):04X}⟩"))
    return found


def _joins(ch: str) -> bool:
    return ord(ch) > 0x2FF and not ch.isspace() and not _INVISIBLE.match(ch)


def visible_text(text: str) -> str:
    """``text`` with its invisible characters named (see :func:`invisible_spans`), for
    plain labels such as titles."""
    spans = invisible_spans(text)
    if not spans:
        return text
    out: list[str] = []
    at = 0
    for position, name in spans:
        out.append(text[at:position])
        out.append(name)
        at = position + 1
    out.append(text[at:])
    return "".join(out)


_MARK = re.compile("⟨U\\+([0-9A-F]{4,6})⟩")


def restore_invisible(text: str, allowed: str | set[str] | None = None) -> str:
    """``text`` with the names :func:`visible_text` gave turned back into the characters
    they stand for (what an editor that shows the names saves, what a copy gives).

    Only invisible characters come back, and with ``allowed`` only those in it (the ones
    that were named), so a name typed on purpose stays text.
    """
    def back(match: re.Match[str]) -> str:
        ch = chr(int(match.group(1), 16)) if int(match.group(1), 16) <= 0x10FFFF else ""
        if not ch or not _INVISIBLE.match(ch) or (allowed is not None and ch not in allowed):
            return match.group()
        return ch

    return _MARK.sub(back, text) if "⟨U+" in text else text


def invisible_characters(text: str) -> set[str]:
    """The characters :func:`visible_text` names in ``text``."""
    return {text[at] for at, _name in invisible_spans(text)}


def _utf16_length(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _nul_stand_in(text: str) -> str:
    """A private-use character that ``text`` does not hold, to carry its NUL characters
    through the Markdown parser (which replaces U+0000 with U+FFFD, as CommonMark says)."""
    return next(ch for ch in map(chr, range(0xE000, 0xF900)) if ch not in text)


def mark_invisible(doc: QTextDocument, dark: bool, nul: str | None = None) -> bool:
    """Replace each invisible character of ``doc`` by its marked name (muted, on a tint);
    whether any was found. ``nul``: the character that stands for U+0000 in ``doc``
    (named ``⟨U+0000⟩`` as NUL is)."""
    text = doc.toPlainText()
    if nul is not None:
        text = text.replace(nul, "\x00")  # one UTF-16 unit each: positions stay
    spans = invisible_spans(text)
    if not spans:
        return False
    # Document positions count UTF-16 units: a character above U+FFFF takes two.
    # Neighbouring characters are replaced in one edit (a run of 200,000 joiners was
    # 200,000 cursor edits: four seconds).
    units: list[tuple[int, int, list[str]]] = []
    at = unit = 0
    for position, name in spans:
        unit += _utf16_length(text[at:position])
        size = _utf16_length(text[position])
        if units and units[-1][0] + units[-1][1] == unit:
            start, length, names = units[-1]
            names.append(name)
            units[-1] = (start, length + size, names)
        else:
            units.append((unit, size, [name]))
        unit += size
        at = position + 1
    cursor = QTextCursor(doc)
    cursor.beginEditBlock()
    for position, size, names in reversed(units):
        cursor.setPosition(position)
        cursor.setPosition(position + size, QTextCursor.MoveMode.KeepAnchor)
        fmt = QTextCharFormat(cursor.charFormat())
        fmt.setForeground(QColor("#ffb74d") if dark else QColor("#b35c00"))
        fmt.setBackground(QColor(255, 183, 77, 40) if dark else QColor(230, 149, 0, 32))
        fmt.setFontUnderline(False)
        cursor.insertText("".join(names), fmt)
    cursor.endEditBlock()
    return True


def render_markdown(doc: QTextDocument, markdown: str, dark: bool,
                    code_header: float, highlight: bool = True,
                    name_invisible: bool = True) -> list[CodeBlock]:
    """Fill ``doc`` with ``markdown`` (see the module docstring); its code blocks.

    ``code_header`` is the height kept free above each code block for its header strip.
    With ``highlight`` false the code is left uncoloured, for :func:`highlight_code` to
    colour later (the timeline does that after the first paint). With ``name_invisible``
    false invisible characters stay as they are (a document read, not shown).
    """
    nul = _nul_stand_in(markdown) if "\x00" in markdown else None
    if nul is not None:
        markdown = markdown.replace("\x00", nul)
    doc.setMarkdown(keep_visible(plain_big_tables(markdown)), _FEATURES)
    wrap = wrap_mode_for(markdown)
    if wrap != doc.defaultTextOption().wrapMode():
        option = doc.defaultTextOption()
        option.setWrapMode(wrap)
        doc.setDefaultTextOption(option)
    _show_images_and_targets(doc, dark)
    blocks = _style_code_blocks(doc, dark, code_header)
    if nul is not None:  # copied as written
        blocks = [replace(b, text=b.text.replace(nul, "\x00")) for b in blocks]
    if name_invisible and mark_invisible(doc, dark, nul):
        # A code block keeps its text for copying; its colours follow what is shown.
        blocks = [replace(b, shown=_blocks_text(doc, b)) for b in blocks]
    _style_tables(doc, dark)
    if highlight:
        highlight_code(doc, blocks, dark)
    return blocks


def _link_colour(dark: bool) -> QColor:
    return QColor("#8ab4f8") if dark else QColor("#1a5fb4")


@dataclass
class _Link:
    end: int  # document position just after the link's text (or the image)
    href: str
    text: str  # what the link shows ("" for an image)
    title: str  # its title, which Markdown shows only as a tooltip
    image: bool
    alt: str = ""


def _links(doc: QTextDocument) -> list[_Link]:
    """The document's links and images, in order."""
    found: list[_Link] = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        current: _Link | None = None
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            end = fragment.position() + fragment.length()
            if fmt.isImageFormat():
                image = fmt.toImageFormat()
                alt = str(image.property(_IMAGE_ALT) or "") if _IMAGE_ALT is not None else ""
                title = str(image.property(_IMAGE_TITLE) or "") \
                    if _IMAGE_TITLE is not None else ""
                found.append(_Link(fragment.position(), image.name(), "", title, True, alt))
                current = None
            elif fmt.isAnchor() and fmt.anchorHref():
                href = fmt.anchorHref()
                if current is not None and current.href == href and not current.image:
                    current.end, current.text = end, current.text + fragment.text()
                else:
                    current = _Link(end, href, fragment.text(), fmt.toolTip(), False)
                    found.append(current)
            else:
                current = None
            it += 1
        block = block.next()
    return found


def link_targets(doc: QTextDocument) -> list[str]:
    """The targets of a rendered document's links and images, in order, each once."""
    seen: dict[str, None] = {}
    for link in _links(doc):
        if link.href:
            seen.setdefault(link.href, None)
    return list(seen)


def _show_images_and_targets(doc: QTextDocument, dark: bool) -> None:
    """Replace each image by a link naming it; show link targets and titles the text hides."""
    links = _links(doc)
    if not links:
        return
    link = QTextCharFormat()
    link.setForeground(_link_colour(dark))
    link.setFontUnderline(True)
    muted = QTextCharFormat()
    muted.setForeground(QColor("#9aa0a6") if dark else QColor("#5f6368"))
    cursor = QTextCursor(doc)
    cursor.beginEditBlock()
    # From the end, so earlier positions stay valid.
    for item in reversed(links):
        title = f' "{item.title}"' if item.title else ""
        if item.image:
            cursor.setPosition(item.end)
            cursor.setPosition(item.end + 1, QTextCursor.MoveMode.KeepAnchor)
            fmt = QTextCharFormat(link)
            fmt.setAnchor(True)
            fmt.setAnchorHref(item.href)
            fmt.setToolTip(item.href)
            label = f"[image: {item.alt}]" if item.alt else "[image]"
            cursor.insertText(f"{label} ({item.href}{title})", fmt)
            continue
        shown = item.text.strip()
        if not title and shown in (item.href.strip(), _bare(item.href)):
            continue  # the text is the target: nothing is hidden
        cursor.setPosition(item.end)
        cursor.insertText(f" ({item.href}{title})", muted)
    cursor.endEditBlock()


def _bare(href: str) -> str:
    for prefix in ("mailto:", "https://", "http://"):
        if href.startswith(prefix):
            return href[len(prefix):]
    return href


def _is_code(block: QTextBlock) -> bool:
    return block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence)


def _style_code_blocks(doc: QTextDocument, dark: bool, header: float) -> list[CodeBlock]:
    background = QColor(255, 255, 255, 18) if dark else QColor(0, 0, 0, 13)
    found: list[CodeBlock] = []
    block = doc.begin()
    cursor: QTextCursor | None = None
    while block.isValid():
        if not _is_code(block):
            block = block.next()
            continue
        if cursor is None:
            cursor = QTextCursor(doc)
            cursor.beginEditBlock()
        first = block
        language = first.blockFormat().stringProperty(QTextFormat.Property.BlockCodeLanguage)
        lines = []
        last = block
        while block.isValid() and _is_code(block) and (
            block.blockFormat().stringProperty(QTextFormat.Property.BlockCodeLanguage)
            == language
        ):
            lines.append(block.text())
            cursor.setPosition(block.position())
            fmt = block.blockFormat()
            fmt.setBackground(background)
            fmt.setLeftMargin(6)
            fmt.setRightMargin(0)
            fmt.setNonBreakableLines(False)
            if block == first:
                fmt.setTopMargin(header)
            cursor.setBlockFormat(fmt)
            last = block
            block = block.next()
        text = "\n".join(lines)
        found.append(CodeBlock(first.blockNumber(), last.blockNumber(), language.strip(), text))
    if cursor is not None:
        cursor.endEditBlock()
    if found and found[0].first == 0:
        # Qt lays the document's first block out without its top margin: a message that
        # opens with code (a tool result) gets the strip's room from the frame instead,
        # or the strip would cover the message's header.
        frame = doc.rootFrame().frameFormat()
        frame.setTopMargin(frame.topMargin() + header)
        doc.rootFrame().setFrameFormat(frame)
    return found


COMMON_LANGUAGES = ("python", "javascript", "typescript", "bash", "json", "sql", "rust",
                    "go", "c", "cpp", "java", "html", "css", "yaml", "toml", "diff")
_warming = threading.Lock()
_warmed = False


def warm_up() -> None:
    """Load Pygments and the lexers of common languages on a background thread, once.

    A lexer's first use imports its module and compiles its patterns (3-30 ms each):
    done here, the first code blocks of a session are coloured without a stall.
    """
    global _warmed
    with _warming:
        if _warmed:
            return
        _warmed = True

    def load() -> None:
        for dark in (False, True):
            _palette(dark)
        for language in COMMON_LANGUAGES:
            _lexer(language)

    threading.Thread(target=load, name="pygments-warm-up", daemon=True).start()


@lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    if not language:
        return None
    try:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:  # pragma: no cover - pygments is a dependency
        return None
    try:
        return get_lexer_by_name(language.lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=2)
def _palette(dark: bool) -> dict[Any, str]:
    """Token type to colour in the Pygments style for the theme.

    Colours only: bold or italic could change a line's width and so the row's height
    after it was measured (highlighting happens after the first paint).
    """
    from pygments.styles import get_style_by_name

    style = get_style_by_name("monokai" if dark else "default")
    return {token: "#" + spec["color"] for token, spec in style if spec["color"]}


def _colour_for(token: Any, colours: dict[Any, str]) -> str | None:
    while token is not None:
        colour = colours.get(token)
        if colour is not None:
            return colour
        token = token.parent
    return None


@lru_cache(maxsize=512)
def code_colours(language: str, text: str, dark: bool) -> tuple[tuple[int, int, str], ...]:
    """The coloured runs of a code block, ``(offset, length, colour)``; cached.

    Empty for an unknown language or a block longer than :data:`HIGHLIGHT_CHARS`.
    """
    if len(text) > HIGHLIGHT_CHARS:
        return ()
    lexer = _lexer(language)
    if lexer is None:
        return ()
    colours = _palette(dark)
    runs: list[tuple[int, int, str]] = []
    for offset, token, value in lexer.get_tokens_unprocessed(text):
        colour = _colour_for(token, colours)
        if colour is None or not value.strip():
            continue
        if runs and runs[-1][2] == colour and runs[-1][0] + runs[-1][1] == offset:
            runs[-1] = (runs[-1][0], runs[-1][1] + len(value), colour)
        else:
            runs.append((offset, len(value), colour))
    return tuple(runs)


def can_highlight(blocks: Sequence[CodeBlock]) -> bool:
    """Whether any of ``blocks`` is in a language Pygments knows (and short enough)."""
    return any(len(b.text) <= HIGHLIGHT_CHARS and _lexer(b.language) is not None
               for b in blocks)


def highlight_code(doc: QTextDocument, blocks: Sequence[CodeBlock], dark: bool) -> None:
    """Colour the code blocks of a rendered document (their text does not change)."""
    cursor: QTextCursor | None = None
    formats: dict[str, QTextCharFormat] = {}
    for code in blocks:
        runs = code_colours(code.language, code.shown or code.text, dark)
        if not runs:
            continue
        first = doc.findBlockByNumber(code.first)
        if not first.isValid():
            continue
        if cursor is None:
            cursor = QTextCursor(doc)
            cursor.beginEditBlock()
        start = first.position()
        for offset, length, colour in runs:
            fmt = formats.get(colour)
            if fmt is None:
                fmt = formats[colour] = QTextCharFormat()
                fmt.setForeground(QColor(colour))
            cursor.setPosition(start + offset)
            cursor.setPosition(start + offset + length, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(fmt)
    if cursor is not None:
        cursor.endEditBlock()


def _style_tables(doc: QTextDocument, dark: bool) -> None:
    tables = [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]
    if not tables:
        return
    border = QColor("#5f6368") if dark else QColor("#c0c4c8")
    shade = QColor(255, 255, 255, 26) if dark else QColor(0, 0, 0, 16)
    for table in tables:
        fmt = QTextTableFormat(table.format())
        fmt.setBorder(1)
        fmt.setBorderBrush(QBrush(border))
        fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
        fmt.setBorderCollapse(True)
        fmt.setCellSpacing(0)
        fmt.setCellPadding(4)
        fmt.setHeaderRowCount(1)
        table.setFormat(fmt)
        _drop_leading_empty_blocks(doc, table)
        cursor = QTextCursor(doc)
        for column in range(table.columns()):
            cell = table.cellAt(0, column)
            cell_fmt = QTextTableCellFormat()
            cell_fmt.setBackground(shade)
            cell_fmt.setFontWeight(QFont.Weight.Bold)
            cell.setFormat(cell_fmt)
            # The header sits over its column the way the column's cells are aligned.
            if table.rows() > 1:
                body = doc.findBlock(table.cellAt(1, column).firstPosition())
                align = body.blockFormat().alignment()
                cursor.setPosition(cell.firstPosition())
                cursor.setPosition(cell.lastPosition(), QTextCursor.MoveMode.KeepAnchor)
                block_fmt = QTextBlockFormat()
                block_fmt.setAlignment(align)
                cursor.mergeBlockFormat(block_fmt)


def _drop_leading_empty_blocks(doc: QTextDocument, table: QTextTable) -> None:
    """Qt's Markdown reader can open a cell with an empty paragraph (a table right after
    a code block gets one in its first cell), which pushes that cell's text a line down
    from its neighbours; remove such an empty first paragraph."""
    cursor = QTextCursor(doc)
    for row in range(table.rows()):
        for column in range(table.columns()):
            cell = table.cellAt(row, column)
            block = doc.findBlock(cell.firstPosition())
            if not block.text() and block.position() + block.length() <= cell.lastPosition():
                cursor.setPosition(block.position())
                cursor.deleteChar()  # the empty paragraph's end: the next one moves up


def plain_tooltip(text: str | None) -> str | None:
    """``text`` as a tooltip that shows it literally.

    Qt renders a tooltip as rich text when it merely looks like HTML (and would load
    the images it names); this escapes it and keeps its line breaks.
    """
    if not text:
        return text
    # Invisible characters are named: a bidi control would reorder the tip's words.
    return "<qt>" + html.escape(visible_text(text)).replace("\n", "<br>") + "</qt>"
