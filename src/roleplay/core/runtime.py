"""The roleplay runtime: one object wiring the harness session service to the roleplay features.

It owns the registries a run needs (commands, projections, tools, effect capabilities,
extensions, artifact generators) and the asset store. CLI commands, the web app and tests build
one per process (per store) and pass it to ``core.run`` and ``core.session_create``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from roleplay.assets.store import AssetStore
from roleplay.core.asset_tools import asset_tools
from roleplay.clock import IdGenerator
from roleplay.harness.models.routes import Route, build_model
from roleplay.harness.models.types import ChatModel
from roleplay.harness.sessions import SessionService
from roleplay.harness.store.base import EventStore
from roleplay.harness.tools import Tool, ToolRegistry
from roleplay.state.tools import state_tools

from .artifacts import ArtifactRegistry
from .commit import commit_tool
from .demo import register as register_demo_policy
from .effects import EffectRegistry, ExtensionRegistry, default_effect_registry
from .profile import register_profile_commands, session_projection
from .replies import replies_projection
from .sources import AssetViewCache, LoreCache
from .writer import write_turn_tool

ROLEPLAY_PRESET = "roleplay"


@dataclass
class RoleplayRuntime:
    store: EventStore
    service: SessionService
    assets: AssetStore
    tools: ToolRegistry
    effects: EffectRegistry
    extensions: ExtensionRegistry
    artifacts: ArtifactRegistry
    ids: IdGenerator
    # RP_WRITER_MODEL: a per-process override of the Writer's global default (the stored
    # ``writer.defaultRoute`` setting, read at every prepare); None defers to that setting.
    writer_default: Route | None = None
    models: dict[str, ChatModel] = field(default_factory=dict)
    # Extension points for features (the MVU adapter): ordered session materializers, a lorebook
    # template renderer built per run from the story value, and a transform of card text.
    materializers: list[Any] = field(default_factory=list)
    lore_template: Callable[[dict[str, Any] | None], Callable[[str, Callable[[str], str | None]], str] | None] | None = None
    card_text_transform: Callable[[str], str] | None = None
    # ``/name`` → (handler, what /help says): play commands features add (quick replies' /qr).
    play_commands: dict[str, tuple[Any, str]] = field(default_factory=dict)
    lore_cache: LoreCache = field(default_factory=LoreCache)
    asset_cache: AssetViewCache = field(default_factory=AssetViewCache)

    @classmethod
    def create(
        cls,
        store: EventStore,
        *,
        ids: IdGenerator | None = None,
        writer_default: Route | None = None,
        extra_tools: list[Tool] | None = None,
    ) -> "RoleplayRuntime":
        service = SessionService(store, ids=ids)
        register_profile_commands(service.commands)
        for projection in (session_projection, replies_projection):
            if projection.name not in service.projections.names():
                service.projections.register(projection)
        effects = default_effect_registry()
        extensions = ExtensionRegistry()
        artifacts = ArtifactRegistry()
        assets = AssetStore(store)
        tools = ToolRegistry(
            [
                write_turn_tool(service),
                commit_tool(effects, extensions, artifacts),
                *state_tools(service),  # also registers rp-state-configure and the state projections
                *asset_tools(service, assets),  # rp_asset_read, and the agent-only rp_asset
                *(extra_tools or []),
            ]
        )
        register_demo_policy()
        from .session_create import DEFAULT_MATERIALIZERS

        return cls(
            store,
            service,
            assets,
            tools,
            effects,
            extensions,
            artifacts,
            service.ids,
            writer_default,
            materializers=list(DEFAULT_MATERIALIZERS),
        )

    def model_for(self, route: Route) -> ChatModel:
        """One model client per route and runtime, so HTTP connections are reused across turns."""
        key = route.spec + (f"@{route.base_url}" if route.base_url else "")
        if key not in self.models:
            self.models[key] = build_model(route)
        return self.models[key]

    async def aclose(self) -> None:
        for model in self.models.values():
            closer: Any = getattr(model, "aclose", None)
            if closer is not None:
                await closer()
        self.models.clear()
