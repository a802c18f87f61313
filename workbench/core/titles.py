"""A session title from the first prompt written in it: one line of plain text.

A prompt is often Markdown; the title shows what a person reads, not the markup: no
heading or list marks, no emphasis or code ticks, a link's text without its address,
an image's description, whitespace folded, at most :data:`TITLE_LENGTH` characters.
"""

from __future__ import annotations

import re

TITLE_LENGTH = 60
FALLBACK_TITLE = "New session"

_FENCE = re.compile(r"^\s*(```|~~~)")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_LINE_START = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)+")
_EMPHASIS = re.compile(r"(\*\*|\*|~~|`+)(?=\S)(.+?)(?<=\S)\1")
# Underscores mark emphasis only at word edges: snake_case_name is a name.
_UNDERSCORE = re.compile(r"(?<!\w)(__|_)(?=\S)(.+?)(?<=\S)\1(?!\w)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str) -> str:
    """``text`` as a title a person gave: control characters (newlines, tabs, escapes)
    become spaces and runs of whitespace fold into one, the ends trimmed; no markup is
    touched."""
    return " ".join(_CONTROL.sub(" ", text).split())


def _plain_line(line: str) -> str:
    line = _LINE_START.sub("", line)
    line = _IMAGE.sub(lambda m: m.group(1), line)
    line = _LINK.sub(lambda m: m.group(1), line)
    line = _AUTOLINK.sub(lambda m: m.group(1), line)
    line = _TAG.sub("", line)
    previous = None
    while previous != line:  # nested emphasis: **_word_**
        previous = line
        line = _EMPHASIS.sub(lambda m: m.group(2), line)
        line = _UNDERSCORE.sub(lambda m: m.group(2), line)
    return " ".join(_CONTROL.sub(" ", line).split())


def title_from_prompt(prompt: str, length: int = TITLE_LENGTH) -> str:
    """The first line of ``prompt`` that has readable text, as plain text, shortened to
    ``length`` characters (with an ellipsis); :data:`FALLBACK_TITLE` when none has."""
    in_fence = False
    for raw in prompt.splitlines():
        if _FENCE.match(raw):
            in_fence = not in_fence
            continue
        line = raw.strip() if in_fence else _plain_line(raw)
        if not line or set(line) <= set("-=*_#>|:` "):
            continue  # a rule, a table border, an empty mark
        if len(line) > length:
            cut = line[: length - 1].rstrip()
            return cut + "…"
        return line
    return FALLBACK_TITLE
