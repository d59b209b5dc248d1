"""The roleplay tables belong to their subsystems, not to the harness: a new home gets them from
``rp-assets``/``rp-settings``, a home an older release made (harness migrations 3 and 4) is adopted
with every row intact, and both end with the same schema. SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from roleplay.assets.migrations import ASSET_MIGRATIONS
from roleplay.assets.store import AssetStore
from roleplay.clock import CountingIds, FixedClock
from roleplay.core.settings import SettingsStore
from roleplay.core.settings_migrations import SETTINGS_MIGRATIONS
from roleplay.errors import RpError
from roleplay.features import migrate_features
from roleplay.harness.store import EventStore, open_store
from tests_support import fresh_pg_schema

pytestmark = pytest.mark.anyio

ROLEPLAY_TABLES = {"assets", "asset_blobs", "asset_seed_markers", "asset_defaults", "settings"}


def legacy_migrations() -> Any:
    path = Path(__file__).with_name("legacy_migrations_v6.py")
    spec = importlib.util.spec_from_file_location("legacy_migrations_v6", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module.MIGRATIONS


@contextlib.contextmanager
def other_home(store_url: str, tmp_path: Path) -> Iterator[str]:
    if store_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'old.db'}"
    else:
        with fresh_pg_schema() as url:
            yield url


def opened(url: str) -> EventStore:
    return open_store(url, clock=FixedClock(), ids=CountingIds())


async def raw(store: EventStore, sql: str, *, write: bool = False) -> list[tuple[Any, ...]]:
    """SQL straight through the transaction runner, without the asset store's own migrations:
    what an older release's code did to its tables."""
    runner = AssetStore(store)
    if write:
        await runner._run_write(lambda tx: tx.conn.execute(sql))
        return []
    return [tuple(r) for r in await runner._run_write(lambda tx: tx.conn.fetchall(sql))]


