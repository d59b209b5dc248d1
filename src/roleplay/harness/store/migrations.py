"""Numbered, append-only schema migrations (the simonw/llm pattern).

Never edit or reorder a migration that has shipped: add a new number. Each migration carries the
statements for both dialects so that the two backends cannot drift apart silently; the shared
conformance suite checks that both reach the same ``schema_version``.

The harness owns no roleplay table: the tables outside the event log (assets, settings, a
feature's own) each belong to one owner with its own numbered list (``Migration`` with
``expects``), recorded per owner in ``feature_migrations`` (``roleplay.assets.schema``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]
    # An owner's migration (``roleplay.assets.schema``) that creates tables only when missing
    # names them here with the columns an existing one must have: how a subsystem adopts the
    # tables an older release created, without rewriting a row.
    expects: tuple[tuple[str, tuple[str, ...]], ...] = ()


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions and append-only events",
        sqlite=(
            """CREATE TABLE sessions (
                id            TEXT PRIMARY KEY,
                preset        TEXT NOT NULL,
                parent_id     TEXT REFERENCES sessions(id),
                forked_from   TEXT REFERENCES sessions(id),
                forked_at_seq INTEGER,
                workspace     TEXT,
                title         TEXT,
                archived      INTEGER NOT NULL DEFAULT 0,
                head_seq      INTEGER NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
                created_at    TEXT NOT NULL,
                updated_at    TEXT NOT NULL
            )""",
            "CREATE INDEX sessions_parent ON sessions(parent_id)",
            "CREATE INDEX sessions_listing ON sessions(archived, updated_at)",
            """CREATE TABLE events (
                global_pos INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL REFERENCES sessions(id),
                seq        INTEGER NOT NULL CHECK (seq > 0),
                type       TEXT NOT NULL,
                v          INTEGER NOT NULL DEFAULT 1,
                payload    TEXT NOT NULL CHECK (json_valid(payload)),
                created_at TEXT NOT NULL,
                UNIQUE (session_id, seq)
            )""",
            """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
            """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""",
        ),
        postgres=(
            """CREATE TABLE sessions (
                id            text PRIMARY KEY,
                preset        text NOT NULL,
                parent_id     text REFERENCES sessions(id),
                forked_from   text REFERENCES sessions(id),
                forked_at_seq bigint,
                workspace     text,
                title         text,
                archived      boolean NOT NULL DEFAULT false,
                head_seq      bigint NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
                created_at    text NOT NULL,
                updated_at    text NOT NULL
            )""",
            "CREATE INDEX sessions_parent ON sessions(parent_id)",
            "CREATE INDEX sessions_listing ON sessions(archived, updated_at)",
            # json, not jsonb: the stored text stays exactly what was appended, as on SQLite.
            """CREATE TABLE events (
                global_pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                session_id text NOT NULL REFERENCES sessions(id),
                seq        bigint NOT NULL CHECK (seq > 0),
                type       text NOT NULL,
                v          integer NOT NULL DEFAULT 1,
                payload    json NOT NULL,
                created_at text NOT NULL,
                CONSTRAINT events_session_seq UNIQUE (session_id, seq)
            )""",
            """CREATE FUNCTION rp_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN RAISE EXCEPTION 'events are append-only'; END $$""",
            """CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
               FOR EACH ROW EXECUTE FUNCTION rp_events_append_only()""",
        ),
    ),
    Migration(
        2,
        "projection snapshots",
        sqlite=(
            """CREATE TABLE snapshots (
                session_id TEXT NOT NULL REFERENCES sessions(id),
                name       TEXT NOT NULL,
                version    INTEGER NOT NULL,
                upto_seq   INTEGER NOT NULL,
                state      TEXT NOT NULL,
                PRIMARY KEY (session_id, name, version)
            )""",
        ),
        postgres=(
            """CREATE TABLE snapshots (
                session_id text NOT NULL REFERENCES sessions(id),
                name       text NOT NULL,
                version    integer NOT NULL,
                upto_seq   bigint NOT NULL,
                state      text NOT NULL,
                PRIMARY KEY (session_id, name, version)
            )""",
        ),
    ),
    # 3 and 4 created the roleplay tables (assets, settings) before those moved to the subsystems
    # that own them: ``roleplay/assets/migrations.py`` and ``roleplay/core/settings_migrations.py``,
    # applied through the per-owner ``feature_migrations`` record. The history is append-only, so
    # the numbers and names stay and every home records 1..LATEST alike; a home that applied them
    # before keeps its tables, which the owners' first migrations adopt (``CREATE … IF NOT
    # EXISTS`` and a check of the columns), and a new home gets no roleplay table from here.
    Migration(3, "assets", sqlite=(), postgres=()),
    Migration(4, "settings", sqlite=(), postgres=()),
    # Large event text stored once (harness/store/texts.py): content-addressed, deduplicated,
    # zlib-compressed parts, referenced in order by the ``texts`` column of an event or a snapshot
    # (a surface snapshot holds the same message texts as the events). Parts are append-only. Rows written before this migration keep ``texts`` NULL and their
    # payload verbatim, so old homes stay readable without rewriting a single event.
    Migration(
        5,
        "content-addressed event text parts",
        sqlite=(
            """CREATE TABLE text_parts (
                id     INTEGER PRIMARY KEY,
                sha256 BLOB NOT NULL UNIQUE,
                size   INTEGER NOT NULL,
                data   BLOB NOT NULL
            )""",
            """CREATE TRIGGER text_parts_no_update BEFORE UPDATE ON text_parts
               BEGIN SELECT RAISE(ABORT, 'text parts are append-only'); END""",
            """CREATE TRIGGER text_parts_no_delete BEFORE DELETE ON text_parts
               BEGIN SELECT RAISE(ABORT, 'text parts are append-only'); END""",
            "ALTER TABLE events ADD COLUMN texts TEXT CHECK (texts IS NULL OR json_valid(texts))",
            "ALTER TABLE snapshots ADD COLUMN texts TEXT CHECK (texts IS NULL OR json_valid(texts))",
        ),
        postgres=(
            """CREATE TABLE text_parts (
                id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                sha256 bytea NOT NULL UNIQUE,
                size   bigint NOT NULL,
                data   bytea NOT NULL
            )""",
            """CREATE TRIGGER text_parts_append_only BEFORE UPDATE OR DELETE ON text_parts
               FOR EACH ROW EXECUTE FUNCTION rp_events_append_only()""",
            "ALTER TABLE events ADD COLUMN texts text",
            "ALTER TABLE snapshots ADD COLUMN texts text",
        ),
    ),
    # Event payloads compressed (harness/store/texts.py ``compress_payload``): a long story's log
    # is mostly small JSON payloads whose keys repeat in every row (13.7 MB of the 1,000-turn demo
    # story, 6.7 MB compressed). A compressed row keeps ``{}`` as its payload and the bytes here;
    # rows before this migration keep ``payload_z`` NULL and are read as they were.
    Migration(
        6,
        "compressed event payloads",
        sqlite=("ALTER TABLE events ADD COLUMN payload_z BLOB",),
        postgres=("ALTER TABLE events ADD COLUMN payload_z bytea",),
    ),
    # A session's head as committed when the function runs, not as of its calling statement's
    # snapshot (a VOLATILE function takes a fresh snapshot for each query it runs; PL/pgSQL is
    # never inlined into the caller). The run lease's statement calls it once the lock is held
    # (``pg_leases.LOCK_SQL``): nothing that commits before the previous holder's unlock is missed,
    # so the store knows the head of a leased session without reading it again (issue 16).
    Migration(
        7,
        "session head after a lease lock",
        sqlite=(),
        postgres=(
            """CREATE OR REPLACE FUNCTION rp_session_head(sid text) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
               BEGIN RETURN (SELECT head_seq FROM sessions WHERE id = sid); END $$""",
        ),
    ),
)

LATEST = MIGRATIONS[-1].number
MIGRATIONS_TABLE_SQLITE = (
    "CREATE TABLE IF NOT EXISTS _migrations (number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
)
MIGRATIONS_TABLE_POSTGRES = (
    "CREATE TABLE IF NOT EXISTS _migrations (number integer PRIMARY KEY, name text NOT NULL, applied_at text NOT NULL)"
)


def _check_sequence() -> None:
    numbers = [m.number for m in MIGRATIONS]
    if numbers != list(range(1, len(numbers) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps, got {numbers}")


_check_sequence()
