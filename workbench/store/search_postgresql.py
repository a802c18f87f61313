"""Full-text search on PostgreSQL (the team store): the query language of SQLite's search.

The same typed queries as :mod:`workbench.store.search` (words, ``"phrases"``, ``prefix*``,
``OR``, ``NOT``/``-word``, role, state, session, agent and date filters), parsed by the
same :func:`~workbench.store.search.parse_query`, over the stored ``search`` tsvector
columns of migration ``0006_search_postgresql`` (the messages' kept by triggers since
``0010_search_upkeep_postgresql``, or sent with the rows by a bulk import). Every word
of a query goes through the database's own ``workbench_words`` before it becomes a
lexeme, so a query and the text it looks for are split, lower-cased and stripped of
diacritics by one function.

The newest :data:`~workbench.store.search.RANK_WINDOW` matches that pass the filters are
ranked (every match when fewer), found without reading every match (a GIN index keeps no
order and no positions, and reading a row costs about a microsecond): the newest
:data:`PROBE_ROWS` rows tell how often the query matches; when often, the index is walked
from the newest row on, testing each row, until the window is full; when seldom, the GIN
index answers, within id ranges sized by that share when it promises many matches (a
phrase of common words), else over the whole table (a rare word costs its matches only).
The walk follows the filter it can (a state other than 'active', a date range, a single
role: indexes of migration 0011), so a filter that keeps few rows reads only those; with a
date range "newest" is by time. Ranking is ``ts_rank``; snippets are made with
``ts_headline`` for the hits returned only, from the text around the first word. Text
without an indexable word (``->``, ``__init__``) is found by substring (``ILIKE`` over
the rows from the newest on; a needle of symbols only, such as ``<=>``, narrowed first by
the trigram index of the messages' runs of symbols, migration 0012).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from workbench.core.conversation import SearchHit
from workbench.errors import StorageError
from workbench.store.db import Database
from workbench.store.migrations import (
    PG_SEARCH_CHARS,
    PG_SYMBOL_LETTERS,
    PG_SYMBOLS,
)
from workbench.store.search import (
    _TOO_COMPLEX_PG,
    ELLIPSIS,
    MAX_TERMS_POSTGRESQL,
    RANK_WINDOW,
    SNIPPET_TOKENS,
    SearchQuery,
    _groups,
    _like_pattern,
    _Term,
    _too_long,
    _words,
    best_hits,
    combine_terms,
    holds_nul,
    parse_query,
    substring_hits,
    title_or_memory_hit,
)
from workbench.store.types import time_to_text

# The most text ts_headline reads for one snippet (it parses all it is given): from a
# little before the first place the query's first word is spelt as typed (else from the
# start), as the best-ranked texts are the long ones.
_HEADLINE_CHARS = 1_200
_HEADLINE_BEFORE = 300


# ts_headline's parser reads "<b>", "</script>" or "<!-- -->" as HTML and leaves them out
# of the snippet, but a message is text, not HTML (SQLite's snippet keeps them): "<" goes
# in as the unit separator, a control character the parser takes for a space (any
# character above ASCII is a letter to it under the C locale, and would join the word
# beside it), and comes back in the snippet. (A text holding that invisible character
# itself shows a "<" in its place in the snippet.)
_LT_STAND_IN = "\x1f"


def _headline_text(sql: str, params: _Params) -> str:
    """The SQL of ``sql``'s text with "<" hidden from ts_headline."""
    return f"replace({sql}, {params.add('<')}, {params.add(_LT_STAND_IN)})"


def _headline_shown(value: Any) -> str:
    """A ts_headline result with its "<" back."""
    return str(value).replace(_LT_STAND_IN, "<")


