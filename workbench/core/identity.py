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
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workbench.core.conversation import Message, as_utc

_SEP = "\x1f"
_END = "\x1e"


_PARTS = "\x1dparts"


def parts_key(parts: Sequence[Any] | None) -> str:
    """The parts of a message that its text does not say (an image, a file, reasoning,
    a citation…) as canonical JSON, or ``""`` when there are none: two messages whose
    text is the same placeholder (``[image]``) but whose images differ are different
    messages. Plain text parts (``{"type": "text", "text": …}``) are left out, since
    the message's content holds their text."""
    if not parts:
        return ""
    kept = [p for p in parts if not _plain_text(p)]
    if not kept:
        return ""
    return json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str)


def _plain_text(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and set(part) <= {"type", "text"}


def fingerprint_messages(
    messages: Sequence[Message], count: int | None = None, *, with_parts: bool = True
) -> str:
    """A hash of the first ``count`` messages (all by default): role, name, content,
    tool calls, tool call id and the parts the text does not say (:func:`parts_key`)
    of each, in order. Times, token counts and metadata are left out: the same turns
    read from another export of the same source match.

    A message without such parts adds what it added before parts were counted, so a
    session without any keeps its fingerprint; ``with_parts=False`` gives the
    fingerprint as it was before for every message (stored sessions that have parts
    were fingerprinted that way).
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
        if with_parts and m.parts:
            key = parts_key(m.parts)
            if key:
                add(_PARTS + key)
        add(_END)
    # One encoding of the whole text: far cheaper than one per field.
    data = _SEP.join(pieces).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


OWN_SOURCE = "workbench"
"""The source an export names for a session made in the workbench (not imported), with
:func:`own_source_id` as its id: read back into the database it was made in, the
export is recognised as that session; read into another, it is a new session that
keeps this source and id (and so is recognised in turn)."""

_OWN_ID = re.compile(r"wb-(\d{8}T\d{12})-([1-9]\d{0,17})")


def own_source_id(session_id: int, created_at: datetime) -> str:
    """The id an export gives a session made in the workbench: its creation time (to
    the microsecond, UTC) and its id in its database, ``wb-20240515T150000123456-12``.
    Stable across exports; a session of another database does not have it (it would
    need the same id, made in the same microsecond)."""
    return f"wb-{_stamp(created_at)}-{session_id}"


def own_session(source_id: str, created_at: datetime, session_id: int) -> bool:
    """Whether ``source_id`` is :func:`own_source_id` of the session ``session_id``
    created at ``created_at``."""
    return source_id == own_source_id(session_id, created_at)


def own_session_id(source_id: str | None) -> int | None:
    """The database id :func:`own_source_id` names in ``source_id`` (to be checked
    against that session's creation time with :func:`own_session`); ``None`` when it
    is not such an id."""
    if not source_id:
        return None
    match = _OWN_ID.fullmatch(source_id)
    return int(match.group(2)) if match else None


def _stamp(created_at: datetime) -> str:
    return as_utc(created_at).strftime("%Y%m%dT%H%M%S%f")


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
