"""Tables outside the event log: numbered per owner, applied once, all or nothing, both backends."""

from __future__ import annotations

from typing import Any

import pytest

from roleplay.assets.migrations import ASSET_MIGRATIONS
from roleplay.assets.store import AssetStore
from roleplay.core.settings_migrations import SETTINGS_MIGRATIONS
from roleplay.errors import ValidationError
from roleplay.features import feature_migrations, migrate_features, open_runtime
from roleplay.harness.store import EventStore
from roleplay.harness.store.migrations import Migration
from roleplay.hookspecs import hookimpl
from roleplay.plugins import plugin_manager

pytestmark = pytest.mark.anyio

LOG = Migration(
    1,
    "weather log",
    ("CREATE TABLE weather_log (day TEXT PRIMARY KEY, sky TEXT NOT NULL)",),
    ("CREATE TABLE weather_log (day text PRIMARY KEY, sky text NOT NULL)",),
)
WIND = Migration(2, "wind", ("ALTER TABLE weather_log ADD COLUMN wind TEXT",), ("ALTER TABLE weather_log ADD COLUMN wind text",))


async def apply_feature_migrations(store: EventStore, plan: dict[str, list[Migration]]) -> list[tuple[str, int]]:
    return await AssetStore(store).migrate(plan)


async def rows(store: EventStore, sql: str) -> list[tuple[Any, ...]]:
    return await AssetStore(store).read(lambda tx: tx.conn.fetchall(sql))


async def test_pending_migrations_apply_once_in_order(store: EventStore) -> None:
    assert await apply_feature_migrations(store, {"weather": [LOG]}) == [("weather", 1)]
    assert await apply_feature_migrations(store, {"weather": [LOG, WIND]}) == [("weather", 2)]
    assert await apply_feature_migrations(store, {"weather": [LOG, WIND]}) == []
    await AssetStore(store).write(lambda tx: tx.conn.execute("INSERT INTO weather_log(day, sky, wind) VALUES ('d1', 'fog', 'east')"))
    assert await rows(store, "SELECT day, sky, wind FROM weather_log") == [("d1", "fog", "east")]
    assert await rows(store, "SELECT feature, number, name FROM feature_migrations WHERE feature = 'weather' ORDER BY number") == [
        ("weather", 1, "weather log"),
        ("weather", 2, "wind"),
    ]


async def test_a_failing_migration_leaves_none_of_its_batch_applied(store: EventStore) -> None:
    broken = Migration(2, "broken", ("CREATE TABLE nowhere.t (x INTEGER)",), ("CREATE TABLE nowhere.t (x integer)",))
    with pytest.raises(Exception):  # noqa: B017 - the driver's own error
        await apply_feature_migrations(store, {"weather": [LOG, broken]})
    assert await apply_feature_migrations(store, {"weather": [LOG]}) == [("weather", 1)]  # 1 was rolled back too


async def test_numbers_must_count_from_one_without_gaps(store: EventStore) -> None:
    with pytest.raises(ValidationError) as exc:
        await apply_feature_migrations(store, {"weather": [WIND]})
    assert exc.value.code == "plugins.migration_sequence" and exc.value.details == {"feature": "weather", "numbers": [2]}


async def test_a_plugins_migrations_run_when_a_runtime_opens(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    class Weather:
        @hookimpl
        def register_migrations(self, register: Any) -> None:
            register("weather", [LOG, WIND])

    def with_weather(*args: Any, **kw: Any) -> Any:
        pm = plugin_manager(*args, **kw)
        pm.register(Weather(), name="weather")
        return pm

    assert feature_migrations(with_weather(None, entry_points=False)) == {
        "rp-assets": list(ASSET_MIGRATIONS),
        "rp-settings": list(SETTINGS_MIGRATIONS),
        "weather": [LOG, WIND],
    }
    monkeypatch.setattr("roleplay.features.plugin_manager", with_weather)
    rt = await open_runtime(store, entry_points=False)
    assert await rows(store, "SELECT count(*) FROM weather_log") == [(0,)]
    await rt.aclose()


async def test_db_migrate_applies_the_core_tables_then_the_enabled_features(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    class Weather:
        @hookimpl
        def register_migrations(self, register: Any) -> None:
            register("weather", [LOG, WIND])

    def with_weather(enabled: Any = None, **kw: Any) -> Any:
        pm = plugin_manager(enabled, **kw)
        if enabled != ():  # the enabled set's manager, not the core-only one
            pm.register(Weather(), name="weather")
        return pm

    monkeypatch.setattr("roleplay.features.plugin_manager", with_weather)
    assert await migrate_features(store, entry_points=False) == [("rp-assets", 1), ("rp-settings", 1), ("weather", 1), ("weather", 2)]
    assert await migrate_features(store, entry_points=False) == []
    assert await rows(store, "SELECT count(*) FROM weather_log") == [(0,)]
