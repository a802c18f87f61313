"""Finding a provider's API key: an environment variable or an OS keyring entry.

The workbench stores only *where* a key is (the variable's name, the keyring entry's
name), never the key. :func:`resolve_api_key` looks in the keyring first when an entry is
named and a keyring backend exists, then in the environment variable. Where no keyring
backend exists (a headless Linux box without Secret Service, a CI runner) it says so in
``notice`` and uses the environment variable instead.

A keyring entry is written ``NAME`` (service ``conversation-workbench``, user ``NAME``)
or ``SERVICE:USER`` to read a key some other program stored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

KEYRING_SERVICE = "conversation-workbench"


@dataclass(frozen=True)
class KeyLookup:
    """The result of a key lookup: the key (or ``None``), where it came from, any notice.

    ``source`` and ``notice`` are sentences safe to show: they never contain the key.
    """

    key: str | None = field(default=None, repr=False)
    source: str = ""
    notice: str | None = None

    @property
    def found(self) -> bool:
        return bool(self.key)


def split_entry(entry: str) -> tuple[str, str]:
    """``(service, user)`` for a keyring entry name (see the module docstring)."""
    service, sep, user = entry.partition(":")
    if sep and service and user:
        return service, user
    return KEYRING_SERVICE, entry


def keyring_status() -> tuple[bool, str]:
    """Whether an OS keyring backend can be used, and a sentence naming it or why not."""
    try:
        import keyring
        from keyring.backends import fail
    except Exception as exc:  # a broken install must not stop the workbench
        return False, f"the keyring package could not be loaded ({type(exc).__name__})"
    try:
        backend = keyring.get_keyring()
    except Exception as exc:
        return False, f"the OS keyring could not be opened ({type(exc).__name__})"
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 1) <= 0:
        return False, "no OS keyring backend is available on this system"
    # A chainer with nothing behind it is as good as none.
    inner = getattr(backend, "backends", None)
    if inner is not None and not inner:
        return False, "no OS keyring backend is available on this system"
    return True, f"the OS keyring ({type(backend).__name__})"


def read_keyring(entry: str) -> str | None:
    """The password stored under ``entry``, or ``None`` (also when the keyring fails)."""
    import keyring

    service, user = split_entry(entry)
    try:
        return keyring.get_password(service, user)
    except Exception:
        return None


def store_in_keyring(entry: str, key: str) -> None:
    """Save ``key`` under ``entry`` in the OS keyring (raises if there is no backend)."""
    import keyring

    service, user = split_entry(entry)
    keyring.set_password(service, user, key)


def delete_from_keyring(entry: str) -> None:
    """Remove the key stored under ``entry``; a missing entry is not an error."""
    import keyring
    from keyring.errors import PasswordDeleteError

    service, user = split_entry(entry)
    try:
        keyring.delete_password(service, user)
    except PasswordDeleteError:
        pass


def resolve_api_key(
    env_var: str | None = None,
    keyring_entry: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> KeyLookup:
    """Find the key: the keyring entry if named and usable, else the environment variable.

    Returns a :class:`KeyLookup` with ``key=None`` when neither is configured (servers
    such as a local llama.cpp need none) or when the configured places hold nothing;
    ``source`` then says where it looked.
    """
    env = os.environ if environ is None else environ
    notice: str | None = None
    looked: list[str] = []
    if keyring_entry:
        usable, why = keyring_status()
        if usable:
            key = read_keyring(keyring_entry)
            if key:
                return KeyLookup(key, f"the keyring entry {keyring_entry!r}")
            looked.append(f"the keyring entry {keyring_entry!r} (empty)")
        else:
            if env_var:
                notice = (f"The keyring entry {keyring_entry!r} cannot be read: {why}; "
                          f"using the environment variable {env_var} instead.")
            else:
                notice = (f"The keyring entry {keyring_entry!r} cannot be read: {why}. "
                          "Name an environment variable that holds the key instead.")
            looked.append(f"the keyring entry {keyring_entry!r} ({why})")
    if env_var:
        key = env.get(env_var)
        if key:
            return KeyLookup(key, f"the environment variable {env_var}", notice)
        looked.append(f"the environment variable {env_var} (not set)")
    source = " and ".join(looked) if looked else "no key is configured"
    return KeyLookup(None, source, notice)


def describe_key_reference(env_var: str | None, keyring_entry: str | None) -> str:
    """A short phrase naming where a provider's key lives, for lists and sentences."""
    places = []
    if keyring_entry:
        places.append(f"keyring entry {keyring_entry!r}")
    if env_var:
        places.append(f"environment variable {env_var}")
    return " or ".join(places) if places else "no key"
