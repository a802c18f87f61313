"""Column types shared by the tables: UTC times as sortable text, JSON as text."""

from __future__ import annotations

import json
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
    """Compact JSON text for a column, ``None`` stays SQL NULL."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
