"""The plugin manager: built-in features as default plugins, third-party ones from entry points.

As in simonw/llm: a pluggy ``PluginManager`` for ``roleplay.hookspecs``. Built-in features are
registered as default plugins (one per feature of the feature manager's catalogue, plus ``rp-core``
which is always on), and only the enabled ones; third-party plugins come from the ``roleplay``
entry-point group of any installed distribution::

    [project.entry-points.roleplay]
    my_plugin = "my_package.plugin"

pluggy calls the implementations of a hook in reverse registration order, so the built-ins are
registered last and backwards: they run in catalogue order (state's tools before the asset
tools, as before the seam), and third-party contributions come after them.

Process-wide hooks (model providers, demo policies) run when a manager is built; runtime hooks
run in ``RoleplayRuntime.create``. ``rp plugins list`` shows what :func:`plugin_rows` reports.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

import pluggy

from roleplay import hookspecs
from roleplay.hookspecs import PROJECT, hookimpl
from roleplay.names import (
    ASSET_TOOLS_FEATURE,
    CHARACTER_CARD_FEATURE,
    COMPAT_MVU_FEATURE,
    CONVERSATION_SUMMARY_FEATURE,
    CORE_FEATURE,
    LOREBOOK_FEATURE,
    MACRO_FEATURE,
    PERSONA_FEATURE,
    PRESET_FEATURE,
    QUICK_REPLIES_FEATURE,
    REPLY_OPTIONS_FEATURE,
    STATE_FEATURE,
    WRITING_STYLE_FEATURE,
)

ENTRY_POINT_GROUP = "roleplay"
CORE = CORE_FEATURE


class CorePlugin:
    """``rp-core``'s process-wide part: the roleplay policy of the offline ``demo`` model, and the
    tables every home has whatever is enabled (the asset library, the settings), each owned by
    its subsystem (``assets/migrations.py``, ``core/settings_migrations.py``)."""

    @hookimpl
    def register_migrations(self, register: Any) -> None:
        from roleplay.assets.migrations import ASSET_MIGRATIONS, OWNER as ASSETS
        from roleplay.core.settings_migrations import OWNER as SETTINGS, SETTINGS_MIGRATIONS

        register(ASSETS, ASSET_MIGRATIONS)
        register(SETTINGS, SETTINGS_MIGRATIONS)

    @hookimpl
    def register_demo_policies(self, register: Any) -> None:
        from roleplay.core.agent_demo import agent_demo_policy
        from roleplay.core.demo import roleplay_demo_policy

        register("roleplay", roleplay_demo_policy, first=True)
        # Before the Chat policy: an Agent request or a specialist's task is the Agent demo's.
        register("roleplay-agent", agent_demo_policy, first=True)


class AssetToolsPlugin:
    """``rp-asset-tools``: ``rp_asset_read`` and the Agent-only ``rp_asset``. Its code lives in
    ``core.asset_tools`` (it applies profile changes); this is only its registration."""

    @hookimpl
    def register_tools(self, register: Any, runtime: Any) -> None:
        from roleplay.core.asset_tools import asset_tools

        for tool in asset_tools(runtime.service, runtime.assets):
            register(tool)


class MacroPlugin:
    """``rp-macro``: the run's identity names for ``{{char}}``/``{{user}}``. Its code is
    ``core.macros`` (every text of a run is expanded with the names frozen at prepare)."""

    @hookimpl
    def runtime_ready(self, runtime: Any) -> None:
        from roleplay.core.macros import macro_context_from

        runtime.identity_names = macro_context_from


# feature → where its plugin is: "module" (hook functions at module level) or "module:Class".
# Catalogue order is call order. A feature of the catalogue without an entry contributes nothing
# to a runtime: its parts are commands (``cli.COMMAND_FEATURES``: the library, message actions) or
# browser-only (avatars, dialogue highlight, compact access mode), yet it is switched all the same.
BUILTIN_PLUGINS: dict[str, str] = {
    CORE: "roleplay.plugins:CorePlugin",
    STATE_FEATURE: "roleplay.state.feature",
    PRESET_FEATURE: "roleplay.assets.presets.feature",
    CHARACTER_CARD_FEATURE: "roleplay.assets.cards.feature",
    PERSONA_FEATURE: "roleplay.assets.personas.feature",
    LOREBOOK_FEATURE: "roleplay.assets.lorebook.feature",
    WRITING_STYLE_FEATURE: "roleplay.assets.styles.feature",
    MACRO_FEATURE: "roleplay.plugins:MacroPlugin",
    ASSET_TOOLS_FEATURE: "roleplay.plugins:AssetToolsPlugin",
    CONVERSATION_SUMMARY_FEATURE: "roleplay.core.summary_feature",
    REPLY_OPTIONS_FEATURE: "roleplay.reply_options",
    QUICK_REPLIES_FEATURE: "roleplay.quick_replies",
    COMPAT_MVU_FEATURE: "roleplay.compat.mvu.integration",
}


def _load(target: str) -> object:
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)() if attr else module


def _all_features() -> tuple[str, ...]:
    from roleplay.core.settings import FEATURES

    return FEATURES


def load_entry_points(pm: pluggy.PluginManager) -> None:
    """Register the installed plugins. One that fails to import (or implements a hook with
    arguments the spec does not have) is ``plugins.load_failed``, naming it, not a traceback."""
    try:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    except Exception as exc:  # noqa: BLE001 - whatever a third party's import raises
        from roleplay.errors import RpError

        raise RpError(
            "plugins.load_failed",
            f"an installed roleplay plugin could not be loaded ({type(exc).__name__}: {exc}); fix or uninstall it",
            details={"error": type(exc).__name__},
        ) from exc


def plugin_manager(enabled: Iterable[str] | None = None, *, entry_points: bool = True) -> pluggy.PluginManager:
    """A manager with the plugins of ``enabled`` (every built-in feature when None; closed under
    the hard dependencies either way) and, unless ``entry_points`` is False, every installed
    third-party plugin. Runs the process-wide hooks once."""
    from roleplay.core.feature_set import closure

    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    if entry_points:
        load_entry_points(pm)
    on = {CORE, *closure(_all_features() if enabled is None else enabled)}
    for feature, target in reversed(BUILTIN_PLUGINS.items()):
        if feature in on:
            pm.register(_load(target), name=feature)
    register_process_hooks(pm)
    return pm


def third_party_manager() -> pluggy.PluginManager:
    """Only the entry-point plugins: what ``rp`` needs for third-party commands and providers
    without importing any built-in feature (``rp --help`` stays fast)."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    load_entry_points(pm)
    return pm


