"""The user's language: the locale fallback, the stored setting as the seeding reads it, and the
first seeding's choice stored as the setting (``settle_language``)."""

from __future__ import annotations

from typing import Any

import pytest

from roleplay.assets.language import effective_language, language_from_locale, parse_language, settle_language, stored_language
from roleplay.assets.store import AssetStore
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANG": "zh_TW.UTF-8"}, "zh"),
        ({"LANG": "de_DE.UTF-8"}, "en"),
        ({"LANG": "zh_CN.UTF-8", "LC_ALL": "en_US.UTF-8"}, "en"),  # LC_ALL wins
        ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_CN"}, "zh"),  # messages are what we show
        ({"LANG": "zh_CN.UTF-8", "LC_ALL": ""}, "zh"),  # an empty variable is unset
    ],
)
def test_language_from_locale(environ: dict[str, str], expected: str) -> None:
    assert language_from_locale(environ) == expected


def test_parse_language_accepts_only_known_codes() -> None:
    assert [parse_language(v) for v in ("en", "zh", "fr", None, 3)] == ["en", "zh", None, None, None]


async def test_the_stored_setting_wins_and_an_unknown_value_falls_back(store: EventStore) -> None:
    from roleplay.core.settings import SettingsStore

    assets = AssetStore(store)
    assert await effective_language(assets, {"LANG": "zh_CN.UTF-8"}) == "zh"
    await SettingsStore(store).set("language", "en")
    assert await effective_language(assets, {"LANG": "zh_CN.UTF-8"}) == "en"
    # written by a later version with more languages: seeding goes on in the locale's language
    await assets.write(lambda tx: tx.conn.execute("UPDATE settings SET value=? WHERE key='language'", ('"fr"',)))
    assert await effective_language(assets, {"LANG": "zh_CN.UTF-8"}) == "zh"


ZH = {"LANG": "zh_CN.UTF-8"}
EN = {"LANG": "en_US.UTF-8"}


async def _settle(assets: AssetStore, environ: dict[str, str], seeded: str | None = None) -> tuple[str, str | None]:
    return await assets.write(lambda tx: settle_language(tx, seeded, environ))  # type: ignore[arg-type]


async def test_the_first_choice_is_stored_and_a_later_locale_does_not_change_it(store: EventStore) -> None:
    from roleplay.core.settings import SettingsStore

    settings, assets = SettingsStore(store), AssetStore(store)
    assert (await settings.get("language")).revision == 0
    assert await _settle(assets, ZH) == ("zh", "locale")
    record = await settings.get("language")
    assert (record.value, record.revision, record.is_default) == ("zh", 1, False)
    assert await _settle(assets, EN) == ("zh", None)
    assert (await settings.get("language")).revision == 1  # nothing written again


async def test_never_written_follows_the_seeded_defaults_and_a_reset_the_locale(store: EventStore) -> None:
    from roleplay.core.settings import SettingsStore

    settings, assets = SettingsStore(store), AssetStore(store)
    await settings.get("language")  # the settings table exists
    assert await _settle(assets, ZH, seeded="en") == ("en", "defaults")
    await settings.reset("language")  # revision 2, value NULL: derive again, from the locale
    assert await _settle(assets, ZH, seeded="en") == ("zh", "locale")
    record = await settings.get("language")
    assert (record.value, record.revision) == ("zh", 3)


async def test_without_the_settings_table_nothing_is_written(store: EventStore) -> None:
    assets = AssetStore(store)
    assert await _settle(assets, ZH) == ("zh", None)
    assert await _settle(assets, ZH, seeded="en") == ("en", None)
    assert await assets.read(stored_language) is None


async def test_an_unknown_stored_value_is_left_alone(store: EventStore) -> None:
    from roleplay.core.settings import SettingsStore

    settings, assets = SettingsStore(store), AssetStore(store)
    await settings.set("language", "en")
    await assets.write(lambda tx: tx.conn.execute("UPDATE settings SET value=? WHERE key='language'", ('"fr"',)))
    assert await _settle(assets, ZH) == ("zh", None)
    assert [row[1] for row in await settings.dump() if row[0] == "language"] == ['"fr"']


class _LateRead:
    """A transaction whose first read of the setting happened before a concurrent write landed."""

    def __init__(self, tx: Any) -> None:
        self.tx, self.dialect, self.now, self.reads = tx, tx.dialect, tx.now, 0
        self.conn = self

    async def fetchone(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        self.reads += 1
        return None if self.reads == 1 else await self.tx.conn.fetchone(sql, args)

    async def fetchall(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        return await self.tx.conn.fetchall(sql, args)

    async def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        return await self.tx.conn.execute(sql, args)  # type: ignore[no-any-return]


async def test_a_concurrent_settings_write_wins_the_compare_and_set(store: EventStore) -> None:
    from roleplay.core.settings import SettingsStore

    settings, assets = SettingsStore(store), AssetStore(store)
    await settings.set("language", "en")  # lands between the seeding's read and its write
    assert await assets.write(lambda tx: settle_language(_LateRead(tx), None, ZH)) == ("en", None)
    record = await settings.get("language")
    assert (record.value, record.revision) == ("en", 1)
