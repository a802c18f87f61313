"""simonw/llm's ``logs.db``: both of its schemas, and a database holding both.

The database is opened read-only (``mode=ro``; ``immutable=1`` when even that fails, as
on read-only media), so importing never changes the user's log.

**Old schema (llm up to 0.31):** ``conversations`` and ``responses``. Each response is
one exchange: an optional system prompt, the prompt, and the reply. It becomes, in
order, a system message (when the system prompt is set and differs from the previous
response's), tool messages for the ``tool_results`` fed into it, the user message (the
prompt, with its ``prompt_fragments`` text put in front the way llm assembles it, and its
``prompt_attachments`` as parts), and the assistant reply with the ``tool_calls`` it made
(OpenAI shape; empty call ids are filled in and results matched to calls by name).

**New schema (llm 0.32 and later):** ``threads``, ``turns``, ``messages`` and ``parts``.
Messages are content-addressed (``hash``, ``parent_hash``); a thread points at its tip
message, and the session is the chain from the root to that tip. ``parts`` of type
``text`` (with ``text_ref`` payloads resolved against ``fragments``), ``reasoning``
(a ``{"type": "reasoning"}`` part), ``attachment`` (a part and an ``[attachment: …]``
line), ``tool_call`` (an assistant tool call) and ``tool_result`` (one tool message per
result). A turn's model, options, duration and tokens go on the messages it produced,
its time on those and on its prompt; fragments a turn used are listed on its prompt. A
message no turn produced (the system message at a thread's root, the old turns of a
conversation continued from the old schema) takes its time from the old ``responses``
row it came from, or keeps none: a time is never borrowed from another message.

Token counts a response or turn stored go into the assistant message's metadata as
``usage`` and, summed, into the session's token usage. With them go the schema a
structured-output prompt asked for (``schema_id`` and ``schema``, from ``schemas``), the
provider's raw response (``response_json``) and, in the new schema, what the provider
said of a message (``provider_metadata``). ``prompt_json`` is not kept: it is the
conversation's own messages again, as they were sent. The system prompt of the old
schema and the system message of the new one are system messages.

llm names a thread created for an old conversation with the conversation's id, and a turn
with its response's id; so when a database holds both, a conversation that also exists
as a thread is read from the thread only, and responses that are also turns are left
out. Both schemas use the conversation / thread id as the source id, so importing the
database again after llm was upgraded updates rather than duplicates (with ``replace``).
"""

from __future__ import annotations

import base64
import json
import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.core.conversation import (
    Conversation,
    Message,
    Role,
    SessionContext,
    SkippedEntry,
    TokenUsage,
)
from workbench.errors import FormatError
from workbench.formats._reading import flag_unclean_text, safe_json
from workbench.formats._support import (
    epoch_time,
    number_positions,
    title_of,
    tool_call,
)
from workbench.formats.base import ImportItem, unforeseen

NAME = "llm"
SQLITE_MAGIC = b"SQLite format 3\x00"
_OLD_TABLES = frozenset({"conversations", "responses"})
_NEW_TABLES = frozenset({"threads", "turns", "messages", "parts"})
_MAX_DEPTH = 1_000_000


# --------------------------------------------------------------------------- database


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only; raises ``FormatError`` when it is not a readable database."""
    uri = Path(path).resolve().as_uri()
    last: Exception | None = None
    for suffix in ("?mode=ro", "?mode=ro&immutable=1"):
        try:
            # The reading generator may be consumed on another thread than the one that
            # opened it (an import running in a worker); it is only ever read from one.
            conn = sqlite3.connect(uri + suffix, uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            last = exc
            continue
        conn.row_factory = _row
        conn.text_factory = _text
        return conn
    raise FormatError(
        f"Cannot open {path} as an SQLite database: it is damaged or cut short ({last}).",
        path=str(path),
    )


def _text(data: bytes) -> str:
    """A TEXT value; one that is not UTF-8 keeps its bad bytes as lone surrogates, which
    the import replaces (and notes) in the conversation holding them."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        flag_unclean_text()
        return data.decode("utf-8", errors="surrogateescape")


