"""Each session's unsent prompt, kept in the GUI settings across restarts.

Drafts are keyed by the database (a digest of its path, so a second database never shows
the first one's drafts) and the session id; ``0`` holds the draft written while no
session is open. An empty draft is removed, not stored.
"""

from __future__ import annotations

import hashlib

from workbench.gui.settings import gui_settings

GROUP = "drafts"


def _key(database: str, session_id: int) -> str:
    digest = hashlib.sha1(database.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{GROUP}/{digest}/{int(session_id)}"


def load_draft(database: str, session_id: int) -> str:
    """The draft of ``session_id`` in ``database`` ("" when there is none)."""
    value = gui_settings().value(_key(database, session_id), "")
    return value if isinstance(value, str) else ""


def save_draft(database: str, session_id: int, text: str) -> None:
    """Keep ``text`` as the session's draft (an empty or blank text removes it)."""
    settings = gui_settings()
    key = _key(database, session_id)
    if text.strip():
        settings.setValue(key, text)
    else:
        settings.remove(key)
    settings.sync()
