"""Fixtures for the provider tests: a protocol server on 127.0.0.1, fresh for each test."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from workbench.cli import main

# The protocol server is a plain module beside the tests (the suite imports by path).
sys.path.insert(0, str(Path(__file__).resolve().parent))


SENTINEL_KEY = "sk-test-SENTINEL-4f9c2a7be1d34c55"



@pytest.fixture
def sentinel_key() -> str:
    """A recognisable fake key: tests assert it never shows up where it must not."""
    return SENTINEL_KEY


@dataclass
class CliResult:
    """Exit status and captured output of one in-process ``workbench`` run."""

    code: int
    out: str
    err: str


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "providers.db"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], db_path: Path) -> Callable[..., CliResult]:
    """Run ``workbench ARGS --db db_path`` in-process and capture what it printed."""

    def run(*args: Any) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args] + ["--db", str(db_path)])
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(int(code), captured.out, captured.err)

    return run
