"""Full-text search over messages, session titles and memory entries (SPEC §5).

Queries are written the way people type them: words (all must match), ``"exact
phrases"``, ``prefix*``, ``OR`` and ``NOT``. They are translated into FTS5 syntax with
every term quoted, so no input can be a syntax error.

Ranking is BM25. A very common word would make SQLite score every row that holds it
(hundreds of thousands, about 2 µs each), so the search ranks only the
:data:`RANK_WINDOW` most recent matches (found by walking the index backwards, which
is cheap), widening the window when filters leave too few. For a rare or medium word
the window holds every match and the ranking is exact. Text the tokenizer cannot see,
such as ``->`` or ``__init__``, is found by a plain substring scan instead (or in
addition, to keep only exact hits).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from workbench.core.conversation import ROLES, STATES, SearchHit
from workbench.errors import StorageError
from workbench.store.db import Database
from workbench.store.types import time_to_text

HIGHLIGHT = ("«", "»")
ELLIPSIS = "…"
SNIPPET_TOKENS = 16
RANK_WINDOW = 5_000
KINDS = ("message", "session", "memory")


@dataclass
class SearchQuery:
    """What to look for and where.

    ``roles``, ``states``: keep only these (default: every role, every state, so folded
    and evicted messages are found too). ``date_from`` is inclusive, ``date_to``
    exclusive. ``kinds`` picks messages, session titles and memory entries.
    """

    text: str
    roles: Sequence[str] | None = None
    session_id: int | None = None
    agent_id: int | None = None
    date_from: datetime | None = None
    date_to: datetime | None = None
    states: Sequence[str] | None = None
    kinds: Sequence[str] = KINDS
    limit: int = 50
    highlight: tuple[str, str] = HIGHLIGHT
    include_archived: bool = True

    def wants(self, kind: str) -> bool:
        """Whether hits of ``kind`` are asked for (session titles not within a session)."""
        return kind in self.kinds and not (kind == "session" and self.session_id is not None)


@dataclass
class _Term:
    text: str  # the words as typed (a phrase may hold several)
    prefix: bool = False
    negated: bool = False
    operator_or: bool = False  # joined to the previous term with OR
    symbolic: bool = False  # holds characters the tokenizer drops


_TOKEN_RE = re.compile(r'"([^"]*)"?|(\S+)')


def _is_word_char(ch: str) -> bool:
    cat = unicodedata.category(ch)
    return cat[0] in ("L", "N") or cat in ("Co",)


def _words(text: str) -> list[str]:
    """The words FTS5's unicode61 tokenizer would index in ``text`` (approximately)."""
    out: list[str] = []
    current: list[str] = []
    for ch in text:
        if _is_word_char(ch):
            current.append(ch)
        elif current:
            out.append("".join(current))
            current = []
    if current:
        out.append("".join(current))
    return out


def parse_query(text: str) -> list[_Term]:
    """Split typed text into terms with their operators."""
    terms: list[_Term] = []
    pending_or = False
    pending_not = False
    for match in _TOKEN_RE.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if word in ("OR", "|") and terms:
            pending_or = True
            continue
        if word in ("AND", "&"):
            continue
        # "-word" excludes a word; "->" and other symbol runs are terms of their own.
        if word == "NOT" or (
            word and word.startswith("-") and len(word) > 1 and terms
            and _is_word_char(word[1])
        ):
            if word == "NOT":
                pending_not = True
                continue
            pending_not, word = True, word[1:]
        raw = phrase if phrase is not None else word
        prefix = bool(phrase is None and raw.endswith("*") and len(raw) > 1)
        if prefix:
            raw = raw.rstrip("*")
        if not raw or not raw.strip():
            continue
        words = _words(raw)
        symbolic = "".join(words) != "".join(ch for ch in raw if not ch.isspace())
        terms.append(
            _Term(raw, prefix, pending_not, pending_or and bool(terms), symbolic)
        )
        pending_or = pending_not = False
    return terms


