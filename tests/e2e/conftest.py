"""The end-to-end fixture: a real llama.cpp server, installed and started by the tests.

``realllm.py`` beside this file installs llama.cpp's server (the ``xllamacpp`` wheel) and
the Gemma 3 270M GGUF into a cache outside the repository, once; this fixture starts one
server for the whole session with a small context window (so a too-long prompt is easy
to make) and stops it at the end. Set ``WORKBENCH_SKIP_E2E=1`` to skip these tests.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realllm  # noqa: E402

CTX = 1024
SKIP = os.environ.get("WORKBENCH_SKIP_E2E", "").strip() not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.e2e)
            if SKIP:
                item.add_marker(pytest.mark.skip(reason="WORKBENCH_SKIP_E2E is set"))


@pytest.fixture(scope="session")
def llama() -> Iterator[realllm.RunningServer]:
    """A running llama.cpp server on 127.0.0.1 (context window :data:`CTX` tokens)."""
    install = realllm.ensure_installed()
    server = realllm.start_server(install, ctx=CTX, threads=2, n_predict=64)
    try:
        yield server
    finally:
        server.stop()
