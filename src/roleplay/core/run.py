"""``RpRun``: one roleplay turn in Chat mode, from prepare to commit.

Prepare (before the turn starts):
    read the session's projections (profile, state, surface) and the live assets, expand the
    identity macros on the new input, collect the context sources, lay them out on the
    session's slots and *freeze* the build. The run's Writer prompt, parent fragments, commit
    material and context epoch never change after this.

Run (on the harness loop, with ``RpRun`` as its hooks):
    1. ``turn/start``, the user's ``user/message``, then the run-context ``user/message`` (the
       compact ``<roleplay_request>`` with the ready marker, bindings, card/persona context and
       commit material; ``source.rpRunContext`` marks it so history projections skip it).
    2. The parent calls ``rp_write_turn {action: "write"}``: a fresh Writer child session writes
       the reply from the frozen prompt (``core.writer``).
    3. From then on only ``rp_commit_turn`` may be called (per-step tool mask). The response
       that calls it becomes the reply: the runtime replaces its text with the Writer's draft
       (already streamed live as ``assistant/chunk`` while the Writer wrote it, see
       ``core.writer``) and drops the parent's own text and reasoning.
    4. A successful commit ends the turn. Failures leave room within the step limit (5) to
       retry the Writer or repair the commit with ``retry.patches``.

**One writer at a time.** ``play_turn`` takes the session's run lease *before* it prepares, and
message actions and profile changes take the same lease, so a turn never runs on a snapshot that
another turn or action has since overtaken: a second start gets ``run.busy``. The commit re-reads
the live story state and surface as a last guard and fails with ``commit.stale_state`` /
``commit.stale_context`` (ending the turn) rather than land a commit the ``rp/state`` fold would
skip.

A parent that answers without tools before the Writer (discussion, clarification) ends the turn
with that plain reply, streamed the same way; nothing is committed, and the result carries
``run.not_committed`` so the caller can flag it. After the Writer, a plain reply becomes a commit
of the Writer's draft without effects (``core.chat_draft``).

**A route that cannot call tools** (``?tools=off``, or a provider refusal of tools) runs the same
turn with the runtime in the parent's place (``core.toolfree``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from roleplay.assets.lorebook import TimedState
from roleplay.canonical import sha256_hex
from roleplay.assets.validation import surrogate_problems
from roleplay.errors import Problem, RpError, ValidationError
from roleplay.harness.history import HistoryFit
from roleplay.harness.leases import run_lease
from roleplay.harness.loop import AgentLoop, AgentSpec, LoopHooks, StepView, TurnResult
from roleplay.harness.models.routes import Route, route_context_window
from roleplay.harness.models.types import SAMPLING_PARAMS, ChatModel, ModelResponse
from roleplay.harness.projections import Loaded
from roleplay.harness.sessions import json_copy
from roleplay.harness.prompts import (
    ORDER_IDENTITY,
    PromptAssembly,
    PromptContext,
    PromptSection,
)
from roleplay.harness.surface import SURFACE, SurfaceKey, surface_key
from roleplay.harness.tools import ToolResultData
from roleplay.names import ASSET_READ_TOOL, OPENING_SOURCE, RUN_CONTEXT_SOURCE, STATE_READ_TOOL
from roleplay.harness.names import ASSISTANT_CHUNK, USER_MESSAGE

from .chat_draft import commit_for_plain_reply
from .agent_mode import AgentPolicy
from .commit import CommitSession
from .context_build import effective_layout, freeze, writer_budget, writer_max_tokens
from .conversation import history_entries, history_story, story_nodes
from .conversation_window import history_text
from .prompt_history import prompt_history
from .macros import MacroContext, expand
from .profile import SESSION_PROJECTION, SessionProfile, profile_of
from .prompts import (
    COMMIT_TURN_TOOL,
    WRITE_TURN_TOOL,
    parent_sections,
    request_for_build,
    writer_sections,
)
from .replies import replies_projection
from .run_context import RpRunDeps
from .runtime import RoleplayRuntime
from .session_route import story_route
from .settings import SettingsSnapshot, SettingsStore, context_window_for, read_settings
from .subagent_catalog import SUBAGENT_MANAGER, SubagentItem, load_catalog
from .summary import SummaryWatch, land_pending_at
from .toolfree import parent_model, uncommitted_note
from .sources import (
    LoreMessages,
    SourceInputs,
    SourceSet,
    StoreAssetReader,
    bound_assets,
    collect_sources,
)
from .turn_eligibility import require_playable
from .types import CommitContext, Diagnostic, ExecutionMode, FrozenBuild, Slot, WriterArtifact
from .writer import WriterSlot

CHAT_STEP_LIMIT = 5
RUN_CONTEXT = RUN_CONTEXT_SOURCE
OPENING = OPENING_SOURCE
READ_TOOLS = (ASSET_READ_TOOL, STATE_READ_TOOL)
CHUNK = 48  # characters per streamed chunk of a plain parent reply (the Writer streams its own)
STALE_CODES = frozenset({"commit.stale_state", "commit.stale_context"})

IDENTITY = PromptSection(
    "harness:identity",
    "You are the narrative engine of a long-form interactive story. You work with the user, whose "
    "part in the story the Player section states, and you keep the story consistent across many turns.",
    ORDER_IDENTITY,
)


@dataclass
class PreparedRun:
    run_id: str
    turn_id: str
    session_id: str
    mode: str
    profile: SessionProfile
    build: FrozenBuild
    sources: SourceSet
    macros: MacroContext
    input_text: str
    images: list[dict[str, Any]]
    state: dict[str, Any] | None
    run_context: str
    writer_route: Route
    writer_system: str
    parent_system_sections: list[PromptSection]
    lore_timed: dict[str, Any]
    # What the commit re-checks against the live log: the state document's digest and revision,
    # and the (id, seq) of every surface node the Writer prompt was built from.
    state_digest: str
    state_revision: int
    surface_key: SurfaceKey
    # The parent route's context window (settings override, else the route's): the parent's
    # earlier turns give way to it. None: unknown, the whole story is sent.
    parent_window: int | None = None
    surface_seq: int = 0  # the surface's seq at prepare (surface_key's nodes are its first ones)
    # Agent mode (core.agent_mode): the enabled sub-agent catalog frozen for the run, the
    # conversation's route (a catalog item without its own route follows it), and what a
    # mid-run context refresh rebuilds from (the same inputs, history and budget as prepare).
    catalog: tuple[SubagentItem, ...] = ()
    parent_route: Route | None = None
    inputs: SourceInputs | None = None
    history: Sequence[Any] = ()
    budget: Any = None
    lore_timed_before: dict[str, Any] | None = None
    workspace_root: str | None = None  # Agent mode's sandboxed workspace tools: off while None
    # The global settings this run was prepared with (frozen for the run, like its catalog): the
    # run's artifacts (reply options' guidance) read them here instead of the table again.
    settings: SettingsSnapshot | None = None


@dataclass
class RunResult:
    session_id: str
    turn: TurnResult
    prepared: PreparedRun
    writer: WriterArtifact | None
    committed: bool
    reply: str
    diagnostics: list[dict[str, Any]] = field(default_factory=list)


async def prepare_run(
    rt: RoleplayRuntime,
    session_id: str,
    text: str,
    *,
    parent_route: Route,
    images: list[dict[str, Any]] | None = None,
    run_id: str | None = None,
    at: int | None = None,
    settings: SettingsSnapshot | None = None,
) -> PreparedRun:
    """Read everything this turn needs and freeze the context build (no event is written).
    ``at``: the session's head, when the caller holds the run lease and has just read it.
    ``settings``: the global settings as the caller has just read them for this run (else read
    here)."""
    # A lone surrogate (a broken \\uD800 escape, undecodable bytes on the command line) is not a
    # character: it could be neither hashed nor stored, so it is refused here, before any read.
    lone = surrogate_problems("run", text)
    if lone:
        raise ValidationError("run.lone_surrogate", lone[0].message, pointer="/text", details=lone[0].details)
    surface = await (rt.service.projection(session_id, SURFACE) if at is None else rt.service.projection_at(session_id, SURFACE, at))
    nodes, head_seq = surface.state["nodes"], surface.upto_seq
    # The other projections are read as of that same head (``projection_at``: no read of newer
    # events when the cache already folded exactly that far, a round trip each on PostgreSQL): the
    # build is one consistent view of the log, as if every read came right after the surface's.
    profile = profile_of((await rt.service.projection_at(session_id, SESSION_PROJECTION, head_seq)).state)
    state_view = await rt.story_state(session_id, at=head_seq)  # {} with rp-state off: prepare works without State
    # Cached projection states are shared: the run keeps its own copy of the state it commits against.
    state = json_copy(state_view) if state_view.get("namespaces") else None
    reader = StoreAssetReader(rt.assets, cache=rt.asset_cache)
    await reader.prefetch(bound_assets(profile))  # one read for all, not one per asset
    macros = await rt.macro_context(profile, reader)  # none while rp-macro is off
    input_text = expand(text, macros)
    if not input_text.strip() and not images:
        raise ValidationError("run.empty_input", "a turn needs some text or an image", pointer="/text")
    writing = (await rt.service.projection_at(session_id, replies_projection, head_seq)).state["writing"]
    # From the session's fold, which a turn feeds only the nodes added since the last (issue 12).
    entries, summary_source = history_entries(rt.service.folds, session_id, surface, writing)
    # The conversation as the prompt reads it (card regex scripts…); the log keeps it verbatim.
    history = await prompt_history(rt.history_transformers, entries, input_text, profile, reader)
    entries, prompt_input = history.entries, history.current_input
    timed = latest_lore_timed(nodes)
    inputs = SourceInputs(
        # Derived from the log position, so `rp prompt` previews exactly what the next turn
        # builds (lore probability rolls are seeded by it) and a replay rolls the same dice.
        run_id=run_id or "run_" + sha256_hex(f"{session_id}:{head_seq}")[:20],
        profile=profile,
        macros=macros,
        state=state,
        conversation_text=history_text(entries),  # renders only the messages new since the last turn
        summary_text=summary_source,
        current_input=prompt_input if prompt_input.strip() else "(The user sent an image without text.)",
        lore_messages=LoreMessages(entries, prompt_input),
        lore_chat_length=len(entries) + 1,
        lore_timed_state=TimedState.from_dict(timed) if timed else TimedState(),
        lore_cache=rt.lore_cache,
        lore_template=rt.lore_template(state) if rt.lore_template is not None else None,
        card_text_transform=rt.card_text_transform,
    )
    sources = await collect_sources(inputs, reader, rt.source_providers)
    saved = _saved_slots(profile)
    slots = effective_layout(saved, sources.sources, sources.preset_positions)
    mode: ExecutionMode = "agent" if profile.execution_mode == "agent" else "chat"
    # Global settings are read at every prepare and frozen for the run (spec: without a session
    # override every prepareRun reads the latest global default; a change applies next turn).
    settings = settings or await read_settings(rt.store)
    # Agent mode freezes the enabled catalog now: a catalog change applies from the next run.
    # Without the sub-agent manager (rp features) the Agent has no specialists.
    with_catalog = mode == "agent" and SUBAGENT_MANAGER in rt.features
    catalog = (await load_catalog(SettingsStore(rt.store), settings.language())).enabled() if with_catalog else ()
    writer_route = resolve_writer_route(rt, profile, parent_route, settings.writer_default_route())
    identity = identity_section(settings.identity())
    writer_prompt = PromptAssembly([identity, *writer_sections()]).assemble(PromptContext(session_id, frozenset()))
    # The history gives way to the Writer route's window (issue 12): whole messages, newest first.
    window = context_window_for(settings.context_windows(), writer_route)
    budget = writer_budget(
        writer_route,
        writer_prompt.text,
        len(images or []),
        window=window,
        context_size=sources.sampling.get("context_size"),
        max_tokens=sources.sampling.get("max_tokens"),
    )
    diagnostics = [*history.diagnostics, *sources.diagnostics]
    build = freeze(slots, sources.sources, sources.bindings, diagnostics, history=entries, budget=budget)
    return PreparedRun(
        run_id=inputs.run_id,
        turn_id=rt.ids("turn_"),
        session_id=session_id,
        mode=mode,
        profile=profile,
        build=build,
        sources=sources,
        macros=macros,
        input_text=input_text,
        images=list(images or []),
        state=state,
        run_context=request_for_build(mode, build, [i.contract() for i in catalog] if mode == "agent" else None),
        writer_route=writer_route,
        writer_system=writer_prompt.text,
        parent_system_sections=[identity, *parent_sections(mode)],
        lore_timed=sources.lore_timed_state.to_dict(),
        state_digest=sha256_hex(state_view),
        state_revision=int(state_view.get("revision", 0)),
        surface_key=surface_key(nodes),
        surface_seq=head_seq,
        parent_window=context_window_for(settings.context_windows(), parent_route) or route_context_window(parent_route),
        catalog=catalog,
        parent_route=parent_route,
        inputs=inputs,
        history=entries,
        budget=budget,
        lore_timed_before=timed,
        workspace_root=settings.value("agent.workspaceRoot") if mode == "agent" else None,
        settings=settings,
    )


def identity_section(override: str | None) -> PromptSection:
    """``harness:identity``: the user's ``prompt.identity`` setting, else the harness's own. The
    only section the user may edit (spec); the Writer and the parent share it."""
    return IDENTITY if override is None else PromptSection(IDENTITY.id, override, ORDER_IDENTITY)


def resolve_writer_route(rt: RoleplayRuntime, profile: SessionProfile, parent: Route, global_default: Route | None = None) -> Route:
    """The session's override, else ``rt.writer_default`` (``RP_WRITER_MODEL``: a per-process
    override of the stored setting, for one-off runs and scripts), else the ``writer.defaultRoute``
    setting, else follow the conversation's route. Frozen at prepare: a change applies from the
    next turn."""
    override = profile.runtime.writer_route
    if override is None:
        if rt.writer_default is not None:
            return rt.writer_default
        if global_default is not None:
            # The parent's explicit output limit is inherited (spec: 父级显式输出上限仍被继承).
            return replace(global_default, max_output_tokens=parent.max_output_tokens)
        return parent
    if override.follow_conversation:
        return parent
    assert override.provider is not None and override.model is not None  # the model's validator
    # The parent's explicit output limit is inherited (spec: 父级显式输出上限仍被继承).
    return Route(override.provider, override.model, override.reasoning_effort, parent.max_output_tokens)


class RpRun(LoopHooks):
    """The Chat-mode hooks on the agent loop for one prepared run."""

    publish_deltas = False

    def __init__(self, rt: RoleplayRuntime, prepared: PreparedRun) -> None:
        self.rt = rt
        self.p = prepared
        # The callbacks below hold the commit session, the runtime and the prepared run, never
        # this object: a run referenced back by its own parts is a reference cycle, and all it
        # holds (the frozen build, every section and source) would wait for a full collection
        # instead of going when the turn does (issue 16: that garbage made a loaded server's
        # full collections, which hold the event loop, several times longer).
        self.commit = CommitSession(
            CommitContext(
                run_id=prepared.run_id,
                turn_id=prepared.turn_id,
                session_id=prepared.session_id,
                mode="agent" if prepared.mode == "agent" else "chat",
                epoch=prepared.build.epoch,
                writer=None,
                state=prepared.state or {"protocolVersion": 2, "revision": 0, "namespaces": {}},
                live_revisions=dict(prepared.sources.live_revisions),
            ),
            secret=rt.ids("sec_").encode("utf-8"),
            live_revisions_check=_changed_revisions(rt),
            live_context_check=_stale_context(rt, prepared),
        )
        self.writer = WriterSlot(
            build=prepared.build,
            system_prompt=prepared.writer_system,
            model=rt.model_for(prepared.writer_route),
            route=prepared.writer_route.to_dict(),
            images=prepared.images,
            on_artifact=self.commit.set_writer,
            transform_text=lambda t: expand(t, prepared.macros),
            macros=prepared.macros,
            sampling={k: v for k, v in prepared.sources.sampling.items() if k in SAMPLING_PARAMS},
            max_tokens=writer_max_tokens(prepared.writer_route, prepared.sources.sampling.get("max_tokens")),
        )
        self.diagnostics: list[Diagnostic] = []  # the run's own notes (e.g. a commit it made for the parent)
        # Notes on the next model response, carried into the commit it makes (a tool-free turn's
        # runtime-made commit says so); taken by on_response.
        self.step_notes: list[Diagnostic] = []
        self.visible = [WRITE_TURN_TOOL, COMMIT_TURN_TOOL, *(t for t in READ_TOOLS if t in rt.tools)]
        if prepared.state is None and STATE_READ_TOOL in self.visible:
            self.visible.remove(STATE_READ_TOOL)
        # Agent mode's own tools, body and refresh (core.agent_mode); None in Chat.
        self.agent = AgentPolicy(self) if prepared.mode == "agent" else None

    # -- loop hooks ------------------------------------------------------------------------------
    def input_events(self, turn_id: str) -> list[Any]:
        from roleplay.harness.events import EventDraft

        source = {RUN_CONTEXT: {"v": 1, "runId": self.p.run_id, "epoch": self.p.build.epoch, "loreTimed": self.p.lore_timed}}
        return [
            EventDraft(
                USER_MESSAGE,
                {
                    "messageId": self.rt.ids("msg_"),
                    "content": [{"type": "text", "text": self.p.run_context}],
                    "turnId": turn_id,
                    "source": source,
                },
            )
        ]

    async def on_response(self, session_id: str, turn_id: str, step_id: str, response: ModelResponse) -> ModelResponse:
        if self.agent is not None:
            return await self.agent.on_response(session_id, turn_id, step_id, response)
        names = [c.name for c in response.tool_calls]
        artifact = self.writer.artifact
        if not names and artifact is not None and self.commit.outcome is None:
            # Chat: after the Writer, its draft is the only body; a plain reply becomes its commit.
            call, diagnostic = commit_for_plain_reply(self.rt.ids("call_"), artifact, response.text)
            self.diagnostics.append(diagnostic)
            self.commit.note_response(step_id, [call.name], "", [diagnostic])
            response, names = replace(response, tool_calls=[call]), [call.name]
        else:
            notes, self.step_notes = self.step_notes, []
            self.commit.note_response(step_id, names, response.text, notes)
        if COMMIT_TURN_TOOL in names and artifact is not None:
            # Every commit attempt's message carries the body (whichever commit succeeds owns the
            # reply); subscribers already have it, streamed live by the Writer tool.
            # The reply body is the Writer's draft; the parent's own text and reasoning are dropped
            # (reasoning kept as an empty string: DeepSeek wants the field on tool-call turns).
            return replace(response, text=artifact.text, reasoning="" if response.reasoning is not None else None)
        if not names and response.text:
            text = expand(response.text, self.p.macros)
            await self._stream(session_id, turn_id, text)
            return replace(response, text=text)
        return response

    async def history_view(self, session_id: str, surface: Loaded, split: int) -> Sequence[dict[str, Any]]:
        """``history`` of the surface's first ``split`` nodes from the session's story fold, which
        each turn feeds only the nodes added since the last (issue 12)."""
        # The writing replies as of the same seq (no read when the cache is there).
        writing = (await self.rt.service.projection_at(session_id, replies_projection, surface.upto_seq)).state["writing"]
        return history_story(self.rt.service.folds, session_id, surface, writing, split)

    async def history(self, session_id: str, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Earlier turns reach the parent as the story: (input, final reply) pairs, without their
        run-context blocks, Writer results, commit calls or retries (issue 12)."""
        writing = (await self.rt.service.projection(session_id, replies_projection)).state["writing"]
        return story_nodes(nodes, writing_ids=writing, opening_id=opening_message_id(nodes))

    def finished(self, results: list[ToolResultData]) -> bool:
        for r in results:
            error = r.error or {}
            if not r.ok and r.name == COMMIT_TURN_TOOL and error.get("code") in STALE_CODES:
                # No later step can commit on a moved log: end the turn as an error now.
                message = error.get("message", "the story moved during this turn")
                raise RpError(error["code"], message, details=error.get("details") or {})
        return any(r.ok and r.name == COMMIT_TURN_TOOL for r in results)

    def step_mask(self, view: StepView) -> list[str]:
        if self.agent is not None:
            return self.agent.step_mask(view)
        if self.writer.artifact is None:
            return [n for n in self.visible if n != COMMIT_TURN_TOOL]
        return [COMMIT_TURN_TOOL]

    # -- internals -------------------------------------------------------------------------------
    async def _stream(self, session_id: str, turn_id: str, text: str) -> None:
        for i in range(0, len(text), CHUNK):
            await self.rt.store.publish_chunk(session_id, {"type": ASSISTANT_CHUNK, "turnId": turn_id, "text": text[i : i + CHUNK]})

    def spec(self) -> AgentSpec:
        if self.agent is not None:
            return self.agent.spec()
        return AgentSpec(
            prompt=PromptAssembly(self.p.parent_system_sections),
            tools=self.rt.tools,
            allowed_tools=self.visible,
            step_limit=CHAT_STEP_LIMIT,
            step_mask=self.step_mask,
            mode="chat",
            context_window=self.p.parent_window,
            deps=RpRunDeps(mode="chat", writer=self.writer, commit=self.commit, run=self),
            hooks=self,
        )


