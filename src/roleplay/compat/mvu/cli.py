"""``rp mvu inspect CARD [LOREBOOK…]``: what the MVU adapter derives from a card, as JSON.

The main CLI attaches :data:`mvu_group` with ``add_command``. The first file is the character card
(PNG, JSON or CHARX), the others are world-info JSON files bound after the card's own book.
Output is the :class:`~roleplay.compat.mvu.adapter.MvuReport` as JSON on stdout (``--json`` is
accepted for symmetry with the other groups; the report is JSON either way). Exit code 1 when
an input cannot be read, with the error format of every ``rp`` command (``error [code]: …`` on
stderr, ``{"error": …}`` with ``--json``); 0 otherwise — a disabled namespace is a result, not a
failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from roleplay.cli_context import fail
from roleplay.errors import RpError

from .adapter import inspect_card


def _fail(source: str, code: str, message: str, as_json: bool) -> None:
    # The error format of every ``rp`` command; the file it is about is in ``details.source``.
    fail(RpError(code, f"{source}: {message}", details={"source": source}), as_json)


@click.group("mvu")
def mvu_group() -> None:
    """MVU / MVU Zod variable-card compatibility."""


@mvu_group.command("inspect")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="JSON output (the default).")
@click.option("--user", default="User", show_default=True, help="Name used for {{user}} / <user>.")
@click.option("--schema", "schema_path", type=click.Path(exists=True, dir_okay=False), help="MVU Zod schema.json.")
def inspect_command(files: tuple[str, ...], as_json: bool, user: str, schema_path: str | None) -> None:
    """Inspect FILES: a card first, then optional lorebook JSON files."""
    from roleplay.assets.cards import import_card_bytes

    card_path, *book_paths = files
    try:
        card = import_card_bytes(Path(card_path).read_bytes(), Path(card_path).name)
    except RpError as exc:
        _fail(card_path, exc.code, exc.message, as_json)
    except OSError as exc:
        _fail(card_path, "mvu.cli.unreadable", str(exc), as_json)
    books = []
    for path in book_paths:
        try:
            books.append((path, json.loads(Path(path).read_text(encoding="utf-8-sig"))))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            _fail(path, "mvu.cli.lorebook_unreadable", str(exc), as_json)
    zod = None
    if schema_path:
        try:
            zod = json.loads(Path(schema_path).read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            _fail(schema_path, "mvu.cli.schema_unreadable", str(exc), as_json)
    report = inspect_card(card, books, user=user, zod_schema=zod, zod_schema_source=schema_path or "schema.json")
    click.echo(json.dumps({"ok": True, "card": card_path, **report.to_dict()}, ensure_ascii=False, indent=2, sort_keys=False))
