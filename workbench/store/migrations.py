"""Versioned schema migrations, one ordered list for both backends.

A migration is a name and, for each backend, a list of SQL statements. Each runs in its
own transaction together with the row that records its name in ``schema_migrations``, so
a database is always at a known version. A released migration is never edited: schema
changes add a new one at the end of :data:`MIGRATIONS`, with the SQL of each backend.

PostgreSQL (the team store, SPEC §10) joined at ``0005_session_metadata``: its
``0001_initial`` creates the schema as SQLite had it after 0005 (:data:`_PG_BASELINE`),
and 0002 to 0005 have nothing left to do there. On PostgreSQL, booleans are ``BOOLEAN``
and ids come from identity columns; times stay sortable text and JSON stays text, as the
SQLModel tables (:mod:`workbench.store.tables`) describe them for both.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import DatabaseVersionError


def _index_insert(index: str, column: str) -> str:
    """The statement that adds a new row's text to a full-text index."""
    return f"INSERT INTO {index}(rowid, {column}) VALUES (new.id, new.{column});"


def _text_index(index: str, table: str, column: str) -> list[str]:
    """An FTS5 index over ``table.column`` with external content (no second copy of the
    text), and the triggers that keep it current."""
    forget = (f"INSERT INTO {index}({index}, rowid, {column}) "
              f"VALUES ('delete', old.id, old.{column});")
    add = _index_insert(index, column)
    return [
        f"""
    CREATE VIRTUAL TABLE {index} USING fts5(
        {column}, content='{table}', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2'
    )
    """,
        f"CREATE TRIGGER {index}_insert AFTER INSERT ON {table} BEGIN {add} END",
        f"CREATE TRIGGER {index}_delete AFTER DELETE ON {table} BEGIN {forget} END",
        f"CREATE TRIGGER {index}_update AFTER UPDATE OF {column} ON {table} BEGIN "
        f"{forget} {add} END",
    ]