def _stale_context(rt: RoleplayRuntime, p: PreparedRun) -> Callable[[], Awaitable[list[Problem]]]:
    """The commit's check that the state document and the conversation are exactly what prepare
    froze (the lease guarantees it; this catches any writer that bypassed it)."""
    frozen_key = p.surface_key  # a summary landing mid-turn replaces ``p.surface_key``

    async def check() -> list[Problem]:
        problems: list[Problem] = []
        sid = p.session_id
        # One fresh read of the log: the surface reads the newest events, the state is taken at
        # that same head (a writer that bypassed the lease shows in either).
        surface = await rt.service.projection(sid, SURFACE)
        live_state = await rt.story_state(sid, at=surface.upto_seq)
        if sha256_hex(live_state) != p.state_digest:
            problems.append(Problem(
                "commit.stale_state",
                f"the story state changed since this turn was prepared (revision {p.state_revision} → {live_state.get('revision')})",
                "", {"component": "state", "expectedRevision": p.state_revision, "currentRevision": live_state.get("revision")},
            ))  # fmt: skip
        nodes = surface.state["nodes"]
        frozen = p.surface_key
        # Nothing rewrote the surface since prepare (the projection cache saw every event since):
        # its first nodes are still the frozen ones, without comparing them one by one.
        appended_only = (
            frozen is frozen_key
            and surface.appends_since is not None
            and surface.appends_since <= p.surface_seq
            and len(nodes) >= len(frozen)
        )
        if not appended_only and surface_key(nodes[: len(frozen)]) != frozen:
            problems.append(Problem(
                "commit.stale_context", "the conversation this turn was written from was edited or deleted since it was prepared",
                "", {"component": "context"},
            ))  # fmt: skip
        return problems

    return check


