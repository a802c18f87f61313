"""core.jsontext.indented writes exactly what json.dumps(indent=2) writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.core.jsontext import indented, indented_excerpt

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


def _note(hidden: int, count: int, key: str) -> str:
    # The key as JSON writes it: a key holding a line break must not split the note.
    return f"<{hidden} of {count} {json.dumps(key)} left out>"


@given(
    st.dictionaries(st.text(max_size=3), values, max_size=3),
    st.text(max_size=3),
    st.lists(values, min_size=1, max_size=40),
    st.integers(min_value=0, max_value=400),
    st.integers(min_value=0, max_value=400),
)
def test_an_excerpt_is_the_whole_text_s_beginning_and_end(
    rest: dict[str, Any], key: str, entries: list[Any], head: int, tail: int,
) -> None:
    value = {**rest, key: entries}
    whole = indented(value)
    assert indented_excerpt(value, 10**9, 10**9, _note) == whole
    excerpt = indented_excerpt(value, head, tail, _note)
    assert excerpt is not None
    if excerpt == whole:
        return
    biggest = max(len(v) for v in value.values() if isinstance(v, list) and v)
    (line,) = [n for n in excerpt.split("\n") if n.strip().startswith("<")
               and n.strip().endswith("left out>") and f" of {biggest} " in n]
    hidden = int(line.strip()[1:].split(" ")[0])
    assert 0 < hidden <= biggest
    left, right = excerpt.split("\n\n" + line + "\n")
    assert whole.startswith(left) and whole.endswith(right)
    assert len(left) + len(right) < len(whole)


def test_an_excerpt_of_a_long_payload_keeps_whole_messages_at_both_ends() -> None:
    messages = [{"role": ("user", "assistant")[i % 2], "content": f"Message {i}"}
                for i in range(1_000)]
    payload = {"model": "m", "messages": messages, "stream": True}
    excerpt = indented_excerpt(payload, 2_000, 1_000, _note)
    assert excerpt is not None
    whole = indented(payload)
    assert excerpt.startswith(whole[:2_000]) and excerpt.endswith(whole[-1_000:])
    (line,) = [n for n in excerpt.split("\n") if "left out>" in n]
    hidden = int(line.strip()[1:].split(" ")[0])
    shown = excerpt.count('"role"')
    assert hidden + shown == 1_000 and line.strip().endswith('of 1000 "messages" left out>')
    assert indented_excerpt([1, 2], 10, 10, _note) is None
    assert indented_excerpt({"a": 1, "b": []}, 10, 10, _note) is None
