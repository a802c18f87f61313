"""What plain records share."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class FieldsJson:
    """Mixin of a dataclass whose JSON is its fields as they are, in their order."""

    def to_json(self) -> dict[str, Any]:
        return asdict(cast("DataclassInstance", self))