def _changed_revisions(rt: RoleplayRuntime) -> Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]:
    """The commit's check of the assets whose revision moved since prepare (a commit must not
    land on stale sources). A deleted asset reads as ``None``."""

    async def check(live: Mapping[str, Any]) -> dict[str, Any]:
        current = await rt.assets.revisions(live)
        return {a: current.get(a) for a in sorted(live) if current.get(a) != live[a]}

    return check


async def play_turn(
    rt: RoleplayRuntime,
    session_id: str,
    text: str,
    *,
    parent_route: Route | None,
    default_route: Route | None = None,
    images: list[dict[str, Any]] | None = None,
    abort: asyncio.Event | None = None,
    settings: SettingsSnapshot | None = None,
) -> RunResult:
    """Prepare and run one Chat-mode turn; the reply streams to the session's subscribers.

    ``parent_route`` None: the story's stored route, else ``default_route``, else the
    environment's (``resolve_session_route``), read from the profile under the lease (the read
    this turn makes anyway, not one more before it). ``settings``: the global settings the caller
    read for this turn (``prepare_run``).

    The lease comes first: a turn prepared before it would be built (and its run id derived) from
    a log head that another turn or message action can overtake. A second start is ``run.busy``."""
    async with run_lease(rt.store, session_id) as lease:
        await require_playable(rt, session_id, record=lease.record)
        # The one read of the log's newest events under the lease: everything after it (a summary
        # landing, the whole prepare) reads the cached projections as of this head.
        story = await rt.service.projection(session_id, SESSION_PROJECTION)
        if parent_route is None:
            parent_route = story_route(story.state, default_route)
        # A summary written alongside the previous turn lands now, before this turn reads the log.
        landed, head = await land_pending_at(rt, session_id, at=story.upto_seq) if text.strip() or images else ([], story.upto_seq)
        prepared = await prepare_run(rt, session_id, text, parent_route=parent_route, images=images, at=head, settings=settings)
        run = RpRun(rt, prepared)
        run.diagnostics.extend(landed)
        watch = await SummaryWatch.start(rt, run, parent_route)
        model: ChatModel = watch.wrap(parent_model(run, rt.model_for(parent_route)))
        loop = AgentLoop(rt.service, model, run.spec())
        content: list[dict[str, Any]] = [{"type": "text", "text": prepared.input_text}, *prepared.images]
        try:
            turn = await loop.run_turn(session_id, content, abort=abort, turn_id=prepared.turn_id, lease=lease, head=head)
        except BaseException:
            await watch.cancel()  # no summary task outlives its turn
            if run.agent is not None:
                await run.agent.finish()  # nor its workspace shell
            raise
        run.diagnostics.extend(await watch.finish(turn))
    if run.agent is not None:
        run.diagnostics.extend(await run.agent.finish())
    return run_result(session_id, turn, prepared, run)


