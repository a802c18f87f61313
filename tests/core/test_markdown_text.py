"""Markdown marks taken out of an excerpt (core/markdown_text.py): what a person reads."""

from __future__ import annotations

import pytest

from workbench.core.markdown_text import markdown_marks_removed

MARKS = "\x02\x03"


@pytest.mark.parametrize(("text", "read"), [
    ("*\x02Aeroporto\x03* de Lisboa", "\x02Aeroporto\x03 de Lisboa"),
    ("**bold**, _soft_ and ~~gone~~", "bold, soft and gone"),
    ("`code` and ``more code``", "code and more code"),
    ("## Heading\n- item\n1. first\n> quoted\n- [x] done", "Heading\nitem\nfirst\nquoted\ndone"),
    ("see [the \x02airport\x03](https://example.com/a) now", "see the \x02airport\x03 now"),
    ("![a photo](p.png) and <https://example.com>", "a photo and https://example.com"),
    ("```python\nprint(1)\n```", "print(1)"),
    ("above\n***\nbelow", "above\nbelow"),
    # An excerpt cuts pairs in two: a mark against a word on one side still goes.
    ("…the *\x02Aeroporto\x03", "…the \x02Aeroporto\x03"),
    ("\x02Aeroporto\x03** de…", "\x02Aeroporto\x03 de…"),
    ("(*word*)", "(word)"),
])
def test_marks_go_and_the_words_stay(text: str, read: str) -> None:
    assert markdown_marks_removed(text, transparent=MARKS) == read


@pytest.mark.parametrize("text", [
    "2 * 3 = 6", "snake_case_name", "a*b*c", "costs 5 € ~ 6 $", "<b>not a tag</b> & co",
])
def test_what_is_not_a_mark_is_left_as_it_is(text: str) -> None:
    assert markdown_marks_removed(text) == text


def test_an_escaped_mark_is_the_character() -> None:
    assert markdown_marks_removed(r"\*not emphasis\* and 1\. not a list") == \
        "*not emphasis* and 1. not a list"
