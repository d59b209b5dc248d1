"""The roleplay runtime: one object wiring the harness session service to the roleplay features.

It owns the registries a run needs (commands, projections, tools, effect capabilities,
extensions, artifact generators, context source providers, materializers, text steps) and the
asset store. CLI commands, the web app and tests build one per process (per store) and pass it to
``core.run`` and ``core.session_create``.

Core registers only its own parts (the Writer and commit tools, the profile command, the
``rp/session`` and ``rp/replies`` projections, the player/history/custom-prompt sources and the
macro-expanded opening). Every feature contributes through the plugin hooks of
``roleplay.hookspecs``: :meth:`RoleplayRuntime.create` calls them once on the plugin manager it is
given (``roleplay.plugins`` builds one from the enabled features). Core imports no feature.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Callable

from roleplay.assets.store import AssetStore
from roleplay.clock import IdGenerator
from roleplay.guides import GuideRegistry
from roleplay.harness.models.routes import Route, build_model
from roleplay.harness.models.types import ChatModel
from roleplay.harness.sessions import SessionService
from roleplay.harness.store.base import EventStore
from roleplay.harness.tools import Tool, ToolRegistry
from roleplay.names import STATE_PROJECTION
from roleplay.state.events import state_document

from .artifacts import ArtifactRegistry
from .commit import commit_tool
from .effects import EffectRegistry, ExtensionRegistry
from .macros import MacroContext, expand_opening
from .profile import register_profile_commands, session_projection
from .prompt_history import HistoryTransformer
from .replies import replies_projection
from .sources import AssetViewCache, LoreCache, SourceProvider, macro_context_for
from .writer import write_turn_tool

ROLEPLAY_PRESET = "roleplay"
CORE_OPENING_ORDER = 500  # the macro-expanded opening; feature materializers order around it

LoreTemplate = Callable[[dict[str, Any] | None], Callable[[str, Callable[[str], str | None]], str] | None]


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
    # What the plugins contributed (``roleplay.hookspecs``): session materializers by order, lorebook
    # template steps built per run from the story value, card text transformers, context sources.
    materializers: list[Any] = field(default_factory=list)
    lore_templates: list[LoreTemplate] = field(default_factory=list)
    text_transformers: list[Callable[[str], str]] = field(default_factory=list)
    history_transformers: list[HistoryTransformer] = field(default_factory=list)  # prompt-only conversation rewrites
    source_providers: list[SourceProvider] = field(default_factory=list)
    # The enabled features this runtime was built with (the feature manager's closed set).
    features: frozenset[str] = frozenset()
    # ``rp-macro``: the run's identity names from the card's and persona's data. None while the
    # feature is off: every ``{{char}}``/``{{user}}`` then stays as written.
    identity_names: Callable[[dict[str, Any] | None, dict[str, Any] | None], MacroContext] | None = None
    # ``/name`` → (handler, what /help says): play commands features add (quick replies' /qr).
    play_commands: dict[str, tuple[Any, str]] = field(default_factory=dict)
    # The guide skills the features contributed (``register_guides``): what Agent mode's
    # ``rp_guide`` offers.
    guides: GuideRegistry = field(default_factory=GuideRegistry)
    # Choices features offer after a played turn (reply options): ``async (rt, RunResult) ->
    # list[str]``. ``rp play`` numbers them and a typed number sends that one; ``rp say`` lists them.
    turn_choices: list[Any] = field(default_factory=list)
    # The same choices for a reply already on the conversation: ``async (rt, session_id, turn_id)
    # -> list[str]``. ``rp play`` shows them again when resuming, an undo, delete, swipe or branch
    # leaves that reply the last one.
    reply_choices: list[Any] = field(default_factory=list)
    lore_cache: LoreCache = field(default_factory=LoreCache)
    asset_cache: AssetViewCache = field(default_factory=AssetViewCache)

    _materializer_order: list[tuple[int, int, Any]] = field(default_factory=list, repr=False)

    @classmethod
    def create(
        cls,
        store: EventStore,
        *,
        ids: IdGenerator | None = None,
        writer_default: Route | None = None,
        extra_tools: list[Tool] | None = None,
        plugins: Any = None,
        features: Iterable[str] = (),
    ) -> "RoleplayRuntime":
        """A runtime with core's own parts plus what ``plugins`` (a pluggy ``PluginManager`` for
        ``roleplay.hookspecs``) contribute; without plugins it is core alone (no state, no asset
        sources). ``roleplay.features.build_runtime`` passes the enabled features' plugins."""
        service = SessionService(store, ids=ids)
        register_profile_commands(service.commands)
        for projection in (session_projection, replies_projection):
            if projection.name not in service.projections.names():
                service.projections.register(projection)
        effects = EffectRegistry()
        extensions = ExtensionRegistry()
        artifacts = ArtifactRegistry()
        rt = cls(
            store,
            service,
            AssetStore(store),
            ToolRegistry(),
            effects,
            extensions,
            artifacts,
            service.ids,
            writer_default,
            features=frozenset(features),
        )
        rt.add_materializer(expand_opening, order=CORE_OPENING_ORDER)
        hook = plugins.hook if plugins is not None else None
        if hook is not None:
            rt._apply_capabilities(hook)
        # The commit tool's declared schema is derived when it is made: after every effect and
        # extension capability is registered, so the parent is offered the whole union.
        rt.tools.register(write_turn_tool(service))
        rt.tools.register(commit_tool(effects, extensions, artifacts))
        if hook is not None:
            rt._apply_contributions(hook)
        for tool in extra_tools or []:
            rt.tools.register(tool)
        return rt

    def _apply_capabilities(self, hook: Any) -> None:
        """What the commit and the session commands validate against, before any tool exists."""
        service = self.service

        def projection(p: Any) -> None:
            if p.name not in service.projections.names():
                service.projections.register(p)

        hook.register_session_commands(register=service.commands.register)
        hook.register_projections(register=projection)
        hook.register_effect_capabilities(register=self.effects.register)
        hook.register_extension_capabilities(register=self.extensions.register)

    def _apply_contributions(self, hook: Any) -> None:
        def play_command(name: str, handler: Any, help: str) -> None:
            self.play_commands[name] = (handler, help)

        hook.register_tools(register=self.tools.register, runtime=self)
        hook.register_artifact_generators(register=self.artifacts.register, runtime=self)
        hook.register_materializers(register=self.add_materializer)
        hook.register_lore_templates(register=self.lore_templates.append)
        hook.register_text_transformers(register=self.text_transformers.append)
        hook.register_history_transformers(register=self.history_transformers.append)
        hook.register_context_sources(register=self.source_providers.append)
        hook.register_play_commands(register=play_command)
        hook.register_guides(register=self.guides.register)
        hook.runtime_ready(runtime=self)

    def add_materializer(self, step: Any, order: int = CORE_OPENING_ORDER) -> None:
        """Steps run by ascending ``order``, registration order within one order."""
        if any(s is step for _, _, s in self._materializer_order):
            return
        self._materializer_order.append((order, len(self._materializer_order), step))
        self.materializers[:] = [s for _, _, s in sorted(self._materializer_order, key=lambda item: (item[0], item[1]))]

    @property
    def lore_template(self) -> LoreTemplate | None:
        """The registered lorebook template steps as one per-run factory (None without any)."""
        factories = list(self.lore_templates)
        if len(factories) <= 1:
            return factories[0] if factories else None

        def per_run(state: dict[str, Any] | None) -> Callable[[str, Callable[[str], str | None]], str] | None:
            renders = [r for r in (f(state) for f in factories) if r is not None]
            if not renders:
                return None

            def render(text: str, lookup: Callable[[str], str | None]) -> str:
                for step in renders:
                    text = step(text, lookup)
                return text

            return render

        return per_run

    @property
    def card_text_transform(self) -> Callable[[str], str] | None:
        """The registered card text transformers as one function (None without any)."""
        steps = list(self.text_transformers)
        if len(steps) <= 1:
            return steps[0] if steps else None

        def transform(text: str) -> str:
            for step in steps:
                text = step(text)
            return text

        return transform

    def macros_for(self, card: dict[str, Any] | None, persona: dict[str, Any] | None) -> MacroContext:
        """The identity names from a card's and a persona's data (``rp-macro``), else none."""
        return self.identity_names(card, persona) if self.identity_names is not None else MacroContext()

    async def macro_context(self, profile: Any, reader: Any) -> MacroContext:
        """The run's identity names from the live card and persona the profile binds."""
        return await macro_context_for(profile, reader) if self.identity_names is not None else MacroContext()

    async def story_state(self, session_id: str, *, at: int | None = None) -> dict[str, Any]:
        """The session's ``rp/state`` view document; ``{}`` when no enabled feature folds it
        (``rp-state`` off: the log keeps its events, nothing reads them). ``at``: the head the
        caller just read (``SessionService.projection_at``)."""
        if STATE_PROJECTION not in self.service.projections.names():
            return {}
        if at is not None:
            return state_document((await self.service.projection_at(session_id, STATE_PROJECTION, at)).state)
        return state_document((await self.service.projection(session_id, STATE_PROJECTION)).state)

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
