"""Finding the files of ``resources/`` (sample session, icons, styles).

In a source checkout they sit in the top-level ``resources/`` folder; in an installed
wheel they are packaged as ``workbench/resources``.
"""

from __future__ import annotations

from importlib import resources as importlib_resources
from pathlib import Path

from workbench.errors import WorkbenchError


def resource_path(name: str) -> Path:
    """The path of a file in ``resources/``; :class:`WorkbenchError` if it is missing."""
    packaged = importlib_resources.files("workbench") / "resources" / name
    if packaged.is_file():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / "resources" / name
    if checkout.is_file():
        return checkout
    raise WorkbenchError(f"The resource file {name!r} is missing from this installation.")


def sample_session_path() -> Path:
    """The sample session shown on first start (context-file JSON)."""
    return resource_path("sample_session.json")
