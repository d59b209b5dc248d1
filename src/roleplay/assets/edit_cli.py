"""``rp persona|preset|style list|show|new|edit``: write your own personas, presets and styles.

``new`` and ``edit`` open ``$VISUAL``/``$EDITOR`` on the asset as a YAML document
(``assets/edit_document.py``); ``--file PATH`` (``-`` for stdin) takes the document instead, for
scripts and tests. ``show`` prints the same document, so ``rp persona show > me.yaml`` and
``rp persona edit --file me.yaml`` round-trip.

Nothing the user typed is lost. When the edited document is refused (not YAML, or the kind's
parser names a problem, each with its JSON Pointer), the text is kept in a file (named in the
message) and the editor can be re-opened on it with the problems as comments on top. ``edit``
stores with revision CAS: the revision read before the editor opened (or ``--revision N``) must
still be current, else ``asset.revision_conflict``, with the edit kept as well.

Without an id, ``show`` and ``edit`` take the kind's default (the one new stories use), so
``rp persona edit`` is how you set your name.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

import click

from roleplay.cli_context import echo_error, echo_json, home_option, json_option, run, state_of, terminal_safe
from roleplay.errors import NotFoundError, RpError, ValidationError

from .edit_document import BLANK, from_document, strip_error_comments, to_document, with_error_comments
from .kinds import PERSONA, PRESET, WRITING_STYLE
from .persona_name import name_persona, unnamed_default_persona
from .store import AssetRecord, AssetStore

# command name -> (asset kind, its help line; ``roleplay.cli.COMMANDS`` repeats it for ``rp --help``)
KIND_COMMANDS: dict[str, tuple[str, str]] = {
    "persona": (PERSONA, "Write and edit your personas (who you are in a story) in $EDITOR."),
    "preset": (PRESET, "Write and edit presets (the sections around the Writer's prompt) in $EDITOR."),
    "style": (WRITING_STYLE, "Write and edit writing styles in $EDITOR."),
}


@asynccontextmanager
async def _assets(ctx: click.Context) -> AsyncIterator[AssetStore]:
    from .seeds import language_notice
    from .service import AssetService

    async with state_of(ctx).open_store() as events:
        service = AssetService(events)
        notice = language_notice(await service.ensure_seeds())
        if notice:  # the first seeding stored the user's language: say so, once
            click.echo(notice, err=True)
        yield service.store


async def _target(store: AssetStore, kind: str, asset_id: str | None) -> AssetRecord:
    if asset_id is not None:
        return await store.get(asset_id, kind=kind)
    record = await store.get_default(kind)
    if record is None:
        raise NotFoundError("asset.no_default", f"there is no default {kind}; name one by its id", details={"kind": kind})
    return record


def _fill_field_ids(kind: str, data: dict[str, Any], store: AssetStore) -> dict[str, Any]:
    """A preset field written without an id gets a fresh one (ids are the fields' identity)."""
    if kind != PRESET or not isinstance(data.get("fields"), list):
        return data
    taken = {f.get("id") for f in data["fields"] if isinstance(f, dict)}
    fields = []
    for item in data["fields"]:
        if isinstance(item, dict) and not item.get("id"):
            new = "fld_" + store.new_id().split("_", 1)[-1]
            while new in taken:
                new = "fld_" + store.new_id().split("_", 1)[-1]
            taken.add(new)
            item = {"id": new, **{k: v for k, v in item.items() if k != "id"}}
        fields.append(item)
    return {**data, "fields": fields}


def _keep(text: str, kind: str) -> str:
    """Write the user's text to a private file that outlives this command; its path."""
    fd, path = tempfile.mkstemp(prefix=f"rp-{kind}-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _kept_error(exc: RpError, path: str) -> RpError:
    return exc.__class__(
        exc.code,
        f"{exc.message}; your edit is kept in {path}",
        pointer=exc.pointer,
        details={**exc.details, "editKeptAt": path},
        problems=exc.problems,
    )


def _read_file(file: Any) -> str:
    data = file.read()
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                "asset.edit.invalid_utf8", f"the document is not UTF-8 text (byte {exc.start})", details={"offset": exc.start}
            ) from None
    return str(data)


Save = Callable[[dict[str, Any]], Awaitable[AssetRecord]]


async def _edit_and_save(kind: str, text: str, save: Save, file: Any, as_json: bool) -> AssetRecord | None:
    """The document from ``file``, else from the editor (again after each refusal, if the user
    wants); stored by ``save``. None: nothing changed, nothing stored."""
    if file is not None:
        data = from_document(_read_file(file))
        if data is None:
            raise ValidationError("asset.edit.empty", "the document is empty; nothing was stored")
        return await save(data)
    original = text
    while True:
        try:
            edited = click.edit(text, extension=".yaml", require_save=False)
        except click.ClickException as exc:  # the editor could not be started or failed
            raise RpError(
                "asset.edit.editor_failed", f"{exc.message}; set $EDITOR (or $VISUAL) to your editor, or give the document with --file PATH"
            ) from None
        if edited is None or strip_error_comments(edited) == strip_error_comments(original):
            return None
        try:
            data = from_document(edited)
            if data is None:
                return None
            return await save(data)
        except RpError as exc:
            path = _keep(edited, kind)
            if as_json or exc.code == "asset.revision_conflict":
                raise _kept_error(exc, path) from None
            echo_error(exc)
            click.echo(terminal_safe(f"your edit is kept in {path}", one_line=True), err=True)
            try:
                again = click.confirm("open the editor again?", default=True, err=True)
            except click.Abort:
                again = False
            if not again:
                raise _kept_error(exc, path) from None
            text = with_error_comments(edited, exc)


def _report(record: AssetRecord, verb: str, is_default: bool, as_json: bool) -> None:
    if as_json:
        echo_json({**record.to_dict(), "default": is_default, "result": verb})
        return
    mark = " [default]" if is_default else ""
    click.echo(terminal_safe(f"{verb} {record.kind} {record.id} (revision {record.revision}) {record.name}{mark}", one_line=True))


def _group(command: str, kind: str, help_line: str) -> click.Group:
    file_option = click.option(
        "--file",
        type=click.File("rb"),
        help="Read the document from PATH (- for stdin) instead of opening $EDITOR. YAML or JSON.",
    )

    @click.group(
        command,
        help=f"{help_line}\n\nThe document is YAML; --file PATH (- for stdin) takes it without an editor. "
        "Without an id, show and edit take the default one.",
    )
    def group() -> None:
        pass

    @group.command("list")
    @home_option
    @json_option
    @click.pass_context
    @run
    async def list_command(ctx: click.Context, as_json: bool) -> None:
        """List them, oldest first; the default is marked."""
        async with _assets(ctx) as store:
            default = await store.get_default(kind)
            page = await store.list(kind, limit=500)
        rows = [{**r.to_dict(with_data=False), "default": default is not None and r.id == default.id} for r in page.items]
        if as_json:
            echo_json(rows)
            return
        for r in rows:
            mark = " [default]" if r["default"] else ""
            click.echo(terminal_safe(f"{r['id']}  rev {r['revision']:<4} {r['name']}{mark}", one_line=True))
        if not rows:
            click.echo(f"no {kind} yet: `rp {command} new` writes one")

    @group.command("show")
    @home_option
    @click.argument("asset_id", required=False)
    @json_option
    @click.pass_context
    @run
    async def show_command(ctx: click.Context, asset_id: str | None, as_json: bool) -> None:
        """Print one as the document `edit` opens (default: the default one)."""
        async with _assets(ctx) as store:
            record = await _target(store, kind, asset_id)
            default = await store.get_default(kind)
        is_default = default is not None and default.id == record.id
        if as_json:
            echo_json({**record.to_dict(), "default": is_default})
            return
        click.echo(terminal_safe(to_document(kind, record.data, _heading(record, is_default))), nl=False)

    @group.command("new")
    @home_option
    @file_option
    @click.option("--default", "make_default", is_flag=True, help="Make it the default for new stories.")
    @json_option
    @click.pass_context
    @run
    async def new_command(ctx: click.Context, file: Any, make_default: bool, as_json: bool) -> None:
        """Write a new one in $EDITOR (or from --file)."""
        async with _assets(ctx) as store:

            async def save(data: dict[str, Any]) -> AssetRecord:
                return await store.create(kind, _fill_field_ids(kind, data, store))

            blank = to_document(kind, BLANK[kind], f"new {kind}")
            record = await _edit_and_save(kind, blank, save, file, as_json)
            if record is None:
                _nothing(as_json)
                return
            if make_default:
                await store.set_default(kind, record.id)
        _report(record, "created", make_default, as_json)

    @group.command("edit")
    @home_option
    @click.argument("asset_id", required=False)
    @file_option
    @click.option(
        "--revision",
        "expected_revision",
        type=click.IntRange(1),
        help="Store only if it is still at this revision (default: the revision read before editing).",
    )
    @click.option("--default", "make_default", is_flag=True, help="Also make it the default for new stories.")
    @json_option
    @click.pass_context
    @run
    async def edit_command(
        ctx: click.Context, asset_id: str | None, file: Any, expected_revision: int | None, make_default: bool, as_json: bool
    ) -> None:
        """Edit one in $EDITOR (or from --file); default: the default one."""
        async with _assets(ctx) as store:
            record = await _target(store, kind, asset_id)
            default = await store.get_default(kind)
            revision = expected_revision or record.revision

            async def save(data: dict[str, Any]) -> AssetRecord:
                return await store.update(record.id, _fill_field_ids(kind, data, store), expected_revision=revision)

            is_default = default is not None and default.id == record.id
            updated = await _edit_and_save(kind, to_document(kind, record.data, _heading(record, is_default)), save, file, as_json)
            if updated is None:
                _nothing(as_json)
                return
            if make_default and not is_default:
                await store.set_default(kind, updated.id)
        _report(updated, "saved", is_default or make_default, as_json)

    return group


def _heading(record: AssetRecord, is_default: bool) -> str:
    return f"{record.kind} {record.id}, revision {record.revision}{' (default)' if is_default else ''}"


def _nothing(as_json: bool) -> None:
    if as_json:
        echo_json({"result": "unchanged"})
    else:
        click.echo("no changes; nothing was stored", err=True)


Ask = Callable[[str, str], Awaitable[str | None]]


async def offer_persona_name(store: AssetStore, ask: Ask) -> AssetRecord | None:
    """First play: while the default persona still has its neutral seeded name, ask what the story
    should call the user (``ask(prompt, default)`` reads one line; empty or the same name keeps
    it). The renamed persona, or None. A refused name is reported and changes nothing."""
    record = await unnamed_default_persona(store)
    if record is None:
        return None
    click.echo(
        terminal_safe(
            f"Stories call you {record.name!r} until you name yourself (Enter keeps it; `rp persona edit` any time).", one_line=True
        ),
        err=True,
    )
    answer = ((await ask("your name> ", record.name)) or "").strip()
    if not answer or answer == record.name:
        return None
    if answer.startswith("/"):  # a play command typed ahead is not a name
        click.echo(terminal_safe(f"(not a name: keeping {record.name})", one_line=True), err=True)
        return None
    try:
        renamed = await name_persona(store, record, answer)
    except RpError as exc:
        echo_error(exc)
        return None
    click.echo(terminal_safe(f"(stories call you {renamed.name} from now on)", one_line=True), err=True)
    return renamed


persona = _group("persona", *KIND_COMMANDS["persona"])
preset = _group("preset", *KIND_COMMANDS["preset"])
style = _group("style", *KIND_COMMANDS["style"])

__all__ = ["KIND_COMMANDS", "offer_persona_name", "persona", "preset", "style"]
