"""core.jsontext.indented writes exactly what json.dumps(indent=2) writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.core.jsontext import indented

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text())
keys = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(keys, inner, max_size=4),
    max_leaves=30,
)


@given(values)
def test_the_same_text_as_json_dumps(value: Any) -> None:
    assert indented(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_a_request_payload_and_other_indents() -> None:
    payload = {"model": "m", "messages": [
        {"role": "user", "content": "héllo \"quoted\"\n\t<|endoftext|> ☃"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
    ], "temperature": 0.5, "stream": True, "stop": None, "n": 1, "extra": {}, "tags": []}
    for indent in (2, 4):
        assert indented(payload, indent) == json.dumps(payload, indent=indent,
                                                       ensure_ascii=False)


def test_what_json_cannot_write_is_refused_the_same_way() -> None:
    with pytest.raises(TypeError):
        indented({"a": object()})
    with pytest.raises(TypeError):
        indented({(1, 2): "tuple key"})
