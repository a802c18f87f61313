"""Column types shared by the tables: UTC times as sortable text, JSON as text."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.types import Text, TypeDecorator

from workbench.core.conversation import as_utc

# Fixed width with microseconds, so text order is time order and date filters can
# compare strings.
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def time_to_text(value: datetime) -> str:
    """A datetime as the text the store keeps (UTC, fixed width)."""
    return as_utc(value).strftime(TIME_FORMAT)


def text_to_time(value: str) -> datetime:
    """The stored text back as an aware UTC datetime."""
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def json_text(value: Any) -> str | None:
    """Compact JSON text for a column, ``None`` stays SQL NULL; a number JSON cannot
    hold is kept as its name (see :func:`finite`)."""
    if value is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(finite(value), ensure_ascii=False, separators=(",", ":"))


def finite(value: Any) -> Any:
    """``value`` with each float JSON cannot hold replaced by its name as text: ``"NaN"``,
    ``"Infinity"``, ``"-Infinity"`` (what Python's own JSON writes unquoted).

    A file written by Python may hold ``NaN`` (a reward, a score), and ``1e400`` decodes
    to infinity: stored as they came, the column would hold text that is not JSON, which
    SQLite's and PostgreSQL's JSON functions refuse and every export then failed on.
    """
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def json_value(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes stored as fixed-width ISO 8601 text."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> str | None:
        return None if value is None else time_to_text(value)

    def process_result_value(self, value: str | None, dialect: Any) -> datetime | None:
        return None if value is None else text_to_time(value)


class JSONText(TypeDecorator[Any]):
    """Any JSON value stored as compact text (NULL for ``None``)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        return json_text(value)

    def process_result_value(self, value: str | None, dialect: Any) -> Any:
        return json_value(value)
