"""The default feature set, wired onto a runtime.

Core knows no community format; features plug into its extension points. This is where the
built-in ones are switched on (the spec's feature manager will own this set; until then every
built-in feature is enabled). Interfaces (CLI, web) build their runtime through here.
"""

from __future__ import annotations

from typing import Any

from roleplay.compat.mvu import integration as mvu
from roleplay.core.runtime import RoleplayRuntime
from roleplay.harness.store.base import EventStore
from roleplay.quick_replies import register as register_quick_replies


def build_runtime(store: EventStore, **kw: Any) -> RoleplayRuntime:
    rt = RoleplayRuntime.create(store, **kw)
    mvu.register(rt)
    register_quick_replies(rt)
    return rt
