"""``rp plugins list`` and ``rp features list|enable|disable``: the plugin seam from the terminal.

``rp plugins list`` shows the plugins a runtime of this home loads now: the built-in features
that are on (and ``rp-core``), and every installed third-party plugin with its distribution and
entry point, each with the hooks it implements. ``rp features`` changes the feature manager's
saved set; a change applies from the next conversation (the next ``rp`` command).
"""

from __future__ import annotations

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, state_of, terminal_safe
from roleplay.core.feature_set import FeatureChange, FeatureManager, FeatureState

expected_option = click.option(
    "--expected-revision",
    type=click.IntRange(min=0),
    help="Refuse the change unless the selection is still at this revision (`rp features list` shows it).",
)


@click.group("plugins")
def plugins() -> None:
    """List the loaded plugins, built-in and installed."""


@plugins.command("list")
@home_option
@json_option
@click.pass_context
@run
async def plugins_list(ctx: click.Context, as_json: bool) -> None:
    """Each loaded plugin: built-in (its module) or installed (distribution, entry point), and its hooks."""
    from roleplay.plugins import plugin_manager, plugin_rows

    async with state_of(ctx).open_store() as store:
        enabled = await FeatureManager(store).enabled()
    rows = plugin_rows(plugin_manager(enabled))
    if as_json:
        echo_json({"plugins": rows})
        return
    for row in rows:
        origin = (
            f"built-in {row['module']}" if row["builtin"] else f"{row['distribution']} {row['version']} (entry point {row['entryPoint']})"
        )
        click.echo(terminal_safe(f"{row['name']}  {origin}", one_line=True))
        click.echo(terminal_safe(f"    hooks: {', '.join(row['hooks']) or '-'}", one_line=True))


@click.group("features")
def features() -> None:
    """Turn roleplay features on and off (applies from the next conversation)."""


def _show_state(state: FeatureState) -> None:
    for row in state.rows():
        mark = "on " if row["enabled"] else "off"
        needs = f"  (needs {', '.join(row['requires'])})" if row["requires"] else ""
        settings = f"  settings: {', '.join(row['settings'])}" if row["settings"] else ""
        click.echo(f"{mark}  {row['name']}{needs}{settings}")
    click.echo(f"(always on: {', '.join(state.to_dict()['alwaysOn'])}; revision {state.revision})", err=True)


def _show_change(change: FeatureChange, as_json: bool) -> None:
    if as_json:
        echo_json(change.to_dict())
        return
    verb = "on" if change.enabled else "off"
    if not change.changed:
        click.echo(f"{change.feature} is already {verb}", err=True)
    else:
        also = ""
        if change.also:
            why = "it needs them" if change.enabled else "they need it"
            also = f"; also turned {verb}: {', '.join(change.also)} ({why})"
        click.echo(f"{change.feature} turned {verb}{also}. Applies from the next conversation.", err=True)
    _show_state(change.state)


@features.command("list")
@home_option
@json_option
@click.pass_context
@run
async def features_list(ctx: click.Context, as_json: bool) -> None:
    """Every optional feature, on or off, with its hard dependencies."""
    async with state_of(ctx).open_store() as store:
        state = await FeatureManager(store).state()
    if as_json:
        echo_json(state.to_dict())
    else:
        _show_state(state)


@features.command("enable")
@home_option
@click.argument("name")
@expected_option
@json_option
@click.pass_context
@run
async def features_enable(ctx: click.Context, name: str, expected_revision: int | None, as_json: bool) -> None:
    """Turn NAME on, with every feature it needs."""
    async with state_of(ctx).open_store() as store:
        change = await FeatureManager(store).enable(name, expected_revision=expected_revision)
    _show_change(change, as_json)


@features.command("disable")
@home_option
@click.argument("name")
@expected_option
@json_option
@click.pass_context
@run
async def features_disable(ctx: click.Context, name: str, expected_revision: int | None, as_json: bool) -> None:
    """Turn NAME off, with every feature that needs it. Nothing is deleted: bindings and logs stay."""
    async with state_of(ctx).open_store() as store:
        change = await FeatureManager(store).disable(name, expected_revision=expected_revision)
    _show_change(change, as_json)


__all__ = ["features", "plugins"]
