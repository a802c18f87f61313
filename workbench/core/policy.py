"""The memory policy of an agent (SPEC §3), read from its free-JSON ``memory_policy``.

An agent stores its policy as a JSON object; sessions may override parts of it (their
``overrides["memory_policy"]``). :meth:`MemoryPolicy.from_dict` merges and checks the
values, filling in the defaults:

=================  ================  ==============================================
key                default           meaning
=================  ================  ==============================================
``mode``           ``auto``          ``auto``: a successful call appends the turn to
                                     memory; ``manual``: nothing is appended
``scope``          ``agent``         long-term entries are the agent's, or the
                                     session's alone (``session``)
``namespace``      ``default``       a name that keeps sets of entries apart
``capture``        ``manual``        ``conversation``: every successful turn is
                                     written as an entry; ``manual``: only what is
                                     remembered on purpose; ``off``: nothing
``inject``         ``instructions``  recalled entries go into the system message, or
                                     into a separate context message (``context``)
``max_entries``    5                 how many entries are recalled per call
``max_messages``   none              a sliding window over the session's messages
``token_budget``   none              a cap on the request's tokens, below the window
``reserve_output`` none              tokens kept free for the reply (none: the
                                     provider's max output, else a default)
``exclude_system`` false             leave system messages inside the history out
``enabled``        true              false turns long-term memory off: nothing is
                                     recalled or captured
``metadata``       ``{}``            free-form; written into every entry this
                                     policy stores
=================  ================  ==============================================

``namespace`` may name a value of the turn's context instead of a fixed name: a template
such as ``"{tenant_id}"`` (or ``"tenant-{tenant_id}"``) is filled in from the context
given with ``Model.with_context(...)`` for each turn, and in the Python API it may be a
callable taking that context and returning the name (:func:`resolve_namespace`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from string import Formatter
from typing import Any

from workbench.errors import RequestError, WorkbenchError

__all__ = ["CAPTURES", "INJECTS", "MODES", "SCOPES", "MemoryPolicy", "resolve_namespace"]

MODES = ("auto", "manual")
SCOPES = ("agent", "session")
CAPTURES = ("manual", "conversation", "off")
INJECTS = ("instructions", "context")


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise RequestError(
            f"Memory policy {key!r} is {value!r}; it must be one of {', '.join(allowed)}."
        )
    return str(value)


def whole_setting(what: str, value: Any, *, optional: bool, minimum: int,
                  error: type[WorkbenchError] = RequestError) -> int | None:
    """``value`` when it is a whole number of at least ``minimum`` (or None, when
    ``optional``); otherwise ``error`` saying that the setting ``what`` is wrong."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(
            f"{what} is {value!r}; it must be a whole number of at least "
            f"{minimum}{' or null' if optional else ''}."
        )
    return value


def merge_settings(
    what: str,
    sources: Sequence[Mapping[str, Any] | None],
    known: set[str],
    *,
    nullable: Collection[str],
    ignored: Collection[str] = frozenset(),
    error: type[WorkbenchError] = RequestError,
) -> dict[str, Any]:
    """The settings of ``sources`` merged, later ones overriding earlier. ``None`` counts
    only for a ``nullable`` key (elsewhere it leaves an earlier value alone); ``ignored``
    keys are passed over. A source that is not a JSON object, or holds a key neither
    ``known`` nor ignored, raises ``error`` naming the ``what`` ("memory policy")."""
    merged: dict[str, Any] = {}
    for source in sources:
        if not source:
            continue
        if not isinstance(source, Mapping):
            raise error(f"A {what} must be a JSON object, not {type(source).__name__}.")
        unknown = sorted(set(source) - known - set(ignored))
        if unknown:
            raise error(
                f"{what.capitalize()} has no setting {unknown[0]!r}; the settings are "
                f"{', '.join(sorted(known))}."
            )
        for key, value in source.items():
            if key not in ignored and (value is not None or key in nullable):
                merged[key] = value
    return merged


def _count(key: str, value: Any, *, optional: bool, minimum: int) -> int | None:
    return whole_setting(f"Memory policy {key!r}", value, optional=optional, minimum=minimum)


