"""FROZEN: ``roleplay/harness/store/migrations.py``'s list as of commit 4deb9ca, the last release in
which the harness created the roleplay tables (3 assets, 4 settings). Homes made by it exist; the
upgrade test (``test_migrations.py``) builds one with this list. Never edit it: it is history.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


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
    # Shared assets (roleplay/assets/store.py). Deletes are hard: a deleted asset is gone and every
    # session reference to it reads as unbound (spec); the only memory kept is the seed marker,
    # which must outlive its asset so a deleted built-in is never recreated. Blobs and default
    # rows cascade with their asset. ``source_character_id`` is a weak link (no foreign key): a
    # lorebook survives the deletion of the card it came from. ``UNIQUE(kind, import_hash)`` makes
    # importing the same file twice (in any number of processes) yield one asset.
    Migration(
        3,
        "assets",
        sqlite=(
            """CREATE TABLE assets (
                id                  TEXT PRIMARY KEY,
                kind                TEXT NOT NULL CHECK (kind IN ('card','lorebook','persona','preset','writing-style')),
                revision            INTEGER NOT NULL CHECK (revision >= 1),
                name                TEXT NOT NULL,
                data                TEXT NOT NULL CHECK (json_valid(data)),
                content_hash        TEXT NOT NULL,
                import_hash         TEXT,
                source_character_id TEXT,
                seed_key            TEXT,
                created_at          TEXT NOT NULL,
                updated_at          TEXT NOT NULL
            )""",
            "CREATE INDEX assets_listing ON assets(kind, created_at, id)",
            "CREATE UNIQUE INDEX assets_import ON assets(kind, import_hash)",
            "CREATE UNIQUE INDEX assets_seed ON assets(seed_key)",
            "CREATE INDEX assets_source_character ON assets(source_character_id)",
            """CREATE TABLE asset_blobs (
                asset_id   TEXT NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                role       TEXT NOT NULL,
                media_type TEXT NOT NULL,
                sha256     TEXT NOT NULL,
                size       INTEGER NOT NULL,
                bytes      BLOB NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (asset_id, role)
            )""",
            """CREATE TABLE asset_seed_markers (
                seed_key     TEXT PRIMARY KEY,
                kind         TEXT NOT NULL,
                version      INTEGER NOT NULL,
                content_hash TEXT,
                asset_id     TEXT,
                deleted      INTEGER NOT NULL DEFAULT 0,
                updated_at   TEXT NOT NULL
            )""",
            """CREATE TABLE asset_defaults (
                kind       TEXT PRIMARY KEY CHECK (kind IN ('persona','preset','writing-style')),
                asset_id   TEXT NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                updated_at TEXT NOT NULL
            )""",
        ),
        postgres=(
            # text, not json: the stored data stays byte-for-byte what was written, as on SQLite.
            """CREATE TABLE assets (
                id                  text PRIMARY KEY,
                kind                text NOT NULL CHECK (kind IN ('card','lorebook','persona','preset','writing-style')),
                revision            bigint NOT NULL CHECK (revision >= 1),
                name                text NOT NULL,
                data                text NOT NULL,
                content_hash        text NOT NULL,
                import_hash         text,
                source_character_id text,
                seed_key            text,
                created_at          text NOT NULL,
                updated_at          text NOT NULL
            )""",
            "CREATE INDEX assets_listing ON assets(kind, created_at, id)",
            "CREATE UNIQUE INDEX assets_import ON assets(kind, import_hash)",
            "CREATE UNIQUE INDEX assets_seed ON assets(seed_key)",
            "CREATE INDEX assets_source_character ON assets(source_character_id)",
            """CREATE TABLE asset_blobs (
                asset_id   text NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                role       text NOT NULL,
                media_type text NOT NULL,
                sha256     text NOT NULL,
                size       bigint NOT NULL,
                bytes      bytea NOT NULL,
                created_at text NOT NULL,
                PRIMARY KEY (asset_id, role)
            )""",
            """CREATE TABLE asset_seed_markers (
                seed_key     text PRIMARY KEY,
                kind         text NOT NULL,
                version      integer NOT NULL,
                content_hash text,
                asset_id     text,
                deleted      boolean NOT NULL DEFAULT false,
                updated_at   text NOT NULL
            )""",
            """CREATE TABLE asset_defaults (
                kind       text PRIMARY KEY CHECK (kind IN ('persona','preset','writing-style')),
                asset_id   text NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                updated_at text NOT NULL
            )""",
        ),
    ),
    # Global settings (roleplay/core/settings.py): one row per key, revision CAS per key. A NULL
    # value means "the default" (a reset); the row stays so the revision never goes back and a
    # stale writer that read an older revision is still refused.
    Migration(
        4,
        "settings",
        sqlite=(
            """CREATE TABLE settings (
                key        TEXT PRIMARY KEY,
                value      TEXT CHECK (value IS NULL OR json_valid(value)),
                revision   INTEGER NOT NULL CHECK (revision >= 0),
                updated_at TEXT NOT NULL
            )""",
        ),
        postgres=(
            # text, not json: the stored value stays byte-for-byte what was written, as on SQLite.
            """CREATE TABLE settings (
                key        text PRIMARY KEY,
                value      text,
                revision   bigint NOT NULL CHECK (revision >= 0),
                updated_at text NOT NULL
            )""",
        ),
    ),
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
