"""``rp import FILE…``, ``rp assets list|show|delete`` and ``rp export card ID -o FILE.png``.

The main ``rp`` group adds ``import_command``, ``assets`` and ``export``. Every command opens the
store through ``cli_context`` (so ``--home``, ``RP_HOME`` and ``RP_DATABASE_URL`` apply) and runs
``ensure_seeds`` first: seeding is idempotent, and doing it on open is how the built-in defaults
appear on a new database.
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, state_of, terminal_safe
from roleplay.errors import RpError

from .kinds import CARD, DEFAULT_KINDS, KINDS
from .seeds import language_notice
from .service import AssetService


def _echo(line: str, *, err: bool = False) -> None:
    """One line that quotes asset text (names, file names, keys): printed inert."""
    click.echo(terminal_safe(line, one_line=True), err=err)


def _text_path(path: Path) -> str:
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@asynccontextmanager
async def _service(ctx: click.Context) -> AsyncIterator[AssetService]:
    async with state_of(ctx).open_store() as events:
        service = AssetService(events)
        notice = language_notice(await service.ensure_seeds())
        if notice:  # the first seeding stored the user's language: say so, once
            click.echo(notice, err=True)
        yield service


@click.command("import")
@home_option
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--repair",
    "allow_repair",
    is_flag=True,
    help="Repair broken or truncated JSON by guessing, even where that loses content; the warnings say what was lost.",
)
@click.option(
    "--trust",
    is_flag=True,
    help="Also trust the cards' own system prompt and post-history instructions (as `rp assets trust` does), so they reach the Writer.",
)
@json_option
@click.pass_context
@run
async def import_command(ctx: click.Context, files: tuple[Path, ...], allow_repair: bool, trust: bool, as_json: bool) -> None:
    """Import character cards (PNG/JSON/CHARX), SillyTavern lorebooks and presets.

    Each file is imported on its own, all or nothing; the exit status is 1 if any file failed.
    Broken JSON is refused unless --repair is given. A card's own system prompt and post-history
    instructions are kept aside until you trust them (--trust, or `rp assets trust` later).
    """
    results: list[dict[str, Any]] = []
    failed = False
    async with _service(ctx) as service:
        for path in files:
            # A file name with bytes that are not UTF-8 is still a file we can read; only its
            # text form (shown, and used for derived names) gets U+FFFD for those bytes.
            shown, name = _text_path(path), _text_path(Path(path.name))
            try:
                result = await service.import_file(path.read_bytes(), name, allow_repair=allow_repair)
            except RpError as exc:
                failed = True
                results.append({"file": shown, "error": exc.to_dict()})
                continue
            item = {"file": shown, **result.to_dict()}
            if item.get("kind") == CARD:
                await _held_prompts(service, item, trust)
            results.append(item)
    if as_json:
        echo_json([{k: v for k, v in item.items() if k != "_previews"} for item in results])
    else:
        for item in results:
            if "error" in item:
                err = item["error"]
                where = f" (at {err['pointer']})" if err.get("pointer") is not None else ""
                _echo(f"{item['file']}: error [{err['code']}]: {err['message']}{where}", err=True)
                for p in err.get("problems", [])[1:]:
                    at = f" (at {p['pointer']})" if p.get("pointer") is not None else ""
                    _echo(f"  also [{p['code']}]: {p['message']}{at}", err=True)
                continue
            verb = "already imported as" if item["duplicate"] else "imported"
            made = ", ".join(f"{a['kind']} {a['id']} ({a['name']})" for a in item["assets"])
            _echo(f"{item['file']}: {verb} {made}")
            for w in item["warnings"]:
                at = f" (at {w['pointer']})" if w.get("pointer") is not None else ""
                _echo(f"  warning [{w['code']}]: {w['message']}{at}")
            for line in _left_behind(item):
                _echo(line)
    if failed:
        sys.exit(1)


_ISOLATED_NAMES = {"system_prompt": "system prompt", "post_history_instructions": "post-history instructions"}
_PREVIEW = 100


async def _held_prompts(service: AssetService, item: dict[str, Any], trust: bool) -> None:
    """For a card with isolated prompts (also one imported before): trust them when asked, and
    add ``trusted`` plus a short preview of each for the plain output, so the user can judge
    them before trusting."""
    prompts = await service.isolated_prompts(item["assetId"])
    if prompts.is_empty:
        return
    if trust and not prompts.trusted:
        prompts = await service.trust_isolated_prompts(item["assetId"], True)
    held = [name for name in _ISOLATED_NAMES if getattr(prompts, name)]
    item["isolatedPrompts"] = held
    item["trusted"] = prompts.trusted
    previews = {}
    for name in held:
        text = " ".join(str(getattr(prompts, name)).split())
        previews[name] = text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"
    item["_previews"] = previews


def _left_behind(item: dict[str, Any]) -> list[str]:
    """Plain-output lines for what an import did not carry over (``--json`` has it all): a card's
    prompts kept aside until trusted, a preset's settings, markers and prompts that did not
    migrate, and the settings it did carry."""
    lines: list[str] = []
    held = item.get("isolatedPrompts") or []
    if held:
        names = " and ".join(_ISOLATED_NAMES.get(h, h) for h in held)
        if item.get("trusted"):
            lines.append(f"  trusted: the card's {names} reach the Writer (`rp assets trust {item['assetId']} --revoke` stops that)")
        else:
            lines.append(
                f"  kept aside: the card's {names}; not sent to the model until you run"
                f" `rp assets trust {item['assetId']}` (or import with --trust)"
            )
        for name, preview in (item.get("_previews") or {}).items():
            lines.append(f"    {_ISOLATED_NAMES.get(name, name)}: {preview}")
    report = item.get("report") or {}
    for p in report.get("notMigrated", []):
        at = f" (at {p['pointer']})" if p.get("pointer") else ""
        lines.append(f"  not carried over [{p['code']}]: {p['message']}{at}")
    return lines


@click.group()
def assets() -> None:
    """List, show and delete shared assets."""


@assets.command("list")
@home_option
@click.option("--kind", type=click.Choice(KINDS), help="Only this kind (default: every kind).")
@click.option("--limit", type=click.IntRange(1, 500), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
@click.pass_context
@run
async def assets_list(ctx: click.Context, kind: str | None, limit: int, offset: int, as_json: bool) -> None:
    """List assets, oldest first; the default of each kind is marked."""
    rows: list[dict[str, Any]] = []
    async with _service(ctx) as service:
        defaults = {k: (await service.store.get_default(k)) for k in DEFAULT_KINDS}
        default_ids = {r.id for r in defaults.values() if r is not None}
        for k in [kind] if kind else KINDS:
            page = await service.store.list(k, limit=limit, offset=offset)
            rows += [{**r.to_dict(with_data=False), "default": r.id in default_ids} for r in page.items]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no assets")
    for r in rows:
        mark = " [default]" if r["default"] else ""
        _echo(f"{r['id']}  {r['kind']:<13} rev {r['revision']:<4} {r['name']}{mark}")


@assets.command("show")
@home_option
@click.argument("asset_id")
@json_option
@click.pass_context
@run
async def assets_show(ctx: click.Context, asset_id: str, as_json: bool) -> None:
    """Show one asset with its data and blobs."""
    async with _service(ctx) as service:
        record = await service.store.get(asset_id)
        blobs = await service.store.list_blobs(asset_id)
        linked = await service.linked_lorebooks(asset_id) if record.kind == "card" else []
    out = record.to_dict()
    out["blobs"] = [{"role": b.role, "mediaType": b.media_type, "size": b.size, "sha256": b.sha256} for b in blobs]
    if record.kind == "card":
        out["linkedLorebooks"] = [b.id for b in linked]
    if as_json:
        echo_json(out)
        return
    _echo(f"{record.id}  {record.kind}  rev {record.revision}  {record.name}")
    click.echo(f"  content {record.content_hash}  updated {record.updated_at}")
    if record.source_character_id:
        click.echo(f"  from card {record.source_character_id}")
    for b in out["blobs"]:
        click.echo(f"  blob {b['role']}: {b['mediaType']}, {b['size']} bytes")
    for book_id in out.get("linkedLorebooks", []):
        click.echo(f"  lorebook {book_id}")


@assets.command("delete")
@home_option
@click.argument("asset_id")
@click.option("--revision", "expected_revision", type=click.IntRange(1), help="Only if still at this revision.")
@click.option("--keep-lorebooks", is_flag=True, help="Deleting a card: keep the lorebooks imported with it.")
@click.option("--yes", "-y", is_flag=True, help="Delete even when stories use it, without asking.")
@json_option
@click.pass_context
@run
async def assets_delete(
    ctx: click.Context, asset_id: str, expected_revision: int | None, keep_lorebooks: bool, yes: bool, as_json: bool
) -> None:
    """Delete an asset (a card also deletes its imported lorebooks unless --keep-lorebooks).

    When stories use it, they are listed and the deletion needs a yes (--yes skips the question;
    with --json it is refused instead of asked). Stories keep running: the binding reads as
    unbound."""
    async with _service(ctx) as service:
        if not yes:
            await _confirm_unused(ctx, service, asset_id, keep_lorebooks, as_json)
        result = await service.delete(asset_id, expected_revision=expected_revision, cascade_lorebooks=not keep_lorebooks)
    if as_json:
        echo_json(result.to_dict())
        return
    for r in result.deleted:
        _echo(f"deleted {r.kind} {r.id} ({r.name})")
    for w in result.warnings:
        _echo(f"warning [{w.code}]: {w.message}", err=True)


async def _confirm_unused(ctx: click.Context, service: AssetService, asset_id: str, keep_lorebooks: bool, as_json: bool) -> None:
    """List the stories that bind what would be deleted and ask; raise ``asset.in_use`` on a no."""
    find = state_of(ctx).asset_users
    record = await service.store.read(lambda tx: tx.get(asset_id))
    if find is None or record is None:
        return  # a missing asset is reported by the delete itself
    ids = {asset_id}
    if record.kind == CARD and not keep_lorebooks:
        ids |= {b.id for b in await service.store.read(lambda tx: tx.linked_lorebooks(asset_id))}
    users = await find(service.store.events, ids)
    if not users:
        return
    stories = len({u.session_id for u in users})
    what = f"{record.kind} {record.id} ({record.name})"
    if not as_json:
        _echo(f"{what} is used by {stories} stor{'y' if stories == 1 else 'ies'}:", err=True)
        for u in users:
            also = "" if u.asset_id == asset_id else f" (its lorebook {u.asset_id})"
            _echo(f"  {u.session_id}  {u.title or ''}{' [archived]' if u.archived else ''}{also}", err=True)
        _echo("they keep running, with that binding unbound", err=True)
        try:
            if click.confirm("delete it anyway?", default=False, err=True):
                return
        except click.Abort:
            click.echo("", err=True)  # Ctrl-C or end of input: a no
    raise RpError(
        "asset.in_use",
        f"{what} is used by {stories} stor{'y' if stories == 1 else 'ies'}; not deleted (--yes deletes anyway)",
        details={"sessions": [u.to_dict() for u in users]},
    )


@assets.command("trust")
@home_option
@click.argument("card_id")
@click.option("--revoke", is_flag=True, help="Stop injecting the card's isolated prompts.")
@json_option
@click.pass_context
@run
async def assets_trust(ctx: click.Context, card_id: str, revoke: bool, as_json: bool) -> None:
    """Trust a card's own system prompt and post-history instructions (off by default): only then
    do they reach the Writer."""
    async with _service(ctx) as service:
        prompts = await service.trust_isolated_prompts(card_id, not revoke)
    if as_json:
        echo_json({"cardId": card_id, "trusted": prompts.trusted})
        return
    click.echo(f"{'trusted' if prompts.trusted else 'untrusted'}: isolated prompts of {card_id}")


@click.group()
def export() -> None:
    """Export assets as community files."""


@export.command("card")
@home_option
@click.argument("card_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="PNG file to write.")
@json_option
@click.pass_context
@run
async def export_card(ctx: click.Context, card_id: str, output: Path, as_json: bool) -> None:
    """Write a card as a V3 PNG (V2 backfill) with its linked lorebooks embedded.

    The card's isolated prompts (system prompt, post-history instructions) are never exported;
    a warning says so when the card has them."""
    async with _service(ctx) as service:
        png = await service.export_card(card_id)
        isolated = await service.isolated_prompts(card_id)
    output.write_bytes(png)
    held = [name for name in _ISOLATED_NAMES if getattr(isolated, name)]
    warnings = []
    if held:
        names = " and ".join(_ISOLATED_NAMES[h] for h in held)
        warnings.append(
            {
                "code": "card.export.isolated_prompts_left_out",
                "message": f"the card's {names} {'were' if len(held) > 1 else 'was'} left out of the file: isolated prompts are never exported",
                "fields": held,
            }
        )
    if as_json:
        echo_json({"cardId": card_id, "output": str(output), "bytes": len(png), "warnings": warnings})
    else:
        click.echo(f"wrote {output} ({len(png)} bytes)")
        for w in warnings:
            _echo(f"warning [{w['code']}]: {w['message']}", err=True)


__all__ = ["assets", "export", "import_command"]