def combine_terms(
    terms: Sequence[_Term], render: Callable[[_Term], str | None], either: str
) -> tuple[list[str], list[str]]:
    """The terms as a backend's query pieces (``render`` gives None for a term with no
    indexable word): the positive ones, a term after OR joined to the one before with
    ``either``, and the negative ones (a symbolic exclusion is left to the exact
    substring conditions)."""
    positive: list[str] = []
    negative: list[str] = []
    for term in terms:
        piece = render(term)
        if piece is None:
            continue
        if term.negated:
            if not term.symbolic:
                negative.append(piece)
        elif term.operator_or and positive:
            positive[-1] = f"({positive[-1]} {either} {piece})"
        else:
            positive.append(piece)
    return positive, negative


def _fts_term(term: _Term) -> str | None:
    """A term as a quoted FTS5 phrase (a prefix one ending in ``*``)."""
    words = _words(term.text)
    if not words:
        return None
    return '"' + " ".join(words).replace('"', '""') + '"' + (" *" if term.prefix else "")


def _fts_expression(terms: Sequence[_Term]) -> str | None:
    """FTS5 MATCH text for the terms, or None when no positive term has a word."""
    positive, negative = combine_terms(terms, _fts_term, "OR")
    if not positive:
        return None  # FTS5 cannot start with NOT; the substring path handles it
    return " AND ".join(positive) + "".join(f" NOT {n}" for n in negative)


