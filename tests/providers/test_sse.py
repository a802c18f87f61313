"""The SSE decoder against the WHATWG rules, and against any split of the byte stream."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.providers.sse import ServerSentEvent, SSEDecoder


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


def test_data_lines_join_with_newlines_and_blank_line_dispatches() -> None:
    events = decode(b"data: first\ndata: second\n\ndata: third\n\n")
    assert [(e.event, e.data) for e in events] == [
        ("message", "first\nsecond"),
        ("message", "third"),
    ]


def test_comments_are_ignored_and_event_names_the_type() -> None:
    events = decode(b": keep-alive\nevent: ping\ndata: {}\n\n: another\n\n")
    assert [(e.event, e.data) for e in events] == [("ping", "{}")]


def test_only_one_space_after_the_colon_is_removed() -> None:
    events = decode(b"data:no space\n\ndata:  two spaces\n\n")
    assert [e.data for e in events] == ["no space", " two spaces"]


def test_line_without_colon_is_a_field_with_empty_value() -> None:
    # "data" alone appends an empty line; an unknown field is ignored.
    events = decode(b"data\ndata\n\nthis is junk\ndata: x\n\n")
    assert [e.data for e in events] == ["\n", "x"]


def test_event_without_data_is_not_dispatched_and_its_type_is_reset() -> None:
    events = decode(b"event: lonely\n\ndata: after\n\n")
    assert [(e.event, e.data) for e in events] == [("message", "after")]


def test_empty_data_line_dispatches_an_empty_event() -> None:
    assert [e.data for e in decode(b"data:\n\n")] == [""]


def test_last_event_id_persists_and_nul_ids_are_ignored() -> None:
    events = decode(b"id: 7\ndata: a\n\ndata: b\n\nid: bad\x00id\ndata: c\n\nid\ndata: d\n\n")
    assert [(e.data, e.id) for e in events] == [("a", "7"), ("b", "7"), ("c", "7"), ("d", "")]


def test_retry_takes_only_ascii_digits() -> None:
    events = decode(b"retry: 1500\ndata: a\n\nretry: 12x\ndata: b\n\nretry: \xc2\xb2\ndata: c\n\n")
    assert [e.retry for e in events] == [1500, 1500, 1500]


def test_cr_crlf_and_lf_line_endings_all_work() -> None:
    for ending in (b"\n", b"\r", b"\r\n"):
        stream = b"event: e" + ending + b"data: x" + ending + b"data: y" + ending + ending
        events = decode(stream)
        assert [(e.event, e.data) for e in events] == [("e", "x\ny")], ending


def test_crlf_split_between_chunks_is_one_line_break() -> None:
    # If the LF after a CR were taken for a second line break, "b" would dispatch alone.
    assert [e.data for e in decode(b"data: a\r", b"\ndata: b\r\n\r\n")] == ["a\nb"]


def test_bom_is_skipped_only_at_the_start() -> None:
    events = decode(b"\xef\xbb\xbfdata: a\n\ndata: \xef\xbb\xbfb\n\n")
    assert [e.data for e in events] == ["a", "\ufeffb"]


def test_bom_split_across_chunks_is_still_skipped() -> None:
    assert [e.data for e in decode(b"\xef", b"\xbb", b"\xbfdata: a\n\n")] == ["a"]


def test_unfinished_event_at_end_of_stream_is_dropped() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: cut") == [ServerSentEvent(data="complete")]
    assert decoder.pending
    assert decoder.close() == []


def test_multibyte_characters_split_across_chunks() -> None:
    payload = "data: héllo → 世界 🙂\n\n".encode()
    chunks = [payload[i : i + 1] for i in range(len(payload))]
    assert [e.data for e in decode(*chunks)] == ["héllo → 世界 🙂"]


# -- any split of the stream gives the same events -------------------------------------------

_LINE_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)),
    max_size=12,
)


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    """A serialized stream and the events a correct decoder must produce from it."""
    ending = draw(st.sampled_from(["\n", "\r", "\r\n"]))
    parts: list[str] = []
    expected: list[ServerSentEvent] = []
    last_id = ""
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        if draw(st.booleans()):
            parts.append(":" + draw(_LINE_TEXT) + ending)
        event_type = draw(st.one_of(st.just(""), _LINE_TEXT.filter(lambda t: t.strip() != "")))
        if event_type:
            parts.append(f"event: {event_type}{ending}")
        if draw(st.booleans()):
            last_id = draw(_LINE_TEXT)
            parts.append(f"id: {last_id}{ending}")
        lines = draw(st.lists(_LINE_TEXT, min_size=1, max_size=3))
        parts.extend(f"data: {line}{ending}" for line in lines)
        parts.append(ending)
        expected.append(ServerSentEvent(event_type or "message", "\n".join(lines), last_id))
    return "".join(parts).encode(), expected


@settings(max_examples=150, deadline=None)
@given(event_streams())
def test_every_single_split_point_gives_the_same_events(
    case: tuple[bytes, list[ServerSentEvent]],
) -> None:
    stream, expected = case
    assert decode(stream) == expected
    for cut in range(len(stream) + 1):
        assert decode(stream[:cut], stream[cut:]) == expected, cut


@settings(max_examples=150, deadline=None)
@given(event_streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_many_split_points_give_the_same_events(
    case: tuple[bytes, list[ServerSentEvent]], cuts: list[int]
) -> None:
    stream, expected = case
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode(*chunks) == expected


@settings(max_examples=60, deadline=None)
@given(event_streams())
def test_byte_at_a_time_gives_the_same_events(case: tuple[bytes, list[ServerSentEvent]]) -> None:
    stream, expected = case
    assert decode(*(stream[i : i + 1] for i in range(len(stream)))) == expected
