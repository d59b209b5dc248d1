"""``rp``: the command-line interface. Each feature contributes its own command group."""

from __future__ import annotations

import click

from roleplay import __version__
from roleplay.cli_context import CliState, fail_on_store_fault, guard_text_arguments
from roleplay.assets.cli import assets, export, import_command
from roleplay.assets.lorebook.cli import lorebook
from roleplay.compat.mvu.cli import mvu_group
from roleplay.core.cli import COMMANDS as STORY_COMMANDS
from roleplay.harness.chat import chat
from roleplay.harness.cli import db, sessions
from roleplay.harness.models.cli import models
from roleplay.state.cli import state_group


@click.group()
@click.version_option(__version__, prog_name="rp")
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="RP_HOME",
    help="Data directory (default: $RP_HOME or the platform data dir). $RP_DATABASE_URL selects PostgreSQL.",
)
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """roleplay: long-form AI roleplay with a replayable event log."""
    state = ctx.ensure_object(CliState)
    if state.home is None:
        state.home = home
    if state.runtime_factory is None:
        from roleplay.features import build_runtime

        state.runtime_factory = build_runtime


cli.add_command(db)
cli.add_command(sessions)
cli.add_command(models)
cli.add_command(chat)
cli.add_command(import_command)
cli.add_command(assets)
cli.add_command(export)
cli.add_command(lorebook)
cli.add_command(mvu_group)
for _command in STORY_COMMANDS:
    cli.add_command(_command)
cli.add_command(state_group)
# Every command, with or without ``run``, refuses arguments that are not UTF-8 text.
guard_text_arguments(cli)


def main() -> None:
    try:
        cli(obj=CliState())
    except Exception as exc:  # noqa: BLE001 - commands without ``run`` get the same fault mapping
        fail_on_store_fault(exc)
        raise
