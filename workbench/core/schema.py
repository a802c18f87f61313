"""A small JSON Schema checker for tool arguments and structured replies.

The workbench validates two things against JSON schemas: the arguments a model passes
to a tool, and the JSON a model returns for ``execute_with_schema``. Both use the common
subset of JSON Schema that models are asked to follow: ``type`` (one or a list),
``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/
``maximum`` (and the exclusive forms), ``anyOf``/``oneOf``/``allOf`` and local ``$ref``
into ``$defs`` or ``definitions``. Keywords outside the subset are ignored, as a
validator that does not know them must.

:func:`check_schema` rejects what is not a schema at all (a list, an unknown type name, a
``required`` that is not a list of names) with a :class:`~workbench.errors.RequestError`
that says what is wrong. :func:`validate` returns the problems as sentences with the
JSON path of each (``$.items[2].name: expected a string, got 3``); an empty list means
the value is valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from workbench.errors import RequestError

__all__ = ["JSON_TYPES", "check_schema", "parse_json_reply", "validate"]

JSON_TYPES: tuple[str, ...] = (
    "string",
    "integer",
    "number",
    "boolean",
    "object",
    "array",
    "null",
)

_SCHEMA_KEYS = ("items", "additionalProperties", "not")
_SCHEMA_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems")
_NUMBER_KEYS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
)
#: Stops a schema whose $ref points back at itself from looping forever.
_MAX_DEPTH = 64


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"),
    (str, "string"), (list, "array"), (dict, "object"),
)


def json_type(value: Any) -> str:
    """The JSON-schema type name of a Python value (its class name when none fits)."""
    for kind, name in _JSON_TYPES:  # bool before int: True is an int to Python
        if isinstance(value, kind):
            return name
    return type(value).__name__


def check_schema(schema: Any, *, where: str = "schema") -> None:
    """Raise :class:`RequestError` when ``schema`` is not a usable JSON schema.

    ``True`` and ``False`` are schemas (anything, nothing); otherwise it must be an
    object whose keywords of the supported subset have the right shapes.
    """
    _check(schema, where, 0)


def _check(schema: Any, where: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise RequestError(f"The {where} is nested too deeply to be a JSON schema.")
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise RequestError(
            f"The {where} is not a JSON schema: expected an object, got {json_type(schema)}."
        )
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        for name in kinds:
            if name not in JSON_TYPES:
                raise RequestError(
                    f"The {where} is not a JSON schema: type {name!r} is not one of "
                    f"{', '.join(JSON_TYPES)}."
                )
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            raise RequestError(f"The {where} is not a JSON schema: 'properties' must be an object.")
        for key, sub in props.items():
            _check(sub, f"{where} property {key!r}", depth + 1)
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(r, str) for r in required)
    ):
        raise RequestError(
            f"The {where} is not a JSON schema: 'required' must be a list of property names."
        )
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        raise RequestError(f"The {where} is not a JSON schema: 'enum' must be a list.")
    for key in _SCHEMA_KEYS:
        if key in schema:
            _check(schema[key], f"{where} {key!r}", depth + 1)
    for key in _SCHEMA_LIST_KEYS:
        if key in schema:
            options = schema[key]
            if not isinstance(options, list) or not options:
                raise RequestError(
                    f"The {where} is not a JSON schema: {key!r} must be a non-empty list."
                )
            for i, sub in enumerate(options):
                _check(sub, f"{where} {key}[{i}]", depth + 1)
    for key in _NUMBER_KEYS:
        value = schema.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise RequestError(f"The {where} is not a JSON schema: {key!r} must be a number.")
    pattern = schema.get("pattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise RequestError(
                f"The {where} is not a JSON schema: 'pattern' {pattern!r} is not a regular "
                f"expression ({exc})."
            ) from exc
    for defs_key in ("$defs", "definitions"):
        defs = schema.get(defs_key)
        if defs is not None:
            if not isinstance(defs, Mapping):
                raise RequestError(
                    f"The {where} is not a JSON schema: {defs_key!r} must be an object."
                )
            for key, sub in defs.items():
                _check(sub, f"{where} definition {key!r}", depth + 1)


def validate(value: Any, schema: Any) -> list[str]:
    """The ways ``value`` breaks ``schema``, as sentences with JSON paths; [] when valid."""
    errors: list[str] = []
    _validate(value, schema, "$", schema, errors, 0)
    return errors


def _resolve(ref: str, root: Any) -> Any:
    if not ref.startswith("#/"):
        raise RequestError(f"Only local schema references are supported, not {ref!r}.")
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise RequestError(f"The schema reference {ref!r} points at nothing.")
        node = node[part]
    return node


def _matches_type(value: Any, kind: str) -> bool:
    actual = json_type(value)
    if kind == "number":
        return actual in ("number", "integer")
    if kind == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == kind


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _validate(
    value: Any, schema: Any, path: str, root: Any, errors: list[str], depth: int
) -> None:
    if depth > _MAX_DEPTH:
        errors.append(f"{path}: the schema nests too deeply")
        return
    if schema is True or schema is None:
        return
    if schema is False:
        errors.append(f"{path}: no value is allowed here")
        return
    if not isinstance(schema, Mapping):
        return
    if "$ref" in schema:
        _validate(value, _resolve(str(schema["$ref"]), root), path, root, errors, depth + 1)
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_matches_type(value, k) for k in kinds):
            wanted = " or ".join(kinds)
            errors.append(f"{path}: expected {wanted}, got {json_type(value)} {_show(value)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_show(v) for v in schema["enum"])
        errors.append(f"{path}: {_show(value)} is not one of {allowed}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: expected {_show(schema['const'])}, got {_show(value)}")
    if isinstance(value, str):
        _validate_string(value, schema, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(value, schema, path, errors)
    elif isinstance(value, list | dict):

        def child(item: Any, sub: Any, where: str) -> None:
            _validate(item, sub, where, root, errors, depth + 1)

        if isinstance(value, list):
            _validate_array(value, schema, path, errors, child)
        else:
            _validate_object(value, schema, path, errors, child)
    for sub in schema.get("allOf") or ():
        _validate(value, sub, path, root, errors, depth + 1)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if not options:
            continue
        passing = 0
        first_failure: list[str] = []
        for sub in options:
            found: list[str] = []
            _validate(value, sub, path, root, found, depth + 1)
            if not found:
                passing += 1
            elif not first_failure:
                first_failure = found
        if passing == 0:
            detail = f" (for instance {first_failure[0]})" if first_failure else ""
            errors.append(f"{path}: matches none of the allowed shapes{detail}")
        elif key == "oneOf" and passing > 1:
            errors.append(f"{path}: matches {passing} of the shapes where exactly one must match")
    if "not" in schema:
        found = []
        _validate(value, schema["not"], path, root, found, depth + 1)
        if not found:
            errors.append(f"{path}: matches a shape that is not allowed")


def _validate_string(value: str, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{path}: shorter than {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{path}: longer than {schema['maxLength']} characters")
    pattern = schema.get("pattern")
    if pattern is not None and re.search(pattern, value) is None:
        errors.append(f"{path}: {_show(value)} does not match the pattern {pattern!r}")


def _validate_number(
    value: float, schema: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} is less than the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: {value} is more than the maximum {schema['maximum']}")
    low = schema.get("exclusiveMinimum")
    if isinstance(low, int | float) and not isinstance(low, bool) and value <= low:
        errors.append(f"{path}: {value} must be more than {low}")
    high = schema.get("exclusiveMaximum")
    if isinstance(high, int | float) and not isinstance(high, bool) and value >= high:
        errors.append(f"{path}: {value} must be less than {high}")


# How the array and object checks validate an item against a sub-schema at a path, one
# level deeper in the same document.
_Child = Callable[[Any, Any, str], None]


def _validate_array(
    value: list[Any], schema: Mapping[str, Any], path: str, errors: list[str], child: _Child
) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{path}: fewer than {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{path}: more than {schema['maxItems']} items")
    prefix = schema.get("prefixItems") or []
    for i, sub in enumerate(prefix[: len(value)]):
        child(value[i], sub, f"{path}[{i}]")
    items = schema.get("items")
    if items is not None:
        for i in range(len(prefix), len(value)):
            child(value[i], items, f"{path}[{i}]")


def _validate_object(
    value: dict[str, Any], schema: Mapping[str, Any], path: str, errors: list[str],
    child: _Child,
) -> None:
    props: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            errors.append(f"{path}: the required property {name!r} is missing")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        where = f"{path}.{key}"
        if key in props:
            child(item, props[key], where)
        elif extra is False:
            errors.append(f"{path}: the property {key!r} is not allowed")
        elif isinstance(extra, Mapping):
            child(item, extra, where)


_FENCE_RE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_reply(text: str) -> Any:
    """The JSON value in a model's reply, allowing a surrounding Markdown code fence.

    Raises ``ValueError`` with the parser's reason when the text is not JSON.
    """
    body = text.strip()
    fenced = _FENCE_RE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise ValueError("the reply is empty, not JSON")
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc
