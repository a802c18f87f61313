"""Tools a model may call: a name, a description, JSON-schema parameters and a callable.

:class:`Tool` holds the four; :func:`tool` builds one from a plain function, deriving
the parameters' schema from its type hints and their descriptions from its docstring::

    @tool
    def weather(city: str, unit: Literal["C", "F"] = "C") -> str:
        '''The weather in a city now.

        Args:
            city: the city's name.
            unit: the temperature scale.
        '''

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``, ``list[X]``,
``tuple[X, ...]``, ``set[X]``, ``dict[str, X]``, ``X | None`` and other unions,
``Literal[...]``, :class:`enum.Enum` subclasses, dataclasses and classes with a
``model_json_schema()`` (pydantic models). A parameter with a default is optional; one
without a hint accepts any JSON value. Running a tool is the engine's business (timeouts,
errors as results); this module only describes and binds.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from workbench.core.provider import ToolSpec
from workbench.core.schema import check_schema, json_type, validate
from workbench.errors import RequestError

__all__ = ["Tool", "as_tool", "as_tools", "parameters_schema", "tool", "tool_result_text"]

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Tool:
    """A tool: what the model sees (name, description, parameters) and what runs.

    ``timeout`` (seconds) overrides the engine's default for this tool. Calling the tool
    object calls the function with keyword arguments.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any] = field(compare=False)
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise RequestError(
                f"Tool name {self.name!r} is not allowed: use 1 to 64 letters, digits, "
                "'_' or '-'."
            )
        if not callable(self.function):
            raise RequestError(f"Tool {self.name!r} has nothing to call.")
        check_schema(self.parameters, where=f"parameters of tool {self.name!r}")
        if isinstance(self.parameters, dict) and self.parameters.get("type", "object") != "object":
            raise RequestError(f"The parameters of tool {self.name!r} must be an object schema.")

    def spec(self) -> ToolSpec:
        """The tool as a provider sends it to the model."""
        return ToolSpec(self.name, self.description, self.parameters)

    def check_arguments(self, arguments: Mapping[str, Any]) -> list[str]:
        """Problems of ``arguments`` against the parameters' schema ([] when valid)."""
        return validate(dict(arguments), self.parameters)

    def __call__(self, **arguments: Any) -> Any:
        return self.function(**arguments)


# -- schema from type hints ---------------------------------------------------------------


def _hint_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of one type hint."""
    if hint is inspect.Parameter.empty or hint is Any or hint is object:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    if hint is str:
        return {"type": "string"}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint in (list, tuple, set, frozenset):
        return {"type": "array"}
    if hint is dict:
        return {"type": "object"}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = _hint_schema(args[0])
        extra = [a for a in args[1:] if isinstance(a, str)]
        if extra:
            schema["description"] = extra[0]
        return schema
    if origin is typing.Literal:
        values = list(args)
        schema = {"enum": values}
        kinds = {_literal_type(v) for v in values}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [_hint_schema(a) for a in args]
        nullable = any(o == {"type": "null"} for o in options)
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1 and set(rest[0]) == {"type"} and isinstance(rest[0]["type"], str):
            kind = rest[0]["type"]
            return {"type": [kind, "null"] if nullable else kind}
        return {"anyOf": options}
    if origin in (list, set, frozenset, Sequence):
        return {"type": "array", "items": _hint_schema(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _hint_schema(args[0])}
        return {
            "type": "array",
            "prefixItems": [_hint_schema(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in (dict, Mapping):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = _hint_schema(args[1])
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        schema = {"enum": values}
        kinds = {_literal_type(v) for v in values}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_schema(hint)
    model_schema = getattr(hint, "model_json_schema", None)
    if callable(model_schema):
        schema = dict(model_schema())
        check_schema(schema, where=f"schema of {getattr(hint, '__name__', hint)}")
        return schema
    raise RequestError(f"A tool parameter cannot be of type {hint!r}: no JSON schema for it.")


def _literal_type(value: Any) -> str | None:
    kind = json_type(value)
    return kind if kind in ("boolean", "integer", "number", "string") else None


def _dataclass_schema(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        props[f.name] = _hint_schema(hints.get(f.name, Any))
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


_SECTION_RE = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$", re.IGNORECASE)
_ANY_SECTION_RE = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_ARG_LINE_RE = re.compile(r"^\s*\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_RE = re.compile(r"^\s*:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (the text before any section) and per-parameter descriptions.

    Understands Google style (``Args:`` with ``name: text`` lines) and Sphinx style
    (``:param name: text``).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    in_other = False
    for line in lines:
        sphinx = _SPHINX_RE.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            in_args, in_other = True, False
            continue
        if _SECTION_RE.match(line):
            in_args, in_other, current = True, False, None
            continue
        if _ANY_SECTION_RE.match(line) and not line.startswith((" ", "\t")):
            in_args, in_other, current = False, True, None
            continue
        if in_args:
            arg = _ARG_LINE_RE.match(line)
            indent = len(line) - len(line.lstrip())
            if arg and (indent <= 4 or current is None):
                current = arg.group(1)
                params[current] = arg.group(3).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
            continue
        if not in_other and not line.lstrip().startswith(":"):
            summary.append(line)
    text = "\n".join(summary).strip()
    return re.sub(r"\s*\n\s*\n\s*", "\n\n", text), params


def parameters_schema(function: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema of a function's keyword parameters, from its hints and docstring.

    ``*args``/``**kwargs`` and a leading ``self``/``cls`` are not parameters the model
    can fill and are left out.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise RequestError(f"Cannot read the parameters of {function!r}: {exc}.") from exc
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to raw ones
        hints = dict(getattr(function, "__annotations__", {}) or {})
    _, docs = _parse_docstring(inspect.getdoc(function))
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, param in signature.parameters.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise RequestError(
                f"Tool parameter {name!r} is positional-only; tools are called with names."
            )
        schema = _hint_schema(hints.get(name, inspect.Parameter.empty))
        if name in docs and docs[name] and "description" not in schema:
            schema["description"] = docs[name]
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            default = param.default
            if default is None or isinstance(default, str | int | float | bool):
                schema["default"] = default
            elif isinstance(default, enum.Enum):
                schema["default"] = default.value
        props[name] = schema
    result: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        result["required"] = required
    return result


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a function (``@tool`` or ``@tool(name=..., timeout=...)``).

    The name defaults to the function's name, the description to its docstring's
    summary, and the parameters are derived by :func:`parameters_schema`.
    """

    def build(fn: Callable[..., Any]) -> Tool:
        summary, _ = _parse_docstring(inspect.getdoc(fn))
        return Tool(
            name=name or str(getattr(fn, "__name__", "tool")),
            description=description if description is not None else summary,
            parameters=parameters_schema(fn),
            function=fn,
            timeout=timeout,
        )

    if function is not None:
        return build(function)
    return build


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """A :class:`Tool` as it is, or a plain function made into one."""
    if isinstance(value, Tool):
        return value
    if callable(value):
        return tool(value)
    raise RequestError(f"{value!r} is not a tool: give a Tool or a function.")


def as_tools(values: Sequence[Tool | Callable[..., Any]]) -> tuple[Tool, ...]:
    """Tools from tools and functions; two tools with one name raise :class:`RequestError`."""
    tools = tuple(as_tool(v) for v in values)
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise RequestError(f"Two tools are named {t.name!r}; tool names must differ.")
        seen.add(t.name)
    return tools


def tool_result_text(value: Any) -> str:
    """What a tool returned, as the text the model reads (JSON for non-strings)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
