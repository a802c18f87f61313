"""The extractive summarizer's token count of its own lines, made while it writes them."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from workbench.core.conversation import Message
from workbench.core.summarizers import (
    SUMMARY_HEADING,
    CountedText,
    ExtractiveSummarizer,
    clear_count_cache,
)
from workbench.core.tokens import ESTIMATE_ENCODING, get_counter
from workbench.engine.compaction import request_tokens

WORDS = "Porto refund … 🎉 naïve - -- `code` 42 x=1; tab\tend line\nbreak ok. (empty) é".split(" ")


def _messages(count: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 90)))
        role = rng.choice(["user", "assistant", "tool"])
        name = "lookup" if role == "tool" and i % 3 == 0 else None
        calls = (
            [{"id": f"c{i}", "function": {"name": "search", "arguments": "{}"}}]
            if role == "assistant" and i % 7 == 0
            else None
        )
        out.append(Message(role, text, id=i + 1, position=i, name=name, tool_calls=calls))
    return out


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_the_counted_tail_is_the_exact_count_of_the_lines(encoding: str) -> None:
    counter = get_counter(encoding)
    folded = _messages(4 * ExtractiveSummarizer.COUNT_BLOCK_LINES + 17, seed=3)
    clear_count_cache()
    draft = ExtractiveSummarizer(counter=counter).summarize(folded, "")
    plain = ExtractiveSummarizer().summarize(folded, "")
    assert draft.text == plain.text  # counting changes nothing in the text
    assert draft.counted_tail is not None
    assert draft.text == SUMMARY_HEADING + "\n" + draft.counted_tail.text
    assert draft.counted_tail.tokens == counter.count_text(draft.counted_tail.text)
    # A second summary of the same messages takes the remembered block counts: same figure.
    again = ExtractiveSummarizer(counter=counter).summarize(folded, "")
    assert again.counted_tail == draft.counted_tail
    # One more message: only the last block differs, and the count is still exact.
    longer = ExtractiveSummarizer(counter=counter).summarize(
        folded + _messages(1, seed=9), ""
    )
    assert longer.counted_tail is not None
    assert longer.counted_tail.tokens == counter.count_text(longer.counted_tail.text)


def test_the_estimate_and_odd_roles_carry_no_count() -> None:
    counter = get_counter()
    few = _messages(20, seed=1)
    draft = ExtractiveSummarizer(counter=counter).summarize(few, "")
    assert draft.counted_tail is not None
    assert draft.counted_tail.tokens == counter.count_text(draft.counted_tail.text)
    odd = ExtractiveSummarizer(counter=counter).summarize([Message("narrator", "hi")], "")
    assert odd.counted_tail is None and odd.text.endswith("- narrator: hi")
    estimate = get_counter(ESTIMATE_ENCODING)
    assert estimate.estimated
    many = _messages(4 * ExtractiveSummarizer.COUNT_BLOCK_LINES, seed=2)
    assert ExtractiveSummarizer(counter=estimate).summarize(many, "").counted_tail is None


@pytest.mark.parametrize("previous", ["", "Earlier: the user lives in Porto.",
                                      SUMMARY_HEADING + "\n- user: hello"])
def test_request_tokens_with_the_counted_tail_equal_counting_everything(previous: str) -> None:
    counter = get_counter()
    folded = _messages(3 * ExtractiveSummarizer.COUNT_BLOCK_LINES, seed=5)
    history = _messages(12, seed=6)
    draft = ExtractiveSummarizer(counter=counter).summarize(folded, previous)
    from workbench.core.summarizers import combine_summary

    summary = combine_summary(previous, draft.text, draft.mode)
    exact = request_tokens("Be brief.", summary, history, counter)
    assert request_tokens(
        "Be brief.", summary, history, counter, counted_tail=draft.counted_tail
    ) == exact
    # A summary the person edited no longer ends with the counted lines: counted whole.
    edited = summary + " (checked)"
    assert request_tokens(
        "Be brief.", edited, history, counter, counted_tail=draft.counted_tail
    ) == request_tokens("Be brief.", edited, history, counter)
    # A wrong figure for a tail that does not end the summary is never used.
    bogus = CountedText("- user: not in the summary", 10**6)
    assert request_tokens("Be brief.", summary, history, counter, counted_tail=bogus) == exact


def test_an_edited_message_gets_its_new_line() -> None:
    from dataclasses import replace

    summarizer = ExtractiveSummarizer(line_chars=40)
    folded = _messages(300, seed=11)
    first = summarizer.summarize(folded, "").text
    assert summarizer.summarize(folded, "").text == first
    edited = list(folded)
    edited[5] = replace(folded[5], content="Changed: the flight is on Monday now.")
    edited[6] = replace(folded[6], role="user" if folded[6].role != "user" else "assistant")
    again = summarizer.summarize(edited, "").text.splitlines()
    assert again[6] == "- " + edited[5].role + ": Changed: the flight is on Monday now."
    assert again[7].startswith(f"- {edited[6].role}: ")
    assert again[:6] == first.splitlines()[:6] and again[8:] == first.splitlines()[8:]


@given(st.text(alphabet=st.sampled_from(list("ab \t\n\r\u00a0\u2003\u3000\x1c\x1f\x85\u2028é.…-")),
               max_size=400),
       st.sampled_from([40, 160]))
@example(" " * 200, 40)  # longer than the part looked at first, and only whitespace
@example("\n" * 300 + "late words", 40)
@example("x" * 40 + " " * 100, 40)  # the limit exactly, then only spaces: no ellipsis
@example("x" * 40 + " " * 60 + "y", 40)  # a space right after the limit
@example(" " + "x" * 60, 40)  # a leading space
@example("x" * 41, 40)  # one over the limit
@example("x " * 30, 40)
def test_a_line_is_the_text_with_its_whitespace_collapsed_and_shortened(
    text: str, limit: int
) -> None:
    from workbench.core.summarizers import shorten

    clear_count_cache()
    (line,) = ExtractiveSummarizer(line_chars=limit).summarize(
        [Message("user", text, id=1)], "").text.splitlines()[1:]
    expected = shorten(text, limit) if text.strip() else "(empty)"
    assert line == f"- user: {expected}"


_BODY_TEXT = st.text(
    alphabet=st.sampled_from(list("ab AZ9-.,:;'…é🎉\t\n/_()[]→")), min_size=0, max_size=120
)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), _BODY_TEXT),
                min_size=1, max_size=30),
       st.sampled_from([20, 40, 160]),
       st.sampled_from(["o200k_base", "cl100k_base"]),
       st.integers(1, 7))
def test_the_lines_count_as_their_starts_plus_their_bodies(
    items: list[tuple[str, str]], limit: int, encoding: str, block: int
) -> None:
    """The counting rule: each line's ``- role:`` plus each body behind a space and
    before a line break, less the last break, in blocks of any size, is the count of the
    lines as one text."""
    counter = get_counter(encoding)
    folded = [Message(role, text) for role, text in items]
    summarizer = ExtractiveSummarizer(limit, counter=counter)
    summarizer.COUNT_BLOCK_LINES = block
    clear_count_cache()
    draft = summarizer.summarize(folded, "")
    assert draft.counted_tail is not None
    assert draft.text == ExtractiveSummarizer(limit).summarize(folded, "").text
    assert draft.counted_tail.tokens == counter.count_text(draft.counted_tail.text)


def test_quick_handoff_shortens_the_switch_interval_and_gives_it_back() -> None:
    import sys
    import threading

    from workbench.core.handoff import HANDOFF_INTERVAL, quick_handoff

    before = sys.getswitchinterval()
    assert before > HANDOFF_INTERVAL
    with quick_handoff():
        assert sys.getswitchinterval() == pytest.approx(HANDOFF_INTERVAL)
        inside = threading.Event()
        leave = threading.Event()

        def other() -> None:
            with quick_handoff():
                inside.set()
                leave.wait(5)

        thread = threading.Thread(target=other)
        thread.start()
        assert inside.wait(5)
    # The other thread still hands off quickly; the interval comes back when it ends.
    assert sys.getswitchinterval() == pytest.approx(HANDOFF_INTERVAL)
    leave.set()
    thread.join(5)
    assert sys.getswitchinterval() == pytest.approx(before)


@pytest.mark.parametrize("counted", [True, False])
def test_a_summarizer_asked_again_for_more_rows_of_a_table_writes_the_same_summary(
    counted: bool,
) -> None:
    from workbench.core.message_table import MessageTable

    counter = get_counter() if counted else None
    messages = _messages(2 * ExtractiveSummarizer.COUNT_BLOCK_LINES + 40, seed=11)
    table = MessageTable.from_messages(messages, encoding="o200k_base", lean=True)
    twice = ExtractiveSummarizer(160, 60_000, counter=counter)
    first = twice.summarize(table.select(range(len(table) - 30)), "")
    # As planning does when the summary still leaves the request over the trigger: the
    # same table again, a few more rows folded (the first ones' lines are not rewritten).
    more = table.select([i for i in range(len(table) - 12) if i != 5])
    clear_count_cache()
    again = twice.summarize(more, "")
    clear_count_cache()
    fresh = ExtractiveSummarizer(160, 60_000, counter=counter).summarize(
        MessageTable.from_messages(messages, encoding="o200k_base", lean=True).select(
            more.indices), "")
    assert again == fresh
    assert first.text.splitlines()[1:6] == again.text.splitlines()[1:6]
    if counted:
        assert again.counted_tail is not None
        assert again.counted_tail.tokens == counter.count_text(again.counted_tail.text)


@pytest.mark.parametrize("kept", ["all", "some", "none"])
def test_a_summary_continued_for_more_rows_of_a_table_is_the_one_written_anew(
    kept: str,
) -> None:
    """Planning again with a few more rows folded (or previewing the same table again)
    continues the table's last counted summary: the same text and count as a summary
    of those rows written from scratch, with the lines the store keeps or without."""
    from workbench.core.message_table import MessageTable
    from workbench.core.summarizers import line_cache
    from workbench.core.tokens import fill_counts

    counter = get_counter()
    messages = _messages(2 * ExtractiveSummarizer.COUNT_BLOCK_LINES + 40, seed=5)
    fill_counts(messages, counter)
    bodies, costs = line_cache(messages)
    if kept == "some":
        bodies = [b if i % 3 else None for i, b in enumerate(bodies)]
        costs = [c if i % 5 else None for i, c in enumerate(costs)]

    def table() -> MessageTable:
        rows = MessageTable.from_messages(messages, encoding=counter.encoding_name, lean=True)
        lines = None if kept == "none" else (list(bodies), list(costs))
        return MessageTable(
            ids=rows.ids, positions=rows.positions, roles=rows.roles, texts=rows.texts,
            costs=rows.costs, encoding=rows.encoding, whole=rows.whole, details=rows.details,
            lines=lines[0] if lines else None, line_costs=lines[1] if lines else None,
        )

    def fresh(indices: list[int]) -> object:
        clear_count_cache()
        return ExtractiveSummarizer(160, 60_000, counter=counter).summarize(
            table().select(indices), "")

    size = len(messages)
    first = [i for i in range(size - 30) if i != 7]
    more = [i for i in range(size - 12) if i != 7]
    gap = [i for i in range(size - 12) if i not in (7, 9)]  # not a continuation
    shared = table()
    summarizer = ExtractiveSummarizer(160, 60_000, counter=counter)
    fewer = first[:40]  # a cut moved far back
    for indices in (first, more, more, first, gap, more, fewer, first):
        clear_count_cache()
        draft = summarizer.summarize(shared.select(indices), "")
        assert draft == fresh(indices)
        assert draft.counted_tail is not None
        assert draft.counted_tail.tokens == counter.count_text(draft.counted_tail.text)
