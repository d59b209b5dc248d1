"""``rp settings get|set|reset``: the global settings (``core.settings``) from the terminal.

``set KEY VALUE`` (or ``--file PATH``, ``-`` for stdin) takes JSON (``3``, ``["rp-state"]``, ``{"deepseek/deepseek-flash": 128000}``);
keys that hold text (a route, the identity prompt, the cursor) also take the bare text. Each
change may name ``--expected-revision`` so that a script never overwrites a change it has not seen.
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, state_of, terminal_safe
from roleplay.errors import RpError

from roleplay.assets.language import language_from_locale

from .settings import SettingRecord, SettingsStore, parse_cli_value

expected_option = click.option(
    "--expected-revision",
    type=click.IntRange(min=0),
    help="Refuse the change unless the key is still at this revision (0: never set).",
)


def _line(record: SettingRecord) -> str:
    value = json.dumps(record.value, ensure_ascii=False)
    where = "default" if record.is_default else "set"
    return terminal_safe(f"{record.key} = {value}  ({where}, revision {record.revision})", one_line=True)


def _env_note(key: str) -> None:
    # RP_WRITER_MODEL is a per-process override that wins over the stored default.
    if key == "writer.defaultRoute" and os.environ.get("RP_WRITER_MODEL"):
        click.echo("note: RP_WRITER_MODEL is set in this environment and overrides writer.defaultRoute", err=True)


def _show(record: SettingRecord, as_json: bool, seeds: list[Any] | None = None) -> None:
    if as_json:
        echo_json(record.to_dict() if seeds is None else {**record.to_dict(), "seeds": [o.to_dict() for o in seeds]})
        return
    click.echo(_line(record))
    for outcome in seeds or []:
        if outcome.kind == "setting":  # a reset language was derived from the locale again
            click.echo(f"  {outcome.reason}")
            continue
        note = _SEED_NOTES.get(outcome.action, outcome.action)
        click.echo(f"  built-in {outcome.kind}: {note.format(language=_LANGUAGE_NAMES.get(_seeds_language(record), ''))}")


_LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}
_SEED_NOTES = {
    "create": "created in {language}",
    "upgrade": "now in {language}",
    "up-to-date": "already in {language}",
    "keep-edited": "kept as you edited it",
    "skip-deleted": "not recreated (you deleted it)",
}


def _seeds_language(record: SettingRecord) -> str:
    return str(record.value) if record.value else language_from_locale()


async def _apply_language(store: Any, record: SettingRecord) -> list[Any] | None:
    """A change of ``language`` applies to the built-in defaults at once (unedited ones switch,
    edited ones stay), so the user sees what it did; the next open would do the same."""
    if record.key != "language":
        return None
    from roleplay.assets.seeds import ensure_seeds
    from roleplay.assets.store import AssetStore

    return await ensure_seeds(AssetStore(store))


@click.group("settings")
def settings() -> None:
    """Read and change the global settings (Writer default route, identity prompt, features…)."""


@settings.command("get")
@home_option
@click.argument("key", required=False)
@json_option
@click.pass_context
@run
async def get_command(ctx: click.Context, key: str | None, as_json: bool) -> None:
    """Show KEY, or every setting."""
    async with state_of(ctx).open_store() as store:
        settings_store = SettingsStore(store)
        if key is not None:
            _show(await settings_store.get(key), as_json)
            return
        snapshot = await settings_store.snapshot()
    records = snapshot.records()
    if as_json:
        echo_json({"settings": [r.to_dict() for r in records]})
        return
    for record in records:
        click.echo(_line(record))


def _read_value(value: str | None, file: Any) -> str:
    if (value is None) == (file is None):
        raise RpError("settings.value_source", "give the value either as VALUE or with --file PATH (- reads stdin), not both or neither")
    if file is None:
        return value  # type: ignore[return-value]
    data = file.read()
    try:
        return data.decode("utf-8")  # type: ignore[no-any-return]
    except UnicodeDecodeError as exc:
        raise RpError(
            "settings.file_not_utf8",
            f"{file.name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            details={"offset": exc.start},
        ) from None


@settings.command("set")
@home_option
@click.argument("key")
@click.argument("value", required=False)
@click.option("--file", type=click.File("rb"), help="Read the value from a file (- for stdin), e.g. a long identity prompt.")
@expected_option
@json_option
@click.pass_context
@run
async def set_command(ctx: click.Context, key: str, value: str | None, file: Any, expected_revision: int | None, as_json: bool) -> None:
    """Set KEY to VALUE (JSON, or bare text for text keys)."""
    parsed: Any = parse_cli_value(key, _read_value(value, file))
    async with state_of(ctx).open_store() as store:
        record = await SettingsStore(store).set(key, parsed, expected_revision=expected_revision)
        seeds = await _apply_language(store, record)
        if any(o.kind == "setting" for o in seeds or []):  # the seeding stored a language: show the row as it is now
            record = await SettingsStore(store).get(key)
    _show(record, as_json, seeds)
    _env_note(key)


@settings.command("reset")
@home_option
@click.argument("key")
@expected_option
@json_option
@click.pass_context
@run
async def reset_command(ctx: click.Context, key: str, expected_revision: int | None, as_json: bool) -> None:
    """Put KEY back to its default."""
    async with state_of(ctx).open_store() as store:
        record = await SettingsStore(store).reset(key, expected_revision=expected_revision)
        seeds = await _apply_language(store, record)
        if any(o.kind == "setting" for o in seeds or []):  # the seeding stored a language: show the row as it is now
            record = await SettingsStore(store).get(key)
    _show(record, as_json, seeds)
