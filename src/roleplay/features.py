"""The runtime with the enabled features: build the plugin manager, collect, build.

``build_runtime`` takes an explicit feature set (every built-in feature when None);
``open_runtime`` reads the feature manager's saved set first and applies the plugins' own
migrations, which is what the CLI does for every command that opens a runtime, so a change of the
set applies from the next command (the spec: from the next new or reopened conversation).
Interfaces (CLI, web) build their runtime through here; core never imports a feature.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pluggy

from roleplay.assets.store import AssetStore
from roleplay.core.feature_set import FeatureManager, closure
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.settings import FEATURES
from roleplay.errors import ValidationError
from roleplay.harness.store.base import EventStore
from roleplay.plugins import plugin_manager


def build_runtime(store: EventStore, *, enabled: Iterable[str] | None = None, entry_points: bool = True, **kw: Any) -> RoleplayRuntime:
    """A runtime with the plugins of ``enabled`` (closed under the hard dependencies) and the
    installed third-party plugins (unless ``entry_points`` is False). Their migrations must have
    been applied (``open_runtime`` does)."""
    features = closure(FEATURES if enabled is None else enabled)
    return RoleplayRuntime.create(store, plugins=plugin_manager(features, entry_points=entry_points), features=features, **kw)


def feature_migrations(pm: pluggy.PluginManager) -> dict[str, list[Any]]:
    """feature → its migrations, from the ``register_migrations`` hook of the loaded plugins."""
    plan: dict[str, list[Any]] = {}

    def register(feature: str, migrations: Sequence[Any]) -> None:
        if feature in plan:
            raise ValidationError("plugins.migration_duplicate", f"two plugins register migrations for {feature!r}", pointer="/feature")
        plan[feature] = list(migrations)

    pm.hook.register_migrations(register=register)
    return plan


async def migrate_features(store: EventStore, *, entry_points: bool = True) -> list[tuple[str, int]]:
    """Every pending migration of the tables outside the event log (``rp db migrate``): the
    subsystems ``rp-core`` registers (assets, settings) first, then the enabled features' own.
    Returns the (owner, number) pairs applied now."""
    applied = await migrate_plugins(store, plugin_manager((), entry_points=False))
    features = closure(await FeatureManager(store).enabled())
    return applied + await migrate_plugins(store, plugin_manager(features, entry_points=entry_points))


async def migrate_plugins(store: EventStore, pm: pluggy.PluginManager) -> list[tuple[str, int]]:
    """The pending migrations ``pm``'s plugins register (``assets/schema.py`` applies them)."""
    return await AssetStore(store).migrate(feature_migrations(pm))


async def open_runtime(store: EventStore, *, entry_points: bool = True, **kw: Any) -> RoleplayRuntime:
    """A runtime with the saved enabled set (``rp features``), its plugins' tables migrated."""
    features = closure(await FeatureManager(store).enabled())
    pm = plugin_manager(features, entry_points=entry_points)
    await migrate_plugins(store, pm)
    return RoleplayRuntime.create(store, plugins=pm, features=features, **kw)


__all__ = ["build_runtime", "feature_migrations", "migrate_features", "migrate_plugins", "open_runtime"]