class _Params:
    """Named bind parameters collected while SQL text is built."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, value: Any) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f":{name}"


def _term_query(term: _Term, params: _Params) -> str | None:
    """The tsquery SQL of one term, or None when it has no indexable word."""
    words = _words(term.text)
    if not words:
        return None
    if not term.prefix:
        return f"phraseto_tsquery('simple', workbench_words({params.add(' '.join(words))}))"
    last = (
        "to_tsquery('simple', quote_literal(trim(workbench_words("
        f"{params.add(words[-1])}))) || ':*')"
    )
    if len(words) == 1:
        return last
    head = f"phraseto_tsquery('simple', workbench_words({params.add(' '.join(words[:-1]))}))"
    return f"tsquery_phrase({head}, {last})"


def _tsquery(terms: Sequence[_Term], params: _Params) -> str | None:
    """The whole query as tsquery SQL, or None when no positive term has a word."""
    positive, negative = combine_terms(terms, lambda term: _term_query(term, params), "||")
    if not positive:
        return None
    return " && ".join(positive + [f"!!{n}" for n in negative])


_SYMBOL_RUN = re.compile("[" + re.escape(PG_SYMBOLS) + "]{3,}")
_SYMBOL_LETTERS = str.maketrans(PG_SYMBOLS, PG_SYMBOL_LETTERS)


def _symbol_run(text: str) -> str | None:
    """The longest run of three or more ASCII symbols in ``text`` as ``symbol_runs``
    spells it (a text holding ``text`` holds it within one of its runs), or None."""
    runs = _SYMBOL_RUN.findall(text)
    return max(runs, key=len).translate(_SYMBOL_LETTERS) if runs else None


def symbol_runs(content: str) -> str | None:
    """What the server's ``workbench_symbol_runs(content)`` makes (a message's
    ``symbols`` column, migration 0012): the runs of three or more ASCII symbols in the
    order of the text, spelt as letters and digits, one word per run; None when there
    is none. Python's regular expression and the server's find the same runs: the
    longest from the leftmost start, of characters of one ASCII class."""
    runs = _SYMBOL_RUN.findall(content)
    return " ".join(runs).translate(_SYMBOL_LETTERS) if runs else None


def _substring_conditions(
    terms: Sequence[_Term], params: _Params, column: str, *, only_symbolic: bool = True,
    symbols: str | None = None,
) -> list[str]:
    """Exact-substring conditions (see :func:`workbench.store.search._substring_conditions`);
    ``symbols`` names the column of the runs of symbols of ``column``, when it has one."""
    clauses: list[str] = []
    for group in _groups(terms):
        if only_symbolic and not any(t.symbolic for t in group):
            continue
        # PostgreSQL's text cannot hold U+0000 (the store refuses a message holding it):
        # no message holds a term with one, and it cannot be sent as a pattern.
        group = [t for t in group if not holds_nul(t)]
        if not group:
            clauses.append("FALSE")
            continue
        clauses.append("(" + " OR ".join(
            f"{column} ILIKE {params.add(_like_pattern(t.text))}" for t in group) + ")")
        runs = [run for t in group if (run := _symbol_run(t.text))]
        if symbols is not None and len(runs) == len(group):
            # Implied by the ILIKE: lets the index of the symbols narrow the rows down.
            # The index holds only texts with such a run: said as it says it.
            clauses.append("((" + " OR ".join(
                f"{symbols} LIKE {params.add('%' + run + '%')}"
                for run in runs) + f") AND {symbols} IS NOT NULL)")
    for term in terms:
        if term.negated and (term.symbolic or not only_symbolic) and not holds_nul(term):
            clauses.append(f"{column} NOT ILIKE {params.add(_like_pattern(term.text))}")
    return clauses


def _message_filters(query: SearchQuery, params: _Params, *,
                     skip: Sequence[str] = ()) -> list[str]:
    """The filters of ``query`` as conditions on ``m`` (those named in ``skip``, of
    "roles", "states" and "dates", left out)."""
    clauses: list[str] = []
    if query.roles and "roles" not in skip:
        clauses.append(f"m.role = ANY({params.add(list(query.roles))})")
    if query.states and "states" not in skip:
        clauses.append(f"m.state = ANY({params.add(list(query.states))})")
    if query.session_id is not None:
        clauses.append(f"m.session_id = {params.add(query.session_id)}")
    if query.date_from is not None and "dates" not in skip:
        clauses.append(f"m.created_at >= {params.add(time_to_text(query.date_from))}")
    if query.date_to is not None and "dates" not in skip:
        clauses.append(f"m.created_at < {params.add(time_to_text(query.date_to))}")
    if query.agent_id is not None or not query.include_archived:
        sub = []
        if query.agent_id is not None:
            sub.append(f"s.agent_id = {params.add(query.agent_id)}")
        if not query.include_archived:
            sub.append("NOT s.archived")
        clauses.append(f"m.session_id IN (SELECT s.id FROM sessions s WHERE {' AND '.join(sub)})")
    return clauses


def _headline_options(marks: tuple[str, str], *, whole: bool = False) -> str:
    def quoted(mark: str) -> str:
        return '"' + mark.replace('"', "").replace(",", "") + '"'

    base = f"StartSel={quoted(marks[0])}, StopSel={quoted(marks[1])}"
    if whole:
        return base + ", HighlightAll=true"
    return (
        f"{base}, MaxWords={SNIPPET_TOKENS}, MinWords={SNIPPET_TOKENS // 2}, ShortWord=1, "
        f'MaxFragments=1, FragmentDelimiter="{ELLIPSIS}"'
    )


def search_postgresql(conn: Connection, query: SearchQuery) -> list[SearchHit]:
    """Run a search on a PostgreSQL connection; hits of every requested kind, best first."""

    def find(terms: Sequence[_Term]) -> list[SearchHit]:
        hits: list[SearchHit] = []
        for kind, search_kind in (("message", _search_messages), ("session", _search_titles),
                                  ("memory", _search_memory)):
            if query.wants(kind):
                hits += search_kind(conn, query, terms)
        return hits

    return best_hits(query, find)


# How the newest RANK_WINDOW matches are found (see _window): the newest PROBE_ROWS rows
# are read first, to learn how often the query matches there; when at least WALK_DENSITY
# of them match, the index is walked on (reading each row, at most WALK_ROWS) until the
# window is full; else the GIN index answers, over id ranges sized by that frequency
# (each RANGE_GROWTH times the one before), so a rare word costs its matches only.
PROBE_ROWS = 1_000
# The columns a walked row carries up to the filters.
_ROW_COLUMNS = ("m.id, m.created_at, m.search, m.role, m.state, m.session_id, m.content,"
                " m.symbols")
WALK_DENSITY = 0.1
WALK_ROWS = 100_000
RANGE_GROWTH = 4
# Past this many matches (as the probe's share promises them), ranges rather than all.
RANGE_MATCHES = 30_000


@dataclass
class _Walk:
    """The index a search walks from the newest row: its condition and order."""

    where: list[str]
    order: str  # "id" (by id) or "created" (by created_at, then id)
    lead: str = ""  # the column the walk's condition holds equal, leading its index

    def below(self, bound: tuple[Any, ...] | None, params: _Params) -> list[str]:
        if bound is None:
            return []
        if self.order == "id":
            return [f"m.id < {params.add(bound[0])}"]
        return [f"(m.created_at, m.id) < ({params.add(bound[1])}, {params.add(bound[0])})"]

    def order_by(self, alias: str = "m", *, lead: bool = True) -> str:
        """The walk's order (led by the equal column, so its index is the one walked)."""
        first = f"{alias}.{self.lead} DESC, " if self.lead and lead else ""
        if self.order == "id":
            return f"{first}{alias}.id DESC"
        return f"{first}{alias}.created_at DESC, {alias}.id DESC"


