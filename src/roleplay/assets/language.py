"""The user's language: which set of built-in defaults (seeds, guides) speaks to them.

The ``language`` setting (``core.settings``) chooses it; while that is unset (``null``) the system
locale does, the way other terminal programs pick their messages: the first non-empty of
``LC_ALL``, ``LC_MESSAGES`` and ``LANG``; ``zh…`` is Chinese, anything else English.

Seeding runs below core, so it reads the setting's stored row itself (:func:`stored_language`);
``core.settings`` owns the key, its validation and its revision CAS. A stored value this version
does not know falls back to the locale instead of failing the open: seeding must never stop a
user from reaching their stories.

The locale decides once, not on every run: the first seeding of a home with ``language`` unset
stores its choice as the setting (:func:`settle_language`, a revision-checked write in the seeding
transaction), so running ``rp`` later under another locale does not flip the unedited defaults
back and forth. ``rp settings reset language`` stores NULL, and the next seeding derives the
language from the current locale again, once.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, Mapping, get_args

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
    return None if row is None or row[0] is None else _decode(row[0])


async def settle_language(tx: Any, seeded: Language | None = None, environ: Mapping[str, str] | None = None) -> tuple[Language, str | None]:
    """The language to seed in, chosen inside the seeding transaction ``tx`` and stored when the
    setting holds none; returns it with how a stored choice was made now ("locale" or
    "defaults"), or None when nothing was written.

    - set to a known language: that one;
    - set to a value this version does not know: the locale, and the value is left alone;
    - never written: ``seeded`` (the language the built-in defaults already speak: a home seeded
      before this rule, or by the asset commands before the settings table existed), else the
      locale; stored;
    - reset (NULL): the locale, stored.

    Without a settings table nothing can be stored (it belongs to ``core.settings``, made on its
    first use); ``seeded`` still keeps the defaults where they are until it exists.
    """
    if not await table_columns(tx, "settings"):
        return seeded or language_from_locale(environ), None
    lock = " FOR UPDATE" if tx.dialect == "postgresql" else ""
    row = await tx.conn.fetchone(f"SELECT value, revision FROM settings WHERE key=?{lock}", (SETTING_KEY,))
    if row is not None and row[0] is not None:
        return _decode(row[0]) or language_from_locale(environ), None
    if row is None and seeded is not None:
        choice, how = seeded, "defaults"
    else:
        choice, how = language_from_locale(environ), "locale"
    text = json.dumps(choice)
    args: tuple[Any, ...]
    if row is None:  # revision 0 → 1; a writer that got there first wins
        sql = "INSERT INTO settings(key, value, revision, updated_at) VALUES (?, ?, 1, ?) ON CONFLICT (key) DO NOTHING"
        args = (SETTING_KEY, text, tx.now)
    else:  # the reset's revision + 1, only while it is still that reset
        revision = int(row[1])
        sql = "UPDATE settings SET value=?, revision=?, updated_at=? WHERE key=? AND revision=? AND value IS NULL"
        args = (text, revision + 1, tx.now, SETTING_KEY, revision)
    if await tx.conn.execute(sql, args) == 1:
        return choice, how
    # Lost the compare-and-set to a concurrent settings write: follow what it stored.
    now = await tx.conn.fetchone("SELECT value FROM settings WHERE key=?", (SETTING_KEY,))
    return (_decode(now[0]) if now and now[0] is not None else None) or language_from_locale(environ), None


def _decode(text: str) -> Language | None:
    try:
        return parse_language(json.loads(text))
    except ValueError:
        return None


async def effective_language(store, environ: Mapping[str, str] | None = None) -> Language:  # type: ignore[no-untyped-def]
    """The setting when set, else the system locale. ``store`` is an ``AssetStore``."""
    return (await store.read(stored_language)) or language_from_locale(environ)


__all__ = [
    "LANGUAGES",
    "Language",
    "SETTING_KEY",
    "effective_language",
    "language_from_locale",
    "parse_language",
    "settle_language",
    "stored_language",
]
