"""Fixtures for the engine and command-line tests.

Every test gets its own database: a file under ``tmp_path``, or on the team-store run
(``WORKBENCH_TEST_BACKENDS``) a fresh database on the test PostgreSQL server, which
``workspace``, ``cli`` (``--db``) and ``run_workbench`` (``WORKBENCH_DB``) all open
(``db_target``). The command line runs either
in-process (``cli``: :func:`workbench.cli.main` with captured output) or as a real child
process (``run_workbench``: ``python -m workbench``), so that the console entry is proven
too. Helpers that several test files need are handed out as fixtures because the suite
imports test modules in importlib mode, where a conftest cannot be imported by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.own_samples import tau_like_export
from workbench.cli import main
from workbench.core.conversation import (
    Message,
    SessionContext,
    Task,
    TokenUsage,
    ToolStats,
)
from workbench.core.tokens import fill_counts, get_counter
from workbench.engine.workspace import Workspace

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = REPO_ROOT / ".." / "shared"
TAU_SAMPLE = SHARED_DIR / "samples" / "openai" / "tau-bench_gpt-4o-airline_first20.json"
SAMPLE_SESSION = REPO_ROOT / "resources" / "sample_session.json"

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

_DEFAULT_DB: Any = object()


@dataclass
class CliResult:
    """What one run of the command line produced."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as JSON (fails the test with the output when it is not JSON)."""
        try:
            return json.loads(self.out)
        except json.JSONDecodeError as exc:  # pragma: no cover - only on failure
            pytest.fail(f"stdout is not JSON ({exc}): {self.out!r}; stderr: {self.err!r}")

    def assert_one_line_error(self) -> str:
        """Check the failure contract (non-zero exit, one stderr line); returns that line."""
        assert self.code != 0, f"expected a failure, got exit 0; stdout: {self.out!r}"
        assert "Traceback" not in self.err, self.err
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {self.err!r}"
        return lines[0]


