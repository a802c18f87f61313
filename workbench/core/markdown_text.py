"""Markdown as a person reads it in a short excerpt: the marks taken out, the text kept.

A search snippet is cut from a message, and messages are often Markdown: the excerpt
shows ``Aeroporto``, not ``*Aeroporto*``. Nothing is interpreted beyond taking marks out
(no HTML is read or written): heading, quote and list marks at a line's start, fence
lines, emphasis and code ticks, a link's or an image's address (its text stays),
backslash escapes. An excerpt may cut a pair of marks in two, so a mark is taken out by
where it stands (against a word on one side only, as Markdown's own rule for an opening
or closing mark has it), not by finding its partner: ``2 * 3`` and ``snake_case`` stay.
"""

from __future__ import annotations

import re
import unicodedata

_FENCE = re.compile(r"^\s*(?:```|~~~)[^`]*$")
_LINE_START = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|>[ \t]*|[-*+][ \t]+(?:\[[ xX]\][ \t]+)?"
                         r"|\d{1,9}[.)][ \t]+)+")
_RULE = re.compile(r"^[ \t]*(?:[-*_][ \t]*){3,}$")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]+)\]\([^)\n]*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
# A backslash escape, or a run of emphasis or code marks.
_MARK = re.compile(r"\\([!-/:-@\[-`{-~])|(\*+|_+|~~+|`+)")


def _is_word(char: str | None) -> bool:
    """Whether ``char`` is part of a word (a mark next to it opens or closes)."""
    if char is None or char.isspace():
        return False
    return not unicodedata.category(char).startswith("P") and char not in "*_~`"


def _marks_out(line: str, transparent: str) -> str:
    def neighbour(at: int, step: int) -> str | None:
        while 0 <= at < len(line):
            if line[at] not in transparent:
                return line[at]
            at += step
        return None

    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1)  # an escaped character is the character itself
        before = _is_word(neighbour(match.start() - 1, -1))
        after = _is_word(neighbour(match.end(), 1))
        return "" if before != after else match.group(2)

    return _MARK.sub(replace, line)


def markdown_marks_removed(text: str, *, transparent: str = "") -> str:
    """``text`` with its Markdown marks taken out (see the module docstring); its lines
    are kept, but fence lines and rules go. Characters in ``transparent`` (markers a
    caller put into the text, such as a search's highlight marks) are kept and are
    looked through when deciding whether a mark stands against a word."""
    lines = []
    for line in text.split("\n"):
        if _FENCE.match(line) or _RULE.match(line):
            continue
        line = _LINE_START.sub("", line)
        line = _IMAGE.sub(lambda m: m.group(1), line)
        line = _LINK.sub(lambda m: m.group(1), line)
        line = _AUTOLINK.sub(lambda m: m.group(1), line)
        lines.append(_marks_out(line, transparent))
    return "\n".join(lines)
