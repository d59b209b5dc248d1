"""``rp lorebook test``: which entries of a stored lorebook activate for a text, and why.

The same engine the turn uses (``LoreEngine``) runs over the stored book with the given text as
the scan buffer, so a card author sees exactly what a turn would see: activated entries in order
with their slot and the reason they fired, and for every other entry the reason it did not.
"""

from __future__ import annotations

from typing import Any

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, state_of, terminal_safe

from .activation import LoreEngine, ScanSettings, TurnInput
from .importer import import_lorebook


@click.group("lorebook")
def lorebook() -> None:
    """Inspect lorebooks (world info)."""


@lorebook.command("test")
@home_option
@click.argument("lorebook_id")
@click.option("--text", "texts", multiple=True, required=True, help="A message of the scan buffer (repeat: oldest first).")
@click.option("--run-id", default="lorebook-test", show_default=True, help="Seeds probability rolls (same id, same result).")
@click.option("--scan-depth", type=click.IntRange(0), help="Messages to scan (default: the book's setting or 2).")
@click.option("--all", "show_all", is_flag=True, help="Also explain every entry that did not fire.")
@json_option
@click.pass_context
@run
async def lorebook_test(
    ctx: click.Context, lorebook_id: str, texts: tuple[str, ...], run_id: str, scan_depth: int | None, show_all: bool, as_json: bool
) -> None:
    """Show which entries of LOREBOOK_ID activate for --text, and why."""
    from roleplay.assets.store import AssetStore

    async with state_of(ctx).open_store() as events:
        record = await AssetStore(events).get(lorebook_id, kind="lorebook")
    book = import_lorebook(record.data["book"], book_id=record.id, name=record.data.get("name"))
    settings = ScanSettings(scan_depth=scan_depth) if scan_depth is not None else None
    engine = LoreEngine([book], settings)
    result = engine.activate(TurnInput(run_id=run_id, messages=list(texts)))
    titles = {e.id: _title(e) for e in book.entries}
    activated: list[dict[str, Any]] = [
        {"entryId": a.entry_id, "title": titles.get(a.entry_id, ""), "slot": str(a.slot.value if hasattr(a.slot, "value") else a.slot),
         "reason": a.reason, "sweep": a.sweep, "details": dict(a.details)}
        for a in result.activated
    ]  # fmt: skip
    decisions = [d.to_dict() | {"title": titles.get(d.entry_id, "")} for d in result.report()]
    if as_json:
        echo_json(
            {
                "lorebookId": record.id,
                "activated": activated,
                "decisions": decisions if show_all else [d for d in decisions if d["activated"]],
                "diagnostics": [p.to_dict() for p in result.diagnostics],
                "sweeps": result.sweeps,
            }
        )
        return

    # Titles, keys and reasons quote the book's text: one line each, printed inert.
    def echo(line: str, err: bool = False) -> None:
        click.echo(terminal_safe(line, one_line=True), err=err)

    echo(f"{record.name or record.id}: {len(activated)} of {len(book.entries)} entries activate ({result.sweeps} sweep(s))")
    for a in activated:
        echo(f"  + {a['title'] or a['entryId']}  [{a['slot']}]  {a['reason']}{_details(a['details'])}")
    if show_all:
        for d in decisions:
            if not d["activated"]:
                echo(f"  - {d['title'] or d['entryId']}  {d['reason']}{_details(d['details'])}")
    for p in result.diagnostics:
        echo(f"  ! [{p.code}] {p.message}", err=True)


def _title(entry: Any) -> str:
    return entry.comment or ", ".join(entry.keys[:3])


def _details(details: dict[str, Any]) -> str:
    if not details:
        return ""
    return " (" + ", ".join(f"{k}={v}" for k, v in sorted(details.items())) + ")"