async def tables(store: EventStore) -> set[str]:
    if store.dialect == "sqlite":
        rows = await raw(store, "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")
    else:
        rows = await raw(store, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
    return {r[0] for r in rows}


async def schema(store: EventStore) -> list[tuple[Any, ...]]:
    """Every table, column, index and constraint, without the name of the PostgreSQL schema."""
    if store.dialect == "sqlite":
        return await raw(store, "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
    columns = await raw(
        store,
        "SELECT table_name, column_name, data_type, is_nullable, column_default, ordinal_position::text"
        " FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, column_name",
    )
    indexes = await raw(
        store, "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname"
    )
    constraints = await raw(
        store,
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = current_schema()::regnamespace ORDER BY conname",
    )
    strip = re.compile(r"\bt_[0-9a-f]{12}\.")
    return [tuple(strip.sub("", v) if isinstance(v, str) else v for v in row) for row in [*columns, *indexes, *constraints]]


async def contents(store: EventStore) -> dict[str, list[tuple[Any, ...]]]:
    order = {
        "assets": "id",
        "asset_blobs": "asset_id, role",
        "asset_seed_markers": "seed_key",
        "asset_defaults": "kind",
        "settings": "key",
    }
    return {table: await raw(store, f"SELECT * FROM {table} ORDER BY {key}") for table, key in order.items()}


async def fresh_home(url: str) -> EventStore:
    store = opened(url)
    await store.migrate()
    assert await migrate_features(store, entry_points=False) == [("rp-assets", 1), ("rp-settings", 1)]
    return store


async def test_the_harness_creates_no_roleplay_table(store_url: str) -> None:
    store = opened(store_url)
    try:
        await store.migrate()
        assert not await tables(store) & ROLEPLAY_TABLES
        # The asset and settings stores make their own tables on first use.
        assert [p.name for p in (await AssetStore(store).list("persona")).items] == []
        assert (await SettingsStore(store).get("language")).revision == 0
        assert await tables(store) >= ROLEPLAY_TABLES
        owned = await raw(store, "SELECT feature, number, name FROM feature_migrations ORDER BY feature")
        assert owned == [("rp-assets", 1, "assets"), ("rp-settings", 1, "settings")]
    finally:
        await store.close()


async def test_an_older_home_upgrades_to_the_schema_of_a_new_one_with_its_rows(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = await fresh_home(store_url)
    with other_home(store_url, tmp_path) as old_url:
        # The old release: the harness's list with the roleplay tables in 3 and 4, and its rows.
        with monkeypatch.context() as m:
            legacy = legacy_migrations()
            m.setattr("roleplay.harness.store.sqlite.MIGRATIONS", legacy)
            m.setattr("roleplay.harness.store.postgres.MIGRATIONS", legacy)
            old = opened(old_url)
            assert await old.migrate() == [1, 2, 3, 4, 5, 6]
        assert await tables(old) >= ROLEPLAY_TABLES and "feature_migrations" not in await tables(old)
        blob = "X'00ff'" if old.dialect == "sqlite" else "'\\x00ff'::bytea"
        flag = "1" if old.dialect == "sqlite" else "true"
        for sql in (
            "INSERT INTO assets VALUES ('ast_1','persona',3,'Mira','{\"name\":\"Mira\",\"description\":\"\"}','h1',NULL,NULL,NULL,'t0','t1')",
            f"INSERT INTO asset_blobs VALUES ('ast_1','avatar','image/png','s1',2,{blob},'t0')",
            f"INSERT INTO asset_seed_markers VALUES ('seed:persona','persona',1,'h0',NULL,{flag},'t0')",
            "INSERT INTO asset_defaults VALUES ('persona','ast_1','t1')",
            "INSERT INTO settings VALUES ('language','\"zh\"',2,'t2')",
        ):
            await raw(old, sql, write=True)
        before = await contents(old)
        await old.close()

        # The new release opens it: the harness adds only what came after v6 (7: the leased-head
        # function, PostgreSQL's), the owners adopt their tables.
        upgraded = opened(old_url)
        try:
            assert await upgraded.migrate() == [7]
            assert await migrate_features(upgraded, entry_points=False) == [("rp-assets", 1), ("rp-settings", 1)]
            assert await migrate_features(upgraded, entry_points=False) == []
            assert await contents(upgraded) == before
            assert await schema(upgraded) == await schema(new)
            assert {"assets", "asset_blobs", "settings"} <= {str(row[0 if new.dialect == "postgresql" else 1]) for row in await schema(new)}
            assert (await AssetStore(upgraded).get("ast_1")).revision == 3
            assert (await SettingsStore(upgraded).get("language")).value == "zh"
        finally:
            await upgraded.close()
    await new.close()


async def test_a_foreign_table_of_the_same_name_is_not_adopted(store_url: str) -> None:
    store = opened(store_url)
    try:
        await store.migrate()
        await raw(store, "CREATE TABLE settings (key TEXT PRIMARY KEY, note TEXT)", write=True)
        await raw(store, "INSERT INTO settings VALUES ('k', 'kept')", write=True)
        with pytest.raises(RpError) as exc:
            await SettingsStore(store).get("language")
        assert exc.value.code == "schema.table_mismatch"
        assert exc.value.details["missing"] == ["value", "revision", "updated_at"]
        assert await raw(store, "SELECT * FROM settings") == [("k", "kept")]
        assert "feature_migrations" not in await tables(store)  # the whole attempt rolled back
    finally:
        await store.close()


def test_each_owner_counts_from_one() -> None:
    assert [m.number for m in ASSET_MIGRATIONS] == [1] and [m.number for m in SETTINGS_MIGRATIONS] == [1]
    for m in (*ASSET_MIGRATIONS, *SETTINGS_MIGRATIONS):
        assert all("IF NOT EXISTS" in s for s in (*m.sqlite, *m.postgres) if s.startswith("CREATE")), m.name
