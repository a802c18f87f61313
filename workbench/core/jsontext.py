"""JSON text indented for people, written faster than ``json.dumps(indent=2)``.

With ``indent`` set, the standard library gives up its C encoder and walks the value in
Python generators, one per nesting level: the Request panel's payload of a long session
(thousands of messages, about a megabyte of text) took tens of milliseconds that way.
:func:`indented` writes the very same text (it is checked against ``json.dumps`` in the
tests) with one loop over the structure and the C string encoder for every text.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

__all__ = ["indented", "indented_excerpt"]

_encode_text = json.encoder.encode_basestring  # the C version when the module has it
_INFINITY = float("inf")


def _float_text(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return _encode_text(key)
    if isinstance(key, float):
        return _encode_text(_float_text(key))
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, int):
        return _encode_text(int.__repr__(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def indented(value: Any, indent: int = 2) -> str:
    """``json.dumps(value, indent=indent, ensure_ascii=False)``, the same text."""
    out: list[str] = []
    append = out.append
    step = " " * indent

    def emit(item: Any, level: int) -> None:
        if isinstance(item, str):
            append(_encode_text(item))
        elif item is None:
            append("null")
        elif item is True:
            append("true")
        elif item is False:
            append("false")
        elif isinstance(item, int):
            append(int.__repr__(item))
        elif isinstance(item, float):
            append(_float_text(item))
        elif isinstance(item, list | tuple):
            if not item:
                append("[]")
                return
            inner = "\n" + step * (level + 1)
            append("[" + inner)
            first = True
            for member in item:
                if not first:
                    append("," + inner)
                first = False
                emit(member, level + 1)
            append("\n" + step * level + "]")
        elif isinstance(item, dict):
            if not item:
                append("{}")
                return
            inner = "\n" + step * (level + 1)
            separator = "{" + inner
            for key, member in item.items():
                append(separator + _key_text(key) + ": ")
                separator = "," + inner
                emit(member, level + 1)
            append("\n" + step * level + "}")
        else:
            # What json.dumps does with anything else (it raises TypeError).
            append(json.dumps(item, ensure_ascii=False))

    emit(value, 0)
    return "".join(out)


_HOLE = "\x00workbench: the entries left out go here\x00"


def indented_excerpt(
    value: Any,
    head_chars: int,
    tail_chars: int,
    note: Callable[[int, int, str], str],
    indent: int = 2,
) -> str | None:
    """The beginning and the end of ``indented(value, indent)`` around one line saying
    what is left out, written without writing the middle; ``None`` when ``value`` is not
    an object with a list in it (then write it whole and cut it).

    The longest list among the object's values (a request's messages) loses whole
    entries from its middle: entries are written from its start until ``head_chars``
    characters of text are written, and from its end until ``tail_chars`` are, so what
    is shown is exactly the text :func:`indented` writes there. The line in between is
    ``note(entries left out, entries in the list, its key)``, on a line of its own
    between blank lines. When every entry is written the text is :func:`indented`'s
    whole.
    """
    if not isinstance(value, dict):
        return None
    lists = [(len(v), i, k) for i, (k, v) in enumerate(value.items())
             if isinstance(v, list) and v]
    if not lists:
        return None
    _size, _order, key = max(lists)
    entries: list[Any] = value[key]
    frame = indented({**value, key: _HOLE}, indent)
    hole = _encode_text(_HOLE)
    if frame.count(hole) != 1:
        return None
    before, after = frame.split(hole)
    # The list is a value of the top object (level 1): its entries are at level 2.
    pad = "\n" + " " * (2 * indent)
    close = "\n" + " " * indent + "]"

    def entry(item: Any) -> str:
        # No JSON text holds a raw line break: indenting each line indents the entry.
        return indented(item, indent).replace("\n", pad)

    count = len(entries)
    head: list[str] = []
    written = len(before)
    start = 0
    while start < count and written < head_chars:
        text = entry(entries[start])
        head.append(text)
        written += len(text) + len(pad) + 1
        start += 1
    tail: list[str] = []
    written = len(after) + len(close)
    end = count
    while end > start and written < tail_chars:
        end -= 1
        text = entry(entries[end])
        tail.append(text)
        written += len(text) + len(pad) + 1
    tail.reverse()
    if end == start:
        return before + "[" + pad + ("," + pad).join(head + tail) + close + after
    line = note(end - start, count, str(key))
    pieces = [before, "["]
    if head:
        pieces += [pad, ("," + pad).join(head), ","]
    pieces += ["\n\n", " " * (2 * indent), line, "\n"]
    if tail:
        pieces += [pad, ("," + pad).join(tail)]
    return "".join([*pieces, close, after])