def _walk_and_filters(query: SearchQuery, params: _Params) -> tuple[_Walk, list[str]]:
    """The index to walk for ``query``'s filters and the filters left to test on each row.

    A single state other than 'active' walks its partial index, a date range the index by
    time, a single role the index by role and id; anything else the primary key."""
    walk = _Walk([], "id")
    rest = _message_filters(query, params, skip=("roles", "states", "dates"))
    states = list(query.states or ())
    roles = list(query.roles or ())
    dated = query.date_from is not None or query.date_to is not None
    if len(states) == 1 and states[0] != "active":
        walk = _Walk([f"m.state = {params.add(states[0])}", "m.state <> 'active'"], "id",
                     "state")
    elif states:
        rest.append(f"m.state = ANY({params.add(states)})")
    if dated:
        clauses = []
        if query.date_from is not None:
            clauses.append(f"m.created_at >= {params.add(time_to_text(query.date_from))}")
        if query.date_to is not None:
            clauses.append(f"m.created_at < {params.add(time_to_text(query.date_to))}")
        if walk.where:
            rest += clauses
        else:
            walk = _Walk(clauses, "created")
    if len(roles) == 1 and not walk.where:
        walk = _Walk([f"m.role = {params.add(roles[0])}"], "id", "role")
    elif len(roles) == 1:
        rest.append(f"m.role = {params.add(roles[0])}")
    elif roles:
        rest.append(f"m.role = ANY({params.add(roles)})")
    return walk, rest


