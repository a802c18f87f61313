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

_SEP = b"\x1f"
_END = b"\x1e"


def fingerprint_messages(messages: Sequence[Message], count: int | None = None) -> str:
    """A hash of the first ``count`` messages (all by default): role, name, content,
    tool calls and tool call id of each, in order. Times, token counts and metadata are
    left out: the same turns read from another export of the same source match.
    """
    digest = hashlib.sha256()
    update = digest.update
    for m in messages if count is None else messages[:count]:
        update(m.role.encode())
        update(_SEP)
        if m.name:
            update(m.name.encode("utf-8", "surrogatepass"))
        update(_SEP)
        if m.content:
            update(m.content.encode("utf-8", "surrogatepass"))
        update(_SEP)
        if m.tool_calls:
            update(
                json.dumps(m.tool_calls, sort_keys=True, ensure_ascii=False).encode(
                    "utf-8", "surrogatepass"
                )
            )
        update(_SEP)
        if m.tool_call_id:
            update(m.tool_call_id.encode("utf-8", "surrogatepass"))
        update(_END)
    return digest.hexdigest()[:32]


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
