"""Provider configs in the ``provider_configs`` table: add, read, change, remove.

The table has no column for a secret and this module keeps it that way: a config names
where its key lives (an environment variable, a keyring entry), and :func:`check_config`
refuses what looks like a key typed into one of those fields or into an extra header.
Refusal sentences never repeat the offending value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, insert, literal, select, update

from workbench.core.conversation import utcnow
from workbench.core.provider import PROVIDER_KINDS, ProviderConfig
from workbench.errors import NotFoundError, StorageError
from workbench.store.db import Database
from workbench.store.rows import json_object, record_from_row
from workbench.store.schema import AGENTS, PROVIDER_CONFIGS
from workbench.store.types import json_text, time_to_text

_COLUMNS: tuple[str, ...] = (
    "name",
    "kind",
    "base_url",
    "model",
    "api_key_env",
    "api_key_keyring",
    "context_window",
    "max_output_tokens",
    "temperature",
    "timeouts",
    "extra_headers",
)
_T = PROVIDER_CONFIGS
_SELECT = select(_T.c.id, *(_T.c[name] for name in _COLUMNS))
_ALL = _SELECT.order_by(_T.c.name)
_BY_NAME = _SELECT.where(_T.c.name == bindparam("name"))
_NAME_TAKEN = select(literal(1)).select_from(_T).where(_T.c.name == bindparam("name"))
_INSERT = insert(_T)
_UPDATE = update(_T).where(_T.c.id == bindparam("row_id"))
_DELETE = delete(_T).where(_T.c.name == bindparam("name"))
_RENAME_FOR_AGENTS = (
    update(AGENTS).where(AGENTS.c.provider == bindparam("old"))
    .values(provider=bindparam("new"), updated_at=bindparam("now"))
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_HEADER = re.compile(r"authorization|api[-_]?key|token|secret|cookie|password", re.I)
_KEY_LIKE = re.compile(r"(^|[^A-Za-z])(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")
_TIMEOUT_NAMES = {"connect", "read", "total"}


def check_config(config: ProviderConfig) -> None:
    """Raise :class:`StorageError` with a sentence when ``config`` cannot be stored."""
    if not config.name or not config.name.strip():
        raise StorageError("A provider needs a name.")
    if config.kind not in PROVIDER_KINDS:
        raise StorageError(
            f"Provider kind {config.kind!r} is not one of {', '.join(PROVIDER_KINDS)}."
        )
    if not re.match(r"^https?://[^/\s]+", config.base_url or ""):
        raise StorageError(
            f"The base URL of provider {config.name!r} must start with http:// or https:// "
            "and name a host."
        )
    if not config.model:
        raise StorageError(f"Provider {config.name!r} needs a model name.")
    if config.api_key_env is not None and not _ENV_NAME.match(config.api_key_env):
        raise StorageError(
            "The API key environment variable must be a variable's name (letters, digits "
            "and _), not the key itself; the value was not stored."
        )
    if config.api_key_keyring is not None and (
        not config.api_key_keyring.strip() or _KEY_LIKE.search(config.api_key_keyring)
    ):
        raise StorageError(
            "The keyring entry must be the entry's name, not the key itself; "
            "the value was not stored."
        )
    for header in config.extra_headers:
        if _SECRET_HEADER.search(header):
            raise StorageError(
                f"The extra header {header!r} would carry a secret, and secrets are never "
                "stored; keep the key in an environment variable or the OS keyring."
            )
    for value in config.extra_headers.values():
        if _KEY_LIKE.search(value):
            raise StorageError(
                "An extra header's value looks like an API key, and secrets are never "
                "stored; keep the key in an environment variable or the OS keyring."
            )
    unknown = set(config.timeouts) - _TIMEOUT_NAMES
    if unknown:
        raise StorageError(
            f"Unknown timeout {sorted(unknown)[0]!r}: use connect, read or total (seconds)."
        )
    for label, size in (("context window", config.context_window),
                        ("max output tokens", config.max_output_tokens)):
        if size is not None and size <= 0:
            raise StorageError(f"The {label} of provider {config.name!r} must be positive.")
    for name, seconds in config.timeouts.items():
        if seconds is not None and not (isinstance(seconds, int | float)
                                        and math.isfinite(seconds) and seconds > 0):
            raise StorageError(
                f"The {name} timeout of provider {config.name!r} must be a number of seconds "
                f"above zero, not {seconds!r}."
            )
    temperature = config.temperature
    if temperature is not None and not (isinstance(temperature, int | float)
                                        and math.isfinite(temperature) and temperature >= 0):
        raise StorageError(
            f"The temperature of provider {config.name!r} must be a number of 0 or more, "
            f"not {temperature!r}."
        )


def _params(config: ProviderConfig) -> dict[str, Any]:
    """The stored values of ``config``, by column (:data:`_COLUMNS`)."""
    return {
        "name": config.name.strip(),
        "kind": config.kind,
        "base_url": config.base_url.strip(),
        "model": config.model,
        "api_key_env": config.api_key_env or None,
        "api_key_keyring": config.api_key_keyring or None,
        "context_window": config.context_window,
        "max_output_tokens": config.max_output_tokens,
        "temperature": config.temperature,
        "timeouts": json_text(dict(config.timeouts)) if config.timeouts else None,
        "extra_headers": (
            json_text(dict(config.extra_headers)) if config.extra_headers else None
        ),
    }


def _from_row(row: Sequence[Any]) -> ProviderConfig:
    return record_from_row(ProviderConfig, ("id", *_COLUMNS), row, timeouts=json_object,
                           extra_headers=json_object)


class ProviderConfigs:
    """The stored provider configs of one database."""

    def __init__(self, db: Database):
        self.db = db

    def all(self) -> list[ProviderConfig]:
        """Every config, by name."""
        with self.db.read() as conn:
            rows = conn.execute(_ALL).all()
        return [_from_row(r) for r in rows]

    def get(self, name: str) -> ProviderConfig:
        """The config called ``name``, or :class:`NotFoundError`."""
        with self.db.read() as conn:
            row = conn.execute(_BY_NAME, {"name": name}).first()
        if row is None:
            raise NotFoundError(f"There is no provider named {name!r}.")
        return _from_row(row)

    def add(self, config: ProviderConfig) -> ProviderConfig:
        """Store a new config; a name already taken raises :class:`StorageError`."""
        check_config(config)
        now = time_to_text(utcnow())
        with self.db.write() as conn:
            taken = conn.execute(_NAME_TAKEN, {"name": config.name.strip()}).first()
            if taken:
                raise StorageError(f"A provider named {config.name.strip()!r} already exists.")
            conn.execute(_INSERT, {**_params(config), "created_at": now, "updated_at": now})
        return self.get(config.name.strip())

    def update(self, name: str, /, **fields: Any) -> ProviderConfig:
        """Change fields of the config called ``name`` (any of :class:`ProviderConfig`'s,
        ``name`` included: the current name is positional only, so it may be renamed).

        A rename carries the agents that use the config along, in the same transaction:
        no agent is ever left naming a provider that does not exist."""
        current = self.get(name)
        unknown = set(fields) - set(_COLUMNS)
        if unknown:
            raise StorageError(f"Provider configs have no field {sorted(unknown)[0]!r}.")
        values = current.to_json() | fields
        changed = ProviderConfig(id=current.id, **values)
        check_config(changed)
        new_name = changed.name.strip()
        now = time_to_text(utcnow())
        with self.db.write() as conn:
            if new_name != name:
                taken = conn.execute(_NAME_TAKEN, {"name": new_name}).first()
                if taken:
                    raise StorageError(f"A provider named {new_name!r} already exists.")
            conn.execute(_UPDATE, {**_params(changed), "updated_at": now,
                                   "row_id": current.id})
            if new_name != current.name:
                conn.execute(_RENAME_FOR_AGENTS, {"old": current.name, "new": new_name,
                                                  "now": now})
        return self.get(new_name)

    def remove(self, name: str) -> None:
        """Delete the config called ``name``; a missing one raises :class:`NotFoundError`."""
        with self.db.write() as conn:
            if not conn.execute(_DELETE, {"name": name}).rowcount:
                raise NotFoundError(f"There is no provider named {name!r}.")