_INITIAL = [
    """
    CREATE TABLE agents (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        instructions TEXT NOT NULL DEFAULT '',
        provider TEXT,
        model TEXT,
        memory_policy TEXT,
        tools TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        agent_id INTEGER NOT NULL REFERENCES agents(id),
        title TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        tags TEXT,
        pinned INTEGER NOT NULL DEFAULT 0,
        archived INTEGER NOT NULL DEFAULT 0,
        forked_from_session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
        forked_from_message_id INTEGER,
        overrides TEXT,
        source TEXT,
        source_id TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        token_count INTEGER NOT NULL DEFAULT 0
    )
    """,
    "CREATE INDEX ix_sessions_listing ON sessions (archived, pinned, updated_at)",
    "CREATE INDEX ix_sessions_agent ON sessions (agent_id)",
    "CREATE INDEX ix_sessions_forked_from ON sessions (forked_from_session_id)",
    """
    CREATE UNIQUE INDEX ux_sessions_source ON sessions (source, source_id)
    WHERE source_id IS NOT NULL
    """,
    """
    CREATE TABLE compactions (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        policy TEXT NOT NULL,
        summarizer TEXT NOT NULL,
        tokens_before INTEGER NOT NULL DEFAULT 0,
        tokens_after INTEGER NOT NULL DEFAULT 0,
        folded_count INTEGER NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',
        before_context TEXT,
        details TEXT,
        undone_at TEXT
    )
    """,
    "CREATE INDEX ix_compactions_session ON compactions (session_id)",
    """
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT NOT NULL DEFAULT '',
        parts TEXT,
        name TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        created_at TEXT NOT NULL,
        token_count INTEGER,
        token_encoding TEXT,
        state TEXT NOT NULL DEFAULT 'active'
            CHECK (state IN ('active', 'folded', 'evicted')),
        important INTEGER NOT NULL DEFAULT 0,
        metadata TEXT,
        compaction_id INTEGER
    )
    """,
    # Paging by position, and cascade deletes of a session.
    "CREATE INDEX ix_messages_session_position ON messages (session_id, position)",
    # Token totals per state and counts per role come from this index alone.
    "CREATE INDEX ix_messages_session_state ON messages (session_id, state, role, token_count)",
    """
    CREATE INDEX ix_messages_compaction ON messages (compaction_id)
    WHERE compaction_id IS NOT NULL
    """,
    """
    CREATE TABLE session_context (
        session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        facts TEXT,
        summary TEXT NOT NULL DEFAULT '',
        tasks TEXT,
        tool_stats TEXT,
        token_usage TEXT,
        system_state TEXT,
        environment TEXT,
        updated_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE memory_entries (
        id INTEGER PRIMARY KEY,
        agent_id INTEGER NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
        session_id INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
        scope TEXT NOT NULL DEFAULT 'agent' CHECK (scope IN ('agent', 'session')),
        namespace TEXT NOT NULL DEFAULT 'default',
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        metadata TEXT,
        created_at TEXT NOT NULL
    )
    """,
    """
    CREATE UNIQUE INDEX ux_memory_entries_identity
    ON memory_entries (agent_id, scope, namespace, ifnull(session_id, 0), content_hash)
    """,
    "CREATE INDEX ix_memory_entries_session ON memory_entries (session_id)",
    """
    CREATE TABLE provider_configs (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        base_url TEXT NOT NULL,
        model TEXT NOT NULL,
        api_key_env TEXT,
        api_key_keyring TEXT,
        context_window INTEGER,
        max_output_tokens INTEGER,
        temperature REAL,
        timeouts TEXT,
        extra_headers TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT)",
    # Full-text indexes over the tables' own text (external content: no second copy).
    # (Bulk imports of this version dropped the message index's insert trigger, filled
    # the index in one pass and put it back; since 0002_pausable_index_triggers they
    # pause it instead, see FTS_PAUSE_SETTING.)
    *_text_index("messages_fts", "messages", "content"),
    *_text_index("sessions_fts", "sessions", "title"),
    *_text_index("memory_fts", "memory_entries", "content"),
    # Vocabulary of the message index: how many rows hold each term, which lets search
    # tell a rare word from a very common one before ranking.
    "CREATE VIRTUAL TABLE messages_fts_vocab USING fts5vocab(messages_fts, 'row')",
]


# While a row with this key is in ``settings``, inserting into messages or sessions does
# not index the new row: a bulk import adds the row inside its own transaction, inserts,
# indexes all the new rows in one statement each, and deletes the row again before it
# commits, so no other connection ever sees it. Pausing this way, instead of dropping
# and re-creating the triggers, changes no schema, so prepared statements stay valid.
FTS_PAUSE_SETTING = "fts_paused"

_PAUSABLE_INDEX_TRIGGERS = [
    statement
    for index, table, column in (("messages_fts", "messages", "content"),
                                 ("sessions_fts", "sessions", "title"))
    for statement in (
        f"DROP TRIGGER {index}_insert",
        f"CREATE TRIGGER {index}_insert AFTER INSERT ON {table} "
        f"WHEN NOT EXISTS (SELECT 1 FROM settings WHERE key = '{FTS_PAUSE_SETTING}') "
        f"BEGIN {_index_insert(index, column)} END",
    )
]


# Each message keeps the body of its extractive summary line at the length a fold of many
# messages writes, and that body's token count in the message's token_encoding (see
# workbench.core.summarizers.line_cache): compacting a long session then writes and counts
# its summary without reading every text through the tokenizer again. The body depends on
# the role, content, name and tool calls only: when one of them changes and the same
# statement writes no new line, the kept one is forgotten, and so is the count when the
# encoding changes without a new count. A change to the rules that write summary lines
# must clear both columns in a migration of its own.
_SUMMARY_LINES = [
    "ALTER TABLE messages ADD COLUMN summary_line TEXT",
    "ALTER TABLE messages ADD COLUMN summary_line_tokens INTEGER",
    """
    CREATE TRIGGER messages_summary_line_stale
    AFTER UPDATE OF role, content, name, tool_calls ON messages
    WHEN old.summary_line IS NOT NULL
        AND new.summary_line IS old.summary_line
        AND (new.role IS NOT old.role OR new.content IS NOT old.content
             OR new.name IS NOT old.name OR new.tool_calls IS NOT old.tool_calls)
    BEGIN
        UPDATE messages SET summary_line = NULL, summary_line_tokens = NULL
        WHERE id = new.id;
    END
    """,
    """
    CREATE TRIGGER messages_summary_line_tokens_stale
    AFTER UPDATE OF token_encoding ON messages
    WHEN old.summary_line_tokens IS NOT NULL
        AND new.summary_line_tokens IS old.summary_line_tokens
        AND new.token_encoding IS NOT old.token_encoding
    BEGIN
        UPDATE messages SET summary_line_tokens = NULL WHERE id = new.id;
    END
    """,
]


# An import recognises a conversation by its source, its id there AND its content (SPEC
# §11): ids repeat across datasets, so (source, source_id) is no longer unique. Each
# imported session keeps the file it came from (``source_file``, what ``--replace``
# matches), and the fingerprint of the messages as imported with their number
# (``fingerprint``, ``fingerprint_count``; see workbench.core.identity): the same
# conversation again changes nothing, one that grew in its source gets the new turns.
# Sessions imported before keep NULLs; the store fingerprints their messages when an
# import meets them.
_IMPORT_IDENTITY = [
    "DROP INDEX ux_sessions_source",
    "CREATE INDEX ix_sessions_source ON sessions (source, source_id) WHERE source_id IS NOT NULL",
    "ALTER TABLE sessions ADD COLUMN source_file TEXT",
    "ALTER TABLE sessions ADD COLUMN fingerprint TEXT",
    "ALTER TABLE sessions ADD COLUMN fingerprint_count INTEGER",
]


# What a source says about a conversation as a whole (a model, a score, a project, the
# branch it is of...): free JSON, read with the session's details, never with the list.
_SESSION_METADATA = [
    "ALTER TABLE sessions ADD COLUMN metadata TEXT",
]


# The fingerprint of the context an import wrote (see ContextStore._imported_context):
# a context changed here since is not written over by the same file read again.
_IMPORTED_CONTEXT = [
    "ALTER TABLE session_context ADD COLUMN imported_fingerprint TEXT",
]


# Which tool calls each assistant message makes, one row per call, kept by triggers, so
# that telling the tool results whose call is missing (the orphans a request leaves out)
# is an index lookup per result instead of reading and parsing every assistant
# message's calls (``Repository.prefix_exceptions``). A call's id is read as
# ``workbench.core.assembly.call_ids`` reads it: the id when the call is an object with
# a text id, else ''; calls that are not a list give '' per member, and a falsy value
# gives nothing. Calls that are not JSON give one row whose call_id is NULL: the reader
# then reads such a stretch the slow way. Each row repeats its message's session,
# position and state (kept in step by the triggers) so the lookup needs no join. Tool
# results are found by a partial index that holds their call ids.
# The bulk import pauses the insert trigger with the full-text ones (FTS_PAUSE_SETTING)
# and fills the rows of a batch with one statement (MESSAGE_CALLS_FILL).
MESSAGE_CALL_ID = (
    "CASE WHEN json_type(m.tool_calls) = 'array' AND j.type = 'object'"
    " AND json_type(j.value, '$.id') = 'text' THEN json_extract(j.value, '$.id') ELSE '' END"
)
MESSAGE_CALLS_FILL = f"""
    INSERT INTO message_calls (message_id, session_id, position, state, call_id)
    SELECT m.id, m.session_id, m.position, m.state, {MESSAGE_CALL_ID}
    FROM messages m, json_each(CASE WHEN json_valid(m.tool_calls) THEN m.tool_calls
                                    ELSE '[]' END) j
    WHERE m.role = 'assistant' AND m.tool_calls IS NOT NULL
        AND m.tool_calls NOT IN ('""', '0', 'false', '0.0') AND json_valid(m.tool_calls)
        AND m.id >= ?
    UNION ALL
    SELECT m.id, m.session_id, m.position, m.state, NULL
    FROM messages m
    WHERE m.role = 'assistant' AND m.tool_calls IS NOT NULL AND NOT json_valid(m.tool_calls)
        AND m.id >= ?
"""


def _calls_of_new(condition: str) -> str:
    """The statements adding the call rows of ``new`` (a message row in a trigger)."""
    return f"""
        INSERT INTO message_calls (message_id, session_id, position, state, call_id)
        SELECT new.id, new.session_id, new.position, new.state,
            {MESSAGE_CALL_ID.replace("m.tool_calls", "new.tool_calls")}
        FROM json_each(CASE WHEN json_valid(new.tool_calls) THEN new.tool_calls
                            ELSE '[]' END) j
        WHERE {condition} AND new.role = 'assistant' AND new.tool_calls IS NOT NULL
            AND new.tool_calls NOT IN ('""', '0', 'false', '0.0');
        INSERT INTO message_calls (message_id, session_id, position, state, call_id)
        SELECT new.id, new.session_id, new.position, new.state, NULL
        WHERE {condition} AND new.role = 'assistant' AND new.tool_calls IS NOT NULL
            AND NOT json_valid(new.tool_calls);
    """


_MESSAGE_CALLS_TABLE = [
    """
    CREATE TABLE message_calls (
        id INTEGER PRIMARY KEY,
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        session_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        state TEXT NOT NULL,
        call_id TEXT
    )
    """,
    "CREATE INDEX ix_message_calls_lookup ON message_calls (session_id, call_id, state, position)",
    "CREATE INDEX ix_message_calls_message ON message_calls (message_id)",
    """
    CREATE INDEX ix_messages_tool_results ON messages (session_id, state, position, tool_call_id)
    WHERE role = 'tool'
    """,
]

_PG_MESSAGE_CALLS = [
    _MESSAGE_CALLS_TABLE[0].replace(
        "id INTEGER PRIMARY KEY", "id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    ),
    *_MESSAGE_CALLS_TABLE[1:],
]

# The calls follow their message's place (0015 adds ``paused``: see _CALLS_PLACE_PAUSABLE).
_CALLS_PLACE = """
    CREATE TRIGGER message_calls_place AFTER UPDATE OF session_id, position, state ON messages
    WHEN new.role = 'assistant' AND new.tool_calls IS NOT NULL
        AND (new.session_id IS NOT old.session_id OR new.position IS NOT old.position
             OR new.state IS NOT old.state){paused}
    BEGIN
        UPDATE message_calls SET session_id = new.session_id, position = new.position,
            state = new.state
        WHERE message_id = new.id;
    END
    """

_MESSAGE_CALLS = [
    *_MESSAGE_CALLS_TABLE,
    MESSAGE_CALLS_FILL.replace("?", "0"),
    f"""
    CREATE TRIGGER message_calls_insert AFTER INSERT ON messages
    WHEN new.role = 'assistant' AND new.tool_calls IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM settings WHERE key = '{FTS_PAUSE_SETTING}')
    BEGIN
        {_calls_of_new("1")}
    END
    """,
    f"""
    CREATE TRIGGER message_calls_change AFTER UPDATE OF role, tool_calls ON messages
    WHEN new.role IS NOT old.role OR new.tool_calls IS NOT old.tool_calls
    BEGIN
        DELETE FROM message_calls WHERE message_id = old.id;
        {_calls_of_new("1")}
    END
    """,
    _CALLS_PLACE.format(paused=""),
]


# The PostgreSQL schema as of 0005 (see the module docstring). The full-text index of the
# team store comes with the search work, in a migration of its own.
# ``schema_migrations`` itself is created by the migrator, as on SQLite.
_PG_BASELINE = [
    """
    CREATE TABLE agents (
        id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        instructions TEXT NOT NULL DEFAULT '',
        provider TEXT,
        model TEXT,
        memory_policy TEXT,
        tools TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE sessions (
        id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        agent_id INTEGER NOT NULL REFERENCES agents(id),
        title TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        tags TEXT,
        pinned BOOLEAN NOT NULL DEFAULT FALSE,
        archived BOOLEAN NOT NULL DEFAULT FALSE,
        forked_from_session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
        forked_from_message_id INTEGER,
        overrides TEXT,
        source TEXT,
        source_id TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        token_count INTEGER NOT NULL DEFAULT 0,
        source_file TEXT,
        fingerprint TEXT,
        fingerprint_count INTEGER,
        metadata TEXT
    )
    """,
    "CREATE INDEX ix_sessions_listing ON sessions (archived, pinned, updated_at)",
    "CREATE INDEX ix_sessions_agent ON sessions (agent_id)",
    "CREATE INDEX ix_sessions_forked_from ON sessions (forked_from_session_id)",
    "CREATE INDEX ix_sessions_source ON sessions (source, source_id) WHERE source_id IS NOT NULL",
    """
    CREATE TABLE compactions (
        id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        policy TEXT NOT NULL,
        summarizer TEXT NOT NULL,
        tokens_before INTEGER NOT NULL DEFAULT 0,
        tokens_after INTEGER NOT NULL DEFAULT 0,
        folded_count INTEGER NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '',
        before_context TEXT,
        details TEXT,
        undone_at TEXT
    )
    """,
    "CREATE INDEX ix_compactions_session ON compactions (session_id)",
    """
    CREATE TABLE messages (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT NOT NULL DEFAULT '',
        parts TEXT,
        name TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        created_at TEXT NOT NULL,
        token_count INTEGER,
        token_encoding TEXT,
        state TEXT NOT NULL DEFAULT 'active'
            CHECK (state IN ('active', 'folded', 'evicted')),
        important BOOLEAN NOT NULL DEFAULT FALSE,
        metadata TEXT,
        compaction_id INTEGER,
        summary_line TEXT,
        summary_line_tokens INTEGER
    )
    """,
    "CREATE INDEX ix_messages_session_position ON messages (session_id, position)",
    "CREATE INDEX ix_messages_session_state ON messages (session_id, state, role, token_count)",
    """
    CREATE INDEX ix_messages_compaction ON messages (compaction_id)
    WHERE compaction_id IS NOT NULL
    """,
    """
    CREATE TABLE session_context (
        session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        facts TEXT,
        summary TEXT NOT NULL DEFAULT '',
        tasks TEXT,
        tool_stats TEXT,
        token_usage TEXT,
        system_state TEXT,
        environment TEXT,
        updated_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE memory_entries (
        id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        agent_id INTEGER NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
        session_id INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
        scope TEXT NOT NULL DEFAULT 'agent' CHECK (scope IN ('agent', 'session')),
        namespace TEXT NOT NULL DEFAULT 'default',
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        metadata TEXT,
        created_at TEXT NOT NULL
    )
    """,
    """
    CREATE UNIQUE INDEX ux_memory_entries_identity
    ON memory_entries (agent_id, scope, namespace, coalesce(session_id, 0), content_hash)
    """,
    "CREATE INDEX ix_memory_entries_session ON memory_entries (session_id)",
    """
    CREATE TABLE provider_configs (
        id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        base_url TEXT NOT NULL,
        model TEXT NOT NULL,
        api_key_env TEXT,
        api_key_keyring TEXT,
        context_window INTEGER,
        max_output_tokens INTEGER,
        temperature DOUBLE PRECISION,
        timeouts TEXT,
        extra_headers TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT)",
]


# Full-text search on PostgreSQL (SPEC §5 on the team store; SQLite has its FTS5 tables
# since 0001). Text is split the way FTS5's unicode61 tokenizer splits it, on every
# character that is not a letter or a digit, lower-cased and without diacritics
# (``workbench_words``): PostgreSQL's own parser would keep ``felelis.py`` or a URL as one
# token and miss words SQLite finds. The split needs a collation that knows Unicode
# letters; the database's default may be "C", which does not, so the function names one
# the server has. Each searchable text keeps its words in a stored tsvector column with a
# GIN index (over its first 250,000 characters: a tsvector holds at most 1 MB), and a
# trigram index serves the substring search of text no word covers (``->``, ``__init__``).
# (0010_search_upkeep_postgresql keeps the messages' column by triggers instead, and
# drops the trigram index.)
_PG_WORDS_FUNCTION = r"""
DO $do$
DECLARE
    coll text;
    accents text;
BEGIN
    SELECT quote_ident(collname) INTO coll FROM pg_collation
    WHERE collname IN ('C.utf8', 'C.UTF-8', 'und-x-icu', 'en_US.utf8')
    ORDER BY array_position(ARRAY['C.utf8', 'C.UTF-8', 'und-x-icu', 'en_US.utf8'],
                            collname::text)
    LIMIT 1;
    SELECT quote_ident(extnamespace::regnamespace::text) INTO accents
    FROM pg_extension WHERE extname = 'unaccent';
    EXECUTE format(
        $f$CREATE FUNCTION workbench_words(t text) RETURNS text
           LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
           AS $body$ SELECT regexp_replace(
               lower(%1$s.unaccent('%1$s.unaccent'::regdictionary, t) %2$s),
               '[^[:alnum:]]+', ' ', 'g') $body$$f$,
        accents, CASE WHEN coll IS NULL THEN '' ELSE 'COLLATE ' || coll END);
END
$do$
"""

PG_SEARCH_CHARS = 250_000

_PG_SEARCH = [
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    _PG_WORDS_FUNCTION,
    f"""
    ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS
        (to_tsvector('simple'::regconfig, workbench_words(left(content, {PG_SEARCH_CHARS}))))
        STORED
    """,
    "CREATE INDEX ix_messages_search ON messages USING gin (search)",
    "CREATE INDEX ix_messages_content_trgm ON messages USING gin (content gin_trgm_ops)",
    """
    ALTER TABLE sessions ADD COLUMN search tsvector GENERATED ALWAYS AS
        (to_tsvector('simple'::regconfig, workbench_words(title))) STORED
    """,
    "CREATE INDEX ix_sessions_search ON sessions USING gin (search)",
    f"""
    ALTER TABLE memory_entries ADD COLUMN search tsvector GENERATED ALWAYS AS
        (to_tsvector('simple'::regconfig, workbench_words(left(content, {PG_SEARCH_CHARS}))))
        STORED
    """,
    "CREATE INDEX ix_memory_entries_search ON memory_entries USING gin (search)",
]

# Columns that exist only on PostgreSQL, as the FTS5 tables exist only on SQLite: the
# SQLModel tables do not describe them and the store never reads them as data.
PG_SEARCH_COLUMNS = {"messages": ("search", "symbols"), "sessions": ("search",),
                     "memory_entries": ("search",)}


# message_calls on PostgreSQL (0007 created the table there without anything filling it):
# plpgsql triggers doing what 0007's SQLite triggers do, with the same rows. One function
# lists a message's calls: none for the falsy texts, one row with a NULL call id for text
# that is not JSON (told by the cast failing, in a block that writes nothing, so no
# subtransaction id is spent), one per element of an array (the element's text "id", else
# ''), one '' per member of an object, one '' for any other value. Nothing pauses them:
# a bulk import on PostgreSQL has its calls listed as it inserts.
_PG_MESSAGE_CALLS_TRIGGERS = [
    """
    CREATE FUNCTION workbench_list_message_calls(
        mid bigint, sid integer, pos integer, st text, calls text
    ) RETURNS void LANGUAGE plpgsql AS $fn$
    DECLARE
        doc json;
    BEGIN
        IF calls IS NULL OR calls IN ('""', '0', 'false', '0.0') THEN
            RETURN;
        END IF;
        BEGIN
            doc := calls::json;
        EXCEPTION WHEN invalid_text_representation THEN
            INSERT INTO message_calls (message_id, session_id, position, state, call_id)
            VALUES (mid, sid, pos, st, NULL);
            RETURN;
        END;
        IF json_typeof(doc) = 'array' THEN
            INSERT INTO message_calls (message_id, session_id, position, state, call_id)
            SELECT mid, sid, pos, st,
                CASE WHEN json_typeof(e) = 'object' AND json_typeof(e -> 'id') = 'string'
                     THEN e ->> 'id' ELSE '' END
            FROM json_array_elements(doc) AS e;
        ELSIF json_typeof(doc) = 'object' THEN
            INSERT INTO message_calls (message_id, session_id, position, state, call_id)
            SELECT mid, sid, pos, st, '' FROM json_object_keys(doc);
        ELSE
            INSERT INTO message_calls (message_id, session_id, position, state, call_id)
            VALUES (mid, sid, pos, st, '');
        END IF;
    END
    $fn$
    """,
    """
    CREATE FUNCTION workbench_message_calls_insert() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM workbench_list_message_calls(new.id, new.session_id, new.position,
                                             new.state, new.tool_calls);
        RETURN NULL;
    END
    $fn$
    """,
    """
    CREATE FUNCTION workbench_message_calls_change() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM message_calls WHERE message_id = old.id;
        IF new.role = 'assistant' AND new.tool_calls IS NOT NULL THEN
            PERFORM workbench_list_message_calls(new.id, new.session_id, new.position,
                                                 new.state, new.tool_calls);
        END IF;
        RETURN NULL;
    END
    $fn$
    """,
    """
    CREATE FUNCTION workbench_message_calls_place() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        UPDATE message_calls SET session_id = new.session_id, position = new.position,
            state = new.state
        WHERE message_id = new.id;
        RETURN NULL;
    END
    $fn$
    """,
    """
    CREATE TRIGGER message_calls_insert AFTER INSERT ON messages FOR EACH ROW
    WHEN (new.role = 'assistant' AND new.tool_calls IS NOT NULL)
    EXECUTE FUNCTION workbench_message_calls_insert()
    """,
    """
    CREATE TRIGGER message_calls_change AFTER UPDATE OF role, tool_calls ON messages
    FOR EACH ROW
    WHEN (new.role IS DISTINCT FROM old.role OR new.tool_calls IS DISTINCT FROM old.tool_calls)
    EXECUTE FUNCTION workbench_message_calls_change()
    """,
    """
    CREATE TRIGGER message_calls_place AFTER UPDATE OF session_id, position, state ON messages
    FOR EACH ROW
    WHEN (new.role = 'assistant' AND new.tool_calls IS NOT NULL
          AND (new.session_id IS DISTINCT FROM old.session_id
               OR new.position IS DISTINCT FROM old.position
               OR new.state IS DISTINCT FROM old.state))
    EXECUTE FUNCTION workbench_message_calls_place()
    """,
    # The calls of the messages written before.
    "DELETE FROM message_calls",
    """
    SELECT workbench_list_message_calls(id, session_id, position, state, tool_calls)
    FROM messages WHERE role = 'assistant' AND tool_calls IS NOT NULL
    """,
]


# The kept summary lines on PostgreSQL: 0003's SQLite triggers as one BEFORE UPDATE
# trigger that clears them in the row being written. A change of what a line is made of
# (role, content, name, tool calls) forgets the line and its count, unless the same write
# sets a new line; a count in another encoding forgets the line's count only.
_PG_SUMMARY_LINES = [
    """
    CREATE FUNCTION workbench_summary_line_stale() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        IF old.summary_line IS NOT NULL
            AND new.summary_line IS NOT DISTINCT FROM old.summary_line
            AND (new.role IS DISTINCT FROM old.role
                 OR new.content IS DISTINCT FROM old.content
                 OR new.name IS DISTINCT FROM old.name
                 OR new.tool_calls IS DISTINCT FROM old.tool_calls) THEN
            new.summary_line := NULL;
            new.summary_line_tokens := NULL;
        END IF;
        IF old.summary_line_tokens IS NOT NULL
            AND new.summary_line_tokens IS NOT DISTINCT FROM old.summary_line_tokens
            AND new.token_encoding IS DISTINCT FROM old.token_encoding THEN
            new.summary_line_tokens := NULL;
        END IF;
        RETURN new;
    END
    $fn$
    """,
    """
    CREATE TRIGGER messages_summary_line_stale
    BEFORE UPDATE OF role, content, name, tool_calls, token_encoding ON messages
    FOR EACH ROW EXECUTE FUNCTION workbench_summary_line_stale()
    """,
]


# What a message's search column holds on PostgreSQL: its words (see _PG_WORDS_FUNCTION)
# with their positions, from the first PG_SEARCH_CHARS characters.
_PG_SEARCH_VECTOR_FUNCTION = f"""
CREATE FUNCTION workbench_search_vector(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $body$
    SELECT to_tsvector('simple'::regconfig, workbench_words(left(t, {PG_SEARCH_CHARS})))
$body$
"""

# The messages' search column kept by triggers instead of generated (0006): a generated
# column is computed again on EVERY update of the row, so folding ten thousand messages
# (a change of state) split and indexed ten thousand texts that had not changed. Now an
# insert that gives no search value gets it from the content, and an update computes it
# again only when the content changed. A bulk import (workbench.store.bulk) sends the
# values with the rows where it can make exactly what workbench_search_vector makes, so
# the server splits only the other texts.
# The trigram index of the content goes: no statement of the search uses it to its
# advantage (its substring patterns of symbols hold no trigram, and the words of the
# others are found through the search column), and keeping it cost twice as much as the
# rest of an import (a trigram entry for every three characters of text).
_PG_SEARCH_UPKEEP = [
    "DROP INDEX ix_messages_content_trgm",
    _PG_SEARCH_VECTOR_FUNCTION,
    "ALTER TABLE messages ALTER COLUMN search DROP EXPRESSION",
    """
    CREATE FUNCTION workbench_message_search() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        new.search := workbench_search_vector(new.content);
        RETURN new;
    END
    $fn$
    """,
    """
    CREATE TRIGGER messages_search_insert BEFORE INSERT ON messages
    FOR EACH ROW WHEN (new.search IS NULL)
    EXECUTE FUNCTION workbench_message_search()
    """,
    """
    CREATE TRIGGER messages_search_update BEFORE UPDATE OF content ON messages
    FOR EACH ROW WHEN (new.content IS DISTINCT FROM old.content)
    EXECUTE FUNCTION workbench_message_search()
    """,
]


# How a search on PostgreSQL finds the newest matches without reading every one of them
# (``search_postgresql``): it walks an index from the newest row and tests each row's
# words, so each filter it can walk by has an index ordered by id (the role, a state other
# than 'active') or by time (the date). A substring made of symbols only (``<=>``) has no
# letter pg_trgm could index: ``workbench_symbols`` keeps the ASCII punctuation of a text
# (anything else becomes a space) spelt as letters and digits, so that a trigram index of
# it narrows such a search down to the rows holding the same run of symbols (the exact
# ILIKE still decides). The names end in "_search" and "_trgm": they are the search's,
# as the FTS5 tables are on SQLite, and not part of the SQLModel schema.
PG_SYMBOLS = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
PG_SYMBOL_LETTERS = "abcdefghijklmnopqrstuvwxyz012345"
# The index of the symbols holds only the texts with a run of three symbols (about one in
# six): a needle it can serve has one (three characters make the shortest trigram), so
# the other texts cost an import this one test instead of the whole index entry. A search
# states the same condition (the regular expression, word for word) to be served by it.
PG_SYMBOL_CLASS = r"[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]"
PG_SYMBOL_RUN = PG_SYMBOL_CLASS + "{3}"

_PG_SEARCH_PLANS = [
    "CREATE INDEX ix_messages_role_search ON messages (role, id)",
    "CREATE INDEX ix_messages_state_search ON messages (state, id) WHERE state <> 'active'",
    "CREATE INDEX ix_messages_created_search ON messages (created_at, id)",
    rf"""
    CREATE FUNCTION workbench_symbols(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $body$ SELECT translate(
        regexp_replace(t, '[^\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+', ' ', 'g'),
        '{PG_SYMBOLS.replace("'", "''")}', '{PG_SYMBOL_LETTERS}') $body$
    """,
    "CREATE INDEX ix_messages_symbols_trgm ON messages"
    " USING gin (workbench_symbols(content) gin_trgm_ops)"
    f" WHERE content ~ '{PG_SYMBOL_RUN}'",
]


# The index of the symbols, kept without a regular expression per row on the server
# (0011's partial expression index split the punctuation of every text with one, and
# tested every text for a run: the largest part of the server's work in an import). A
# message's ``symbols`` column holds its runs of three or more ASCII symbols, spelt as
# letters and digits, one word per run in the order of the text, or NULL when it has
# none. Whoever sends a message's search value sends its symbols too (the bulk import,
# which makes both in Python); an insert without a search value, and a change of the
# content, have the server make both. A needle's run of three or more symbols is part of
# one run of the text, so the runs alone serve every needle the index served before.
_PG_SYMBOL_RUNS = [
    "ALTER TABLE messages ADD COLUMN symbols text",
    rf"""
    CREATE FUNCTION workbench_symbol_runs(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $body$ SELECT translate(string_agg(r.run[1], ' ' ORDER BY r.n),
        '{PG_SYMBOLS.replace("'", "''")}', '{PG_SYMBOL_LETTERS}')
    FROM regexp_matches(t, '{PG_SYMBOL_CLASS}{{3,}}', 'g') WITH ORDINALITY AS r(run, n) $body$
    """,
    """
    CREATE OR REPLACE FUNCTION workbench_message_search() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        new.search := workbench_search_vector(new.content);
        new.symbols := workbench_symbol_runs(new.content);
        RETURN new;
    END
    $fn$
    """,
    f"UPDATE messages SET symbols = workbench_symbol_runs(content)"
    f" WHERE content ~ '{PG_SYMBOL_RUN}'",
    "DROP INDEX ix_messages_symbols_trgm",
    "DROP FUNCTION workbench_symbols(text)",
    "CREATE INDEX ix_messages_symbol_runs_trgm ON messages USING gin (symbols gin_trgm_ops)"
    " WHERE symbols IS NOT NULL",
]


# A bulk import on PostgreSQL lists its messages' calls itself (workbench.store.bulk):
# it reads the JSON it wrote, and sends the rows of message_calls in one statement,
# where the insert trigger ran a function per assistant message with calls. The import
# says so for its own transaction (the setting below); every other insert still has the
# trigger list its calls.
PG_CALLS_LISTED_SETTING = "workbench.calls_listed"
_PG_CALLS_LISTED_BY_IMPORT = [
    "DROP TRIGGER message_calls_insert ON messages",
    f"""
    CREATE TRIGGER message_calls_insert AFTER INSERT ON messages FOR EACH ROW
    WHEN (new.role = 'assistant' AND new.tool_calls IS NOT NULL
          AND current_setting('{PG_CALLS_LISTED_SETTING}', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION workbench_message_calls_insert()
    """,
]


# The active tool results whose call is missing, one row each, kept by triggers (0014),
# so that preflight finds the orphans among the left-out history by reading them alone
# instead of looking up the call of every tool result there (which grew with the
# session). An active tool result is listed when no active message_calls row of its
# session with its call id (a result without one asks for '') lies at an earlier
# position. Only the active state is kept: it is what requests carry, and folding or
# evicting thousands of messages then costs one delete per tool result it takes away.
# Every change that can alter that answers for itself: a result written or changed is
# tested again, a call listed removes the later results it answers, a call removed or
# moved lists the later results no other earlier call answers. Each row repeats its
# result's session, position, state and call id. SQLite's bulk import pauses the test on
# insert and lists the orphans of a batch in one statement (ORPHAN_RESULTS_FILL); a team
# store's tells them in Python (workbench.store.bulk), or has the server find them
# (PG_ORPHAN_RESULTS_FILL) for a session with calls only the server reads exactly.
ORPHAN_COLUMNS = "message_id, session_id, position, state, call_id"


def _no_call_before(row: str, call_id: str) -> str:
    """SQL true when no call ``call_id`` of ``row``'s session and state precedes it."""
    return f"""NOT EXISTS (
        SELECT 1 FROM message_calls c WHERE c.session_id = {row}.session_id
            AND c.call_id = {call_id} AND c.state = {row}.state
            AND c.position < {row}.position)"""


_RESULT_CALL = "coalesce({row}.tool_call_id, '')"


def _list_if_orphan(row: str, condition: str = "1 = 1") -> str:
    """INSERT of ``row`` (a tool result) into orphan_results when no call precedes it."""
    call = _RESULT_CALL.format(row=row)
    return f"""
        INSERT INTO orphan_results ({ORPHAN_COLUMNS})
        SELECT {row}.id, {row}.session_id, {row}.position, {row}.state, {call}
        WHERE {condition} AND {row}.state = 'active' AND {_no_call_before(row, call)}"""


def _answered_by(call: str) -> str:
    """DELETE of the orphans ``call`` (a message_calls row) answers."""
    return f"""
        DELETE FROM orphan_results WHERE session_id = {call}.session_id
            AND call_id = {call}.call_id AND state = {call}.state
            AND position > {call}.position"""


def _left_without(call: str, *, also: str = "", postgresql: bool = False) -> str:
    """INSERT of the later results of ``call``'s id that no earlier call answers once
    ``call`` (a message_calls row removed or moved away) no longer does; results listed
    already stay as they are."""
    verb = "INSERT INTO" if postgresql else "INSERT OR IGNORE INTO"
    tail = "ON CONFLICT (message_id) DO NOTHING" if postgresql else ""
    return f"""
        {verb} orphan_results ({ORPHAN_COLUMNS})
        SELECT m.id, m.session_id, m.position, m.state, {call}.call_id
        FROM messages m
        WHERE m.session_id = {call}.session_id AND m.role = 'tool'
            AND coalesce(m.tool_call_id, '') = {call}.call_id AND m.state = {call}.state
            AND m.position > {call}.position AND {_no_call_before("m", f"{call}.call_id")}
            {also}
        {tail}"""


_ORPHANS_OF = f"""
    INSERT INTO orphan_results ({ORPHAN_COLUMNS})
    SELECT m.id, m.session_id, m.position, m.state, coalesce(m.tool_call_id, '')
    FROM messages m
    WHERE m.role = 'tool' AND m.state = 'active' AND {{where}}
        AND {_no_call_before("m", "coalesce(m.tool_call_id, '')")}
"""
#: The orphans among the messages from id ``?`` on (SQLite's bulk import).
ORPHAN_RESULTS_FILL = _ORPHANS_OF.format(where="m.id >= ?")
#: The orphans of the sessions ``:sids`` (a team store's bulk import).
PG_ORPHAN_RESULTS_FILL = _ORPHANS_OF.format(where="m.session_id = ANY(:sids)")

_ORPHAN_TABLE = [
    """
    CREATE TABLE orphan_results (
        message_id INTEGER NOT NULL PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        session_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        state TEXT NOT NULL,
        call_id TEXT NOT NULL
    )
    """,
    "CREATE INDEX ix_orphan_results_place ON orphan_results (session_id, state, position)",
    "CREATE INDEX ix_orphan_results_call ON orphan_results (session_id, call_id, state, position)",
    # The results of one call id (for the triggers below and preflight), replacing the
    # index 0007 made for the lookup per result.
    "DROP INDEX ix_messages_tool_results",
    """
    CREATE INDEX ix_messages_results_by_call
    ON messages (session_id, (coalesce(tool_call_id, '')), state, position) WHERE role = 'tool'
    """,
    # The calls at or before a place (preflight's calls made before the left-out stretch).
    "CREATE INDEX ix_message_calls_place ON message_calls (session_id, state, position)",
]

_RESULT_CHANGED = """
    (new.role = 'tool' OR old.role = 'tool') AND (new.state = 'active' OR old.state = 'active')
    AND (new.role IS NOT old.role OR new.tool_call_id IS NOT old.tool_call_id
         OR new.session_id IS NOT old.session_id OR new.position IS NOT old.position
         OR new.state IS NOT old.state)
"""
_CALL_MOVED = """
    (new.state = 'active' OR old.state = 'active')
    AND (new.session_id IS NOT old.session_id OR new.position IS NOT old.position
         OR new.state IS NOT old.state OR new.call_id IS NOT old.call_id)
"""
_ACTIVE_CALL = "{call}.call_id IS NOT NULL AND {call}.state = 'active'"
#: While a write that changes many messages of one session at once (a compaction and its
#: undo) holds this setting, the triggers of changes stand aside and the write lists the
#: session's orphans again afterwards, in one statement (workbench.store.orphans).
ORPHANS_PAUSE_SETTING = "orphans_paused"
PG_ORPHANS_PAUSE_SETTING = "workbench.orphans_paused"
_NOT_PAUSED = f"NOT EXISTS (SELECT 1 FROM settings WHERE key = '{ORPHANS_PAUSE_SETTING}')"
_PG_NOT_PAUSED = f"current_setting('{PG_ORPHANS_PAUSE_SETTING}', true) IS DISTINCT FROM 'on'"
#: The orphans of one session (``:sid``), listed anew after such a write.
ORPHANS_OF_SESSION = _ORPHANS_OF.format(where="m.session_id = :sid")

_ORPHAN_RESULTS = [
    *_ORPHAN_TABLE,
    f"""
    CREATE TRIGGER orphan_results_insert AFTER INSERT ON messages
    WHEN new.role = 'tool' AND new.state = 'active'
        AND NOT EXISTS (SELECT 1 FROM settings WHERE key = '{FTS_PAUSE_SETTING}')
    BEGIN {_list_if_orphan("new")}; END
    """,
    f"""
    CREATE TRIGGER orphan_results_change
    AFTER UPDATE OF role, tool_call_id, session_id, position, state ON messages
    WHEN {_RESULT_CHANGED} AND {_NOT_PAUSED}
    BEGIN
        DELETE FROM orphan_results WHERE message_id = old.id;
        {_list_if_orphan("new", "new.role = 'tool'")};
    END
    """,
    f"""
    CREATE TRIGGER orphan_results_call_listed AFTER INSERT ON message_calls
    WHEN new.call_id IS NOT NULL AND new.state = 'active' AND {_NOT_PAUSED}
    BEGIN {_answered_by("new")}; END
    """,
    f"""
    CREATE TRIGGER orphan_results_call_removed AFTER DELETE ON message_calls
    WHEN old.call_id IS NOT NULL AND old.state = 'active' AND {_NOT_PAUSED}
    BEGIN {_left_without("old")}; END
    """,
    f"""
    CREATE TRIGGER orphan_results_call_moved
    AFTER UPDATE OF session_id, position, state, call_id ON message_calls
    WHEN {_CALL_MOVED} AND {_NOT_PAUSED}
    BEGIN
        {_left_without("old", also="AND " + _ACTIVE_CALL.format(call="old"))};
        {_answered_by("new")} AND {_ACTIVE_CALL.format(call="new")};
    END
    """,
    ORPHAN_RESULTS_FILL.replace("?", "0"),
]


_PG_RESULT_CHANGED = (
    _RESULT_CHANGED.replace("IS NOT old", "IS DISTINCT FROM old")
)
_PG_CALL_MOVED = _CALL_MOVED.replace("IS NOT old", "IS DISTINCT FROM old")
_PG_NOT_LISTED_BY_IMPORT = (
    f"current_setting('{PG_CALLS_LISTED_SETTING}', true) IS DISTINCT FROM 'on'"
)


def _pg_trigger_function(name: str, body: str) -> str:
    return f"""
    CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        {body};
        RETURN NULL;
    END
    $fn$
    """


# The same on PostgreSQL. A bulk import lists its calls itself (0013), and with them the
# orphans of its sessions in one statement: for the rows of its own statements (the
# transaction-local setting of 0013) the insert triggers stand aside.
_PG_ORPHAN_RESULTS = [
    *_ORPHAN_TABLE,
    _pg_trigger_function("workbench_orphan_results_insert",
                         _list_if_orphan("new")),
    _pg_trigger_function(
        "workbench_orphan_results_change",
        "DELETE FROM orphan_results WHERE message_id = old.id;\n"
        + _list_if_orphan("new", "new.role = 'tool'"),
    ),
    _pg_trigger_function("workbench_orphan_results_call_listed", _answered_by("new")),
    _pg_trigger_function("workbench_orphan_results_call_removed",
                         _left_without("old", postgresql=True)),
    _pg_trigger_function(
        "workbench_orphan_results_call_moved",
        f"IF {_ACTIVE_CALL.format(call='old')} THEN\n"
        + _left_without("old", postgresql=True)
        + f";\nEND IF;\nIF {_ACTIVE_CALL.format(call='new')} THEN\n"
        + _answered_by("new") + ";\nEND IF",
    ),
    f"""
    CREATE TRIGGER orphan_results_insert AFTER INSERT ON messages FOR EACH ROW
    WHEN (new.role = 'tool' AND new.state = 'active' AND {_PG_NOT_LISTED_BY_IMPORT})
    EXECUTE FUNCTION workbench_orphan_results_insert()
    """,
    f"""
    CREATE TRIGGER orphan_results_change
    AFTER UPDATE OF role, tool_call_id, session_id, position, state ON messages FOR EACH ROW
    WHEN ({_PG_RESULT_CHANGED} AND {_PG_NOT_PAUSED})
    EXECUTE FUNCTION workbench_orphan_results_change()
    """,
    f"""
    CREATE TRIGGER orphan_results_call_listed AFTER INSERT ON message_calls FOR EACH ROW
    WHEN ({_ACTIVE_CALL.format(call="new")} AND {_PG_NOT_LISTED_BY_IMPORT}
          AND {_PG_NOT_PAUSED})
    EXECUTE FUNCTION workbench_orphan_results_call_listed()
    """,
    f"""
    CREATE TRIGGER orphan_results_call_removed AFTER DELETE ON message_calls FOR EACH ROW
    WHEN (old.call_id IS NOT NULL AND old.state = 'active' AND {_PG_NOT_PAUSED})
    EXECUTE FUNCTION workbench_orphan_results_call_removed()
    """,
    f"""
    CREATE TRIGGER orphan_results_call_moved
    AFTER UPDATE OF session_id, position, state, call_id ON message_calls FOR EACH ROW
    WHEN ({_PG_CALL_MOVED} AND {_PG_NOT_PAUSED})
    EXECUTE FUNCTION workbench_orphan_results_call_moved()
    """,
    _ORPHANS_OF.format(where="1 = 1"),
]


# 0015: the calls' place follows their message's place by trigger, one UPDATE of
# message_calls per tool-call message. A write that moves or folds many messages of one
# session at once (a compaction and its undo, every later position moving by one when a
# message is inserted or deleted) pays it for each such message (10-20 us, and then the
# orphan triggers it sets off): 11,128 of them when a message goes in at the top of a
# 100,000-message session. Such a write now holds 0014's pause for that trigger too and
# moves the calls of the session in one statement (workbench.store.orphans).
_CALLS_PLACE_PAUSABLE = [
    "DROP TRIGGER message_calls_place",
    _CALLS_PLACE.format(paused=f"\n        AND {_NOT_PAUSED}"),
]
_PG_CALLS_PLACE_PAUSABLE = [
    "DROP TRIGGER message_calls_place ON messages",
    f"""
    CREATE TRIGGER message_calls_place AFTER UPDATE OF session_id, position, state ON messages
    FOR EACH ROW
    WHEN (new.role = 'assistant' AND new.tool_calls IS NOT NULL
          AND (new.session_id IS DISTINCT FROM old.session_id
               OR new.position IS DISTINCT FROM old.position
               OR new.state IS DISTINCT FROM old.state)
          AND {_PG_NOT_PAUSED})
    EXECUTE FUNCTION workbench_message_calls_place()
    """,
]

@dataclass(frozen=True)
class Migration:
    """A named, ordered schema change: its statements on SQLite and on PostgreSQL."""

    name: str
    statements: tuple[str, ...]
    postgresql: tuple[str, ...] = ()

    def statements_for(self, dialect: str) -> tuple[str, ...]:
        """The statements of ``dialect`` (SQLAlchemy's name: "sqlite", "postgresql")."""
        return self.postgresql if dialect == "postgresql" else self.statements


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial", tuple(_INITIAL), tuple(_PG_BASELINE)),
    Migration("0002_pausable_index_triggers", tuple(_PAUSABLE_INDEX_TRIGGERS)),
    Migration("0003_summary_lines", tuple(_SUMMARY_LINES)),
    Migration("0004_import_identity", tuple(_IMPORT_IDENTITY)),
    Migration("0005_session_metadata", tuple(_SESSION_METADATA)),
    Migration("0006_search_postgresql", (), tuple(_PG_SEARCH)),
    # On PostgreSQL the table and indexes exist for the same schema; the repository
    # reads them on SQLite only (its orphan query is SQLite's JSON functions).
    Migration("0007_message_calls", tuple(_MESSAGE_CALLS), tuple(_PG_MESSAGE_CALLS)),
    Migration("0008_message_calls_postgresql", (), tuple(_PG_MESSAGE_CALLS_TRIGGERS)),
    Migration("0009_summary_lines_postgresql", (), tuple(_PG_SUMMARY_LINES)),
    Migration("0010_search_upkeep_postgresql", (), tuple(_PG_SEARCH_UPKEEP)),
    Migration("0011_search_plans_postgresql", (), tuple(_PG_SEARCH_PLANS)),
    Migration("0012_symbol_runs_postgresql", (), tuple(_PG_SYMBOL_RUNS)),
    Migration("0013_calls_listed_by_import_postgresql", (), tuple(_PG_CALLS_LISTED_BY_IMPORT)),
    Migration("0014_orphan_results", tuple(_ORPHAN_RESULTS), tuple(_PG_ORPHAN_RESULTS)),
    Migration("0015_calls_place_pausable", tuple(_CALLS_PLACE_PAUSABLE),
              tuple(_PG_CALLS_PLACE_PAUSABLE)),
    Migration("0016_imported_context", tuple(_IMPORTED_CONTEXT), tuple(_IMPORTED_CONTEXT)),
)


def refuse_newer(applied: list[str], where: str, what: str = "database") -> None:
    """Raise :class:`DatabaseVersionError` when ``applied`` (the schema changes a database
    records) holds one this version does not know; ``where`` and ``what`` ("file") name
    it in the sentence."""
    known = {m.name for m in MIGRATIONS}
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise DatabaseVersionError(
            f"{where} was written by a newer version of Conversation Workbench (it has "
            f"schema change {sorted(unknown)[-1]!r}, which this version does not know). "
            f"Upgrade the workbench to open it; the {what} was left untouched."
        )
