"""``rp`` itself: the lazy command table and start-up cost."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from roleplay.cli import COMMANDS, cli
from roleplay.cli_context import CliState


def _imported_by(*args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from roleplay.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return modules, proc


def test_rp_help_imports_neither_openai_nor_any_command_module() -> None:
    modules, proc = _imported_by("--help")
    assert proc.returncode == 0 and "Commands:" in proc.stdout, proc.stderr[-2000:]
    assert "roleplay.cli" in modules  # the trace did record our imports
    assert not {m for m in modules if m == "openai" or m.startswith("openai.")}
    assert not {m for m in modules if m.startswith(("roleplay.core", "roleplay.harness", "roleplay.assets", "roleplay.features"))}
    assert "asyncio" not in modules


def test_rp_help_lists_every_command_with_its_own_help_line() -> None:
    modules, proc = _imported_by("--help")
    for name in COMMANDS:
        assert f"  {name} " in proc.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_static_help_line_is_the_commands_own(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.name == name
    assert COMMANDS[name][2] == command.get_short_help_str(limit=500)


def test_a_lazily_loaded_command_runs_and_still_refuses_undecodable_arguments() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["models", "test", "--model", "demo\udcff"], obj=CliState())
    assert result.exit_code == 1 and "cli.arg.invalid_utf8" in result.output


def test_an_unknown_command_is_a_usage_error() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["nope"], obj=CliState())
    assert result.exit_code == 2 and "No such command 'nope'" in result.output


def _leaves(command: click.Command, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Command]]:
    if not isinstance(command, click.Group):
        return [(path, command)]
    ctx = click.Context(command)
    return [leaf for name in command.list_commands(ctx) for leaf in _leaves(command.get_command(ctx, name), (*path, name))]  # type: ignore[arg-type]


def test_every_command_takes_json() -> None:
    # Interactive play too: its --json makes stdout JSON Lines (tests/core/test_cli.py).
    missing = [" ".join(path) for path, command in _leaves(cli, ()) if "as_json" not in {p.name for p in command.params}]
    assert missing == []
