"""``rp``: the command-line interface. Each feature contributes its own command group.

The groups are imported only when used. Importing all of them costs about a second (the
``openai`` SDK alone most of it), which ``rp --help`` and every command would otherwise pay
before doing anything; ``COMMANDS`` keeps each one's module and one-line help so the top-level
help needs no import. ``tests/test_cli.py`` checks the help lines against the real commands.

Commands of a feature (``COMMAND_FEATURES``) are absent while the feature manager has the feature
off: left out of ``rp --help`` and refused by name. Third-party plugins add commands through the
``register_commands(cli)`` hook (``roleplay.hookspecs``); their modules load when ``rp`` lists or
looks up a command it does not know, never for a built-in one.
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import sys
from typing import Any

import click

from roleplay import __version__
from roleplay.cli_context import CliState, fail_on_store_fault, guard_text_arguments
from roleplay.names import (
    CHARACTER_CARD_FEATURE,
    COMPAT_MVU_FEATURE,
    LIBRARY_FEATURE,
    LOREBOOK_FEATURE,
    MESSAGE_ACTIONS_FEATURE,
    PERSONA_FEATURE,
    PRESET_FEATURE,
    QUICK_REPLIES_FEATURE,
    STATE_FEATURE,
    SUBAGENT_MANAGER_FEATURE,
    WRITING_STYLE_FEATURE,
)

# name -> (module, attribute, the command's one-line help as ``rp --help`` shows it)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "assets": ("roleplay.assets.cli", "assets", "List, show and delete shared assets."),
    "branch": (
        "roleplay.core.actions_cli",
        "branch_command",
        "Start a new story from SESSION_ID as it stood after a turn; the source is untouched.",
    ),
    "chat": ("roleplay.harness.chat", "chat", "Chat with the configured model; every exchange is saved as a session."),
    "continue": ("roleplay.core.cli", "continue_command", "The Writer goes on with the last reply of SESSION_ID, as one more turn."),
    "delete": (
        "roleplay.core.actions_cli",
        "delete_command",
        "Delete MESSAGE (an id or its number) and everything after it; a failed reply keeps your message.",
    ),
    "edit": (
        "roleplay.core.actions_cli",
        "edit_command",
        "Replace the text of MESSAGE (an id or its number) in SESSION_ID; a reply keeps its effects.",
    ),
    "db": ("roleplay.harness.cli", "db", "Database maintenance."),
    "export": ("roleplay.assets.cli", "export", "Export assets as community files."),
    "impersonate": (
        "roleplay.core.cli",
        "impersonate_command",
        "Draft your next message in SESSION_ID in your persona's voice; nothing is sent.",
    ),
    "import": ("roleplay.assets.cli", "import_command", "Import character cards (PNG/JSON/CHARX), SillyTavern lorebooks and presets."),
    "lorebook": ("roleplay.assets.lorebook.cli", "lorebook", "Inspect lorebooks (world info)."),
    "messages": (
        "roleplay.core.actions_cli",
        "messages_command",
        "List the visible messages of SESSION_ID with their numbers and ids (and whether a run is writing one of their turns now).",
    ),
    "metrics": (
        "roleplay.core.actions_cli",
        "metrics_command",
        "Tokens, latency, route and cost of each reply of SESSION_ID and in total.",
    ),
    "mode": ("roleplay.core.agent_cli", "mode_command", "Show or switch a story's execution mode: chat or agent."),
    "models": ("roleplay.harness.models.cli", "models", "List model providers and test a model route."),
    "mvu": ("roleplay.compat.mvu.cli", "mvu_group", "MVU / MVU Zod variable-card compatibility."),
    "new": ("roleplay.core.cli", "new_command", "Start a story."),
    "persona": ("roleplay.assets.edit_cli", "persona", "Write and edit your personas (who you are in a story) in $EDITOR."),
    "preset": ("roleplay.assets.edit_cli", "preset", "Write and edit presets (the sections around the Writer's prompt) in $EDITOR."),
    "style": ("roleplay.assets.edit_cli", "style", "Write and edit writing styles in $EDITOR."),
    "play": ("roleplay.core.cli", "play_command", "Interactive play."),
    "prompt": ("roleplay.core.cli", "prompt_command", "Show the exact Writer prompt and parent views the next turn would use."),
    "quick-replies": (
        "roleplay.quick_replies.cli",
        "quick_replies",
        "List, add, edit and delete quick replies (snippets /qr inserts into your draft in rp play).",
    ),
    "regenerate": (
        "roleplay.core.actions_cli",
        "regenerate_command",
        "Write the last reply of SESSION_ID again; the replaced one stays as an alternative (rp swipe).",
    ),
    "say": ("roleplay.core.cli", "say_command", "Play one turn of SESSION_ID and stream the reply."),
    "serve": ("roleplay.web.serve", "serve_command", "Serve the HTTP API (and its docs at /api/docs) until Ctrl-C."),
    "sessions": ("roleplay.harness.cli", "sessions", "List, inspect, fork and archive sessions."),
    "settings": (
        "roleplay.core.settings_cli",
        "settings",
        "Read and change the global settings (Writer default route, identity prompt, features…).",
    ),
    "subagents": ("roleplay.core.agent_cli", "subagents", "List, add, edit, enable, disable and delete Agent mode's task sub-agents."),
    "swipe": (
        "roleplay.core.actions_cli",
        "swipe_command",
        "Show another alternative of the last reply: DIRECTION is left, right or its number (1 = first).",
    ),
    "state": ("roleplay.state.cli", "state_group", "Check rp.state v2 namespace definitions and simulate state.update effects."),
    "writer-route": (
        "roleplay.core.agent_cli",
        "writer_route_command",
        "[SESSION_ID] ROUTE|default|follow: the Writer's model, globally or for one story.",
    ),
}

COMMANDS.update(
    {
        "features": ("roleplay.plugins_cli", "features", "Turn roleplay features on and off (applies from the next conversation)."),
        "plugins": ("roleplay.plugins_cli", "plugins", "List the loaded plugins, built-in and installed."),
    }
)

# name -> the feature whose command it is; absent while the feature is off (``rp features``).
COMMAND_FEATURES: dict[str, str] = {
    "assets": LIBRARY_FEATURE,
    "import": LIBRARY_FEATURE,
    "export": CHARACTER_CARD_FEATURE,
    "lorebook": LOREBOOK_FEATURE,
    "persona": PERSONA_FEATURE,
    "preset": PRESET_FEATURE,
    "style": WRITING_STYLE_FEATURE,
    "mvu": COMPAT_MVU_FEATURE,
    "quick-replies": QUICK_REPLIES_FEATURE,
    "state": STATE_FEATURE,
    "subagents": SUBAGENT_MANAGER_FEATURE,
    "writer-route": SUBAGENT_MANAGER_FEATURE,
    # spec rp-message-actions: edit, suffix delete, regenerate, branch, reply metrics
    **dict.fromkeys(("messages", "edit", "delete", "regenerate", "swipe", "branch", "metrics"), MESSAGE_ACTIONS_FEATURE),
}


def saved_features(ctx: click.Context) -> set[str] | None:
    """The saved enabled set (closed), or None for "everything" (no database yet, never saved).

    Read before any command module loads: straight from the SQLite file, read-only, so
    ``rp --help`` stays fast and never creates a home; through the store on PostgreSQL."""
    from roleplay.config import resolve_paths
    from roleplay.feature_catalog import required_closure

    state = ctx.find_object(CliState)
    home = (state.home if state is not None else None) or ctx.params.get("home")
    paths = resolve_paths(home)
    if paths.is_sqlite:
        path = paths.database_url.removeprefix("sqlite:///")
        if not os.path.exists(path):
            return None
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                row = conn.execute("SELECT value FROM settings WHERE key = 'features.enabled'").fetchone()
        except sqlite3.Error:
            return None  # not migrated yet: the defaults
        value = json.loads(row[0]) if row is not None and row[0] is not None else None
    else:
        value = _saved_features_postgres(state or CliState(home=home))
    return None if value is None else required_closure(value)


def _saved_features_postgres(state: CliState) -> list[str] | None:
    import asyncio

    from roleplay.core.feature_set import FeatureManager

    async def read() -> list[str]:
        async with state.open_store() as store:
            return list(await FeatureManager(store).enabled())

    return asyncio.run(read())


def plugins_installed() -> bool:
    """Whether an installed distribution declares a ``roleplay`` entry point, looked up where
    ``importlib.metadata`` finds them (``*.dist-info``/``*.egg-info`` directories on ``sys.path``)
    without importing it: that import (email, zipfile, pluggy with it) would cost every ``rp --help``
    about 50 ms. Only when one is there does ``rp`` load the plugin manager for commands and
    providers; a zipped egg is not looked into."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(entry or ".", name, "entry_points.txt"), encoding="utf-8") as f:
                        if "[roleplay]" in f.read():
                            return True
                except OSError:
                    continue
    return False


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    _plugins_loaded = False

    def _load_plugin_commands(self) -> None:
        if not self._plugins_loaded:
            self._plugins_loaded = True
            if not plugins_installed():
                return
            from roleplay.errors import RpError
            from roleplay.plugins import third_party_manager

            try:
                third_party_manager().hook.register_commands(cli=self)
            except RpError as exc:  # the built-in commands still work; a runtime refuses to open
                click.echo(f"warning [{exc.code}]: {exc.message}", err=True)

    def _disabled(self, ctx: click.Context) -> set[str]:
        saved = saved_features(ctx)
        return set() if saved is None else {name for name, feature in COMMAND_FEATURES.items() if feature not in saved}

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return sorted({*self.commands, *COMMANDS} - self._disabled(ctx))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMAND_FEATURES and cmd_name in self._disabled(ctx):
            feature = COMMAND_FEATURES[cmd_name]
            raise click.UsageError(
                f"`rp {cmd_name}` belongs to {feature}, which is turned off; `rp features enable {feature}` turns it on", ctx
            )
        command = self.commands.get(cmd_name)
        if command is None and cmd_name not in COMMANDS:
            self._load_plugin_commands()
            command = self.commands.get(cmd_name)
            if command is not None:
                guard_text_arguments(command)
        if command is None and cmd_name in COMMANDS:
            module, attr, _ = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module), attr)
            # Every command, with or without ``run``, refuses arguments that are not UTF-8 text.
            guard_text_arguments(command)
            self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is not None:
                if loaded.hidden:
                    continue
                rows.append((name, loaded.get_short_help_str(limit)))
            else:
                rows.append((name, click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _build_runtime(*args: Any, **kwargs: Any) -> Any:
    # Imported when a command opens a runtime, not when ``rp`` starts. An awaitable: the runtime
    # has the saved enabled features, read from the store first.
    from roleplay.features import open_runtime

    return open_runtime(*args, **kwargs)


async def _asset_users(store: Any, asset_ids: Any) -> Any:
    from roleplay.core.asset_users import sessions_using

    return await sessions_using(store, asset_ids)


async def _owned_migrations(store: Any) -> Any:
    from roleplay.features import migrate_features

    return await migrate_features(store)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="rp")
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="RP_HOME",
    is_eager=True,  # read before --help, which lists only the commands of enabled features
    help="Data directory (default: $RP_HOME or the platform data dir). $RP_DATABASE_URL selects PostgreSQL.",
)
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """roleplay: long-form AI roleplay with a replayable event log."""
    state = ctx.ensure_object(CliState)
    if state.home is None:
        state.home = home
    if state.runtime_factory is None:
        state.runtime_factory = _build_runtime
    if state.asset_users is None:
        state.asset_users = _asset_users
    if state.owned_migrations is None:
        state.owned_migrations = _owned_migrations
    _load_third_party_providers()


_providers_loaded = False


def _load_third_party_providers() -> None:
    # Installed plugins' model providers must be known before a command parses a route; the
    # built-in ones are the harness's own, so only entry points are read (never built-in features).
    global _providers_loaded
    if not _providers_loaded:
        _providers_loaded = True
        if not plugins_installed():
            return
        from roleplay.errors import RpError
        from roleplay.plugins import register_process_hooks, third_party_manager

        try:
            register_process_hooks(third_party_manager())
        except RpError:
            pass  # a command that opens a runtime reports it (plugins.load_failed); others work on


guard_text_arguments(cli)


def main() -> None:
    try:
        cli(obj=CliState())
    except Exception as exc:  # noqa: BLE001 - commands without ``run`` get the same fault mapping
        fail_on_store_fault(exc)
        raise
