"""What every ``rp`` command shares: where the data lives, how errors print, how async runs.

``--home`` is accepted both on ``rp`` itself and on each command (``rp sessions list --home X``);
``RP_HOME`` and ``RP_DATABASE_URL`` come from the environment. Errors print as
``error [code]: message`` on stderr (or as ``{"error": {...}}`` on stdout with ``--json``) and
exit with status 1, never with a traceback.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

import click

from roleplay.config import Paths, resolve_paths
from roleplay.errors import RpError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    home: str | None = None
    _paths: Paths | None = field(default=None, repr=False)
    # Builds the roleplay runtime over a store; the top-level ``rp`` group injects the one with
    # every enabled feature, so feature packages never import the interface layer.
    runtime_factory: Any = None

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            self._paths = resolve_paths(self.home)
        return self._paths

    def open_store(self, *, migrate: bool = True):  # type: ignore[no-untyped-def]
        """An opened store; migrations are applied first unless ``migrate`` is False."""
        from roleplay.harness.store import open_store

        store = open_store(self.paths.database_url)
        if migrate:
            return _MigratingStore(store)
        return _MigratingStore(store, migrate=False)


class _MigratingStore:
    """``async with state.open_store() as store`` — migrate on enter, close on exit."""

    def __init__(self, store: Any, migrate: bool = True) -> None:
        self.store = store
        self.migrate = migrate

    async def __aenter__(self) -> Any:
        if self.migrate:
            await self.store.migrate()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        await self.store.close()


def home_option(fn: F) -> F:
    """Add ``--home`` to a command; it overrides the one given to ``rp``."""

    def set_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            state = ctx.ensure_object(CliState)
            state.home = value
            state._paths = None

    return click.option(
        "--home",
        type=click.Path(file_okay=False),
        expose_value=False,
        callback=set_home,
        is_eager=True,
        help="Data directory (default: $RP_HOME or the platform data dir).",
    )(fn)


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def run(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Run an async command body, turning RpError into a clean message and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = kwargs.get("as_json", False)
        try:
            return asyncio.run(fn(*args, **kwargs))
        except RpError as exc:
            fail(exc, as_json)
        except KeyboardInterrupt:
            # Ctrl-C outside a running turn (inside one it aborts the turn): leave quietly.
            click.echo("", err=True)
            sys.exit(130)

    return wrapper


def fail(exc: RpError, as_json: bool = False) -> None:
    if as_json:
        click.echo(json.dumps({"error": exc.to_dict()}, ensure_ascii=False, indent=2))
    else:
        where = f" (at {exc.pointer})" if exc.pointer is not None else ""
        click.echo(f"error [{exc.code}]: {exc.message}{where}", err=True)
        for p in exc.problems[1:]:
            at = f" (at {p.pointer})" if p.pointer is not None else ""
            click.echo(f"  also [{p.code}]: {p.message}{at}", err=True)
    sys.exit(1)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def state_of(ctx: click.Context) -> CliState:
    return ctx.ensure_object(CliState)