# Keys of an agent's memory_policy JSON that belong to other policies, not this one.
FOREIGN_SECTIONS = frozenset({"compaction"})

@dataclass(frozen=True)
class MemoryPolicy:
    """How an agent's memory behaves; see the module documentation for each field."""

    mode: str = "auto"
    scope: str = "agent"
    namespace: str | Callable[[Any], str] = "default"
    capture: str = "manual"
    inject: str = "instructions"
    max_entries: int = 5
    max_messages: int | None = None
    token_budget: int | None = None
    reserve_output: int | None = None
    exclude_system: bool = False
    enabled: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _choice("mode", self.mode, MODES)
        _choice("scope", self.scope, SCOPES)
        _choice("capture", self.capture, CAPTURES)
        _choice("inject", self.inject, INJECTS)
        if not callable(self.namespace) and (
            not isinstance(self.namespace, str) or not self.namespace.strip()
        ):
            raise RequestError("Memory policy 'namespace' must be a non-empty name.")
        if not isinstance(self.enabled, bool):
            raise RequestError("Memory policy 'enabled' must be true or false.")
        if not isinstance(self.metadata, Mapping):
            raise RequestError("Memory policy 'metadata' must be a JSON object.")
        _count("max_entries", self.max_entries, optional=False, minimum=0)
        _count("max_messages", self.max_messages, optional=True, minimum=1)
        _count("token_budget", self.token_budget, optional=True, minimum=1)
        _count("reserve_output", self.reserve_output, optional=True, minimum=0)
        if not isinstance(self.exclude_system, bool):
            raise RequestError("Memory policy 'exclude_system' must be true or false.")

    @property
    def auto(self) -> bool:
        """Whether a successful call appends its turn to memory."""
        return self.mode == "auto"

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any] | None, *overrides: Mapping[str, Any] | None
    ) -> MemoryPolicy:
        """A policy from an agent's JSON, with later mappings overriding earlier ones.

        Unknown keys raise :class:`RequestError` naming them, so a typo is not silently
        ignored. ``None`` leaves an earlier value alone, except for the optional numbers
        (``max_messages``, ``token_budget``, ``reserve_output``), where it clears them.
        """
        # FOREIGN_SECTIONS: what other policies keep in the same agent JSON (compaction).
        return cls(**merge_settings(
            "memory policy", (data, *overrides), {f.name for f in fields(cls)},
            nullable=("max_messages", "token_budget", "reserve_output"),
            ignored=FOREIGN_SECTIONS))

    def replace(self, **changes: Any) -> MemoryPolicy:
        """A copy with some settings changed (checked like a new policy)."""
        return MemoryPolicy(**{**asdict(self), **changes})

    def to_dict(self) -> dict[str, Any]:
        """The policy as the JSON an agent stores."""
        return asdict(self)


def _context_values(context: Any) -> Mapping[str, Any]:
    if context is None:
        return {}
    if isinstance(context, Mapping):
        return context
    if is_dataclass(context) and not isinstance(context, type):
        return asdict(context)
    dump = getattr(context, "model_dump", None)
    if callable(dump):
        values = dump()
        if isinstance(values, Mapping):
            return values
    return dict(getattr(context, "__dict__", {}) or {})


def resolve_namespace(namespace: str | Callable[[Any], str], context: Any) -> str:
    """The namespace of one turn: ``namespace`` itself, or filled in from the turn's
    ``context`` (a template such as ``"{tenant_id}"``, or a callable given the context).

    A template naming a value the context does not hold raises :class:`RequestError`
    naming it, rather than mixing tenants in one namespace.
    """
    if callable(namespace):
        value = namespace(context)
        if not isinstance(value, str) or not value.strip():
            raise RequestError(f"The namespace callable returned {value!r}, not a name.")
        return value
    names = [name for _, name, _, _ in Formatter().parse(namespace) if name]
    if not names:
        return namespace
    values = _context_values(context)
    missing = [name for name in names if name not in values]
    if missing:
        raise RequestError(
            f"The memory namespace {namespace!r} needs {missing[0]!r} from the turn's "
            "context, and the context has none."
        )
    return namespace.format_map({name: values[name] for name in names})
