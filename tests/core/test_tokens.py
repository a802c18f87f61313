"""Offline token counting: loading the vocabularies, the cookbook rule, caching counts."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import math
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken.load
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

from workbench.core import tokens
from workbench.core.conversation import Message
from workbench.core.encodings import ENCODING_DEFINITIONS
from workbench.core.tokens import (
    DEFAULT_ENCODING,
    ESTIMATE_ENCODING,
    TokenCounter,
    clear_counters,
    encoding_for_model,
    fill_counts,
    get_counter,
    parse_vocabulary,
)
from workbench.errors import TokenizerError

# tiktoken's published hashes of the vocabulary files, restated here on purpose: the test
# checks the cached file against the outside world's value, not against the module's.
OFFICIAL_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

SAMPLE_TEXTS = [
    "hello world",
    "Hello, World! How are you doing today?",
    "def add(a: int, b: int) -> int:\n    return a + b\n",
    "    indented\n\n\n  lines\twith\ttabs   ",
    "naïve café, Straße, ĳssel, 東京タワー, Привет мир, مرحبا",
    "emoji 🎉🚀 and ZWJ 👩‍👩‍👧 sequences",
    '{"query": "tokens", "limit": 10, "nested": {"a": [1, 2, 3]}}',
    "numbers 1234567890 3.14159 -42 1e-9",
    "<|endoftext|> and <|endofprompt|> and <|fim_prefix|> typed by a user",
    "",
    " ",
    "I'm sure they'll say it's John's, won't they? WE'RE NOT",
]


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def o200k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenCounter]:
    """A counter for the default encoding, loaded once for the module into a scratch home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_HOME", str(tmp_path_factory.mktemp("tokens-home")))
        clear_counters()
        counter = get_counter()
        clear_counters()
    assert counter.encoding is not None, "the o200k_base vocabulary should load offline"
    yield counter


