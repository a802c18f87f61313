"""Live changes between desktops on the team store (PostgreSQL ``LISTEN``/``NOTIFY``).

Each write transaction ends with :func:`notify`, which names the sessions it changed and
the process that wrote (its *origin*); PostgreSQL delivers the notification to every
listener when, and only if, the transaction commits. Each window runs a
:class:`ChangeListener`: a thread with a connection of its own that listens, so the UI
thread never waits on the network. It counts the changes other processes made
(:attr:`ChangeListener.version`, what SQLite's ``data_version`` is to a file) and keeps
the sessions they named until :meth:`ChangeListener.take` hands them over. When the
connection drops, the listener connects again and reports *everything* changed: what was
committed meanwhile was not heard, so the window catches up from the database
(``updated_at``) instead of trusting a list.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

CHANNEL = "workbench_changes"
# PostgreSQL refuses a payload of 8,000 bytes or more; a longer list says "everything".
MAX_PAYLOAD = 7_900


def new_origin() -> str:
    """A token naming this process's writes (random: process ids repeat across hosts)."""
    return uuid.uuid4().hex


def change_payload(origin: str, session_ids: Iterable[int]) -> str:
    """The notification text: the origin and the sessions (or ``all`` when too many)."""
    payload = json.dumps({"origin": origin, "sessions": sorted(set(session_ids))},
                         separators=(",", ":"))
    if len(payload.encode("utf-8")) > MAX_PAYLOAD:
        payload = json.dumps({"origin": origin, "all": True}, separators=(",", ":"))
    return payload


def notify(conn: Connection, origin: str, session_ids: Iterable[int]) -> None:
    """Queue the change notification in ``conn``'s transaction (sent when it commits)."""
    conn.execute(text("SELECT pg_notify(:channel, :payload)"),
                 {"channel": CHANNEL, "payload": change_payload(origin, session_ids)})


@dataclass(frozen=True)
class Changes:
    """What other processes changed since the last :meth:`ChangeListener.take`."""

    sessions: frozenset[int]
    everything: bool  # a notification said "all", or the connection was lost meanwhile

    @property
    def any(self) -> bool:
        return self.everything or bool(self.sessions)


class ChangeListener:
    """Listens for other processes' changes on its own connection and thread.

    ``conninfo`` is a libpq connection string or URL (``postgresql://user@host/db``).
    """

    def __init__(self, conninfo: str, origin: str, *, retry_seconds: float = 0.5,
                 on_lost: Callable[[], object] | None = None) -> None:
        self.conninfo = conninfo
        self.origin = origin
        self.retry_seconds = retry_seconds
        # Called (on the listener's thread) when its connection drops: the server
        # restarted or the network cut, so the owner's other connections are likely
        # gone too.
        self.on_lost = on_lost
        self._lock = threading.Condition()
        self._version = 0
        self._sessions: set[int] = set()
        self._everything = False
        self._connections = 0  # times a connection was made (>1: there were reconnects)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.application_name = f"workbench-listener-{origin[:12]}"
        self.last_error: str | None = None

    # -- the owner's side ------------------------------------------------------------------

    def start(self) -> ChangeListener:
        self._thread = threading.Thread(target=self._run, name="workbench-pg-listen",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join()

    @property
    def version(self) -> int:
        """How many times others' changes (or a lost connection) were noticed."""
        with self._lock:
            return self._version

    @property
    def connections(self) -> int:
        with self._lock:
            return self._connections

    def take(self) -> Changes:
        """The changes noticed since the last call (and forget them)."""
        with self._lock:
            changes = Changes(frozenset(self._sessions), self._everything)
            self._sessions.clear()
            self._everything = False
            return changes

    def wait_for(self, predicate: Callable[[ChangeListener], bool], timeout: float) -> bool:
        """Wait until ``predicate(self)`` holds (for tests and shutdown); False on timeout."""
        with self._lock:
            return bool(self._lock.wait_for(lambda: predicate(self), timeout))

    # -- the thread ------------------------------------------------------------------------

    def _noticed(self, sessions: Iterable[int] = (), *, everything: bool = False) -> None:
        with self._lock:
            self._sessions.update(sessions)
            self._everything = self._everything or everything
            self._version += 1
            self._lock.notify_all()

    def _handle(self, payload: str) -> None:
        try:
            data = json.loads(payload)
        except ValueError:
            self._noticed(everything=True)  # not ours to read: refresh rather than miss
            return
        if not isinstance(data, dict):
            self._noticed(everything=True)
            return
        if data.get("origin") == self.origin:
            return  # this process's own write: it already shows it
        sessions = data.get("sessions")
        if data.get("all") or not isinstance(sessions, list):
            self._noticed(everything=True)
        else:
            self._noticed(int(s) for s in sessions if isinstance(s, int))

    def _run(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True,
                                     application_name=self.application_name) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    with self._lock:
                        self._connections += 1
                        reconnected = self._connections > 1
                        self.last_error = None
                        self._lock.notify_all()
                    if reconnected:  # what was committed while away was not heard
                        self._noticed(everything=True)
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.25):
                            self._handle(note.payload)
            except psycopg.Error as exc:
                with self._lock:
                    self.last_error = str(exc).strip() or type(exc).__name__
                    was_connected = self._connections > 0
                    self._lock.notify_all()
                if was_connected and self.on_lost is not None and not self._stop.is_set():
                    self.on_lost()
                self._stop.wait(self.retry_seconds)
