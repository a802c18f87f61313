"""Issue 19's smaller items: an over-long search query, temporaries of a killed export."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workbench.core.conversation import Conversation, Message
from workbench.engine.workspace import SearchQuery, Workspace
from workbench.errors import StorageError


def _one_session(workspace: Workspace) -> None:
    workspace.import_conversation(
        Conversation(title="Notes", messages=[Message(role="user", content="alpha beta")])
    )


@pytest.mark.parametrize(
    "text",
    [
        " OR ".join(f"w{i}" for i in range(3000)),  # fts5: parser stack overflow
        "(" * 5000 + "x" + ")" * 5000,
        " ".join(f"w{i}" for i in range(20_000)),  # Expression tree is too large
    ],
    ids=["or-chain", "parentheses", "many-words"],
)
def test_an_over_long_search_says_the_query_is_too_long(
    workspace: Workspace, text: str
) -> None:
    _one_session(workspace)
    try:
        hits = workspace.search(SearchQuery(text=text))
    except StorageError as exc:
        message = str(exc)
        assert "The search query is too long" in message
        assert "fts5" not in message and "Expression tree" not in message
        assert "refused the change" not in message
    else:
        assert hits == []  # a query SQLite can still plan simply finds nothing
    # The database is unharmed: an ordinary search still works.
    assert workspace.search(SearchQuery(text="alpha"))


def test_the_cli_says_an_over_long_search_is_too_long(cli: Any) -> None:
    # SQLite's FTS5 refuses the OR chain; the team store refuses a query of more terms
    # than search.MAX_TERMS_POSTGRESQL (it would plan it, taking seconds).
    result = cli("search", " OR ".join(f"w{i}" for i in range(3000)))
    assert result.code == 1
    assert "search query is too long" in result.err and "fts5" not in result.err


def test_an_export_killed_mid_write_leaves_a_temporary_the_next_export_removes(
    workspace: Workspace, tmp_path: Path
) -> None:
    _one_session(workspace)
    folder = tmp_path / "exports"
    folder.mkdir()
    target = folder / "out.json"
    # A child process starts the export's temporary file and is killed before renaming.
    program = (
        "import os, sys, tempfile\n"
        "fd, name = tempfile.mkstemp(prefix=f'.out.json.{os.getpid()}.', suffix='.tmp',"
        " dir=sys.argv[1])\n"
        "os.write(fd, b'{\"half\": ')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    child = subprocess.run([sys.executable, "-c", program, str(folder)], check=False)
    assert child.returncode != 0
    (left,) = folder.glob(".out.json.*.tmp")
    # A temporary of a process that is still running (this one) is not touched.
    alive = folder / f".out.json.{os.getpid()}.busy.tmp"
    alive.write_text("being written", encoding="utf-8")

    workspace.export_sessions(["Notes"], "context-json", target)

    assert target.exists() and not left.exists()
    assert alive.exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted(["out.json", alive.name])
