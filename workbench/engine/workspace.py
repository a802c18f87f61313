"""The workspace: one open database with the use cases the CLI and the GUI share.

``Workspace.open(path)`` opens (and migrates) the SQLite file. The GUI and the CLI read
and edit through the typed methods here (sessions, messages, context, agents, the editing
and trash helpers), never through ``ws.repo``, which is the engine's own way to the store.
Use cases that join layers live here or in the modules this one calls: importing files
(formats → token counts → store), exporting, searching, and the first-run sample session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.core.conversation import (
    Agent,
    Conversation,
    ForkOrigin,
    Message,
    SearchHit,
    SessionContext,
    SessionInfo,
)
from workbench.core.identity import OWN_SOURCE, own_source_id
from workbench.engine.editing import Editing, SessionTrash
from workbench.engine.import_report import ImportReport, ProgressCallback
from workbench.engine.importing import count_missing_tokens, import_conversations
from workbench.engine.line_upkeep import LineUpkeep
from workbench.engine.resources import sample_session_path
from workbench.errors import (
    FormatError,
    NotFoundError,
    RequestError,
    UnknownFormatError,
    WorkbenchError,
)
from workbench.store.db import Database, OpenProgress
from workbench.store.opening import open_database
from workbench.store.repository import Repository
from workbench.store.searching import KINDS as SEARCH_KINDS
from workbench.store.searching import SearchQuery, search

if TYPE_CHECKING:
    from workbench.engine.providers import ProviderSettings
    from workbench.formats import Exporter, ExportSession

SAMPLE_SETTING = "sample_session_offered"

__all__ = ["SEARCH_KINDS", "ImportReport", "OpenProgress", "SearchQuery", "Workspace"]


def import_format_names() -> list[str]:
    """Names of the formats ``import --format`` accepts."""
    from workbench.formats import importers

    return [i.name for i in importers()]


def import_format_descriptions() -> list[tuple[str, str]]:
    """Each format ``import`` reads: its name and what it is, in the order detection
    tries them."""
    from workbench.formats import importers

    return [(i.name, i.description) for i in importers()]


def export_format_names() -> list[str]:
    """Names of the formats ``export --format`` accepts."""
    from workbench.formats import exporters

    return [e.name for e in exporters()]


def exported_identity(info: SessionInfo) -> SessionInfo:
    """``info`` with the source and source id an export names the session by: those it
    was imported with, or for a session made here (no source id) the workbench's own
    (:data:`~workbench.core.identity.OWN_SOURCE`, :func:`~workbench.core.identity.own_source_id`),
    so that its export read back into this database is recognised as the session itself
    (and into another, makes a session that keeps that identity)."""
    if info.source and info.source_id:
        return info
    return dataclasses.replace(
        info, source=OWN_SOURCE, source_id=own_source_id(info.id, info.created_at)
    )


def source_identity(path: Path) -> str:
    """How an import names the file it read: its absolute path (symbolic links
    resolved), so the same file given another way is still the same source."""
    try:
        return str(path.resolve())
    except OSError:
        return str(path.absolute())


@contextlib.contextmanager
def _readable_twice(path: Path) -> Iterator[Path]:
    """``path``, or, when it is a pipe or a device (``/dev/stdin``, ``<(curl …)``), a
    temporary copy of what it gives: detection reads the start of a file and the
    importer reads it again, which a pipe cannot give twice."""
    try:
        kind = path.stat().st_mode
    except OSError:
        kind = 0
    if not kind or stat.S_ISREG(kind) or stat.S_ISDIR(kind):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="workbench-import-") as folder:
        copy = Path(folder) / (path.name or "input")
        try:
            with open(path, "rb") as source, open(copy, "wb") as target:
                shutil.copyfileobj(source, target)
        except OSError as exc:
            raise RequestError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
        if copy.stat().st_size == 0:
            raise UnknownFormatError(f"{path} gave nothing: there is nothing to import.",
                                     path=str(path))
        try:
            yield copy
        except FormatError as exc:  # said of the copy: said again of what was given
            if str(copy) not in str(exc):
                raise
            raise type(exc)(str(exc).replace(str(copy), str(path)), path=str(path),
                            entry=exc.entry) from exc


class Workspace:
    """An open workbench database and the use cases over it."""

    def __init__(self, db: Database):
        self.db = db
        self.repo = Repository(db)
        self._line_upkeep: LineUpkeep | None = None

    @classmethod
    def open(cls, db_path: Path | str | None = None, *,
             progress: OpenProgress | None = None) -> Workspace:
        """Open the database at ``db_path`` (default: ``WORKBENCH_DB``, ``WORKBENCH_HOME``
        or the platform's user data folder), creating and migrating it as needed;
        ``progress`` hears of a backup and of each schema change (see ``OpenProgress``)."""
        return cls(open_database(db_path, progress=progress))

    @property
    def db_path(self) -> Path:
        """The database file (only meaningful when :attr:`is_file`)."""
        return self.db.path

    @property
    def location(self) -> str:
        """What the window and sentences call the database: the file's path, or the
        team store's URL without its password."""
        return self.db.location

    @property
    def is_file(self) -> bool:
        """Whether the database is a SQLite file (not a team store on a server)."""
        return self.db.is_file

    def close(self) -> None:
        """Stop the background work on the database (see :meth:`keep_summary_lines`),
        then close it."""
        if self._line_upkeep is not None:
            self._line_upkeep.stop()
        self.db.close()

    # -- background upkeep -------------------------------------------------------------

    def keep_summary_lines(self, *, on_session: Callable[[int, int], object] | None = None,
                           ) -> LineUpkeep:
        """Keep, on a background thread, the summary lines a database written before
        they were kept lacks (see :mod:`workbench.engine.line_upkeep`), so that compaction
        previews read them; started once per workspace (later calls return the same
        upkeep), stopped by :meth:`close`. Nothing runs when the database says every line
        is kept. ``on_session`` hears ``(session id, lines written)`` on that thread
        each time a session is done."""
        if self._line_upkeep is None:
            self._line_upkeep = LineUpkeep(self.db, on_session=on_session)
            self._line_upkeep.start()
        return self._line_upkeep

    def prefer_summary_lines(self, session_id: int) -> None:
        """Have the background upkeep keep ``session_id``'s lines next (the session a
        window shows, which may be previewed soon); nothing when none runs."""
        upkeep = self._line_upkeep
        if upkeep is not None and upkeep.running:
            upkeep.prefer(session_id)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions ----------------------------------------------------------------------

    def list_sessions(
        self,
        include_archived: bool = False,
        filter_text: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[SessionInfo]:
        """Sessions, pinned first, then most recently updated."""
        return self.repo.list_sessions(
            include_archived=include_archived, filter_text=filter_text, limit=limit, offset=offset
        )

    def count_sessions(self, include_archived: bool = False, filter_text: str | None = None) -> int:
        return self.repo.count_sessions(include_archived=include_archived, filter_text=filter_text)

    def session_view(self, ref: str | int) -> tuple[SessionInfo, list[Message], SessionContext]:
        """A session found by id, source id or title, with all its messages and context."""
        info = self.repo.find_session(ref)
        return info, self.repo.list_messages(info.id), self.repo.get_context(info.id)

    def session_metadata(self, session_id: int) -> dict[str, Any]:
        """What the source of an imported session said about it as a whole (a model, a
        score, a project, the conversation it is a branch of...); empty when nothing."""
        return self.repo.session_metadata(session_id)

    def get_session(self, session_id: int) -> SessionInfo:
        """The session with this id, or :class:`~workbench.errors.NotFoundError`."""
        return self.repo.get_session(session_id)

    def find_session(self, ref: str | int) -> SessionInfo:
        """A session by id, by source id, or by exact title (the newest of equals);
        :class:`~workbench.errors.NotFoundError` when none matches."""
        return self.repo.find_session(ref)

    def find_one_session(self, ref: str | int) -> SessionInfo:
        """As :meth:`find_session`, but a name (source id or title) that several sessions
        share is refused with their ids rather than taken as the newest: for changes
        that cannot be taken back."""
        info = self.find_session(ref)
        if str(ref).strip() != str(info.id):
            named = self.repo.sessions_named(str(ref))
            if len(named) > 1:
                shown = ", ".join(str(i) for i in named[:10]) + (", …" if len(named) > 10 else "")
                raise RequestError(
                    f"{str(ref).strip()!r} names {len(named)} sessions ({shown}); give the id "
                    "of the one you mean."
                )
        return info

    def create_session(self, title: str) -> SessionInfo:
        """Create an empty session with this title, for the default agent."""
        return self.repo.create_session(title)

    def delete_session(self, session_id: int) -> None:
        """Delete a session for good, with its messages, context, compactions and memory
        entries (the GUI's undoable delete goes through :meth:`session_trash`)."""
        self.repo.delete_session(session_id)

    def get_context(self, session_id: int) -> SessionContext:
        """The session's context: facts, summary, tasks (empty if never written)."""
        return self.repo.get_context(session_id)

    def stats(self) -> dict[str, Any]:
        """Counts over the whole database: sessions, messages by role and state, tokens;
        ``database`` is where it is (:attr:`location`: a file's path, or a server's URL
        without its password)."""
        return {**self.repo.stats(), "database": self.location}

    def editing(self) -> Editing:
        """The message and session edits (with token recounts and short ids) over this
        database."""
        return Editing(self.repo)

    def session_trash(self) -> SessionTrash:
        """A trash for sessions deleted while the delete can still be taken back."""
        return SessionTrash(self.repo)

    # -- messages ----------------------------------------------------------------------

    def get_message(self, message_id: int) -> Message:
        """The message with this id, or :class:`~workbench.errors.NotFoundError`."""
        return self.repo.get_message(message_id)

    def message_index(self, session_id: int) -> list[tuple[int, int, str, str]]:
        """``(id, position, role, state)`` of every message of a session, in order."""
        return self.repo.message_index(session_id)

    def page_messages(
        self,
        session_id: int,
        *,
        after_position: int = -1,
        limit: int = 200,
        states: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
    ) -> list[Message]:
        """Up to ``limit`` messages after ``after_position``, in order (keyset paging),
        optionally only those in ``states`` or of ``roles``."""
        return self.repo.page_messages(
            session_id, after_position=after_position, limit=limit, states=states, roles=roles
        )

    def page_before(
        self, session_id: int, *, before_position: int, limit: int = 200
    ) -> list[Message]:
        """Up to ``limit`` messages just before ``before_position``, in order."""
        return self.repo.page_before(session_id, before_position=before_position, limit=limit)

    # -- agents ------------------------------------------------------------------------

    def list_agents(self) -> list[Agent]:
        """Every agent, by name."""
        return self.repo.list_agents()

    def default_agent(self) -> Agent:
        """The default agent, created on first use (a write)."""
        return self.repo.default_agent()

    def create_agent(
        self,
        name: str,
        *,
        instructions: str = "",
        provider: str | None = None,
        model: str | None = None,
        memory_policy: dict[str, Any] | None = None,
        tools: Sequence[str] = (),
    ) -> Agent:
        """Create an agent; a name already taken raises
        :class:`~workbench.errors.StorageError`."""
        return self.repo.create_agent(
            name,
            instructions=instructions,
            provider=provider,
            model=model,
            memory_policy=memory_policy,
            tools=tools,
        )

    def update_agent(self, agent_id: int, **fields: Any) -> Agent:
        """Change ``name``, ``instructions``, ``provider``, ``model``, ``memory_policy``
        or ``tools`` of an agent; returns it as stored."""
        return self.repo.update_agent(agent_id, **fields)

    def delete_agent(self, agent_id: int) -> int:
        """Delete an agent and its long-term memory entries in one transaction; returns
        how many memory entries went with it."""
        return self.repo.delete_agent(agent_id)

    # -- providers ---------------------------------------------------------------------

    def provider_settings(self) -> ProviderSettings:
        """The provider configs stored in this database, and the clients built from them
        (keys stay in the keychain or the environment)."""
        # Imported here: the providers bring httpx, which opening a workspace need not load.
        from workbench.engine.providers import ProviderSettings

        return ProviderSettings(self.db)

    # -- import / export ---------------------------------------------------------------

    def import_path(
        self,
        path: Path | str,
        *,
        format: str | None = None,
        replace: bool = False,
        progress: ProgressCallback | None = None,
        count_tokens: bool = True,
    ) -> ImportReport:
        """Import every conversation of a file or folder, each in its own transaction.

        Bad entries are reported in ``skipped`` and the rest still imported. A progress
        callback that returns False stops after the conversation in hand: only whole
        conversations are ever stored. With ``count_tokens=False`` messages are stored
        without token counts, for :meth:`count_missing_tokens` to fill afterwards (see
        :mod:`workbench.engine.importing`).
        """
        from workbench.formats import read_conversations

        path = Path(path)
        with _readable_twice(path) as readable:
            items = read_conversations(readable, format)
            return import_conversations(
                self.repo,
                items,
                replace=replace,
                progress=progress,
                count_tokens=count_tokens,
                source_file=source_identity(path) if readable == path else str(path),
            )

    def count_missing_tokens(self) -> Iterator[tuple[int, int]]:
        """Fill the token counts an import left out; yields ``(counted, total)`` after each
        short transaction. Stopping early is safe: the next pass does the rest."""
        return count_missing_tokens(self.repo)

    def import_conversation(self, conversation: Conversation) -> SessionInfo:
        """Store one already-parsed conversation (token counts filled in first)."""
        report = import_conversations(self.repo, [conversation], replace=False)
        if report.skipped:
            raise WorkbenchError(report.skipped[0].reason)
        return report.sessions[0][0]

    def export_sessions(
        self,
        refs: Sequence[str | int],
        format: str,
        path: Path | str,
        *,
        progress: ProgressCallback | None = None,
        notes: list[str] | None = None,
    ) -> list[SessionInfo]:
        """Write the sessions to ``path`` in the named export format (atomically).

        ``notes``, when given, receives a sentence for each kind of data the format
        could not hold (the session context in openai-jsonl, say).

        ``progress`` is called with ``(sessions read, sessions in all)`` after each
        session is read; returning False stops the export before anything is written
        (the file, new or existing, is left as it was) and an empty list is returned.
        """
        self._refuse_own_files(Path(path))
        read = self._export_bundles(refs, format, progress, notes)
        if read is None:
            return []
        exporter, bundles, infos = read
        exporter.write(bundles, Path(path))
        return infos

    def _refuse_own_files(self, target: Path) -> None:
        """Refuse to write over this database's own file or its journal companions."""
        if not self.is_file:
            return
        own = self.db_path
        target = Path(os.path.realpath(target))
        for companion in ("", "-wal", "-shm", "-journal"):
            mine = Path(os.path.realpath(f"{own}{companion}"))
            same = target == mine
            if not same and target.exists() and mine.exists():
                with contextlib.suppress(OSError):
                    same = os.path.samefile(target, mine)
            if same:
                what = "the database itself" if not companion else "a file of the database"
                whose = "" if target == own else f" ({own})"
                raise RequestError(
                    f"{target} is {what}{whose}; an export there would destroy it. "
                    "Choose another file."
                )

    def export_text(
        self, refs: Sequence[str | int], format: str, *, notes: list[str] | None = None
    ) -> str:
        """The text :meth:`export_sessions` would write to a file (for standard output,
        a pipe); ``notes`` as there."""
        read = self._export_bundles(refs, format, None, notes)
        assert read is not None  # no progress callback, so never stopped
        exporter, bundles, _ = read
        return exporter.render(bundles)

    def _export_bundles(
        self,
        refs: Sequence[str | int],
        format: str,
        progress: ProgressCallback | None,
        notes: list[str] | None,
    ) -> tuple[Exporter, list[ExportSession], list[SessionInfo]] | None:
        """The exporter of ``format``, the sessions ``refs`` names read whole (each with
        the identity and fork origin the export names it by, see :func:`exported_identity`)
        and their infos as stored; None when ``progress`` stopped the reading."""
        from workbench.formats import ExportSession, get_exporter

        exporter = get_exporter(format)
        bundles = []
        infos = []
        for done, ref in enumerate(refs, start=1):
            info, messages, context = self.session_view(ref)
            infos.append(info)
            bundles.append(
                ExportSession(
                    info=exported_identity(info),
                    messages=messages,
                    context=context,
                    metadata=self.repo.session_metadata(info.id),
                    forked_from=self._fork_origin(info),
                )
            )
            if progress is not None and progress(done, len(refs)) is False:
                return None
        cannot_hold = getattr(exporter, "cannot_hold", None)
        if notes is not None and cannot_hold is not None:
            notes.extend(cannot_hold(bundles))
        return exporter, bundles, infos

    def _fork_origin(self, info: SessionInfo) -> ForkOrigin | None:
        """The session ``info`` was forked from, as an export names it (None: not a fork,
        or its parent is gone)."""
        if info.forked_from_session_id is None:
            return None
        try:
            parent = exported_identity(self.repo.get_session(info.forked_from_session_id))
        except NotFoundError:
            return None
        position: int | None = None
        if info.forked_from_message_id is not None:
            with contextlib.suppress(NotFoundError):
                message = self.repo.get_message(info.forked_from_message_id)
                position = message.position
        assert parent.source is not None and parent.source_id is not None
        return ForkOrigin(parent.source, parent.source_id, position)

    # -- search ------------------------------------------------------------------------

    def search(self, query: str | SearchQuery, **filters: Any) -> list[SearchHit]:
        """Full-text search (SPEC §5); see :class:`SearchQuery` for the filters."""
        q = query if isinstance(query, SearchQuery) else SearchQuery(text=query, **filters)
        return search(self.db, q)

    # -- first run ---------------------------------------------------------------------

    def first_run_offer_due(self) -> bool:
        """Whether this database has not yet made its first-run offer of local servers."""
        # Imported here: discovery brings httpx, which opening a workspace need not load.
        from workbench.engine.discovery import offer_due

        return offer_due(self.repo)

    def mark_first_run_offered(self) -> None:
        """Record that the first-run offer of local servers was made (once per database)."""
        from workbench.engine.discovery import mark_offered

        mark_offered(self.repo)

    def ensure_sample_session(self) -> SessionInfo | None:
        """On an empty database, import the sample session once; returns it if added."""
        if self.repo.get_setting(SAMPLE_SETTING, False):
            return None
        if self.repo.count_sessions(include_archived=True) > 0:
            self.repo.set_setting(SAMPLE_SETTING, True)
            return None
        report = self.import_path(sample_session_path(), format="context-json")
        self.repo.set_setting(SAMPLE_SETTING, True)
        return report.sessions[0][0] if report.sessions else None