CliRunner = Callable[..., CliResult]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The database file the test works on (not created yet)."""
    return tmp_path / "db" / "engine.db"


@pytest.fixture
def workspace(db_target: Path | str) -> Iterator[Workspace]:
    """An open workspace over the test's database (the :func:`db_path` file or a
    team-store database, see ``backend``), closed after the test."""
    ws = Workspace.open(db_target)
    try:
        yield ws
    finally:
        ws.close()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], db_target: Path | str) -> CliRunner:
    """Run ``workbench ARGS`` in-process; ``--db`` naming the test's database (see
    ``backend``) is added unless ``db`` says otherwise (a path, or ``None`` for no
    ``--db`` at all)."""

    def run(*args: Any, db: Any = _DEFAULT_DB) -> CliResult:
        argv = [str(a) for a in args]
        if db is _DEFAULT_DB:
            db = db_target
        if db is not None:
            argv += ["--db", str(db)]
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse exits on usage errors
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(int(code), captured.out, captured.err)

    return run


@pytest.fixture
def run_workbench(db_target: Path | str) -> Callable[..., CliResult]:
    """Run ``python -m workbench ARGS`` as a child process with ``WORKBENCH_DB`` naming
    the test's database (see ``backend``) unless ``db`` names another."""

    def run(*args: Any, db: Path | str | None = None,
            program: Sequence[str] | None = None) -> CliResult:
        env = dict(os.environ)
        env["WORKBENCH_DB"] = str(db or db_target)
        # The checkout under test, also for the console script (which would otherwise
        # import the package where it was installed from).
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        command = list(program or [sys.executable, "-m", "workbench"]) + [str(a) for a in args]
        done = subprocess.run(
            command,
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        return CliResult(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture(params=["own"] + (["shared"] if TAU_SAMPLE.is_file() else []))
def tau_sample(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """An agent benchmark log in the tau-bench shape: the suite's own (always) and the real
    sample of ``../shared`` (only when that folder is present: not a skip otherwise, the
    case is simply not there)."""
    if request.param == "own":
        return tau_like_export(tmp_path / "tau-like.json")
    return TAU_SAMPLE


@pytest.fixture
def sample_session_file() -> Path:
    """The repository's own sample session (context-file JSON)."""
    return SAMPLE_SESSION


@pytest.fixture
def write_jsonl() -> Callable[[Path, Sequence[Any]], Path]:
    """Write items as JSON Lines (an item that is a ``str`` is written as the raw line)."""

    def write(path: Path, items: Sequence[Any]) -> Path:
        lines = [item if isinstance(item, str) else json.dumps(item) for item in items]
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return path

    return write


@pytest.fixture
def write_json() -> Callable[[Path, Any], Path]:
    """Write one value as a JSON file."""

    def write(path: Path, value: Any) -> Path:
        path.write_text(json.dumps(value, indent=2), encoding="utf-8")
        return path

    return write


# -- a rich session -------------------------------------------------------------------------


def _rich_messages() -> list[Message]:
    def at(minutes: int) -> datetime:
        return T0 + timedelta(minutes=minutes)

    lookup = {
        "id": "call_lookup",
        "type": "function",
        "function": {"name": "get_reservation", "arguments": '{"reservation": "QX7"}'},
    }
    cancel = {
        "id": "call_cancel",
        "type": "function",
        "function": {"name": "cancel_reservation", "arguments": '{"reservation": "QX7"}'},
    }
    profile = {
        "id": "call_profile",
        "type": "function",
        "function": {"name": "get_user", "arguments": '{"user": "ana_1"}'},
    }
    return [
        Message(
            role="system", content="You are a booking agent. Answer briefly.", created_at=at(0)
        ),
        Message(
            role="user", content="Please cancel reservation QX7 and refund me.", created_at=at(1)
        ),
        Message(
            role="assistant",
            content="",
            tool_calls=[lookup],
            created_at=at(2),
            metadata={"model": "gpt-4o", "finish_reason": "tool_calls"},
        ),
        Message(
            role="tool",
            name="get_reservation",
            tool_call_id="call_lookup",
            content='{"reservation": "QX7", "status": "booked", "price": 120}',
            created_at=at(3),
        ),
        Message(
            role="assistant",
            content="Cancelling now and checking your profile.",
            tool_calls=[cancel, profile],
            created_at=at(4),
        ),
        Message(
            role="tool",
            name="cancel_reservation",
            tool_call_id="call_cancel",
            content="cancelled",
            created_at=at(5),
        ),
        Message(
            role="tool",
            name="get_user",
            tool_call_id="call_profile",
            content='{"name": "Ana", "tier": "gold"}',
            created_at=at(6),
        ),
        Message(
            role="assistant",
            content="Done: QX7 is cancelled; the refund of 120 EUR reaches you in 5 days.",
            created_at=at(7),
            important=True,
            metadata={
                "usage": {"prompt_tokens": 210, "completion_tokens": 22},
                "tags": ["outcome"],
            },
        ),
        Message(
            role="user", content="Thanks! ünïcödé, emoji 🎉 and `code` survive?", created_at=at(8)
        ),
        Message(
            role="assistant", name="helper_bot", content="They do. Anything else?", created_at=at(9)
        ),
    ]


RICH_CONTEXT = SessionContext(
    facts=["The user is called Ana.", "Reservation QX7 was booked in March."],
    summary="Ana asked to cancel QX7; the agent looked it up, cancelled it and promised a refund.",
    tasks=[
        Task(
            id="cancel",
            description="Cancel QX7",
            status="completed",
            progress=1.0,
            created_at=T0,
            updated_at=T0 + timedelta(minutes=5),
        ),
        Task(
            id="refund",
            description="Track the refund",
            status="running",
            progress=0.25,
            created_at=T0 + timedelta(minutes=7),
            updated_at=T0 + timedelta(minutes=8),
        ),
    ],
    tool_stats=ToolStats(
        total_calls=3,
        by_tool={"get_reservation": 1, "cancel_reservation": 1, "get_user": 1},
        failures=1,
    ),
    token_usage=TokenUsage(input_tokens=1234, output_tokens=321),
    system_state={"units": "metric", "verbose": False},
    environment={"timezone": "Europe/Madrid", "client": "tests"},
)


@pytest.fixture
def build_rich_session() -> Callable[[Workspace], int]:
    """Create, through the repository, a session with tool calls, null content, folded
    and evicted messages, important flags, metadata and a full context; returns its id."""

    def build(ws: Workspace) -> int:
        repo = ws.repo
        info = repo.create_session("Cancel QX7", tags=["support", "refunds"], created_at=T0)
        messages = _rich_messages()
        fill_counts(messages, get_counter())
        ids = [m.id for m in repo.append_messages(info.id, messages) if m.id is not None]
        assert len(ids) == len(messages)
        repo.set_state([ids[1], ids[2], ids[3]], "folded")
        repo.set_state([ids[5]], "evicted")
        repo.set_important(ids[8], True)
        repo.set_context(info.id, RICH_CONTEXT.copy())
        return info.id

    return build
