"""``rp mode``, ``rp subagents`` and ``rp writer-route``: Agent mode and the sub-agent manager.

- ``rp mode SESSION [chat|agent]``: show or switch the session's ``runtime.executionMode``. The
  switch is a CAS on the profile revision (``--expected-revision``, else the revision just read)
  and takes the session's run lease, so it is ``run.busy`` while a turn runs.
- ``rp subagents list|add|edit|enable|disable|delete``: the global task catalog
  (``core.subagent_catalog``); each change is a CAS on the catalog's revision and applies from
  the next run.
- ``rp writer-route [SESSION] ROUTE|default|follow``: without SESSION the global default (the
  ``writer.defaultRoute`` setting; ``default``/``follow`` reset it, which follows the
  conversation); with SESSION the session's override ``runtime.writerRoute`` (``default``
  removes it, ``follow`` follows the session's conversation route).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, state_of, terminal_safe
from roleplay.errors import RpError
from roleplay.harness.models.routes import parse_route_spec

from .execution_mode import MODES, runtime_view, set_mode, set_writer_route
from .profile import profile_of, session_projection
from .settings import SettingsStore, read_settings
from .runtime import RoleplayRuntime
from .subagent_catalog import Catalog, SubagentItem, add_item, delete_item, edit_item, load_catalog, save_catalog


def writer_route_text(route: dict[str, Any] | None) -> str:
    if route is None:
        return "the global default"
    if route.get("followConversation"):
        return "the conversation's route"
    effort = f"/{route['reasoningEffort']}" if route.get("reasoningEffort") else ""
    return f"{route['provider']}/{route['model']}{effort}"


@asynccontextmanager
async def _runtime(ctx: click.Context) -> AsyncIterator[RoleplayRuntime]:
    """Core alone: a profile change needs the session service and the asset store, no feature."""
    async with state_of(ctx).open_store() as store:
        rt = RoleplayRuntime.create(store)
        try:
            yield rt
        finally:
            await rt.aclose()


# -- rp mode ---------------------------------------------------------------------------------------


@click.command("mode")
@home_option
@click.argument("session_id")
@click.argument("mode", required=False, type=click.Choice(MODES))
@click.option("--expected-revision", type=click.IntRange(min=0), help="Refuse unless the profile is still at this revision.")
@json_option
@click.pass_context
@run
async def mode_command(ctx: click.Context, session_id: str, mode: str | None, expected_revision: int | None, as_json: bool) -> None:
    """Show or switch a story's execution mode: chat or agent.

    chat: the Writer's text is the reply, as written. agent: an orchestrating parent with the
    task sub-agents, asset and State tools, which may revise the draft. Only while no turn runs."""
    async with _runtime(ctx) as rt:
        if mode is None:
            loaded = await rt.service.projection(session_id, session_projection)
            view = runtime_view(profile_of(loaded.state), loaded.state["revision"])
        else:
            view = await set_mode(rt, session_id, mode, expected_revision)
    if as_json:
        echo_json({"sessionId": session_id, **view})
        return
    click.echo(f"{session_id}: {view['executionMode']} mode (profile revision {view['profileRevision']})")


# -- rp writer-route -------------------------------------------------------------------------------


@click.command("writer-route")
@home_option
@click.argument("args", nargs=-1, required=True)
@json_option
@click.pass_context
@run
async def writer_route_command(ctx: click.Context, args: tuple[str, ...], as_json: bool) -> None:
    """[SESSION_ID] ROUTE|default|follow: the Writer's model, globally or for one story.

    Without SESSION_ID the global default (default and follow both follow each conversation's
    route); with it that story's own choice (default removes it, follow uses the story's
    conversation route)."""
    if len(args) > 2:
        raise RpError("cli.usage", "give at most SESSION_ID and ROUTE|default|follow")
    value = args[-1].strip()
    if len(args) == 1:
        async with state_of(ctx).open_store() as store:
            settings = SettingsStore(store)
            if value in ("default", "follow"):
                record = await settings.reset("writer.defaultRoute")
            else:
                parse_route_spec(value)
                record = await settings.set("writer.defaultRoute", value)
        if as_json:
            echo_json({"scope": "global", **record.to_dict()})
            return
        shown = record.value if record.value is not None else "follow the conversation"
        click.echo(terminal_safe(f"Writer default: {shown} (applies from the next turn)", one_line=True))
        return
    session_id = args[0]
    async with _runtime(ctx) as rt:
        view = await set_writer_route(rt, session_id, value)
    if as_json:
        echo_json({"scope": "session", "sessionId": session_id, **view})
        return
    click.echo(terminal_safe(f"{session_id}: Writer uses {writer_route_text(view['writerRoute'])} (from the next turn)", one_line=True))


# -- rp subagents ----------------------------------------------------------------------------------


async def _catalog(store: Any) -> tuple[SettingsStore, Catalog]:
    settings = SettingsStore(store)
    language = (await read_settings(store)).language()
    return settings, await load_catalog(settings, language)


def _show(catalog: Catalog, as_json: bool, note: str | None = None) -> None:
    if as_json:
        echo_json(catalog.to_dict())
        return
    if note:
        click.echo(note)
    if not catalog.items:
        click.echo("(no sub-agents; rp subagents add NAME --contract … --instructions … adds one)")
    for item in catalog.items:
        state = "on " if item.enabled else "off"
        route = item.route or "follows the conversation"
        tools = ", ".join(item.tools) or "no tools"
        click.echo(terminal_safe(f"[{state}] {item.name}  ({route}; {tools})", one_line=True))
        click.echo(terminal_safe(f"      {item.usage_contract}", one_line=True))


@click.group("subagents")
def subagents() -> None:
    """List, add, edit, enable, disable and delete Agent mode's task sub-agents.

    One catalog shared by every story; a change applies from the next turn."""


def _changes(
    contract: str | None, instructions: str | None, tools: tuple[str, ...], route: str | None, rename: str | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if contract is not None:
        out["usageContract"] = contract
    if instructions is not None:
        out["instructions"] = instructions
    if tools:
        out["tools"] = [t for t in tools if t != "none"]
    if route is not None:
        if route in ("follow", "default"):
            out["route"] = None
        else:
            parse_route_spec(route)
            out["route"] = route
    if rename is not None:
        out["name"] = rename
    return out


item_options = [
    click.option("--contract", help="The usage contract the Agent reads: when, whether required, order, input, result."),
    click.option("--instructions", help="The specialist's working instructions (its whole persona, verbatim)."),
    click.option("--contract-file", type=click.File("rb"), help="Read the usage contract from a file (- for stdin)."),
    click.option("--instructions-file", type=click.File("rb"), help="Read the instructions from a file (- for stdin)."),
    click.option("--tool", "tools", multiple=True, help="A tool it may use (repeat; 'none' clears the list on edit)."),
    click.option("--route", help="provider/model[/effort] for this specialist; 'follow' uses the conversation's route."),
]


def _text_or_file(text: str | None, file: Any, option: str) -> str | None:
    if file is None:
        return text
    if text is not None:
        raise RpError("subagents.value_source", f"give --{option} or --{option}-file, not both")
    data = file.read()
    try:
        return data.decode("utf-8")  # type: ignore[no-any-return]
    except UnicodeDecodeError as exc:
        raise RpError(
            "subagents.file_not_utf8", f"{file.name} is not UTF-8 text (offset {exc.start})", details={"offset": exc.start}
        ) from None


def _with_item_options(fn: Any) -> Any:
    for option in reversed(item_options):
        fn = option(fn)
    return fn


@subagents.command("list")
@home_option
@json_option
@click.pass_context
@run
async def list_command(ctx: click.Context, as_json: bool) -> None:
    """List the catalog (created with the built-in specialists on first use)."""
    async with state_of(ctx).open_store() as store:
        _, catalog = await _catalog(store)
    _show(catalog, as_json)


@subagents.command("add")
@home_option
@click.argument("name")
@_with_item_options
@click.option("--disabled", is_flag=True, help="Add it switched off.")
@json_option
@click.pass_context
@run
async def add_command(
    ctx: click.Context,
    name: str,
    contract: str | None,
    instructions: str | None,
    contract_file: Any,
    instructions_file: Any,
    tools: tuple[str, ...],
    route: str | None,
    disabled: bool,
    as_json: bool,
) -> None:
    """Add the specialist NAME (needs --contract and --instructions)."""
    contract = _text_or_file(contract, contract_file, "contract")
    instructions = _text_or_file(instructions, instructions_file, "instructions")
    if contract is None or instructions is None:
        raise RpError("subagents.incomplete", "a new sub-agent needs --contract and --instructions")
    data = {"name": name, **_changes(contract, instructions, tools, route, None), "enabled": not disabled}
    item = SubagentItem.model_validate(data)
    async with state_of(ctx).open_store() as store:
        settings, catalog = await _catalog(store)
        catalog = await save_catalog(settings, add_item(catalog, item), catalog.revision)
    _show(catalog, as_json, f"added {item.name} (from the next turn)")


@subagents.command("edit")
@home_option
@click.argument("name")
@_with_item_options
@click.option("--rename", help="A new name.")
@json_option
@click.pass_context
@run
async def edit_command(
    ctx: click.Context,
    name: str,
    contract: str | None,
    instructions: str | None,
    contract_file: Any,
    instructions_file: Any,
    tools: tuple[str, ...],
    route: str | None,
    rename: str | None,
    as_json: bool,
) -> None:
    """Change the specialist NAME."""
    contract = _text_or_file(contract, contract_file, "contract")
    instructions = _text_or_file(instructions, instructions_file, "instructions")
    changes = _changes(contract, instructions, tools, route, rename)
    if not changes:
        raise RpError("subagents.nothing_to_change", "name what to change: --contract, --instructions, --tool, --route or --rename")
    async with state_of(ctx).open_store() as store:
        settings, catalog = await _catalog(store)
        catalog = await save_catalog(settings, edit_item(catalog, name, changes), catalog.revision)
    _show(catalog, as_json, f"changed {name} (from the next turn)")


async def _switch(ctx: click.Context, name: str, enabled: bool, as_json: bool) -> None:
    async with state_of(ctx).open_store() as store:
        settings, catalog = await _catalog(store)
        catalog = await save_catalog(settings, edit_item(catalog, name, {"enabled": enabled}), catalog.revision)
    _show(catalog, as_json, f"{'enabled' if enabled else 'disabled'} {name} (from the next turn)")


@subagents.command("enable")
@home_option
@click.argument("name")
@json_option
@click.pass_context
@run
async def enable_command(ctx: click.Context, name: str, as_json: bool) -> None:
    """Switch NAME on: the next turns' Agent may call it."""
    await _switch(ctx, name, True, as_json)


@subagents.command("disable")
@home_option
@click.argument("name")
@json_option
@click.pass_context
@run
async def disable_command(ctx: click.Context, name: str, as_json: bool) -> None:
    """Switch NAME off: it stays in the catalog, invisible to the Agent."""
    await _switch(ctx, name, False, as_json)


@subagents.command("delete")
@home_option
@click.argument("name")
@json_option
@click.pass_context
@run
async def delete_command(ctx: click.Context, name: str, as_json: bool) -> None:
    """Delete NAME from the catalog (the built-in ones are not re-created)."""
    async with state_of(ctx).open_store() as store:
        settings, catalog = await _catalog(store)
        catalog = await save_catalog(settings, delete_item(catalog, name), catalog.revision)
    _show(catalog, as_json, f"deleted {name}")


__all__ = ["mode_command", "set_mode", "set_writer_route", "subagents", "writer_route_command"]
