"""The user's language: which set of built-in defaults (seeds, guides) speaks to them.

The ``language`` setting (``core.settings``) chooses it; while that is unset (``null``) the system
locale does, the way other terminal programs pick their messages: the first non-empty of
``LC_ALL``, ``LC_MESSAGES`` and ``LANG``; ``zh…`` is Chinese, anything else English.

Seeding runs below core, so it reads the setting's stored row itself (:func:`stored_language`);
``core.settings`` owns the key, its validation and its revision CAS. A stored value this version
does not know falls back to the locale instead of failing the open: seeding must never stop a
user from reaching their stories.
"""

from __future__ import annotations

import json
import os
from typing import Literal, Mapping, get_args

from .schema import table_columns

Language = Literal["en", "zh"]
LANGUAGES: tuple[str, ...] = get_args(Language)
SETTING_KEY = "language"


def language_from_locale(environ: Mapping[str, str] | None = None) -> Language:
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = (env.get(name) or "").strip()
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def parse_language(value: object) -> Language | None:
    """A known language code, or None for anything else (unset, unknown, wrong type)."""
    return value if isinstance(value, str) and value in LANGUAGES else None  # type: ignore[return-value]


async def stored_language(tx) -> Language | None:  # type: ignore[no-untyped-def]
    """The ``language`` setting's stored value inside an asset-store transaction, or None."""
    if not await table_columns(tx, "settings"):
        return None  # the settings store makes its table on first use: nothing was ever set
    row = await tx.conn.fetchone("SELECT value FROM settings WHERE key=?", (SETTING_KEY,))
    if row is None or row[0] is None:
        return None
    try:
        return parse_language(json.loads(row[0]))
    except ValueError:
        return None


async def effective_language(store, environ: Mapping[str, str] | None = None) -> Language:  # type: ignore[no-untyped-def]
    """The setting when set, else the system locale. ``store`` is an ``AssetStore``."""
    return (await store.read(stored_language)) or language_from_locale(environ)


__all__ = ["LANGUAGES", "Language", "SETTING_KEY", "effective_language", "language_from_locale", "parse_language", "stored_language"]
