"""The user's language: the locale fallback and the stored setting as the seeding reads it."""

from __future__ import annotations

import pytest

from roleplay.assets.language import effective_language, language_from_locale, parse_language
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