def _like_pattern(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


# What SQLite says when a query is too big or too deep for it to parse or plan.
_TOO_COMPLEX = re.compile(
    r"parser stack overflow|Expression tree is too large|too many terms|too many SQL "
    r"variables|pattern too complex|string or blob too big|too many arguments",
    re.IGNORECASE,
)
# What PostgreSQL or its driver says when a query nests too deep or binds too many values.
_TOO_COMPLEX_PG = re.compile(
    r"stack depth limit exceeded|memory exhausted|number of parameters must be|too many|"
    r"exceeds the maximum|is too big|too long",
    re.IGNORECASE,
)
# The most terms a search on PostgreSQL takes: it plans thousands (where SQLite's FTS5
# refuses an OR chain past about a hundred) but spends seconds per thousand on each kind
# of hit, holding a connection of the team store meanwhile.
MAX_TERMS_POSTGRESQL = 256


def _validate(query: SearchQuery) -> None:
    for role in query.roles or ():
        if role not in ROLES:
            raise StorageError(f"Role {role!r} is not one of {', '.join(ROLES)}.")
    for state in query.states or ():
        if state not in STATES:
            raise StorageError(f"State {state!r} is not one of {', '.join(STATES)}.")
    for kind in query.kinds:
        if kind not in KINDS:
            raise StorageError(f"Search kind {kind!r} is not one of {', '.join(KINDS)}.")
    if query.limit <= 0:
        raise StorageError("The search limit must be at least 1.")


def search_sqlite(db: Database, query: SearchQuery) -> list[SearchHit]:
    """Run a search on a SQLite file: the FTS5 tables answer; hits of every requested
    kind, best first (higher score = better). :func:`workbench.store.searching.search`
    chooses this or the team store's search."""
    return best_hits(query, lambda terms: _hits(db, query, terms))


def best_hits(
    query: SearchQuery, find: Callable[[Sequence[_Term]], list[SearchHit]]
) -> list[SearchHit]:
    """What ``find`` gives for the checked and parsed query, best first, at most its
    limit (nothing for a query without terms)."""
    _validate(query)
    terms = parse_query(query.text)
    if not terms:
        return []
    hits = find(terms)
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[: query.limit]


def _hits(db: Database, query: SearchQuery, terms: Sequence[_Term]) -> list[SearchHit]:
    hits: list[SearchHit] = []
    try:
        with db.read() as conn:
            if query.wants("message"):
                hits += _search_messages(conn, query, terms)
            fts = _fts_expression(terms)
            if fts is not None and query.wants("session"):
                hits += _search_sessions(conn, query, fts)
            if fts is not None and query.wants("memory"):
                hits += _search_memory(conn, query, fts)
    except StorageError as exc:
        if _TOO_COMPLEX.search(str(exc)):
            # SQLite's own words ("fts5: parser stack overflow") say nothing to a user.
            raise _too_long(query, terms) from exc
        raise
    return hits


def _too_long(query: SearchQuery, terms: Sequence[_Term]) -> StorageError:
    return StorageError(
        f"The search query is too long ({len(terms):,} terms, "
        f"{len(query.text):,} characters); search for fewer words."
    )


# -- messages -----------------------------------------------------------------------------


def _message_filters(query: SearchQuery, alias: str = "m") -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if query.roles:
        clauses.append(f"{alias}.role IN ({', '.join('?' for _ in query.roles)})")
        params += list(query.roles)
    if query.states:
        clauses.append(f"{alias}.state IN ({', '.join('?' for _ in query.states)})")
        params += list(query.states)
    if query.session_id is not None:
        clauses.append(f"{alias}.session_id = ?")
        params.append(query.session_id)
    if query.date_from is not None:
        clauses.append(f"{alias}.created_at >= ?")
        params.append(time_to_text(query.date_from))
    if query.date_to is not None:
        clauses.append(f"{alias}.created_at < ?")
        params.append(time_to_text(query.date_to))
    if query.agent_id is not None or not query.include_archived:
        sub = []
        sub_params: list[Any] = []
        if query.agent_id is not None:
            sub.append("s.agent_id = ?")
            sub_params.append(query.agent_id)
        if not query.include_archived:
            sub.append("s.archived = 0")
        clauses.append(
            f"{alias}.session_id IN (SELECT s.id FROM sessions s WHERE {' AND '.join(sub)})"
        )
        params += sub_params
    return clauses, params


def _groups(terms: Sequence[_Term]) -> list[list[_Term]]:
    """Positive terms grouped by OR: every group must match, any member of it may."""
    groups: list[list[_Term]] = []
    for term in terms:
        if term.negated:
            continue
        if term.operator_or and groups:
            groups[-1].append(term)
        else:
            groups.append([term])
    return groups


def holds_nul(term: _Term) -> bool:
    """Whether a term holds U+0000 (which SQLite's LIKE takes for the end of the text,
    and PostgreSQL's text cannot hold)."""
    return "\x00" in term.text


def _contains(alias: str, term: _Term) -> tuple[str, Any]:
    """The condition that ``alias.content`` holds ``term`` (ignoring ASCII case, as
    LIKE does) and its parameter. LIKE stops at a NUL of the pattern or the text (a
    lone NUL was ``LIKE '%'``, which every message matches): a term holding one is
    looked for with ``instr``, which compares the whole text."""
    if holds_nul(term):
        return f"instr(lower({alias}.content), lower(?)) > 0", term.text
    return f"{alias}.content LIKE ? ESCAPE '\\'", _like_pattern(term.text)


def _substring_conditions(
    terms: Sequence[_Term], alias: str = "m", *, only_symbolic: bool = True
) -> tuple[list[str], list[Any]]:
    """Exact-substring conditions: per OR group one (LIKE … OR LIKE …), per excluded
    term one NOT LIKE. With ``only_symbolic``, groups without symbols are left to FTS."""
    clauses: list[str] = []
    params: list[Any] = []
    for group in _groups(terms):
        if only_symbolic and not any(t.symbolic for t in group):
            continue
        found = [_contains(alias, t) for t in group]
        clauses.append("(" + " OR ".join(sql for sql, _ in found) + ")")
        params += [param for _, param in found]
    for term in terms:
        if term.negated and (term.symbolic or not only_symbolic):
            sql, param = _contains(alias, term)
            clauses.append(f"NOT ({sql})")
            params.append(param)
    return clauses, params


def _search_messages(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    fts = _fts_expression(terms)
    if fts is None:
        return _substring_messages(conn, query, terms)
    filters, params = _message_filters(query)
    sym, sym_params = _substring_conditions(terms)
    filters += sym
    params += sym_params
    window = RANK_WINDOW
    while True:
        # The rowid of the window-th newest match, or None when fewer rows match: then
        # every match is ranked. Walking the doclist backwards costs little.
        floor = conn.exec_driver_sql(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (fts, window - 1),
        ).scalar()
        ranked = _rank(conn, fts, floor, filters, params, query.limit)
        if floor is None or len(ranked) >= query.limit:
            break
        window *= 8  # the filters left too few in the window: look further back
    if not ranked:
        return []
    ids = [r[0] for r in ranked]
    details = {
        r[0]: r
        for r in conn.exec_driver_sql(
            "SELECT id, session_id, role, position FROM messages"
            f" WHERE id IN ({', '.join('?' for _ in ids)})",
            tuple(ids),
        )
    }
    snippets = _snippets(conn, fts, ids, query.highlight)
    return [
        SearchHit(
            kind="message",
            session_id=details[mid][1],
            message_id=mid,
            role=details[mid][2],
            snippet=snippets.get(mid, ""),
            score=round(-float(score), 6),
            position=details[mid][3],
        )
        for mid, score in ranked
        if mid in details
    ]


def _rank(
    conn: Connection,
    fts: str,
    floor: int | None,
    filters: Sequence[str],
    params: Sequence[Any],
    limit: int,
) -> list[tuple[int, float]]:
    """``(message id, bm25)`` of the best matches at or above ``floor``."""
    where = ["messages_fts MATCH ?"]
    args: list[Any] = [fts]
    if floor is not None:
        where.append("f.rowid >= ?")
        args.append(floor)
    if filters:
        # Filters need the message row; without them the index alone ranks.
        sql = (
            "SELECT f.rowid, bm25(messages_fts) AS score"
            " FROM messages_fts AS f JOIN messages AS m ON m.id = f.rowid"
            f" WHERE {' AND '.join([*where, *filters])} ORDER BY score LIMIT ?"
        )
        args += list(params)
    else:
        sql = (
            "SELECT f.rowid, bm25(messages_fts) AS score FROM messages_fts AS f"
            f" WHERE {' AND '.join(where)} ORDER BY score LIMIT ?"
        )
    return [(int(r[0]), float(r[1])) for r in conn.exec_driver_sql(sql, (*args, limit))]


def _snippets(
    conn: Connection, fts: str, ids: Sequence[int], marks: tuple[str, str]
) -> dict[int, str]:
    # The rowid range lets FTS5 seek; the unary + keeps SQLite from turning the IN
    # list into one full MATCH per id.
    rows = conn.exec_driver_sql(
        "SELECT rowid, snippet(messages_fts, 0, ?, ?, ?, ?) FROM messages_fts"
        " WHERE messages_fts MATCH ? AND rowid >= ? AND rowid <= ?"
        f" AND +rowid IN ({', '.join('?' for _ in ids)})",
        (marks[0], marks[1], ELLIPSIS, SNIPPET_TOKENS, fts, min(ids), max(ids), *ids),
    ).all()
    return {int(r[0]): str(r[1]) for r in rows}


def _substring_messages(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    """Plain substring scan for text with no indexable word (newest first)."""
    if all(t.negated for t in terms):
        return []
    filters, params = _message_filters(query)
    sub, sub_params = _substring_conditions(terms, only_symbolic=False)
    filters += sub
    params += sub_params
    rows = conn.exec_driver_sql(
        "SELECT m.id, m.session_id, m.role, m.position, m.content FROM messages AS m"
        f" WHERE {' AND '.join(filters)} ORDER BY m.id DESC LIMIT ?",
        (*params, query.limit),
    ).all()
    return substring_hits(rows, query, terms)


def substring_hits(rows: Sequence[Any], query: SearchQuery,
                   terms: Sequence[_Term]) -> list[SearchHit]:
    """The hits of a substring scan (rows of id, session_id, role, position, content),
    each with a snippet around the first term that is not excluded."""
    wanted = next(t.text for t in terms if not t.negated)
    return [
        SearchHit(kind="message", session_id=r[1], message_id=r[0], role=r[2],
                  snippet=substring_snippet(r[4], wanted, query.highlight), score=0.0,
                  position=r[3])
        for r in rows
    ]


def substring_snippet(
    content: str, needle: str, marks: tuple[str, str] = HIGHLIGHT, width: int = 60
) -> str:
    """A short excerpt around the first case-insensitive occurrence of ``needle``."""
    at = content.lower().find(needle.lower())
    if at < 0:
        return content[:width] + (ELLIPSIS if len(content) > width else "")
    start = max(0, at - width // 2)
    end = min(len(content), at + len(needle) + width // 2)
    return (
        (ELLIPSIS if start > 0 else "")
        + content[start:at]
        + marks[0]
        + content[at : at + len(needle)]
        + marks[1]
        + content[at + len(needle) : end]
        + (ELLIPSIS if end < len(content) else "")
    )


# -- session titles and memory entries ---------------------------------------------------------


def _search_sessions(conn: Connection, query: SearchQuery, fts: str) -> list[SearchHit]:
    where, params = _conditions("sessions_fts MATCH ?", fts, [("s.agent_id", query.agent_id)],
                                *(() if query.include_archived else ("s.archived = 0",)))
    rows = conn.exec_driver_sql(
        "SELECT s.id, highlight(sessions_fts, 0, ?, ?), bm25(sessions_fts) AS score, s.title"
        " FROM sessions_fts AS f JOIN sessions AS s ON s.id = f.rowid"
        f" WHERE {' AND '.join(where)} ORDER BY score LIMIT ?",
        (query.highlight[0], query.highlight[1], *params, query.limit),
    ).all()
    return [title_or_memory_hit("session", r[0], r[1], -float(r[2]), title=r[3])
            for r in rows]


def _search_memory(conn: Connection, query: SearchQuery, fts: str) -> list[SearchHit]:
    where, params = _conditions("memory_fts MATCH ?", fts, [("e.agent_id", query.agent_id),
                                                            ("e.session_id", query.session_id)])
    rows = conn.exec_driver_sql(
        "SELECT e.id, e.session_id, snippet(memory_fts, 0, ?, ?, ?, ?), bm25(memory_fts) AS score"
        " FROM memory_fts AS f JOIN memory_entries AS e ON e.id = f.rowid"
        f" WHERE {' AND '.join(where)} ORDER BY score LIMIT ?",
        (query.highlight[0], query.highlight[1], ELLIPSIS, SNIPPET_TOKENS, *params, query.limit),
    ).all()
    return [title_or_memory_hit("memory", r[1], r[2], -float(r[3]), memory_id=r[0])
            for r in rows]


def _conditions(match: str, fts: str, equal: list[tuple[str, Any]],
                *fixed: str) -> tuple[list[str], list[Any]]:
    """The conditions of a search (the full-text ``match``, ``column = ?`` for each filter
    of ``equal`` that is set, then the ``fixed`` ones) and their parameters."""
    where, params = [match], [fts]
    for column, value in equal:
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    return where + list(fixed), params


def title_or_memory_hit(kind: str, session_id: int | None, snippet: Any, score: float,
                        **more: Any) -> SearchHit:
    """A hit on a session title or a memory entry (no message, no role); higher scores
    rank first (SQLite's is bm25 negated)."""
    return SearchHit(kind=kind, session_id=session_id, message_id=None, role=None,
                     snippet=str(snippet), score=round(score, 6), **more)
