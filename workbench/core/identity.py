"""Recognising a conversation by its content: the fingerprint an import keeps; and the
lines that describe what a source said about a conversation.

An import recognises a conversation it has seen before by its source, its id in that
source *and* a fingerprint of its messages (SPEC §11): ids repeat across datasets
(ShareGPT's ``identity_0``) and across context files, so an id alone would take a
different conversation for one already imported. The fingerprint of the first ``n``
messages is a prefix fingerprint, so a conversation that grew in its source (new turns
at the end) is recognised as the stored one continued.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from workbench.core.conversation import Message

_SEP = "\x1f"
_END = "\x1e"


def fingerprint_messages(messages: Sequence[Message], count: int | None = None) -> str:
    """A hash of the first ``count`` messages (all by default): role, name, content,
    tool calls and tool call id of each, in order. Times, token counts and metadata are
    left out: the same turns read from another export of the same source match.
    """
    pieces: list[str] = []
    add = pieces.append
    for m in messages if count is None else messages[:count]:
        add(m.role)
        add(m.name or "")
        add(m.content or "")
        add(json.dumps(m.tool_calls, sort_keys=True, ensure_ascii=False)
            if m.tool_calls else "")
        add(m.tool_call_id or "")
        add(_END)
    # One encoding of the whole text: far cheaper than one per field.
    data = _SEP.join(pieces).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


def metadata_lines(metadata: dict[str, Any], limit: int = 120) -> list[str]:
    """``key: value`` lines describing a session's metadata for people (``show``, the
    session list's tooltip): text as it is, other values as compact JSON, each line cut
    at ``limit`` characters and kept on one line."""
    lines: list[str] = []
    for key, value in metadata.items():
        if value is None or value == "" or value == [] or value == {}:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = " ".join(text.split())
        line = f"{key}: {text}"
        if len(line) > limit:
            line = line[: limit - 1] + "…"
        lines.append(line)
    return lines
