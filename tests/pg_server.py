"""A throwaway PostgreSQL server for the team-store tests, started by the test session.

The server comes from the machine's PostgreSQL packages (``make test`` installs them as
root through ``scripts/ensure-system-libs.sh test``). ``initdb`` refuses to run as root, so
as root the cluster is created and run as ``nobody`` (``setpriv``); otherwise as the user
running the tests. The cluster lives in a temporary folder, listens on a free port of
127.0.0.1 and on a socket in that folder, trusts local connections (it only exists for the
run) and is tuned for tests (no fsync: :data:`TEST_SETTINGS`; the benchmarks pass settings
of their own). :meth:`PostgresServer.stop` removes everything.

It needs nothing but the standard library, so ``bench/`` imports it by path too.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

USER = "workbench"
# Server settings of the test run: nothing is kept after it, so nothing is flushed to disk.
TEST_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}


class ServerUnavailable(RuntimeError):
    """PostgreSQL could not be started here (not installed, or it failed to start)."""


def _bin_dir() -> Path:
    """The newest installed PostgreSQL's programs (Debian keeps them out of PATH)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise ServerUnavailable(
        "PostgreSQL is not installed (no initdb); `make test` installs it as root, or: "
        "apt-get install postgresql"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster of the test run (``settings``: the server's settings,
    :data:`TEST_SETTINGS` by default)."""

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.settings = dict(TEST_SETTINGS if settings is None else settings)
        self.root = Path(tempfile.mkdtemp(prefix="workbench-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self._bin = _bin_dir()
        self._as_nobody = os.geteuid() == 0
        self._started = False

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self._bin / args[0]), *args[1:]]
        if self._as_nobody:
            command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                       *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                              check=False, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            log = self.log.read_text("utf-8", "replace") if self.log.exists() else ""
            raise ServerUnavailable(
                f"{args[0]} failed ({done.returncode}): {done.stderr.strip()} {log[-2000:]}"
            )
        return done

    def start(self) -> PostgresServer:
        if self._as_nobody:
            self.root.chmod(0o755)
            shutil.chown(self.root, "nobody", "nogroup")
        try:
            self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "trust",
                      "-E", "UTF8", "--locale=C", "--no-sync")
            options = " ".join(
                [f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"]
                + [f"-c {name}={value}" for name, value in self.settings.items()]
            )
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
                      "-w", "-t", "60", "start")
        except (ServerUnavailable, OSError, subprocess.TimeoutExpired) as exc:
            self.stop()
            raise ServerUnavailable(str(exc)) from exc
        self._started = True
        return self

    def require_password(self, password: str) -> None:
        """Give the server's user ``password`` and restart the server asking for it on
        every TCP connection (scram-sha-256); its socket stays trusted."""
        psql = [str(self._bin / "psql"), "-h", str(self.root), "-p", str(self.port), "-U",
                USER, "-d", "postgres", "-v", "ON_ERROR_STOP=1",
                "-c", f"ALTER USER {USER} PASSWORD '{password}'"]
        done = subprocess.run(psql, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise ServerUnavailable(f"psql failed: {done.stderr.strip()}")
        hba = self.data / "pg_hba.conf"
        lines = [line.replace("trust", "scram-sha-256") if line.startswith("host") else line
                 for line in hba.read_text().splitlines()]
        with hba.open("r+") as file:  # in place: the file keeps its owner
            file.write("\n".join(lines) + "\n")
            file.truncate()
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "restart")

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL (psycopg 3 driver) of ``database`` on this server."""
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        if self._started:
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except ServerUnavailable:
                pass
            self._started = False
        shutil.rmtree(self.root, ignore_errors=True)


def started_for_tests(settings: Mapping[str, str] | None = None) -> PostgresServer:
    """A started server for tests (``settings`` as :class:`PostgresServer` takes them).
    When none will start, the tests that need it are skipped with the reason, but under
    ``CI=true`` they fail: a run there never passes over the team store silently."""
    try:
        return PostgresServer(settings).start()
    except ServerUnavailable as exc:
        import pytest  # here only: the benchmarks use this module without pytest

        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the PostgreSQL test server did not start: {exc}")
        pytest.skip(f"PostgreSQL is not available here: {exc}")