def register_process_hooks(pm: pluggy.PluginManager) -> None:
    """Model providers and demo policies are process-wide registries of the harness."""
    from roleplay.harness.models.demo import register_demo_policy

    pm.hook.register_model_providers(register=register_model_provider)
    pm.hook.register_demo_policies(register=register_demo_policy)


def register_model_provider(provider: Any) -> None:
    from roleplay.errors import ValidationError
    from roleplay.harness.models.registry import PROVIDERS

    existing = PROVIDERS.get(provider.name)
    if existing is not None and existing != provider:
        raise ValidationError("plugins.provider_duplicate", f"model provider {provider.name!r} is already registered", pointer="/name")
    PROVIDERS[provider.name] = provider


def source_providers(enabled: Iterable[str] | None = None) -> list[Any]:
    """The context source providers of ``enabled`` (every built-in feature when None), in
    registration order: what ``collect_sources`` gets from a runtime built with them."""
    found: list[Any] = []
    plugin_manager(enabled, entry_points=False).hook.register_context_sources(register=found.append)
    return found


def plugin_rows(pm: pluggy.PluginManager) -> list[dict[str, Any]]:
    """One row per loaded plugin: its name, where it comes from and the hooks it implements."""
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    rows = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        dist = dists.get(id(plugin))
        if dist is not None:
            origin: dict[str, Any] = {"builtin": False, "distribution": dist.project_name, "version": dist.version, "entryPoint": name}
        else:
            origin = {"builtin": True, "module": BUILTIN_PLUGINS.get(name, getattr(plugin, "__name__", type(plugin).__module__))}
        rows.append({"name": name, **origin, "hooks": hooks})
    builtin_order = list(BUILTIN_PLUGINS)
    rows.sort(key=lambda r: (not r["builtin"], builtin_order.index(r["name"]) if r["name"] in builtin_order else 0, r["name"]))
    return rows


__all__ = [
    "BUILTIN_PLUGINS",
    "CORE",
    "ENTRY_POINT_GROUP",
    "plugin_manager",
    "plugin_rows",
    "register_process_hooks",
    "source_providers",
    "third_party_manager",
]