@pytest.fixture
def fresh(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty workbench home and no shared counters, before and after the test."""
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    clear_counters()
    yield isolated_home
    clear_counters()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make any attempt to open a network connection fail loudly (and record it)."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("network access is forbidden in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


# --------------------------------------------------------------------------- loading


def test_loads_offline_into_the_workbench_cache(
    fresh: Path, no_network: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiktoken_cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken_cache))
    reader = tiktoken.load.read_file_cached
    loader = openai_public.load_tiktoken_bpe

    counter = get_counter()

    # Nothing inside tiktoken is replaced, not even for a moment.
    assert tiktoken.load.read_file_cached is reader
    assert openai_public.load_tiktoken_bpe is loader

    assert counter.encoding_name == DEFAULT_ENCODING == "o200k_base"
    assert not counter.estimated
    assert counter.count_text("hello world") == 2
    assert no_network == []
    cached = fresh / "cache" / "encodings" / "o200k_base.tiktoken"
    assert cached.is_file()
    assert sha256_of(cached) == OFFICIAL_SHA256["o200k_base"]
    # The atomic write leaves no temporary file behind, and tiktoken made no copy of its own.
    assert sorted(p.name for p in cached.parent.iterdir()) == ["o200k_base.tiktoken"]
    assert not tiktoken_cache.exists()


def test_the_second_load_reads_the_cached_file(
    fresh: Path, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    get_counter("cl100k_base")
    clear_counters()
    # With the package gone, only the cache can provide the vocabulary.
    monkeypatch.setattr(tokens, "_find_packaged_file", lambda name: None)

    counter = get_counter("cl100k_base")

    assert not counter.estimated
    assert counter.encoding_name == "cl100k_base"
    assert counter.count_text("hello world") == 2


def _swap_ranks(path: Path, first: bytes, second: bytes) -> None:
    """Exchange the ranks of two tokens: the file still parses, but means something else."""
    lines = path.read_bytes().splitlines()
    keys = {base64.b64encode(first): None, base64.b64encode(second): None}
    found = {}
    for index, line in enumerate(lines):
        token, _rank = line.split()
        if token in keys:
            found[token] = index
    a, b = (found[base64.b64encode(first)], found[base64.b64encode(second)])
    token_a, rank_a = lines[a].split()
    token_b, rank_b = lines[b].split()
    lines[a] = token_a + b" " + rank_b
    lines[b] = token_b + b" " + rank_a
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.parametrize("damage", ["swapped ranks", "garbage", "truncated"])
def test_a_corrupted_cache_file_is_rebuilt_not_used(
    fresh: Path,
    no_network: list[Any],
    o200k: TokenCounter,
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    get_counter()
    clear_counters()
    cached = fresh / "cache" / "encodings" / "o200k_base.tiktoken"
    if damage == "swapped ranks":
        _swap_ranks(cached, b"hello", b" world")
    elif damage == "garbage":
        cached.write_bytes(b"this is not a vocabulary\n\x00\xff\n")
    else:
        cached.write_bytes(cached.read_bytes()[:100_000])
    assert sha256_of(cached) != OFFICIAL_SHA256["o200k_base"]

    with caplog.at_level(logging.WARNING, logger="workbench.core.tokens"):
        counter = get_counter()

    assert not counter.estimated
    assert counter.encoding is not None and o200k.encoding is not None
    # A counter built on the swapped file would give "hello world" other token ids.
    assert counter.encoding.encode_ordinary("hello world") == o200k.encoding.encode_ordinary(
        "hello world"
    )
    assert sha256_of(cached) == OFFICIAL_SHA256["o200k_base"]
    assert any("rebuilding" in record.getMessage() for record in caplog.records)


def test_an_unwritable_cache_falls_back_to_a_temporary_directory(
    fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A regular file where the home should be: nothing can be created beneath it.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("occupied")
    monkeypatch.setenv("WORKBENCH_HOME", str(blocker))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    counter = get_counter("cl100k_base")

    assert not counter.estimated
    written = list(scratch.rglob("cl100k_base.tiktoken"))
    assert len(written) == 1
    assert sha256_of(written[0]) == OFFICIAL_SHA256["cl100k_base"]


def test_missing_vocabulary_falls_back_to_a_labelled_estimate(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tokens, "_find_packaged_file", lambda name: None)

    with caplog.at_level(logging.WARNING, logger="workbench.core.tokens"):
        counter = get_counter()
        again = get_counter()

    assert again is counter
    assert counter.estimated
    assert counter.encoding_name == ESTIMATE_ENCODING
    assert counter.encoding is None
    assert counter.count_text("x" * 10) == math.ceil(10 / 4)
    assert counter.count_text("") == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "estimate" in warnings[0].getMessage()

    msgs = [Message(role="user", content="abcdefgh")]
    assert fill_counts(msgs, counter) == 1
    assert msgs[0].token_encoding == ESTIMATE_ENCODING
    assert msgs[0].token_count == 3 + math.ceil(4 / 4) + math.ceil(8 / 4)


def test_unknown_encoding_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(TokenizerError) as caught:
        get_counter("p99k_imaginary")
    text = str(caught.value)
    assert "p99k_imaginary" in text
    assert "o200k_base" in text and "cl100k_base" in text


def test_concurrent_first_calls_share_one_counter(fresh: Path) -> None:
    results: list[TokenCounter] = []
    barrier = threading.Barrier(6)

    def fetch() -> None:
        barrier.wait()
        results.append(get_counter("cl100k_base"))

    threads = [threading.Thread(target=fetch) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 6
    assert all(counter is results[0] for counter in results)
    assert not results[0].estimated


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_tokens_equal_an_independent_tokenizer(name: str, fresh: Path) -> None:
    # bpe-openai's Rust tokenizer is a separate implementation of the same encodings.
    bpe_openai = pytest.importorskip("bpe_openai")
    reference = bpe_openai.get_encoding(name)
    counter = get_counter(name)
    assert counter.encoding is not None

    for text in SAMPLE_TEXTS:
        expected = reference.encode_ordinary(text)
        assert counter.encoding.encode_ordinary(text) == expected, text
        assert counter.count_text(text) == len(expected), text


# --------------------------------------------------------------------------- models


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-4-32k", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("text-embedding-ada-002", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-3-large", "cl100k_base"),
        ("openai/gpt-4", "cl100k_base"),
        ("GPT-4", "cl100k_base"),
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4o-2024-08-06", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("llama-3.1-8b-instruct", "o200k_base"),
        ("", "o200k_base"),
        (None, "o200k_base"),
    ],
)
def test_model_to_encoding(model: str | None, expected: str) -> None:
    assert encoding_for_model(model) == expected


def test_get_counter_by_model(fresh: Path) -> None:
    assert get_counter(model="gpt-4").encoding_name == "cl100k_base"
    assert get_counter(model="gpt-4o").encoding_name == "o200k_base"
    assert get_counter(model="gpt-4o") is get_counter()
    # An explicit encoding wins over the model.
    assert get_counter("o200k_base", model="gpt-4") is get_counter()


# --------------------------------------------------------------------------- the rule


def conversation() -> list[Message]:
    return [
        Message(role="system", content="You are a careful assistant."),
        Message(role="user", content="Find my notes about tokens.", name="ana"),
        Message(
            role="assistant",
            content="",
            tool_calls=[
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search_notes", "arguments": '{"query": "tokens"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "current_time", "arguments": "{}"},
                },
            ],
        ),
        Message(role="tool", content='[{"title": "BPE"}]', tool_call_id="call_1"),
        Message(role="tool", content="2024-06-01T12:00:00Z", tool_call_id="call_2"),
        Message(role="assistant", content="You have one note, titled BPE. <|endoftext|>"),
    ]


def test_request_follows_the_cookbook_rule(o200k: TokenCounter) -> None:
    encoding = o200k.encoding
    assert encoding is not None

    def n(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    expected = 3  # priming the reply
    for msg in conversation():
        expected += 3 + n(msg.role) + n(msg.content)
        if msg.name:
            expected += 1 + n(msg.name)
        if msg.tool_call_id:
            expected += n(msg.tool_call_id)
        for call in msg.tool_calls or []:
            expected += n(call["function"]["name"]) + n(call["function"]["arguments"])

    assert o200k.count_request(conversation()) == expected


def test_a_name_costs_one_token_more_than_its_text(o200k: TokenCounter) -> None:
    plain = Message(role="user", content="Hello there")
    named = Message(role="user", content="Hello there", name="example_user")

    assert o200k.count_message(named) - o200k.count_message(plain) == 1 + o200k.count_text(
        "example_user"
    )


def test_an_empty_message_costs_its_overhead_and_role(o200k: TokenCounter) -> None:
    assert o200k.count_message(Message(role="assistant")) == 3 + o200k.count_text("assistant")
    assert o200k.count_request([]) == 3


def test_parts_are_not_counted(o200k: TokenCounter) -> None:
    text = Message(role="assistant", content="The answer is 4.")
    with_parts = Message(
        role="assistant",
        content="The answer is 4.",
        parts=[
            {"type": "reasoning", "text": "Two plus two is four, as everybody knows."},
            {"type": "image", "url": "file:///tmp/sum.png"},
        ],
    )
    assert o200k.count_message(with_parts) == o200k.count_message(text)


def test_tool_call_shapes(o200k: TokenCounter) -> None:
    arguments = {"query": "naïve tokens", "limit": 3}
    as_object = Message(
        role="assistant", tool_calls=[{"id": "t1", "name": "search", "input": arguments}]
    )
    as_text = Message(
        role="assistant",
        tool_calls=[
            {
                "id": "t1",
                "function": {
                    "name": "search",
                    "arguments": json.dumps(arguments, ensure_ascii=False),
                },
            }
        ],
    )
    base = o200k.count_message(Message(role="assistant"))
    expected_extra = o200k.count_text("search") + o200k.count_text(
        json.dumps(arguments, ensure_ascii=False)
    )
    assert o200k.count_message(as_object) == base + expected_extra
    assert o200k.count_message(as_text) == base + expected_extra


def test_batch_counting_equals_one_by_one(o200k: TokenCounter) -> None:
    # Enough messages to take the multi-threaded path.
    msgs = conversation() * 40 + [Message(role="narrator", content=t) for t in SAMPLE_TEXTS]
    assert o200k.count_messages(msgs) == [o200k.count_message(m) for m in msgs]
    assert o200k.count_request(msgs) == sum(o200k.count_message(m) for m in msgs) + 3
    assert o200k.count_messages([]) == []


def test_special_token_text_is_ordinary_text(o200k: TokenCounter) -> None:
    for special in ["<|endoftext|>", "<|endofprompt|>", "<|fim_middle|>"]:
        # As a real special token it would be exactly one token.
        assert o200k.count_text(special) > 1
        assert o200k.count_texts([special, special * 3])[0] == o200k.count_text(special)
        assert o200k.count_message(Message(role="user", content=special)) > 4


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(), max_size=150))
def test_count_texts_equals_count_text(o200k: TokenCounter, texts: list[str]) -> None:
    assert o200k.count_texts(texts) == [o200k.count_text(t) for t in texts]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(), max_size=100))
def test_estimate_batch_equals_single(texts: list[str]) -> None:
    counter = TokenCounter(None)
    assert counter.count_texts(texts) == [math.ceil(len(t) / 4) for t in texts]


def test_single_threaded_counter_agrees(o200k: TokenCounter) -> None:
    texts = [t * (i % 7 + 1) for i, t in enumerate(SAMPLE_TEXTS * 30)]
    serial = TokenCounter(o200k.encoding, threads=1)
    assert serial.count_texts(texts) == o200k.count_texts(texts)


# --------------------------------------------------------------------------- fill_counts


def test_fill_counts_skips_current_and_recounts_stale(o200k: TokenCounter) -> None:
    current = Message(
        role="user", content="already counted", token_count=999, token_encoding="o200k_base"
    )
    other = Message(
        role="user", content="counted elsewhere", token_count=5, token_encoding="cl100k_base"
    )
    estimate = Message(role="user", content="estimated", token_count=7, token_encoding="estimate")
    missing = Message(role="assistant", content="never counted")
    unlabelled = Message(role="assistant", content="unknown origin", token_count=4)
    msgs = [current, other, estimate, missing, unlabelled]

    assert fill_counts(msgs, o200k) == 4

    assert current.token_count == 999  # trusted, not recomputed
    for msg in (other, estimate, missing, unlabelled):
        assert msg.token_encoding == "o200k_base"
        assert msg.token_count == o200k.count_message(Message(role=msg.role, content=msg.content))
    assert fill_counts(msgs, o200k) == 0


def test_fill_counts_uses_the_default_counter(fresh: Path) -> None:
    msgs = [Message(role="user", content="hello world")]
    assert fill_counts(msgs) == 1
    assert msgs[0].token_encoding == DEFAULT_ENCODING
    assert msgs[0].token_count == 3 + get_counter().count_text("user") + 2


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_our_encoding_definitions_are_tiktokens(name: str, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    """The split pattern, special tokens and vocabulary hash written out in
    core.encodings are those of the installed tiktoken (asked here with its vocabulary
    loader stubbed, so nothing is fetched)."""
    asked: list[tuple[str, str | None]] = []

    def no_vocabulary(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append((blobpath, expected_hash))
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", no_vocabulary)
    theirs = openai_public.ENCODING_CONSTRUCTORS[name]()
    ours = ENCODING_DEFINITIONS[name]
    assert theirs["pat_str"] == ours.pattern
    assert theirs["special_tokens"] == ours.special_tokens
    assert asked[0][1] == ours.sha256


def test_a_vocabulary_file_is_parsed_line_by_line() -> None:
    assert parse_vocabulary(b"IQ== 0\nYWI= 1\n\n") == {b"!": 0, b"ab": 1}
    with pytest.raises(ValueError, match="line 2"):
        parse_vocabulary(b"IQ== 0\nnot base64! x\n")


def _vocabulary_line_by_line(data: bytes) -> dict[bytes, int]:
    """The format's rule, line by line: what the fast path must agree with."""
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line.strip():
            token, _, rank = line.partition(b" ")
            ranks[base64.b64decode(token, validate=True)] = int(rank)
    return ranks


VOCABULARY_LINE = st.one_of(
    st.tuples(st.binary(max_size=6), st.integers(0, 10**6)).map(
        lambda pair: base64.b64encode(pair[0]) + b" " + str(pair[1]).encode()
    ),
    st.sampled_from([b"", b" ", b"IQ==\t1", b"IQ== 1 2", b"IQ= 1", b"I Q== 1", b"IQ== x",
                     b"IQ== 1\r", b"\rIQ== 1", b"IQ==  1", b"YWI= +3", b"YWI= 1_0"]),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(VOCABULARY_LINE, max_size=8), end=st.sampled_from([b"", b"\n", b"\r\n"]))
def test_a_vocabulary_parses_as_its_lines_say(lines: list[bytes], end: bytes) -> None:
    data = b"\n".join(lines) + end
    try:
        expected: dict[bytes, int] | None = _vocabulary_line_by_line(data)
    except (ValueError, binascii.Error):
        expected = None
    if expected is None:
        with pytest.raises(ValueError, match="line"):
            parse_vocabulary(data)
    else:
        assert parse_vocabulary(data) == expected


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_published_vocabularies_parse_as_their_lines_say(name: str) -> None:
    encoding = get_counter(name).encoding
    assert encoding is not None
    data = tokens.encodings_cache_dir().joinpath(f"{name}.tiktoken").read_bytes()
    assert parse_vocabulary(data) == _vocabulary_line_by_line(data)


# --------------------------------------------------------------------------- long texts

# Letters, spaces and newlines (where the pieces are cut) mixed with what sits around them
# in real text: other whitespace, punctuation, contractions, digits, accents, CJK.
PIECE_TEXT = st.lists(
    st.sampled_from(list("ab Z\n\t.'9é字") + ["  ", "\n\n", "'s", " \n", "\r\n", "Ab"]),
    max_size=120,
).map("".join)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@settings(max_examples=300, deadline=None)
@given(text=PIECE_TEXT, piece=st.integers(1, 40))
def test_a_long_text_counted_in_pieces_gives_the_count_of_the_whole(
    name: str, text: str, piece: int
) -> None:
    encoding = get_counter(name).encoding
    assert encoding is not None
    encode = encoding.encode_ordinary
    assert tokens.encoded_length(encode, text, piece=piece) == len(encode(text))


def test_a_very_long_message_is_counted_without_its_token_list(fresh: Path) -> None:
    counter = get_counter("cl100k_base")
    assert counter.encoding is not None
    text = "word and more words\nNext line " * (tokens.LONG_TEXT // 10)
    pieces: list[int] = []
    encode = counter.encoding.encode_ordinary

    def recording(chunk: str) -> list[int]:
        pieces.append(len(chunk))
        return encode(chunk)

    assert tokens.encoded_length(recording, text) == len(encode(text))
    assert len(pieces) > 1 and max(pieces) <= tokens.LONG_TEXT + 40


# --------------------------------------------------------------------------- joined batches

# What could make a joined count differ from counting each text alone: special-token text
# (whole, cut short, doubled), whitespace runs at the ends where texts meet, line breaks,
# contractions, digits, text beyond ASCII and emoji.
JOINED_PIECES = st.sampled_from(
    [
        "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|endoftext", "|>", "<|",
        "endoftext|>", " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n ", "'s", "'LL", "a", "Z",
        "word", " word", "9", "123456", ".", "!?", "é", "字", "🎉", "\u200d", "ß", "\u0301",
    ]
)
JOINED_TEXT = st.one_of(
    st.lists(JOINED_PIECES, max_size=30).map("".join),
    st.text(max_size=60),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@settings(max_examples=250, deadline=None)
@given(texts=st.lists(JOINED_TEXT, max_size=40), group=st.integers(1, 200))
def test_texts_counted_many_to_a_call_are_counted_as_tiktoken_counts_each(
    name: str, texts: list[str], group: int
) -> None:
    encoding = get_counter(name).encoding
    assert encoding is not None
    expected = [len(encoding.encode_ordinary(t)) for t in texts]
    assert TokenCounter(encoding, threads=1).count_texts(texts) == expected
    # Small groups too, so that the texts are cut into several native calls.
    joined = tokens._JoinedEncoder.of(encoding)
    assert joined is not None
    joined.group_chars = group
    assert joined(texts) == expected


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_joined_counts_of_long_texts_and_lone_surrogates_are_tiktokens(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoding = get_counter(name).encoding
    assert encoding is not None
    monkeypatch.setattr(tokens, "LONG_TEXT", 5000)
    texts = [
        "word and more words\nNext line " * 400,  # beyond LONG_TEXT: counted in pieces
        "tail  ",
        "a lone surrogate \ud800 in text",  # tiktoken replaces it before encoding
        "   ",
        "x<|endoftext|>y" * 3,
        *SAMPLE_TEXTS,
        " " * 7000,  # a whitespace run longer than LONG_TEXT, with no place to cut
    ]
    counter = TokenCounter(encoding, threads=1)
    assert counter.count_texts(texts) == [len(encoding.encode_ordinary(t)) for t in texts]
    assert TokenCounter(encoding, threads=2).count_texts(texts * 30) == (
        counter.count_texts(texts) * 30
    )


def test_a_batch_of_short_texts_is_one_native_call(o200k: TokenCounter) -> None:
    """Counting a batch takes the interpreter lock back once per call of tiktoken's
    native encoder: once for a batch of short texts, not once per text."""
    assert o200k.encoding is not None
    joined = tokens._JoinedEncoder.of(o200k.encoding)
    assert joined is not None
    calls: list[int] = []
    native = joined._encode

    def counting(text: str, allowed: Any) -> Any:
        calls.append(len(text))
        return native(text, allowed)

    joined._encode = counting
    texts = [f"message {i}: some words, and more" for i in range(500)]
    assert joined(texts) == [len(o200k.encoding.encode_ordinary(t)) for t in texts]
    assert len(calls) == 1


def test_a_buffer_that_does_not_split_per_text_is_counted_text_by_text(
    o200k: TokenCounter,
) -> None:
    assert o200k.encoding is not None
    joined = tokens._JoinedEncoder.of(o200k.encoding)
    assert joined is not None
    separator = joined._sep_bytes
    texts = ["one", "two words", "three words here"]
    expected = [len(o200k.encoding.encode_ordinary(t)) for t in texts]
    for wrong in (separator * 5, b"\x01" + separator + b"\x00\x00\x00", b""):
        joined._encode = lambda text, allowed, wrong=wrong: wrong
        assert joined(texts) == expected


def test_an_encoding_without_the_native_buffer_is_counted_text_by_text(
    o200k: TokenCounter,
) -> None:
    assert o200k.encoding is not None

    class Plain:
        """An encoding with only the public encode_ordinary."""

        name = "o200k_base"
        encode_ordinary = staticmethod(o200k.encoding.encode_ordinary)

    assert tokens._JoinedEncoder.of(Plain()) is None  # type: ignore[arg-type]
    counter = TokenCounter(Plain(), threads=1)  # type: ignore[arg-type]
    assert counter.count_texts(SAMPLE_TEXTS) == o200k.count_texts(SAMPLE_TEXTS)


# --------------------------------------------------------------------------- hostile text

# tiktoken's pre-tokenizer panics (a Rust panic, a BaseException) on a whitespace run of
# about a million characters: of spaces, tabs, no-break spaces (o200k), line separators.
LONG_RUNS = [
    " " * 1_200_000,
    "\t" * 1_000_000 + "x",
    "word " + "\u00a0" * 1_050_000 + " end",
    "\u2028" * 1_000_000,
]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_a_whitespace_run_tiktoken_cannot_take_is_counted_in_pieces(
    name: str, fresh: Path
) -> None:
    counter = get_counter(name)
    assert counter.encoding is not None
    singly = [counter.count_text(text) for text in LONG_RUNS]
    # About what the run's pieces count (the estimate's scale), never nothing.
    assert all(len(text) // 400 < n <= 4 * len(text)
               for n, text in zip(singly, LONG_RUNS, strict=True))
    # The batch paths (joined, serial, several threads) count them the same way, and
    # ordinary texts beside them exactly.
    texts = [*SAMPLE_TEXTS, *LONG_RUNS, "after the runs"]
    expected = [*[len(counter.encoding.encode_ordinary(t)) for t in SAMPLE_TEXTS], *singly,
                len(counter.encoding.encode_ordinary("after the runs"))]
    assert TokenCounter(counter.encoding, threads=1).count_texts(texts) == expected
    assert TokenCounter(counter.encoding, threads=2).count_texts(texts * 20) == expected * 20
    message = Message(role="user", content=LONG_RUNS[1])
    assert counter.count_messages([message]) == [counter.count_message(message)]


def test_a_text_of_many_shorter_whitespace_runs_is_counted_whole(o200k: TokenCounter) -> None:
    assert o200k.encoding is not None
    text = ("x" + " " * (tokens.SPACE_RUN - 1)) * 8
    assert not tokens.counted_alone(text)
    assert o200k.count_text(text) == len(o200k.encoding.encode_ordinary(text))


def test_the_next_piece_boundary_is_found_across_search_windows() -> None:
    # Looked for a window at a time (a search of a long text holds the interpreter lock):
    # the same boundary as one search of the whole text, wherever it falls.
    window = 64
    for where in range(window - 3, 2 * window + 3):
        for boundary in (" y", "\nZ"):
            text = "x" * where + boundary + "x" * 50
            whole = tokens._PIECE_BOUNDARY.search(text, 5)
            found = tokens._next_boundary(text, 5, window)
            assert whole is not None and found is not None
            assert found.start() == whole.start(), (where, boundary)
    assert tokens._next_boundary("x" * 1000, 0, window) is None
