"""The context-file format (SPEC §7): one JSON object per session, or a directory of them.

A session object holds ``session_id``, ``system_state``, ``facts``, ``recent_history``
(entries ``{timestamp, role, content, token_count}``), ``long_term_summary``,
``active_tasks``, ``tool_stats``, ``last_known_environment`` and ``token_usage``.

So that a round trip loses nothing, the exporter adds optional keys, each only when it
carries something, so that a plain session stays plain:

- on a history entry: ``name``, ``tool_calls``, ``tool_call_id``, ``parts``, ``state``
  (when not ``active``), ``metadata`` (with ``important``) and ``token_encoding``;
- on the session: ``title``, ``created_at`` and ``updated_at`` (when they differ from
  what the importer would derive, and never a time the session's source did not give),
  ``tags``, ``imported_from`` (``{"source", "source_id"}``) for a session imported
  from another format or made in the workbench (source ``workbench``): read back, the
  session has that source and id again, so the conversation is recognised as the one
  its source holds (a session made in the workbench, as itself in its own database);
  and ``forked_from`` (``{"source", "source_id", "position"}``) for a fork: the session
  it was forked from as the export names it, and the position of the message it was
  forked at (``null`` when that message was deleted), so that reading it back links
  the fork again (to the session alone when the position is not known).

The pin and archive marks are the workbench's own and are not written: an export of a
pinned or archived session says so (a session imported again starts unpinned).

Exporting one session writes one object; several are written as a JSON array, which the
importer reads as well. What a file holds is written back as it was read: unknown keys
of an entry go into its metadata (their names under ``entry_keys``) and come back beside
the known keys; unknown keys of a session go into the session's metadata and come back
at the top level; unknown keys of ``token_usage``, ``tool_stats`` and tasks are kept in
place; times written as epoch numbers stay epoch numbers (an entry's in its metadata as
``source_timestamp``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.core.conversation import (
    ROLES,
    STATES,
    Conversation,
    Message,
    MessageState,
    Role,
    SessionContext,
    SkippedEntry,
    Task,
    TokenUsage,
    ToolStats,
    format_time,
    parse_time,
)
from workbench.core.identity import OWN_SOURCE, own_source_id
from workbench.errors import FormatError, InvalidEntryError
from workbench.formats._reading import JsonStream, open_file
from workbench.formats._support import guarded, number_positions, primed, skipped_message
from workbench.formats.base import (
    FORKED_FROM,
    IMPORTED_FROM,
    ExportSession,
    ImportItem,
    dump_json,
    fingerprint,
    forked_from_json,
    imported_from,
    peek_json,
    pin_marks_note,
    read_forked_from,
    read_head,
    read_imported_from,
    shorten,
    type_name,
    unforeseen,
    write_atomic,
)

NAME = "context-json"
SOURCE_TIME = "source_timestamp"
"""Message metadata key: an entry's ``timestamp`` as the file wrote it (an epoch
number), written back as it was while the message's time is unchanged."""
ENTRY_KEYS = "entry_keys"
"""Message metadata key: the names of the keys an entry had beside the known ones
(their values are in the metadata), written back beside them on export."""

_SESSION_KEYS = frozenset(
    {
        "session_id",
        "system_state",
        "facts",
        "recent_history",
        "long_term_summary",
        "active_tasks",
        "tool_stats",
        "last_known_environment",
        "token_usage",
        "title",
        "tags",
        "created_at",
        "updated_at",
    }
)
_ENTRY_KEYS = frozenset(
    {
        "timestamp",
        "role",
        "content",
        "token_count",
        "name",
        "tool_calls",
        "tool_call_id",
        "parts",
        "state",
        "metadata",
        "token_encoding",
    }
)
# Keys that, next to ``session_id``, only a context file has.
_CONTEXT_CUES = frozenset(_SESSION_KEYS - {"session_id", "title", "tags", "created_at"})
_DIRECTORY_SNIFF_LIMIT = 20
_OTHER_SUFFIXES = (".jsonl", ".zip", ".db")  # conversation files that are not context files


# --------------------------------------------------------------------------- detection