def _row(cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> sqlite3.Row:
    """A row whose BLOB values (in a column llm writes text to) are read as text too: a
    value of bytes in a conversation's metadata could not be stored."""
    if any(type(v) is bytes for v in values):
        values = tuple(_text(v) if type(v) is bytes else v for v in values)
    return sqlite3.Row(cursor, values)


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    return {str(row[0]) for row in rows}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f'PRAGMA table_info("{table}")')}


def _has_rows(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None


def _json(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return None
    # Not JSON, or nested too deep to keep: read as absent (see formats._reading).
    return safe_json(text)


def _join_bits(bits: list[str]) -> str:
    """Fragments and the typed text as llm joins them: stripped, blank ones dropped."""
    return "\n\n".join(b.strip() for b in bits if b and b.strip())


@dataclass
class _Lookups:
    """Fragment and attachment rows, read on first use."""

    conn: sqlite3.Connection
    tables: set[str]
    fragments: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    attachments: dict[str, dict[str, Any]] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)

    def fragment(self, fragment_id: Any) -> tuple[str, str | None]:
        """``(content, source)`` of a fragment; a missing one reads as empty text."""
        if not isinstance(fragment_id, int) or "fragments" not in self.tables:
            return "", None
        if fragment_id not in self.fragments:
            row = self.conn.execute(
                "SELECT content, source FROM fragments WHERE id = ?", (fragment_id,)
            ).fetchone()
            self.fragments[fragment_id] = (str(row[0] or ""), row[1]) if row else ("", None)
        return self.fragments[fragment_id]

    def schema(self, schema_id: Any) -> Any:
        """The JSON schema a structured-output prompt asked for (its text when it is not
        JSON), or ``None`` when the log has no such schema."""
        if not schema_id or "schemas" not in self.tables:
            return None
        key = str(schema_id)
        if key not in self.schemas:
            row = self.conn.execute("SELECT content FROM schemas WHERE id = ?",
                                    (key,)).fetchone()
            text = row[0] if row else None
            decoded = _json(text)
            self.schemas[key] = decoded if decoded is not None else text
        return self.schemas[key]

    def attachment(self, attachment_id: Any) -> dict[str, Any]:
        """An attachment as a message part: its type and where it was read from; its
        bytes only when the log holds no path or URL for it (an attachment piped in),
        as a ``data_url``, since the log is then their only copy."""
        key = str(attachment_id)
        if key not in self.attachments:
            part: dict[str, Any] = {"type": "attachment", "id": key}
            if "attachments" in self.tables:
                row = self.conn.execute(
                    "SELECT type, path, url, CASE WHEN coalesce(path, '') = ''"
                    " AND coalesce(url, '') = '' THEN content END"
                    " FROM attachments WHERE id = ?", (key,)
                ).fetchone()
                if row is not None:
                    for name, value in zip(("mime_type", "path", "url"), row[:3], strict=True):
                        if value:
                            part[name] = value
                    content = row[3]
                    if isinstance(content, str):
                        content = content.encode("utf-8", "surrogateescape")
                    if isinstance(content, bytes) and content:
                        mime = part.get("mime_type") or "application/octet-stream"
                        part["data_url"] = (f"data:{mime};base64,"
                                            + base64.b64encode(content).decode("ascii"))
            self.attachments[key] = part
        return dict(self.attachments[key])


def _attachment_line(part: dict[str, Any]) -> str:
    where = part.get("path") or part.get("url") or part.get("id", "")
    name = str(where).rstrip("/").rsplit("/", 1)[-1] or str(where)
    return f"[attachment: {name}]"


def _usage(row: sqlite3.Row, keys: set[str]) -> dict[str, Any] | None:
    usage: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens"):
        if key in keys and row[key] is not None:
            usage[key] = row[key]
    if "token_details" in keys and row["token_details"]:
        usage["details"] = _json(row["token_details"]) or row["token_details"]
    return usage or None


def _call_metadata(row: sqlite3.Row, keys: set[str], lookups: _Lookups) -> dict[str, Any]:
    """What a response (old schema) or turn (new) says of the call beyond its text: the
    model, options, duration, usage, the schema a structured-output prompt asked for
    (``schema``, with its ``schema_id``) and the provider's raw response
    (``response_json``)."""
    meta: dict[str, Any] = {}
    if "schema_id" in keys and row["schema_id"]:
        meta["schema_id"] = row["schema_id"]
        schema = lookups.schema(row["schema_id"])
        if schema is not None:
            meta["schema"] = schema
    if "response_json" in keys and row["response_json"]:
        raw = _json(row["response_json"])
        if raw not in (None, {}, []):
            meta["response_json"] = raw
    if "model" in keys and row["model"]:
        meta["model"] = row["model"]
    if "resolved_model" in keys and row["resolved_model"]:
        meta["resolved_model"] = row["resolved_model"]
    if "options_json" in keys:
        options = _json(row["options_json"])
        if options:
            meta["options"] = options
    if "duration_ms" in keys and row["duration_ms"] is not None:
        meta["duration_ms"] = row["duration_ms"]
    usage = _usage(row, keys)
    if usage:
        meta["usage"] = usage
    return meta


def _sum_usage(messages: list[Message]) -> SessionContext:
    total_in = total_out = 0
    for message in messages:
        usage = message.metadata.get("usage")
        if isinstance(usage, dict):
            total_in += _token_count(usage.get("input_tokens"))
            total_out += _token_count(usage.get("output_tokens"))
    return SessionContext(token_usage=TokenUsage(input_tokens=total_in, output_tokens=total_out))


def _token_count(value: Any) -> int:
    """A count of tokens as a number, 0 for anything else (text, infinity): the usage
    as the log stored it stays in the message's metadata."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0
    return int(value)


def _times_from_responses(
    conn: sqlite3.Connection, tables: set[str], thread_id: str, messages: list[Message]
) -> None:
    """Give untimed messages of a thread the times of the old ``responses`` rows they
    came from (a conversation of llm 0.31 or older continued by a newer llm: its old
    messages have no turn of their own, but the old rows hold their original times).

    Prompts and replies are matched in order by their text; a message that matches no
    row keeps no time (a time is never taken from another message).
    """
    if "responses" not in tables or all(m.created_at is not None for m in messages):
        return
    try:
        rows = conn.execute(
            "SELECT prompt, response, datetime_utc FROM responses WHERE conversation_id = ?"
            " ORDER BY datetime_utc, rowid",
            (thread_id,),
        ).fetchall()
    except sqlite3.Error:
        return
    pending: list[tuple[str, str]] = []  # (role, text) to match, with its time
    times: list[Any] = []
    for prompt, response, when in rows:
        for role, text in ((Role.USER.value, prompt), (Role.ASSISTANT.value, response)):
            if isinstance(text, str) and text:
                pending.append((role, text))
                times.append(when)
    at = 0
    for message in messages:
        if at >= len(pending):
            return
        role, text = pending[at]
        if message.role != role:
            continue
        if message.content == text or (role == Role.USER.value and message.content.endswith(text)):
            if message.created_at is None:
                message.created_at = epoch_time(times[at])
            at += 1


class _CallMatcher:
    """Matches tool results to the calls they answer when the log lost the call ids."""

    def __init__(self) -> None:
        self.open: list[tuple[str, str]] = []  # (call id, tool name)
        self.made = 0

    def call_id(self, given: Any, name: str) -> str:
        self.made += 1
        call_id = given if isinstance(given, str) and given else f"llm-call-{self.made}"
        self.open.append((call_id, name))
        return call_id

    def result_id(self, given: Any, name: str) -> str | None:
        if isinstance(given, str) and given:
            self.open = [c for c in self.open if c[0] != given]
            return given
        for i, (call_id, call_name) in enumerate(self.open):
            if call_name == name:
                del self.open[i]
                return call_id
        if self.open:
            return self.open.pop(0)[0]
        return None


# --------------------------------------------------------------------------- new schema


class _NewSchema:
    """Reads threads, turns, messages and parts (llm 0.32+)."""

    def __init__(self, conn: sqlite3.Connection, lookups: _Lookups) -> None:
        self.conn = conn
        self.lookups = lookups
        self.turn_keys = _columns(conn, "turns")
        self.message_keys = _columns(conn, "messages")
        # No chain is longer than the log has messages (one that would be goes round a
        # cycle of parent links): the walk up from a tip stops there.
        (count,) = conn.execute("SELECT count(*) FROM messages").fetchone()
        self.depth_limit = min(int(count), _MAX_DEPTH)
        self.turns_by_tip: dict[str, list[sqlite3.Row]] = {}
        for row in conn.execute("SELECT * FROM turns ORDER BY datetime_utc, id"):
            if row["tip_message_hash"]:
                self.turns_by_tip.setdefault(row["tip_message_hash"], []).append(row)
        self.turn_fragments: dict[str, list[sqlite3.Row]] = {}
        if "turn_fragments" in lookups.tables:
            for row in conn.execute(
                'SELECT turn_id, fragment_id, kind FROM turn_fragments ORDER BY turn_id, "order"'
            ):
                self.turn_fragments.setdefault(row["turn_id"], []).append(row)

    def thread_ids(self) -> set[str]:
        return {str(row[0]) for row in self.conn.execute("SELECT id FROM threads")}

    def turn_ids(self) -> set[str]:
        return {str(row[0]) for row in self.conn.execute("SELECT id FROM turns")}

    def read(self) -> Iterator[ImportItem]:
        threads = self.conn.execute(
            "SELECT id, name, tip_message_hash, forked_from, datetime_utc FROM threads "
            "ORDER BY datetime_utc, id"
        ).fetchall()
        for thread in threads:
            try:
                yield self.thread(thread)
            except sqlite3.Error:
                raise  # the database itself failed: said once, for the whole file
            except Exception as exc:  # one thread's unforeseen fault costs that thread only
                yield unforeseen(f"thread {thread['id']}", exc)

    def _chain(self, tip: str) -> list[sqlite3.Row]:
        # What the provider said of a message (a thinking block's signature…), when this
        # llm keeps it.
        meta = "m.provider_metadata" if "provider_metadata" in self.message_keys else "NULL"
        rows = self.conn.execute(
            "WITH RECURSIVE chain(hash, parent_hash, role, provider_metadata, depth) AS ("
            f" SELECT m.hash, m.parent_hash, m.role, {meta}, 0 FROM messages AS m"
            " WHERE m.hash = ?"
            " UNION ALL"
            f" SELECT m.hash, m.parent_hash, m.role, {meta}, chain.depth + 1"
            " FROM messages AS m JOIN chain ON m.hash = chain.parent_hash"
            " WHERE chain.depth < ?)"
            " SELECT hash, parent_hash, role, provider_metadata FROM chain ORDER BY depth",
            (tip, self.depth_limit),
        ).fetchall()
        # A cycle of parent links (a damaged log) would repeat its messages down to the
        # depth limit: the chain ends where it comes round to a message it holds.
        chain: list[sqlite3.Row] = []
        seen: set[str] = set()
        for row in rows:
            if row["hash"] in seen:
                break
            seen.add(row["hash"])
            chain.append(row)
        chain.reverse()
        return chain

    def _parts(self, message_hash: str) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT type, tool_name, text, payload FROM parts WHERE message_hash = ? "
            "ORDER BY position",
            (message_hash,),
        ).fetchall()

    def thread(self, thread: sqlite3.Row) -> ImportItem:
        thread_id = str(thread["id"])
        tip = thread["tip_message_hash"]
        if not tip:
            return SkippedEntry(
                entry=f"thread {thread_id}", reason="The thread points at no message: it is empty."
            )
        chain = self._chain(tip)
        if not chain:
            return SkippedEntry(
                entry=f"thread {thread_id}",
                reason=f"The thread's tip message {tip} is not in the messages table.",
            )
        owners, prompts = self._turn_owners(chain)
        matcher = _CallMatcher()
        messages: list[Message] = []
        for index, row in enumerate(chain):
            turn = owners.get(index)
            prompt_of = prompts.get(index)
            made = self._message(row, matcher)
            when_row = turn if turn is not None else prompt_of
            when = epoch_time(when_row["datetime_utc"]) if when_row is not None else None
            for message in made:
                message.created_at = when
            if turn is not None and made:
                meta = _call_metadata(turn, self.turn_keys, self.lookups)
                once: dict[str, Any] = {key: meta.pop(key) for key in ("usage", "response_json")
                                        if key in meta}
                for message in made:
                    message.metadata.update(meta)
                # Usage counts the whole call, and the raw response is the whole call's:
                # once, on the message that ends the turn.
                if once and row["hash"] == turn["tip_message_hash"]:
                    made[-1].metadata.update(once)
            if prompt_of is not None and made:
                used = self._fragments_of(prompt_of["id"])
                if used:
                    made[0].metadata["fragments"] = used
            messages.extend(made)
        _times_from_responses(self.conn, self.lookups.tables, thread_id, messages)
        number_positions(messages)
        name = thread["name"]
        title = title_of(name, messages, f"llm thread {thread_id}")
        times = [m.created_at for m in messages if m.created_at is not None]
        metadata: dict[str, Any] = {"schema": "threads", "thread_id": thread_id}
        if thread["forked_from"]:
            metadata["forked_from"] = thread["forked_from"]
        return Conversation(
            title=title,
            messages=messages,
            context=_sum_usage(messages),
            source=NAME,
            source_id=thread_id,
            # The thread row is written just after its first turn: the earliest time.
            created_at=min([*times, *filter(None, [epoch_time(thread["datetime_utc"])])],
                           default=None),
            updated_at=max(times) if times else None,
            metadata=metadata,
        )

    def _turn_owners(
        self, chain: list[sqlite3.Row]
    ) -> tuple[dict[int, sqlite3.Row], dict[int, sqlite3.Row]]:
        """Which turn produced each chain message, and which turn each prompt started."""
        position = {row["hash"]: i for i, row in enumerate(chain)}
        owners: dict[int, sqlite3.Row] = {}
        prompts: dict[int, sqlite3.Row] = {}
        for index, row in enumerate(chain):
            for turn in self.turns_by_tip.get(row["hash"], ()):
                parent = turn["parent_message_hash"]
                start = position.get(parent, -1) if parent else -1
                if start >= index:
                    continue
                for j in range(start + 1, index + 1):
                    owners.setdefault(j, turn)
                if start >= 0:
                    prompts.setdefault(start, turn)
                break
        return owners, prompts

    def _fragments_of(self, turn_id: str) -> list[dict[str, Any]]:
        used = []
        for row in self.turn_fragments.get(turn_id, ()):
            content, source = self.lookups.fragment(row["fragment_id"])
            used.append({"kind": row["kind"], "fragment_id": row["fragment_id"], "source": source})
        return used

    def _text(self, text: Any, payload: Any) -> str:
        if isinstance(text, str):
            return text
        if isinstance(payload, dict):
            refs = payload.get("text_ref")
            if isinstance(refs, list):
                pieces = []
                for ref in refs:
                    if not isinstance(ref, dict):
                        continue
                    if "literal" in ref:
                        pieces.append(str(ref["literal"] or ""))
                    elif "fragment" in ref:
                        pieces.append(self.lookups.fragment(ref["fragment"])[0])
                return "".join(pieces)
            inner = payload.get("text")
            if isinstance(inner, str):
                return inner
        return ""

    def _message(self, row: sqlite3.Row, matcher: _CallMatcher) -> list[Message]:
        role = str(row["role"] or Role.USER.value)
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        results: list[Message] = []
        rich = False
        for kind, tool_name, text, raw_payload in self._parts(row["hash"]):
            payload = _json(raw_payload)
            data = payload if isinstance(payload, dict) else {}
            if kind == "text":
                value = self._text(text, data)
                texts.append(value)
                parts.append({"type": "text", "text": value})
            elif kind == "reasoning":
                rich = True
                parts.append({"type": "reasoning", "text": self._text(text, data)})
            elif kind == "attachment":
                rich = True
                ref = data.get("attachment")
                attachment_id = (
                    ref.get("id") if isinstance(ref, dict) else data.get("attachment_id")
                )
                part = self.lookups.attachment(attachment_id)
                parts.append(part)
                texts.append(_attachment_line(part))
            elif kind == "tool_call":
                name = str(data.get("name") or tool_name or "tool")
                call_id = matcher.call_id(data.get("tool_call_id"), name)
                calls.append(tool_call(call_id, name, data.get("arguments") or {}))
            elif kind == "tool_result":
                name = str(data.get("name") or tool_name or "tool")
                output = data.get("output", text)
                meta: dict[str, Any] = {}
                if data.get("exception"):
                    meta["exception"] = data["exception"]
                results.append(
                    Message(
                        role=Role.TOOL.value,
                        content=output if isinstance(output, str) else json.dumps(output),
                        name=name,
                        tool_call_id=matcher.result_id(data.get("tool_call_id"), name),
                        metadata=meta,
                    )
                )
            else:
                rich = True
                parts.append({"type": str(kind or "unknown"), **data})
        out = list(results)
        if texts or calls or rich or not results:
            if role not in (Role.SYSTEM.value, Role.USER.value, Role.ASSISTANT.value):
                role = Role.ASSISTANT.value if calls else Role.USER.value
            out.append(
                Message(
                    role=role,
                    content="\n".join(t for t in texts if t),
                    tool_calls=calls or None,
                    parts=parts if rich else None,
                )
            )
        provider = _json(row["provider_metadata"])
        if provider not in (None, {}, []):
            out[-1].metadata["provider_metadata"] = provider
        return out


# --------------------------------------------------------------------------- old schema


class _OldSchema:
    """Reads conversations and responses (llm up to 0.31)."""

    def __init__(self, conn: sqlite3.Connection, lookups: _Lookups) -> None:
        self.conn = conn
        self.lookups = lookups
        self.tables = lookups.tables
        self.keys = _columns(conn, "responses")

    def _rows(self, sql: str, table: str, response_id: str) -> list[sqlite3.Row]:
        if table not in self.tables:
            return []
        return self.conn.execute(sql, (response_id,)).fetchall()

    def read(self, skip_conversations: set[str], skip_responses: set[str]) -> Iterator[ImportItem]:
        names: dict[str, tuple[str | None, str | None]] = {}
        if "conversations" in self.tables:
            for row in self.conn.execute("SELECT id, name, model FROM conversations"):
                names[str(row["id"])] = (row["name"], row["model"])
        order = "datetime_utc" if "datetime_utc" in self.keys else "rowid"
        cursor = self.conn.execute(
            "SELECT * FROM responses"
            f" ORDER BY conversation_id IS NULL, conversation_id, {order}, id"
        )
        group: list[sqlite3.Row] = []
        group_id: str | None = None
        for row in cursor:
            conv_id = row["conversation_id"]
            key = str(conv_id) if conv_id else f"response:{row['id']}"
            if group and key != group_id:
                yield from self._guarded(
                    group_id, group, names, skip_conversations, skip_responses
                )
                group = []
            group_id = key
            group.append(row)
        if group:
            yield from self._guarded(
                group_id, group, names, skip_conversations, skip_responses
            )

    def _guarded(
        self,
        key: str | None,
        rows: list[sqlite3.Row],
        names: dict[str, tuple[str | None, str | None]],
        skip_conversations: set[str],
        skip_responses: set[str],
    ) -> Iterator[ImportItem]:
        """:meth:`_conversation`, one conversation's unforeseen fault costing it only."""
        try:
            items = list(self._conversation(key, rows, names, skip_conversations,
                                            skip_responses))
        except sqlite3.Error:
            raise  # the database itself failed: said once, for the whole file
        except Exception as exc:
            items = [unforeseen(f"conversation {key}", exc)]
        yield from items

    def _conversation(
        self,
        key: str | None,
        rows: list[sqlite3.Row],
        names: dict[str, tuple[str | None, str | None]],
        skip_conversations: set[str],
        skip_responses: set[str],
    ) -> Iterator[ImportItem]:
        assert key is not None
        if key in skip_conversations:
            return
        rows = [r for r in rows if str(r["id"]) not in skip_responses]
        if not rows:
            return
        source_id = key.removeprefix("response:")
        name, model = names.get(key, (None, None))
        matcher = _CallMatcher()
        messages: list[Message] = []
        system_before: str | None = None
        for row in rows:
            messages.extend(self._response(row, matcher, system_before))
            system_before = self._system(row)
        number_positions(messages)
        title = title_of(name, messages, f"llm conversation {source_id}")
        times = [m.created_at for m in messages if m.created_at is not None]
        metadata: dict[str, Any] = {"schema": "responses", "conversation_id": source_id}
        if model:
            metadata["model"] = model
        yield Conversation(
            title=title,
            messages=messages,
            context=_sum_usage(messages),
            source=NAME,
            source_id=source_id,
            created_at=min(times) if times else None,
            updated_at=max(times) if times else None,
            metadata=metadata,
        )

    def _system(self, row: sqlite3.Row) -> str:
        bits = [
            self.lookups.fragment(f["fragment_id"])[0]
            for f in self._rows(
                'SELECT fragment_id FROM system_fragments WHERE response_id = ? ORDER BY "order"',
                "system_fragments",
                row["id"],
            )
        ]
        return _join_bits([*bits, str(row["system"] or "")])

    def _response(
        self, row: sqlite3.Row, matcher: _CallMatcher, system_before: str | None
    ) -> list[Message]:
        response_id = str(row["id"])
        when = epoch_time(row["datetime_utc"]) if "datetime_utc" in self.keys else None
        out: list[Message] = []
        system = self._system(row)
        if system and system != system_before:
            out.append(Message(role=Role.SYSTEM.value, content=system, created_at=when))
        for result in self._rows(
            "SELECT * FROM tool_results WHERE response_id = ? ORDER BY id",
            "tool_results",
            response_id,
        ):
            name = str(result["name"] or "tool")
            meta: dict[str, Any] = {}
            if "exception" in result.keys() and result["exception"]:
                meta["exception"] = result["exception"]
            out.append(
                Message(
                    role=Role.TOOL.value,
                    content=str(result["output"] or ""),
                    name=name,
                    tool_call_id=matcher.result_id(result["tool_call_id"], name),
                    created_at=when,
                    metadata=meta,
                )
            )
        fragments = self._rows(
            'SELECT fragment_id FROM prompt_fragments WHERE response_id = ? ORDER BY "order"',
            "prompt_fragments",
            response_id,
        )
        sources = []
        bits = []
        for fragment in fragments:
            content, source = self.lookups.fragment(fragment["fragment_id"])
            bits.append(content)
            sources.append(
                {"kind": "prompt", "fragment_id": fragment["fragment_id"], "source": source}
            )
        prompt = _join_bits([*bits, str(row["prompt"] or "")])
        attachments = [
            self.lookups.attachment(a["attachment_id"])
            for a in self._rows(
                "SELECT attachment_id FROM prompt_attachments WHERE response_id = ?"
                ' ORDER BY "order"',
                "prompt_attachments",
                response_id,
            )
        ]
        if prompt or attachments:
            lines = [prompt] if prompt else []
            lines.extend(_attachment_line(a) for a in attachments)
            meta = {"fragments": sources} if sources else {}
            out.append(
                Message(
                    role=Role.USER.value,
                    content="\n".join(lines),
                    parts=[{"type": "text", "text": prompt}, *attachments] if attachments else None,
                    created_at=when,
                    metadata=meta,
                )
            )
        calls = [
            tool_call(
                matcher.call_id(call["tool_call_id"], str(call["name"] or "tool")),
                str(call["name"] or "tool"),
                call["arguments"] or "{}",
            )
            for call in self._rows(
                "SELECT * FROM tool_calls WHERE response_id = ? ORDER BY id",
                "tool_calls",
                response_id,
            )
        ]
        reasoning = row["reasoning"] if "reasoning" in self.keys else None
        text = str(row["response"] or "")
        meta = _call_metadata(row, self.keys, self.lookups)
        meta["response_id"] = response_id
        out.append(
            Message(
                role=Role.ASSISTANT.value,
                content=text,
                tool_calls=calls or None,
                parts=[{"type": "reasoning", "text": reasoning}, {"type": "text", "text": text}]
                if reasoning
                else None,
                created_at=when,
                metadata=meta,
            )
        )
        return out


# --------------------------------------------------------------------------- the format


class LlmLogsImporter:
    """Reads simonw/llm's ``logs.db`` (old, new, or both schemas) without changing it."""

    name = NAME
    description = "simonw/llm logs.db (SQLite; conversations/responses or threads/turns)"

    def sniff(self, path: Path, head: bytes) -> bool:
        """An SQLite file with llm's ``responses`` or ``threads``/``turns`` tables."""
        if path.is_dir() or not head.startswith(SQLITE_MAGIC):
            return False
        try:
            conn = connect_readonly(path)
        except FormatError:
            # An SQLite file whose tables cannot even be listed is damaged (cut short, or
            # overwritten): claimed here so that reading it says so, rather than
            # detection saying it cannot tell the format.
            return True
        try:
            tables = _tables(conn)
        except sqlite3.Error:
            return True
        finally:
            conn.close()
        return _OLD_TABLES <= tables or _NEW_TABLES <= tables

    def read(self, path: Path) -> Iterator[ImportItem]:
        """Conversations of the old schema, then threads of the new, duplicates left out."""
        path = Path(path)
        if path.is_dir():
            raise FormatError(f"{path} is a directory, not an llm logs.db file.", path=str(path))
        conn = connect_readonly(path)
        try:
            tables = _tables(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise FormatError(
                f"Cannot read {path}: the database is damaged or cut short ({exc}).",
                path=str(path),
            ) from exc
        has_old = _OLD_TABLES <= tables or "responses" in tables
        has_new = _NEW_TABLES <= tables
        if not has_old and not has_new:
            conn.close()
            raise FormatError(
                f"{path} is an SQLite database but not an llm logs.db: it has neither a "
                "'responses' table nor 'threads', 'turns', 'messages' and 'parts'.",
                path=str(path),
            )
        return self._read(path, conn, tables, has_old, has_new)

    def _read(
        self,
        path: Path,
        conn: sqlite3.Connection,
        tables: set[str],
        has_old: bool,
        has_new: bool,
    ) -> Iterator[ImportItem]:
        try:
            lookups = _Lookups(conn, tables)
            new = _NewSchema(conn, lookups) if has_new else None
            if has_old and _has_rows(conn, "responses"):
                skip_conversations = new.thread_ids() if new else set()
                skip_responses = new.turn_ids() if new else set()
                yield from _OldSchema(conn, lookups).read(skip_conversations, skip_responses)
            if new is not None:
                yield from new.read()
        except sqlite3.Error as exc:
            damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError
            )
            why = f"the database is damaged or cut short ({exc})" if damaged else str(exc)
            raise FormatError(f"Cannot read {path}: {why}.", path=str(path)) from exc
        finally:
            conn.close()