@dataclass
class _Part:
    """What one statement found of the window: its best matches, how many matches and
    rows it saw, and where it stopped (the key of its last row)."""

    best: list[tuple[int, float]]
    matches: int
    rows: int
    last: tuple[Any, ...] | None


def _window(conn: Connection, tsq: str, walk: _Walk, filters: list[str], params: _Params,
            size: int, limit: int) -> list[tuple[int, float]]:
    """``(id, ts_rank)`` of the best ``limit`` of the newest ``size`` matches (of all of
    them when fewer); newest in id order, or by time for a date range."""
    hit = " AND ".join([f"m.search @@ ({tsq})", *filters])

    def part(rows_sql: str, p: _Params) -> _Part:
        """Run ``rows_sql`` (rows ``id, created_at, score`` in the walk's order, score
        NULL for a row that does not match) keeping only its best rows and its last."""
        oldest_first = walk.order_by("r", lead=False).replace(" DESC", "")
        # The rows once (three columns, not the texts they were ranked by), then their
        # best, their last and their counts from them, without sorting them all.
        sql = (
            f"WITH r AS MATERIALIZED ({rows_sql})"
            " SELECT 0, b.id, b.created_at, b.score FROM (SELECT r.id, r.created_at, r.score"
            " FROM r WHERE r.score IS NOT NULL ORDER BY r.score DESC, r.id DESC"
            f" LIMIT {p.add(limit)}) AS b"
            " UNION ALL SELECT 1, l.id, l.created_at, NULL FROM (SELECT r.id, r.created_at"
            f" FROM r ORDER BY {oldest_first} LIMIT 1) AS l"
            " UNION ALL SELECT 2, count(r.score), count(*)::text, NULL FROM r")
        rows = conn.execute(text(sql), p.values).all()
        counts = next(r for r in rows if r[0] == 2)
        last = next((r for r in rows if r[0] == 1), None)
        return _Part([(int(r[1]), float(r[3])) for r in rows if r[0] == 0],
                     int(counts[1]), int(counts[2]),
                     None if last is None else (int(last[1]), last[2]))

    def walked(bound: tuple[Any, ...] | None, rows: int, need: int | None) -> _Part:
        """Walk ``rows`` rows below ``bound``: all of them (``need`` None), else up to the
        ``need``-th match."""
        p = _Params()
        p.values = dict(params.values)
        inner = " AND ".join(["TRUE", *walk.where, *walk.below(bound, p)])
        # The walk reads its rows in the subquery (a LIMIT keeps the tests out of it);
        # the filters test them above, by the same column names.
        scan = (f"SELECT {_ROW_COLUMNS} FROM messages m WHERE {inner}"
                f" ORDER BY {walk.order_by()} LIMIT {p.add(rows)}")
        if need is None:
            sql = (f"SELECT m.id, m.created_at, CASE WHEN {hit} THEN ts_rank(m.search, ({tsq}))"
                   f" END AS score FROM ({scan}) AS m")
        else:
            sql = (f"SELECT m.id, m.created_at, ts_rank(m.search, ({tsq})) AS score"
                   f" FROM ({scan}) AS m WHERE {hit} LIMIT {p.add(need)}")
        return part(sql, p)

    def indexed(bound: tuple[Any, ...] | None, low: int | None, need: int) -> _Part:
        """The first ``need`` matches below ``bound`` (and at or above id ``low``), as the
        planner finds them (the GIN index for few)."""
        p = _Params()
        p.values = dict(params.values)
        where = [hit, *walk.where, *walk.below(bound, p)]
        if low is not None:
            where.append(f"m.id >= {p.add(low)}")
        # The newest are chosen by their key and place only (a narrow sort), then their
        # words are read again by place (ctid) to be ranked.
        sql = (f"SELECT w.id, w.created_at, ts_rank(t.search, ({tsq})) AS score FROM ("
               f"SELECT m.id, m.created_at, m.ctid AS place FROM messages m"
               f" WHERE {' AND '.join(where)} ORDER BY {walk.order_by()}"
               f" LIMIT {p.add(need)}) AS w JOIN messages t ON t.ctid = w.place")
        return part(sql, p)

    best: list[tuple[int, float]] = []
    probe_rows = min(PROBE_ROWS, size)  # so the probe never finds more than the window
    probe = walked(None, probe_rows, None)
    best += probe.best
    found = probe.matches
    if probe.rows < probe_rows or found >= size or probe.last is None:
        return best
    bound = probe.last
    density = found / probe.rows
    if density >= WALK_DENSITY:
        more = walked(bound, WALK_ROWS, size - found)
        best += more.best
        found += more.matches
        if found >= size:
            return best
        if more.last is not None:
            bound = more.last
    # As many matches as the probe's share promises, below the bound: when that is many,
    # within id ranges (each about big enough for the rest of the window, then
    # RANGE_GROWTH times more), so the GIN index's rows outside them are not read.
    expected = density * _table_rows(conn)
    width = max(1, int((size - found) / density * 1.1)) if density else 0
    while found < size:
        low = None
        if (walk.order == "id" and density and expected > RANGE_MATCHES
                and bound[0] - width > 1):
            low = bound[0] - width
        more = indexed(bound, low, size - found)
        best += more.best
        found += more.matches
        if low is None:
            break
        bound = (low, None)
        width *= RANGE_GROWTH
    return best