def looks_like_context(value: Any) -> bool:
    """Whether a (possibly cut-off) JSON value is a context session or a list of them."""
    if isinstance(value, list):
        return bool(value) and isinstance(value[0], dict) and looks_like_context(value[0])
    if not isinstance(value, dict):
        return False
    if "recent_history" in value:
        return True
    return "session_id" in value and any(key in value for key in _CONTEXT_CUES)


def _json_files(directory: Path) -> list[Path]:
    try:
        entries = list(directory.iterdir())
    except OSError as exc:
        raise FormatError(
            f"Cannot list {directory}: {exc.strerror or exc}.", path=str(directory)
        ) from exc
    return sorted(
        p
        for p in entries
        if p.suffix.lower() == ".json" and not p.name.startswith(".") and p.is_file()
    )


# --------------------------------------------------------------------------- parsing


def _optional_str(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None or isinstance(value, str):
        return value
    raise InvalidEntryError(f"{where}{key} must be a string, not {type_name(value)}")


def _optional_dict(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise InvalidEntryError(f"{where}{key} must be an object, not {type_name(value)}")


def _optional_list_of_dicts(
    raw: dict[str, Any], key: str, where: str
) -> list[dict[str, Any]] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidEntryError(f"{where}{key} must be a list, not {type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidEntryError(f"{where}{key}[{i}] must be an object, not {type_name(item)}")
    return value


def _time(raw: dict[str, Any], key: str, where: str) -> datetime | None:
    value = raw.get(key)
    try:
        return parse_time(value)
    except (ValueError, OverflowError, OSError) as exc:
        raise InvalidEntryError(f"{where}{key} {value!r} is not a time") from exc


def parse_history_entry(raw: Any, index: int) -> Message:
    """One ``recent_history`` entry as a message; raises :class:`InvalidEntryError`
    (its sentence says what is wrong; the caller names the entry's position)."""
    if not isinstance(raw, dict):
        raise InvalidEntryError(f"an entry must be an object, not {type_name(raw)}")
    role = raw.get("role")
    if role is None:
        raise InvalidEntryError("role is missing")
    if role not in ROLES:
        raise InvalidEntryError(f"role {role!r} is not one of {', '.join(ROLES)}")
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        raise InvalidEntryError(
            f"content must be a string or null, not {type_name(content)}"
        )
    token_count = raw.get("token_count")
    if token_count is not None and (
        isinstance(token_count, bool) or not isinstance(token_count, int) or token_count < 0
    ):
        raise InvalidEntryError(
            f"token_count {token_count!r} is not a whole number of tokens"
        )
    state = raw.get("state") or MessageState.ACTIVE.value
    if state not in STATES:
        raise InvalidEntryError(f"state {state!r} is not one of {', '.join(STATES)}")
    metadata = dict(_optional_dict(raw, "metadata", ""))
    important = metadata.pop("important", False)
    if not isinstance(important, bool):
        raise InvalidEntryError("metadata.important must be true or false")
    unknown = [key for key in raw if key not in _ENTRY_KEYS]
    for key in unknown:
        metadata.setdefault(key, raw[key])
    if unknown:
        metadata[ENTRY_KEYS] = unknown
    timestamp = raw.get("timestamp")
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
        metadata[SOURCE_TIME] = timestamp
    return Message(
        role=str(role),
        content=content or "",
        position=index,
        name=_optional_str(raw, "name", ""),
        tool_calls=_optional_list_of_dicts(raw, "tool_calls", ""),
        tool_call_id=_optional_str(raw, "tool_call_id", ""),
        parts=_optional_list_of_dicts(raw, "parts", ""),
        created_at=_time(raw, "timestamp", ""),
        token_count=token_count,
        token_encoding=_optional_str(raw, "token_encoding", ""),
        state=str(state),
        important=important,
        metadata=metadata,
    )


def _parse_tasks(value: Any) -> list[Task]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidEntryError(f"active_tasks must be a list, not {type_name(value)}")
    tasks = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            # Simple agents keep tasks as bare strings; the text is the task.
            tasks.append(Task(id=item, description=item))
            continue
        try:
            tasks.append(Task.from_json(item))
        except (ValueError, TypeError, OverflowError) as exc:
            raise InvalidEntryError(f"active_tasks[{i}]: {exc}") from exc
    return tasks


def _parse_context(raw: dict[str, Any]) -> SessionContext:
    facts = raw.get("facts")
    if facts is None:
        facts = []
    if not isinstance(facts, list):
        raise InvalidEntryError(f"facts must be a list of strings, not {type_name(facts)}")
    for i, fact in enumerate(facts):
        if not isinstance(fact, str):
            raise InvalidEntryError(f"facts[{i}] must be a string, not {type_name(fact)}")
    summary = _optional_str(raw, "long_term_summary", "") or ""
    stats_raw = _optional_dict(raw, "tool_stats", "")
    usage_raw = _optional_dict(raw, "token_usage", "")
    try:
        tool_stats = ToolStats.from_json(stats_raw)
    except (ValueError, TypeError, OverflowError) as exc:  # 1e400 is infinity
        raise InvalidEntryError(f"tool_stats: {exc}") from exc
    try:
        token_usage = TokenUsage.from_json(usage_raw)
    except (ValueError, TypeError, OverflowError) as exc:  # 1e400 is infinity
        raise InvalidEntryError(f"token_usage: {exc}") from exc
    return SessionContext(
        facts=list(facts),
        summary=summary,
        tasks=_parse_tasks(raw.get("active_tasks")),
        tool_stats=tool_stats,
        token_usage=token_usage,
        system_state=_optional_dict(raw, "system_state", ""),
        environment=_optional_dict(raw, "last_known_environment", ""),
    )


def derive_title(session_id: str | None, messages: Sequence[Message]) -> str:
    """The title a session without a ``title`` key gets: its first user message, shortened."""
    for message in messages:
        if message.role == Role.USER.value and message.content.strip():
            return shorten(message.content)
    if session_id:
        return f"Session {session_id}"
    return "Untitled session"


def _derived_times(messages: Sequence[Message]) -> tuple[datetime | None, datetime | None]:
    times = [m.created_at for m in messages if m.created_at is not None]
    return (times[0], times[-1]) if times else (None, None)


def parse_session(raw: Any, fallback_id: str, where: str = "") -> list[ImportItem]:
    """One session object as a conversation, preceded by its skipped entries if any.

    A ``recent_history`` entry that cannot be read costs only itself: it is reported as
    skipped at ``where`` (``"item 2"``, ``"file a.json"``) and the session keeps the
    others. Raises :class:`InvalidEntryError` when the session itself cannot be read.
    ``fallback_id`` becomes the ``source_id`` when the object has no ``session_id``.
    """
    if not isinstance(raw, dict):
        raise InvalidEntryError(f"a session must be a JSON object, not {type_name(raw)}")
    if "session_id" not in raw and "recent_history" not in raw:
        raise InvalidEntryError("the object has neither 'session_id' nor 'recent_history'")
    session_id = raw.get("session_id")
    if session_id is not None and (
        isinstance(session_id, bool) or not isinstance(session_id, str | int)
    ):
        raise InvalidEntryError(f"session_id must be a string, not {type_name(session_id)}")
    history = raw.get("recent_history")
    if history is None:
        history = []
    if not isinstance(history, list):
        raise InvalidEntryError(f"recent_history must be a list, not {type_name(history)}")
    context = _parse_context(raw)
    sid = None if session_id is None else str(session_id)
    title = raw.get("title")
    if "title" in raw and not isinstance(title, str):
        raise InvalidEntryError(f"title must be a string, not {type_name(title)}")
    messages: list[Message] = []
    bad: list[tuple[int, InvalidEntryError]] = []
    for i, entry in enumerate(history):
        try:
            messages.append(parse_history_entry(entry, i))
        except InvalidEntryError as exc:
            bad.append((i, exc))
    number_positions(messages)
    if not isinstance(title, str):
        title = derive_title(sid, messages)
    tags = raw.get("tags")
    if tags is None:
        tags = []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidEntryError("tags must be a list of strings")
    first, last = _derived_times(messages)
    created_at = _time(raw, "created_at", "") if "created_at" in raw else first
    updated_at = _time(raw, "updated_at", "") if "updated_at" in raw else last
    metadata = {k: v for k, v in raw.items() if k not in _SESSION_KEYS}
    forked_from = read_forked_from(metadata)
    source, source_id = read_imported_from(metadata) or (
        NAME, sid if sid is not None else fingerprint(messages))
    label = f"session {sid}" if sid is not None else f"session {title!r}"
    results: list[ImportItem] = [
        skipped_message(f"{where} recent_history[{i}]".strip(), label, f"message {i}", exc)
        for i, exc in bad
    ]
    results.append(Conversation(
        title=title,
        messages=messages,
        context=context,
        source=source,
        source_id=source_id,
        created_at=created_at,
        updated_at=updated_at,
        tags=list(tags),
        metadata=metadata,
        forked_from=forked_from,
    ))
    return results


# --------------------------------------------------------------------------- exporting


def _timestamp(message: Message, raw: Any) -> Any:
    """The entry's time as the file wrote it (an epoch number) while it still holds."""
    if raw is not None and not isinstance(raw, bool) and isinstance(raw, int | float):
        try:
            if parse_time(raw) == message.created_at:
                return raw
        except (ValueError, OverflowError, OSError):
            pass
    return format_time(message.created_at)


def history_entry_json(message: Message) -> dict[str, Any]:
    """A message as a ``recent_history`` entry: the four plain keys plus what is set,
    and the keys the entry had beside them when it was read from a context file."""
    metadata = message.public_metadata()
    raw_time = metadata.pop(SOURCE_TIME, None)
    own_keys = metadata.pop(ENTRY_KEYS, None)
    entry: dict[str, Any] = {
        "timestamp": _timestamp(message, raw_time),
        "role": message.role,
        "content": message.content,
        "token_count": message.token_count,
    }
    optional: dict[str, Any] = {
        "name": message.name,
        "tool_calls": message.tool_calls,
        "tool_call_id": message.tool_call_id,
        "parts": message.parts,
        "token_encoding": message.token_encoding,
    }
    entry.update({k: v for k, v in optional.items() if v is not None})
    if message.state != MessageState.ACTIVE.value:
        entry["state"] = message.state
    if isinstance(own_keys, list):
        for key in own_keys:
            if isinstance(key, str) and key in metadata and key not in entry:
                entry[key] = metadata.pop(key)
    if metadata:
        entry["metadata"] = metadata
    return entry


def session_json(session: ExportSession) -> dict[str, Any]:
    """One exported session as a context-file object."""
    info = session.info
    # A session that came from a context file keeps its original id, so the exported
    # file matches the imported one, and so does a session made in the workbench (its
    # own id, see core.identity). Any other session gets an id made of its creation
    # time and workbench id: stable across exports, and unlike the bare id it does not
    # collide with sessions exported from another database.
    if info.source in (NAME, OWN_SOURCE) and info.source_id:
        session_id = info.source_id
    else:
        session_id = own_source_id(info.id, info.created_at)
    ctx = session.context
    obj: dict[str, Any] = {
        "session_id": session_id,
        "system_state": ctx.system_state,
        "facts": list(ctx.facts),
        "recent_history": [history_entry_json(m) for m in session.messages],
        "long_term_summary": ctx.summary,
        "active_tasks": [t.to_json() for t in ctx.tasks],
        "tool_stats": ctx.tool_stats.to_json(),
        "last_known_environment": ctx.environment,
        "token_usage": ctx.token_usage.to_json(),
    }
    if info.title != derive_title(session_id, session.messages):
        obj["title"] = info.title
    if info.tags:
        obj["tags"] = list(info.tags)
    first, last = _derived_times(session.messages)
    # A session whose source gave no time holds the import's time: not written as its own.
    if session.metadata.get("time_missing") is not True:
        if info.created_at != first:
            obj["created_at"] = format_time(info.created_at)
        if info.updated_at != last:
            obj["updated_at"] = format_time(info.updated_at)
    origin = imported_from(info.source, info.source_id, NAME)
    if origin is not None:
        obj[IMPORTED_FROM] = origin
    fork = forked_from_json(session.forked_from)
    if fork is not None:
        obj[FORKED_FROM] = fork
    # What the source said about the session: a context file's own extra keys, or
    # another format's conversation data, beside the context keys (read back the same).
    for key, value in session.metadata.items():
        if key not in obj and key not in _SESSION_KEYS:
            obj[key] = value
    return obj


# --------------------------------------------------------------------------- the format


class ContextFileImporter:
    """Reads context files: one session object, an array of them, or a directory."""

    name = NAME
    description = "context-file JSON (session_id, recent_history, facts, …), file or directory"

    def sniff(self, path: Path, head: bytes) -> bool:
        """A JSON object (or array of objects) with context keys, or a directory of them."""
        if path.is_dir():
            # Only a folder of context files: one holding another format's file too (a
            # ChatGPT conversations.json, a JSONL) is read file by file, each in its own
            # format, instead of every *.json as a context file and the rest not at all.
            if any(p.suffix.lower() in _OTHER_SUFFIXES and not p.name.startswith(".")
                   and p.is_file() for p in path.iterdir()):
                return False
            found = False
            for candidate in _json_files(path)[:_DIRECTORY_SNIFF_LIMIT]:
                try:
                    value = peek_json(read_head(candidate))
                except FormatError:
                    continue  # unreadable: reported by the read as a skipped file
                if not looks_like_context(value):
                    return False
                found = True
            return found
        return looks_like_context(peek_json(head))

    def read(self, path: Path) -> Iterator[ImportItem]:
        """Sessions of a file or of every ``*.json`` file of a directory, in name order."""
        path = Path(path)
        if path.is_dir():
            return self._read_directory(_json_files(path))
        return primed(_read_file(path, prefix="", whole=f"file {path.name}", alone=True))

    def _read_directory(self, files: list[Path]) -> Iterator[ImportItem]:
        for file in files:
            where = f"file {file.name}"
            try:
                yield from _read_file(file, prefix=f"{where} ", whole=where, alone=False)
            except FormatError as exc:
                yield SkippedEntry(entry=where, reason=str(exc))


def _read_file(path: Path, prefix: str, whole: str, alone: bool) -> Iterator[ImportItem]:
    """The sessions of one file, read in chunks. ``alone``: the file is all there is to
    read, so a file that cannot be read at all raises instead of being reported."""
    with open_file(path) as handle:
        stream = JsonStream(handle, str(path), path)
        char = stream.first_char()
        if char == "[":
            yield from guarded(
                _sessions(path, stream.elements(prefix), prefix, whole),
                prefix,
                fatal_at_start=alone,
            )
            return
        data = stream.document(whole)
        if isinstance(data, SkippedEntry):
            yield data
            return
        if not isinstance(data, dict):
            raise FormatError(
                f"{path} holds {type_name(data)}, not a context session object or a list "
                "of them.",
                path=str(path),
            )
        yield from _sessions(path, data, prefix, whole)


def _sessions(
    path: Path, data: dict[str, Any] | Iterable[Any], prefix: str, whole: str
) -> Iterator[ImportItem]:
    if isinstance(data, dict):
        try:
            yield from parse_session(data, fallback_id=path.stem, where=whole)
        except InvalidEntryError as exc:
            yield SkippedEntry(entry=whole, reason=_sentence(exc))
        except Exception as exc:  # an unforeseen fault of the session costs it only
            yield unforeseen(whole, exc)
        return
    for i, item in enumerate(data):
        if isinstance(item, SkippedEntry):  # unreadable: reported in its place
            yield item
            continue
        where = f"{prefix}item {i}"
        try:
            session = parse_session(item, fallback_id=f"{path.name}#{i}", where=where)
        except InvalidEntryError as exc:
            yield SkippedEntry(entry=where, reason=_sentence(exc))
            continue
        except Exception as exc:  # one session's unforeseen fault costs that session only
            yield unforeseen(where, exc)
            continue
        yield from session


def _sentence(exc: Exception) -> str:
    text = str(exc)
    return text if text.endswith(".") else text + "."


class ContextFileExporter:
    """Writes sessions as context-file JSON: one object, or an array for several."""

    name = NAME
    suffix = ".json"

    def cannot_hold(self, sessions: Sequence[ExportSession]) -> list[str]:
        """What this format leaves out of ``sessions``: the pin and archive marks."""
        return pin_marks_note(sessions)

    def render(self, sessions: Sequence[ExportSession]) -> str:
        """``sessions`` as the text :meth:`write` puts in the file."""
        objects = [session_json(s) for s in sessions]
        payload: Any = objects[0] if len(objects) == 1 else objects
        return dump_json(payload) + "\n"

    def write(self, sessions: Sequence[ExportSession], path: Path) -> None:
        """Write ``sessions`` to ``path`` atomically."""
        write_atomic(Path(path), self.render(sessions))
