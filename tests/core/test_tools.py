"""Tools (issue 3 "Tools"): the ``@tool`` decorator's schemas, and the JSON-schema checker
that tool arguments and structured replies are validated with."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

import pydantic
import pytest

from workbench.core.schema import check_schema, parse_json_reply, validate
from workbench.core.tools import Tool, as_tool, as_tools, parameters_schema, tool, tool_result_text
from workbench.errors import RequestError


class Unit(enum.Enum):
    CELSIUS = "C"
    FAHRENHEIT = "F"


@dataclass
class Point:
    x: float
    y: float = 0.0


def test_decorator_derives_names_descriptions_and_required_parameters() -> None:
    @tool
    def weather(city: str, days: int = 1, unit: Literal["C", "F"] = "C") -> str:
        """The weather forecast for a city.

        Args:
            city: the city's name,
                as people write it.
            days: how many days ahead.
        """
        return f"{city}:{days}:{unit}"

    assert isinstance(weather, Tool)
    assert weather.name == "weather"
    assert weather.description == "The weather forecast for a city."
    params = weather.parameters
    assert params["type"] == "object"
    assert params["required"] == ["city"]
    assert params["properties"]["city"] == {
        "type": "string",
        "description": "the city's name, as people write it.",
    }
    assert params["properties"]["days"]["type"] == "integer"
    assert params["properties"]["days"]["default"] == 1
    assert params["properties"]["unit"]["enum"] == ["C", "F"]
    assert weather(city="Porto", days=2) == "Porto:2:C"
    assert weather.spec().to_openai()["function"]["name"] == "weather"


def test_hints_of_every_supported_kind_become_schemas() -> None:
    def everything(
        tags: list[str],
        pair: tuple[int, str],
        many: tuple[float, ...],
        scores: dict[str, float],
        maybe: int | None,
        either: int | str,
        unit: Unit,
        point: Point,
        anything,  # noqa: ANN001 - no hint means any JSON value
        flag: bool = False,
    ) -> None:
        """Sphinx style.

        :param tags: labels to add
        """

    props = parameters_schema(everything)["properties"]
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "labels to add",
    }
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["many"] == {"type": "array", "items": {"type": "number"}}
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["maybe"] == {"type": ["integer", "null"]}
    assert props["either"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["unit"] == {"enum": ["C", "F"], "type": "string"}
    assert props["point"]["properties"]["x"] == {"type": "number"}
    assert props["point"]["required"] == ["x"]
    assert props["anything"] == {}
    assert props["flag"] == {"type": "boolean", "default": False}


class Order(pydantic.BaseModel):
    item: str
    count: int = 1


def test_pydantic_models_as_parameters_use_their_own_schema() -> None:
    def place(order: Order) -> str:
        return order.item

    schema = parameters_schema(place)["properties"]["order"]
    assert schema["properties"]["item"]["type"] == "string"
    assert schema["required"] == ["item"]


def test_decorator_with_options_overrides_name_description_and_timeout() -> None:
    @tool(name="clock", description="What time it is.", timeout=2.5)
    def now() -> str:
        return "noon"

    assert (now.name, now.description, now.timeout) == ("clock", "What time it is.", 2.5)
    assert now.parameters == {"type": "object", "properties": {}}


def test_bad_tools_are_refused_with_a_reason() -> None:
    with pytest.raises(RequestError, match="not allowed"):
        Tool("has spaces", "", {"type": "object"}, lambda: None)
    with pytest.raises(RequestError, match="not a JSON schema"):
        Tool("t", "", {"type": "object", "properties": {"a": {"type": "strng"}}}, lambda: None)
    with pytest.raises(RequestError, match="object schema"):
        Tool("t", "", {"type": "string"}, lambda: None)
    with pytest.raises(RequestError, match="nothing to call"):
        Tool("t", "", {"type": "object"}, "not callable")  # type: ignore[arg-type]
    with pytest.raises(RequestError, match="no JSON schema"):
        tool(_takes_a_file)
    with pytest.raises(RequestError, match="Two tools"):
        as_tools([tool(_takes_nothing), tool(_takes_nothing)])
    with pytest.raises(RequestError, match="not a tool"):
        as_tool(42)  # type: ignore[arg-type]


def _takes_a_file(handle: bytes) -> None:
    """bytes has no JSON schema."""


def _takes_nothing() -> None:
    """Nothing."""


def test_arguments_are_checked_against_the_parameters() -> None:
    @tool
    def book(seat: int, name: str, meal: Literal["veg", "fish"] = "veg") -> None:
        """Book a seat."""

    assert book.check_arguments({"seat": 3, "name": "Ana"}) == []
    problems = book.check_arguments({"seat": "3", "meal": "beef"})
    assert any("$.seat" in p and "integer" in p for p in problems)
    assert any("'name' is missing" in p for p in problems)
    assert any("$.meal" in p for p in problems)


def test_results_become_text_for_the_model() -> None:
    assert tool_result_text("plain") == "plain"
    assert tool_result_text(None) == ""
    assert tool_result_text({"b": 1, "a": [1, 2]}) == '{"b": 1, "a": [1, 2]}'
    assert tool_result_text(Point(1.0, 2.0)) == '{"x": 1.0, "y": 2.0}'


# -- the schema checker -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ([1, 2], "expected an object"),
        ("string", "expected an object"),
        ({"type": "text"}, "type 'text'"),
        ({"type": "object", "properties": []}, "'properties' must be an object"),
        ({"type": "object", "required": "a"}, "'required' must be a list"),
        ({"enum": "abc"}, "'enum' must be a list"),
        ({"anyOf": []}, "non-empty list"),
        ({"minimum": "3"}, "'minimum' must be a number"),
        ({"pattern": "("}, "not a regular expression"),
    ],
)
def test_what_is_not_a_schema_is_refused(schema: object, fragment: str) -> None:
    with pytest.raises(RequestError, match="not a JSON schema") as err:
        check_schema(schema)
    assert fragment in str(err.value)


def test_validate_reports_every_problem_with_its_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "kind": {"$ref": "#/$defs/kind"},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
        "$defs": {"kind": {"enum": ["a", "b"]}},
    }
    assert validate({"name": "Ana", "age": 3, "tags": ["x"], "kind": "a"}, schema) == []
    problems = validate(
        {"name": "A", "age": -1.5, "tags": ["x", 2, "y"], "kind": "c", "x": 1}, schema
    )
    text = "\n".join(problems)
    assert "$.name: shorter than 2" in text
    assert "$.age: expected integer" in text
    assert "$.tags[1]: expected string" in text
    assert "$.tags: more than 2 items" in text
    assert "$.kind:" in text
    assert "'x' is not allowed" in text


def test_validate_understands_unions_numbers_and_nulls() -> None:
    schema = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert validate(None, schema) == []
    assert validate(3, schema) == []
    assert validate(3.0, {"type": "integer"}) == []
    assert validate(True, {"type": "integer"}) != []
    assert validate(2, {"type": "number", "exclusiveMaximum": 2}) != []
    assert validate("x", {"oneOf": [{"type": "string"}, {"type": "string"}]}) != []
    assert validate("x", {"not": {"type": "string"}}) != []


def test_parse_json_reply_accepts_fenced_json_and_explains_the_rest() -> None:
    assert parse_json_reply('{"a": 1}') == {"a": 1}
    assert parse_json_reply('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_json_reply("Sure! Here it is: {a: 1}")
    with pytest.raises(ValueError, match="empty"):
        parse_json_reply("   ")
