"""A real keyring backend that keeps passwords in a dict, so tests of API keys and team
store passwords need no OS keyring service (installed by the ``memory_keyring`` fixture
of tests/conftest.py through keyring's public ``set_keyring``)."""

from __future__ import annotations

from keyring.backend import KeyringBackend


class MemoryKeyring(KeyringBackend):
    """Passwords by ``(service, username)`` in :attr:`passwords`."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.passwords.pop((service, username), None)
