"""The asset store's own tables (``roleplay/assets/store.py``), owned here and not by the harness.

Owner ``rp-assets``: a numbered list applied through the per-owner ``feature_migrations`` record
(``roleplay.assets.schema``), on SQLite and PostgreSQL alike, the first time an ``AssetStore``
touches a store (and by ``rp db migrate``). Never edit or reorder a shipped migration: add a number.

Migration 1 is the DDL harness migration 3 ran before the tables moved here, verbatim, but with
``IF NOT EXISTS``: a home created by an older release already has the tables, and migration 1
adopts them (``expects`` checks their columns) without rewriting a row. Deletes are hard: a
deleted asset is gone and every session reference to it reads as unbound (spec); the only memory
kept is the seed marker, which must outlive its asset so a deleted built-in is never recreated.
Blobs and default rows cascade with their asset. ``source_character_id`` is a weak link (no
foreign key): a lorebook survives the deletion of the card it came from. ``UNIQUE(kind,
import_hash)`` makes importing the same file twice (in any number of processes) yield one asset.
"""

from __future__ import annotations

from roleplay.harness.store.migrations import Migration

OWNER = "rp-assets"

EXPECTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "assets",
        (
            "id",
            "kind",
            "revision",
            "name",
            "data",
            "content_hash",
            "import_hash",
            "source_character_id",
            "seed_key",
            "created_at",
            "updated_at",
        ),
    ),
    ("asset_blobs", ("asset_id", "role", "media_type", "sha256", "size", "bytes", "created_at")),
    ("asset_seed_markers", ("seed_key", "kind", "version", "content_hash", "asset_id", "deleted", "updated_at")),
    ("asset_defaults", ("kind", "asset_id", "updated_at")),
)

ASSET_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "assets",
        sqlite=(
            """CREATE TABLE IF NOT EXISTS assets (
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
            "CREATE INDEX IF NOT EXISTS assets_listing ON assets(kind, created_at, id)",
            "CREATE UNIQUE INDEX IF NOT EXISTS assets_import ON assets(kind, import_hash)",
            "CREATE UNIQUE INDEX IF NOT EXISTS assets_seed ON assets(seed_key)",
            "CREATE INDEX IF NOT EXISTS assets_source_character ON assets(source_character_id)",
            """CREATE TABLE IF NOT EXISTS asset_blobs (
                asset_id   TEXT NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                role       TEXT NOT NULL,
                media_type TEXT NOT NULL,
                sha256     TEXT NOT NULL,
                size       INTEGER NOT NULL,
                bytes      BLOB NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (asset_id, role)
            )""",
            """CREATE TABLE IF NOT EXISTS asset_seed_markers (
                seed_key     TEXT PRIMARY KEY,
                kind         TEXT NOT NULL,
                version      INTEGER NOT NULL,
                content_hash TEXT,
                asset_id     TEXT,
                deleted      INTEGER NOT NULL DEFAULT 0,
                updated_at   TEXT NOT NULL
            )""",
            """CREATE TABLE IF NOT EXISTS asset_defaults (
                kind       TEXT PRIMARY KEY CHECK (kind IN ('persona','preset','writing-style')),
                asset_id   TEXT NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                updated_at TEXT NOT NULL
            )""",
        ),
        postgres=(
            # text, not json: the stored data stays byte-for-byte what was written, as on SQLite.
            """CREATE TABLE IF NOT EXISTS assets (
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
            "CREATE INDEX IF NOT EXISTS assets_listing ON assets(kind, created_at, id)",
            "CREATE UNIQUE INDEX IF NOT EXISTS assets_import ON assets(kind, import_hash)",
            "CREATE UNIQUE INDEX IF NOT EXISTS assets_seed ON assets(seed_key)",
            "CREATE INDEX IF NOT EXISTS assets_source_character ON assets(source_character_id)",
            """CREATE TABLE IF NOT EXISTS asset_blobs (
                asset_id   text NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                role       text NOT NULL,
                media_type text NOT NULL,
                sha256     text NOT NULL,
                size       bigint NOT NULL,
                bytes      bytea NOT NULL,
                created_at text NOT NULL,
                PRIMARY KEY (asset_id, role)
            )""",
            """CREATE TABLE IF NOT EXISTS asset_seed_markers (
                seed_key     text PRIMARY KEY,
                kind         text NOT NULL,
                version      integer NOT NULL,
                content_hash text,
                asset_id     text,
                deleted      boolean NOT NULL DEFAULT false,
                updated_at   text NOT NULL
            )""",
            """CREATE TABLE IF NOT EXISTS asset_defaults (
                kind       text PRIMARY KEY CHECK (kind IN ('persona','preset','writing-style')),
                asset_id   text NOT NULL REFERENCES assets(id) ON DELETE CASCADE,
                updated_at text NOT NULL
            )""",
        ),
        expects=EXPECTS,
    ),
)

__all__ = ["ASSET_MIGRATIONS", "OWNER"]