def _table_rows(conn: Connection) -> float:
    """About how many messages there are (the planner's count, kept by ANALYZE)."""
    rows = conn.execute(text(
        "SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass")).scalar()
    return max(float(rows or 0), 0.0)


def _search_messages(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    params = _Params()
    tsq = _tsquery(terms, params)
    if tsq is None:
        return _substring_messages(conn, query, terms)
    walk, filters = _walk_and_filters(query, params)
    filters += _substring_conditions(terms, params, "m.content", symbols="m.symbols")
    # Plans for these values (never a generic one), without JIT (its compiling costs more
    # than these statements take), costed for an index whose rows the server holds.
    conn.execute(text("SELECT set_config('plan_cache_mode', 'force_custom_plan', true),"
                      " set_config('jit', 'off', true),"
                      " set_config('random_page_cost', '1.1', true)"))
    best = _window(conn, tsq, walk, filters, params, max(RANK_WINDOW, query.limit),
                   query.limit)
    ranked = sorted(best, key=lambda r: (r[1], r[0]), reverse=True)[: query.limit]
    if not ranked:
        return []
    ids = [r[0] for r in ranked]
    snippet_params = _Params()
    snippet_tsq = _tsquery(terms, snippet_params)
    first = next((w for t in terms if not t.negated for w in _words(t.text)), "")
    shown = (f"substr(content, greatest(1, strpos(lower(content),"
             f" {snippet_params.add(first.lower())}) - {_HEADLINE_BEFORE}), {_HEADLINE_CHARS})")
    rows = conn.execute(text(
        "SELECT id, session_id, role, position, ts_headline('simple', "
        f"{_headline_text(shown, snippet_params)}, ({snippet_tsq}), "
        f"{snippet_params.add(_headline_options(query.highlight))})"
        f" FROM messages WHERE id = ANY({snippet_params.add(ids)})"),
        snippet_params.values).all()
    details = {int(r[0]): r for r in rows}
    return [
        SearchHit(kind="message", session_id=details[mid][1], message_id=mid,
                  role=details[mid][2], snippet=_headline_shown(details[mid][4]),
                  score=round(float(score), 6), position=details[mid][3])
        for mid, score in ranked if mid in details
    ]


def _substring_messages(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    """Substring scan for text with no indexable word (newest first)."""
    if all(t.negated for t in terms):
        return []
    params = _Params()
    where = [*_message_filters(query, params),
             *_substring_conditions(terms, params, "m.content", only_symbolic=False,
                                   symbols="m.symbols")]
    rows = conn.execute(text(
        "SELECT m.id, m.session_id, m.role, m.position, m.content FROM messages AS m"
        f" WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT {params.add(query.limit)}"),
        params.values).all()
    return substring_hits(rows, query, terms)


def _ranked_rows(conn: Connection, query: SearchQuery, terms: Sequence[_Term], *,
                 table: str, shown: str, columns: str, equal: list[tuple[str, Any]],
                 whole: bool, more: Sequence[str] = ()) -> list[Any]:
    """The best rows of a title or memory search: ``(id, <columns>, headline, score)``.

    ``table`` is "<name> <alias>", ``shown`` the SQL of the text the headline is cut
    from, ``equal`` the ``column = value`` filters (those with a value apply).
    """
    params = _Params()
    tsq = _tsquery(terms, params)
    if tsq is None:
        return []
    alias = table.split()[1]
    where = [f"{alias}.search @@ ({tsq})", *more]
    where += [f"{column} = {params.add(value)}" for column, value in equal if value is not None]
    rows = conn.execute(text(
        f"SELECT {alias}.id, {columns}, ts_headline('simple',"
        f" {_headline_text(shown, params)}, ({tsq}),"
        f" {params.add(_headline_options(query.highlight, whole=whole))}),"
        f" ts_rank({alias}.search, ({tsq})) AS score FROM {table}"
        f" WHERE {' AND '.join(where)} ORDER BY score DESC, {alias}.id DESC"
        f" LIMIT {params.add(query.limit)}"), params.values).all()
    return [(*row[:-2], _headline_shown(row[-2]), row[-1]) for row in rows]


def _search_titles(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    rows = _ranked_rows(conn, query, terms, table="sessions s", shown="s.title",
                        columns="s.title", equal=[("s.agent_id", query.agent_id)], whole=True,
                        more=[] if query.include_archived else ["NOT s.archived"])
    return [title_or_memory_hit("session", r[0], r[2], float(r[3]), title=r[1])
            for r in rows]


def _search_memory(
    conn: Connection, query: SearchQuery, terms: Sequence[_Term]
) -> list[SearchHit]:
    rows = _ranked_rows(conn, query, terms, table="memory_entries e",
                        shown=f"left(e.content, {PG_SEARCH_CHARS})", columns="e.session_id",
                        equal=[("e.agent_id", query.agent_id),
                               ("e.session_id", query.session_id)], whole=False)
    return [title_or_memory_hit("memory", r[1], r[2], float(r[3]), memory_id=r[0])
            for r in rows]


def search_team_store(db: Database, query: SearchQuery) -> list[SearchHit]:
    """Run a search on a team-store database (its ``search`` tsvector columns): the same
    query language and hits as SQLite's; a query with more terms than the server plans
    is refused with the sentence SQLite's FTS5 gives."""
    terms = parse_query(query.text)
    if len(terms) > MAX_TERMS_POSTGRESQL:
        raise _too_long(query, terms)
    try:
        with db.read() as conn:
            return search_postgresql(conn, query)
    except StorageError as exc:
        if _TOO_COMPLEX_PG.search(str(exc)):
            raise _too_long(query, terms) from exc
        raise
