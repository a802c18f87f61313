"""Session titles from a first prompt: plain text, one line, never the markup."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.core.titles import FALLBACK_TITLE, TITLE_LENGTH, title_from_prompt


@pytest.mark.parametrize(("prompt", "title"), [
    ("# **Plan** the _trip_ to `Paris`\nmore", "Plan the trip to Paris"),
    ("\n\n- [ ] pack the [bags](https://example.com/x)", "pack the bags"),
    ("> quoted *question*?", "quoted question?"),
    ("1. first ![map](/dev/zero) step", "first map step"),
    ("---\n\nReal line", "Real line"),
    ("```python\nprint('hi')\n```", "print('hi')"),
    ("<b>bold</b> <img src=x> text", "bold text"),
    ("snake_case_name stays", "snake_case_name stays"),
    ("   \n\t\n", FALLBACK_TITLE),
    ("# \n**", FALLBACK_TITLE),
])
def test_titles_are_the_plain_text_of_the_first_readable_line(prompt: str, title: str) -> None:
    assert title_from_prompt(prompt) == title


def test_a_long_line_is_shortened_with_an_ellipsis() -> None:
    title = title_from_prompt("word " * 40)
    assert len(title) <= TITLE_LENGTH and title.endswith("…")
    assert title.startswith("word word")


@given(st.text())
def test_any_prompt_gives_one_short_line(prompt: str) -> None:
    title = title_from_prompt(prompt)
    assert title and len(title) <= TITLE_LENGTH
    assert "\n" not in title and "\r" not in title
    assert title == title.strip()