def run_result(session_id: str, turn: TurnResult, prepared: PreparedRun, run: RpRun) -> RunResult:
    """A finished turn as its caller sees it, flagged when no commit landed or the parent's
    history was cut (a Chat turn, a Continue)."""
    committed = any(r.ok and r.name == COMMIT_TURN_TOOL for r in turn.tool_results)
    flag = uncommitted_note(turn)
    if flag is not None:
        run.diagnostics.append(flag)
    if turn.history is not None and turn.history.omitted:
        run.diagnostics.append(parent_history_note(turn.history))
    return RunResult(
        session_id=session_id,
        turn=turn,
        prepared=prepared,
        writer=run.writer.artifact,
        committed=committed,
        reply=turn.text,
        diagnostics=[d.to_dict() for d in [*prepared.build.diagnostics, *run.diagnostics]],
    )


def parent_history_note(fit: HistoryFit) -> Diagnostic:
    return Diagnostic(
        "run.parent_history_trimmed",
        f"{fit.omitted} of {fit.messages} earlier story messages were left out of the parent's request, oldest first, "
        f"to fit its context window of {fit.window} tokens ({fit.reply_reserve} kept for the reply, {fit.fixed_tokens} "
        "for the system prompt, tools and this turn); the log keeps them",
        details=fit.to_dict(),
    )


# -- reading the log ---------------------------------------------------------------------------------


def opening_message_id(nodes: list[dict[str, Any]]) -> str | None:
    for node in nodes:
        if node["role"] == "assistant" and (node.get("source") or {}).get(OPENING) is not None:
            return node["id"]
    return None


def latest_lore_timed(nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The lore timed-effects state left by the last run still on the surface, so a deleted or
    regenerated turn takes its sticky/cooldown changes with it."""
    for node in reversed(nodes):
        ctx = (node.get("source") or {}).get(RUN_CONTEXT)
        if ctx is not None:
            return ctx.get("loreTimed")
    return None


def _saved_slots(profile: SessionProfile) -> list[Slot] | None:
    build = profile.context_build
    if build is None:
        return None
    return [Slot(s.id, s.name, tuple(s.sources), s.section_tag, s.idle) for s in build.slots]
