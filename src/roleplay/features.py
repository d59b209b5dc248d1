"""The runtime with the enabled features: build the plugin manager, collect, build.

``build_runtime`` takes an explicit feature set (every built-in feature when None);
``open_runtime`` reads the feature manager's saved set first, which is what the CLI does for
every command that opens a runtime, so a change of the set applies from the next command (the
spec: from the next new or reopened conversation). Interfaces (CLI, web) build their runtime
through here; core never imports a feature.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from roleplay.core.feature_set import FeatureManager, closure
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.settings import FEATURES
from roleplay.harness.store.base import EventStore
from roleplay.plugins import plugin_manager


def build_runtime(store: EventStore, *, enabled: Iterable[str] | None = None, entry_points: bool = True, **kw: Any) -> RoleplayRuntime:
    """A runtime with the plugins of ``enabled`` (closed under the hard dependencies) and the
    installed third-party plugins (unless ``entry_points`` is False)."""
    features = closure(FEATURES if enabled is None else enabled)
    pm = plugin_manager(features, entry_points=entry_points)
    return RoleplayRuntime.create(store, plugins=pm, features=features, **kw)


async def open_runtime(store: EventStore, **kw: Any) -> RoleplayRuntime:
    """A runtime with the saved enabled set (``rp features``)."""
    return build_runtime(store, enabled=await FeatureManager(store).enabled(), **kw)


__all__ = ["build_runtime", "open_runtime"]
