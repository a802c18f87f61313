"""The team store as the front ends meet it (SPEC §10): a database on a PostgreSQL
server, named by a ``postgresql://user@host:port/database`` URL.

The password is never part of what is kept or shown. It comes, in this order, from the
URL itself or the password a person typed (both held in memory only:
:func:`open_team_store`), the OS keyring entry :func:`remember_password` wrote, or
libpq's own sources (``PGPASSWORD``, ``~/.pgpass``). :func:`team_address` is the URL
without it, for a settings file, a recent list or a title; every sentence raised here
leaves the password out.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

from sqlalchemy.engine import URL

from workbench.engine.workspace import Workspace
from workbench.errors import StorageError, WorkbenchError
from workbench.store.db import OpenProgress, default_location, is_database_url, refuse_url
from workbench.store.db_postgresql import KEYRING_SERVICE, keyring_account, server_url

__all__ = [
    "database_to_open",
    "is_team_url",
    "open_team_store",
    "remember_password",
    "split_password",
    "team_address",
]

EXAMPLE_URL = "postgresql://user@host:5432/database"


def is_team_url(where: str | Path | None) -> bool:
    """Whether ``where`` is a server's URL (``scheme://...``) rather than a file path."""
    return is_database_url(where)


def database_to_open(where: Path | str | None) -> Path | str:
    """What opening ``where`` opens: itself, or when None the default (``WORKBENCH_DB``,
    a file or a team store's URL; else the file in ``WORKBENCH_HOME`` or the user data
    folder)."""
    return where if where is not None else default_location()


def _password_in(url: str) -> str | None:
    """The password written into ``url`` (``scheme://user:password@host...``), if any,
    found without parsing the rest (which may be what is wrong with it)."""
    _scheme, _sep, rest = url.partition("://")
    userinfo, at, _host = rest.rpartition("@")
    if not at:
        return None
    _user, colon, password = userinfo.partition(":")
    return password if colon and password else None


def split_password(url: str) -> tuple[str, str | None]:
    """``url`` without the password written into it, and that password (None, and
    ``url`` as it is, when it holds none): a form moves it where it is not shown."""
    password = _password_in(url)
    if password is None:
        return url, None
    scheme, _sep, rest = url.partition("://")
    userinfo, _at, host = rest.rpartition("@")
    return f"{scheme}://{userinfo.partition(':')[0]}@{host}", unquote(password)


def _without(text: str, secrets: tuple[str | None, ...]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _parsed(url: str, password: str | None = None) -> URL:
    """``url`` parsed as a team store's address; a sentence (without any password)
    when it is not one."""
    url = url.strip()
    hidden = (_password_in(url), password)
    if not is_team_url(url):
        raise StorageError(f"Write the team database as a URL: {EXAMPLE_URL}.")
    try:
        refuse_url(url)
        return server_url(url)
    except StorageError as exc:
        raise StorageError(_without(str(exc), hidden)) from None
    except ValueError:  # a port that is not a number, and the like
        raise StorageError(
            f"{_without(url, hidden)!r} is not a database URL the workbench can read: "
            f"write it as {EXAMPLE_URL}."
        ) from None


def team_address(url: str) -> str:
    """The URL as it may be kept and shown: ``postgresql://user@host:port/database``
    (with its options), never with a password. Raises :class:`StorageError` with a
    sentence when ``url`` is not a team store's URL."""
    parsed = _parsed(url)
    return URL.create("postgresql", username=parsed.username, host=parsed.host,
                      port=parsed.port, database=parsed.database,
                      query=parsed.query).render_as_string()


def open_team_store(url: str, password: str | None = None, *,
                    progress: OpenProgress | None = None) -> Workspace:
    """Open the team store at ``url`` (migrating it when it is new or older).

    ``password``, when given, is used for this connection only (in memory: it is not
    written anywhere); else the URL's own, the keyring's or libpq's is. Errors are
    sentences that never hold the password.
    """
    hidden = (_password_in(url), password)
    parsed = _parsed(url, password)
    if password:
        parsed = parsed.set(password=password)
    try:
        return Workspace.open(parsed.render_as_string(hide_password=False),
                              progress=progress)
    except WorkbenchError as exc:
        text = _without(str(exc), hidden)
        if text == str(exc):
            raise
        raise type(exc)(text) from None
    except Exception as exc:  # a driver's own error: said, never with the password
        detail = _without(str(exc).strip() or type(exc).__name__, hidden).rstrip(".")
        raise StorageError(
            f"Cannot open the database {team_address(url)}: {detail}."
        ) from None


def remember_password(url: str, password: str) -> None:
    """Keep ``password`` in the OS keyring for the team store at ``url`` (service
    ``conversation-workbench-postgresql``, account ``user@host:port/database``), where
    opening the store finds it next time.

    Raises :class:`WorkbenchError` with a sentence (never holding the password) when
    there is no keyring here or it refuses.
    """
    if not password:
        raise WorkbenchError("There is no password to remember: type it first.")
    account = keyring_account(_parsed(url, password))
    try:
        import keyring
        from keyring.backends import fail
    except ImportError as exc:  # pragma: no cover - keyring is a dependency
        raise WorkbenchError(f"The keyring package could not be loaded ({exc}).") from None
    try:
        backend = keyring.get_keyring()
        if isinstance(backend, fail.Keyring):
            raise WorkbenchError(
                "The password was not remembered: no OS keyring is available on this "
                "system; PGPASSWORD or ~/.pgpass can hold it instead."
            )
        keyring.set_password(KEYRING_SERVICE, account, password)
    except WorkbenchError:
        raise
    except Exception as exc:  # the backend's own errors: their text may be unhelpful
        raise WorkbenchError(
            f"The OS keyring did not take the password for {account} "
            f"({type(exc).__name__}); PGPASSWORD or ~/.pgpass can hold it instead."
        ) from None
