"""The settings table (``roleplay/core/settings.py``), owned here and not by the harness.

Owner ``rp-settings``: a numbered list applied through the per-owner ``feature_migrations`` record
(``roleplay.assets.schema``) the first time a ``SettingsStore`` touches a store (and by ``rp db
migrate``). Never edit or reorder a shipped migration: add a number.

Migration 1 is the DDL harness migration 4 ran before the table moved here, verbatim, but with
``IF NOT EXISTS``: a home created by an older release already has the table, and migration 1
adopts it (``expects`` checks its columns) without rewriting a row. One row per key, revision CAS
per key. A NULL value means "the default" (a reset); the row stays so the revision never goes
back and a stale writer that read an older revision is still refused.
"""

from __future__ import annotations

from roleplay.harness.store.migrations import Migration

OWNER = "rp-settings"

EXPECTS: tuple[tuple[str, tuple[str, ...]], ...] = (("settings", ("key", "value", "revision", "updated_at")),)

SETTINGS_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "settings",
        sqlite=(
            """CREATE TABLE IF NOT EXISTS settings (
                key        TEXT PRIMARY KEY,
                value      TEXT CHECK (value IS NULL OR json_valid(value)),
                revision   INTEGER NOT NULL CHECK (revision >= 0),
                updated_at TEXT NOT NULL
            )""",
        ),
        postgres=(
            # text, not json: the stored value stays byte-for-byte what was written, as on SQLite.
            """CREATE TABLE IF NOT EXISTS settings (
                key        text PRIMARY KEY,
                value      text,
                revision   bigint NOT NULL CHECK (revision >= 0),
                updated_at text NOT NULL
            )""",
        ),
        expects=EXPECTS,
    ),
)

__all__ = ["OWNER", "SETTINGS_MIGRATIONS"]
