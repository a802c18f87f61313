"""Shared helpers for the format tests: building sessions as the store would hand them over."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from workbench.core.conversation import Message, SessionContext, SessionInfo
from workbench.formats import ExportSession

T0 = datetime(2024, 5, 15, 15, 0, tzinfo=UTC)


def make_session(
    messages: list[Message],
    *,
    title: str = "A session",
    context: SessionContext | None = None,
    session_id: int = 7,
    **info: Any,
) -> ExportSession:
    """An export session with sensible defaults for the fields a test does not care about."""
    fields: dict[str, Any] = {"agent_id": 1, "created_at": T0, "updated_at": T0}
    fields.update(info)
    return ExportSession(
        info=SessionInfo(id=session_id, title=title, **fields),
        messages=messages,
        context=context or SessionContext(),
    )


@pytest.fixture
def session_factory() -> Callable[..., ExportSession]:
    """:func:`make_session` as a fixture."""
    return make_session
