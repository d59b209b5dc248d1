"""Agent mode: the orchestrating parent of one run (spec 产品边界, Chat 与 Agent 执行模式).

``RpRun`` stays the run; when its prepared mode is ``agent`` it hands the mode-specific parts to
an :class:`AgentPolicy`:

- **Tools.** The run gets its own registry: every installed tool (Agent mode lifts Chat's mask),
  with the Agent ``rp_write_turn`` (its schema shows the bounded ``brief``; Chat's neither shows
  nor accepts it), ``rp_run_subagent`` over the catalog frozen at prepare (left out when no item
  is enabled), and ``rp_asset`` / ``rp_state`` wrapped so that a successful write refreshes the
  context. Step limit 20.
- **Body.** The parent writes the final narrative itself (it may revise the Writer's draft) and
  calls ``rp_commit_turn`` in the same response; that text is the body (Agent-mode commit checks:
  not empty, no Chat body-equality rule). A repair call without text carries the body of the
  attempt it repairs, so every attempt's message holds the reply. The body streams to
  subscribers once; a later attempt with other text resets the stream first.
- **Discussion.** A response without tools ends the turn with that text (nothing is committed;
  ``run.not_committed`` flags it), before or after the Writer.
- **Blocked steps.** A failed specialist blocks ``rp_write_turn`` and ``rp_commit_turn``
  (``subagent.blocking_failure``) until that specialist succeeds on a retry; the runtime cannot
  read which contract depends on which, so it keeps every dependent step closed rather than
  trusting the model to stop. A failed context refresh blocks both for the rest of the run
  (``run.context_refresh_failed``); the configuration that succeeded stays.
- **Refresh** (spec: Agent 完成 ``rp_asset`` 或 State definition 写入后…): a successful asset write
  or bind, or a State configuration, rebuilds the build through the same Session Slot layout from
  the live profile, assets and State (the conversation and the input stay the ones frozen at
  prepare). When the content changed (a new epoch), earlier Writer artifacts are dropped, the
  commit session moves to the new epoch, and the tool result returns the full refreshed context
  with ``meta.commitContextReplacement = {epoch, previousEpoch, commitContext}``.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from roleplay.assets.lorebook import TimedState
from roleplay.canonical import sha256_hex
from roleplay.errors import RpError
from roleplay.harness.loop import AgentSpec, StepView
from roleplay.harness.models.types import ModelResponse
from roleplay.harness.prompts import PromptAssembly, PromptContext, tool_sections
from roleplay.harness.tools import Tool, ToolContext, ToolOutput, ToolRegistry
from roleplay.names import (
    ASSET_WRITE_TOOL,
    COMMIT_TURN_TOOL,
    SESSION_PROJECTION,
    STATE_CONFIGURE_TOOL,
    WRITE_TURN_TOOL,
)
from roleplay.harness.names import ASSISTANT_CHUNK

from .context_build import effective_layout, freeze
from .guide_tools import guide_tool
from .macros import expand
from .profile import profile_of
from .prompts import request_for_build
from .run_context import RpRunDeps
from .sources import StoreAssetReader, collect_sources
from .subagent_catalog import SubagentItem
from .subagent_tools import subagent_tool
from .toolfree import RUNTIME_CALL_WARNING
from .types import Diagnostic, FrozenBuild, Slot
from .workspace_tools import PersistentShell, workspace_tools
from .writer import write_turn_tool

if TYPE_CHECKING:
    from .run import PreparedRun, RpRun
    from .runtime import RoleplayRuntime

AGENT_STEP_LIMIT = 20
CHUNK = 48
REFRESHING_TOOLS = frozenset({ASSET_WRITE_TOOL, STATE_CONFIGURE_TOOL})
EMPTY_STATE: dict[str, Any] = {"protocolVersion": 2, "revision": 0, "namespaces": {}}


@dataclass(frozen=True)
class Refresh:
    build: FrozenBuild
    changed: bool
    previous_epoch: str
    dropped_writer: str | None


class AgentPolicy:
    """The Agent-mode parts of one :class:`~roleplay.core.run.RpRun` (see the module docstring)."""

    def __init__(self, run: RpRun) -> None:
        self.run = run
        self.rt = run.rt
        self.p: PreparedRun = run.p
        self.catalog: tuple[SubagentItem, ...] = tuple(self.p.catalog)
        self.failed: dict[str, dict[str, Any]] = {}  # specialist → the error of its last call
        self.refresh_error: dict[str, Any] | None = None
        self.refreshes: list[dict[str, Any]] = []
        self.body = ""  # the body of the latest commit attempt
        self.streamed = ""
        self.shell: PersistentShell | None = None  # the workspace shell, when the sandbox setting is on
        self.registry = self._registry()
        self.visible = [t.name for t in self.registry.visible()]

    # -- tools --------------------------------------------------------------------------------------
    def _registry(self) -> ToolRegistry:
        registry, self.shell = agent_registry(
            self.rt, self.p, check_open=self._check_open, refreshing=self._refreshing, on_outcome=self._subagent_outcome
        )
        return registry

    def _subagent_outcome(self, name: str, error: dict[str, Any] | None) -> None:
        if error is None:
            self.failed.pop(name, None)
        else:
            self.failed[name] = error

    def _check_open(self, tool: str) -> None:
        if self.refresh_error is not None:
            raise RpError(
                "run.context_refresh_failed",
                f"{tool} is blocked for this turn: the context could not be refreshed after a configuration change "
                f"([{self.refresh_error.get('code')}] {self.refresh_error.get('message')}); the change itself stays. "
                "Tell the user; the next turn builds its context afresh.",
                details={"error": self.refresh_error},
            )
        if self.failed:
            name, error = next(iter(self.failed.items()))
            raise RpError(
                "subagent.blocking_failure",
                f"{tool} is blocked: specialist {name!r} failed ([{error.get('code')}] {error.get('message')}) and the steps "
                "that depend on it cannot run. Run it again, or answer the user without writing.",
                details={"failed": dict(self.failed)},
            )

    def _refreshing(self, tool: Tool) -> Any:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            output = await _call(tool, args, ctx)
            if tool.name == ASSET_WRITE_TOOL and not (output.meta or {}).get("refreshContext"):
                return output
            return await self._after_write(output)

        return handler

    async def _after_write(self, output: ToolOutput) -> ToolOutput:
        meta = dict(output.meta or {})
        text = output.content if isinstance(output.content, str) else json.dumps(output.content, ensure_ascii=False)
        try:
            refreshed = await self.refresh()
        except RpError as exc:
            self.refresh_error = {"code": exc.code, "message": exc.message}
            meta["contextRefresh"] = {"ok": False, "error": self.refresh_error}
            note = (
                f"\n\nThe change was saved, but this turn's context could not be refreshed ([{exc.code}] {exc.message}): "
                "rp_write_turn and rp_commit_turn are blocked for the rest of this turn."
            )
            return ToolOutput(text + note, meta=meta)
        build = refreshed.build
        record = {"ok": True, "epoch": build.epoch, "previousEpoch": refreshed.previous_epoch, "changed": refreshed.changed}
        if refreshed.dropped_writer is not None:
            record["droppedWriter"] = refreshed.dropped_writer
        meta["contextRefresh"] = record
        self.refreshes.append(record)
        if not refreshed.changed:
            return ToolOutput(text + "\n\nThe Writer's context did not change.", meta=meta)
        meta["commitContextReplacement"] = {
            "epoch": build.epoch,
            "previousEpoch": refreshed.previous_epoch,
            "commitContext": build.commit_context,
        }
        request = request_for_build("agent", build, [i.contract() for i in self.catalog])
        dropped = " The Writer draft written before it is void." if refreshed.dropped_writer else ""
        note = (
            f'\n\n<context_refresh epoch="{build.epoch}">\n{request}\n</context_refresh>\n'
            f"This turn's context was rebuilt from the change and replaces the earlier one.{dropped} "
            "Call rp_write_turn before writing the reply."
        )
        return ToolOutput(text + note, meta=meta)

    async def refresh(self) -> Refresh:
        """Rebuild the context through the same Slot layout from the live profile, assets and
        State; the conversation, the input and the budget stay the ones frozen at prepare."""
        rt, p = self.rt, self.p
        if p.inputs is None:
            raise RpError("run.context_refresh_failed", "this run kept no source inputs to rebuild its context from")
        profile = profile_of((await rt.service.projection(p.session_id, SESSION_PROJECTION)).state)
        state_view = await rt.story_state(p.session_id)
        state = copy.deepcopy(state_view) if state_view.get("namespaces") else None
        reader = StoreAssetReader(rt.assets, cache=rt.asset_cache)
        macros = await rt.macro_context(profile, reader)
        inputs = replace(
            p.inputs,
            profile=profile,
            macros=macros,
            state=state,
            lore_timed_state=TimedState.from_dict(p.lore_timed_before) if p.lore_timed_before else TimedState(),
            lore_template=rt.lore_template(state) if rt.lore_template is not None else None,
        )
        sources = await collect_sources(inputs, reader, rt.source_providers)
        build_spec = profile.context_build
        saved = None if build_spec is None else [Slot(s.id, s.name, tuple(s.sources), s.section_tag, s.idle) for s in build_spec.slots]
        slots = effective_layout(saved, sources.sources, sources.preset_positions)
        build = freeze(slots, sources.sources, sources.bindings, sources.diagnostics, history=p.history, budget=p.budget)
        previous = p.build.epoch
        changed = build.epoch != previous
        dropped: str | None = None
        # Whatever changed, the run now checks its commit against the live state and assets.
        p.state, p.state_digest, p.state_revision = state, sha256_hex(state_view), int(state_view.get("revision", 0))
        if changed:
            writer = self.run.writer
            dropped = writer.artifact.call_id if writer.artifact is not None else None
            p.build, p.sources, p.profile, p.macros = build, sources, profile, macros
            writer.build, writer.artifact = build, None
        commit = self.run.commit
        commit.refresh(
            replace(
                commit.ctx,
                epoch=p.build.epoch,
                writer=self.run.writer.artifact,
                state=state or EMPTY_STATE,
                live_revisions=dict(p.sources.live_revisions),
            )
        )
        return Refresh(p.build, changed, previous, dropped)

    # -- loop hooks ---------------------------------------------------------------------------------
    async def on_response(self, session_id: str, turn_id: str, step_id: str, response: ModelResponse) -> ModelResponse:
        names = [c.name for c in response.tool_calls]
        commit = self.run.commit
        if COMMIT_TURN_TOOL in names:
            sent = _body_argument(response, COMMIT_TURN_TOOL)
            text = expand(response.text, self.p.macros).strip() if response.text else ""
            # A repair call (retry patches, no text) carries the body of the attempt it repairs.
            body = sent if sent is not None else (text or self.body)
            artifact = self.run.writer.artifact
            if not body and artifact is not None and RUNTIME_CALL_WARNING in response.warnings:
                body = artifact.text  # a tool-free route: the runtime commits the Writer's draft as it is
            self.body = body
            commit.note_response(step_id, names, body)
            if body:
                await self._stream_body(session_id, turn_id, body)
            return replace(response, text=body)
        commit.note_response(step_id, names, response.text)
        if not names and response.text:
            text = expand(response.text, self.p.macros)
            await self._stream_body(session_id, turn_id, text)
            return replace(response, text=text)
        return response

    def step_mask(self, view: StepView) -> list[str]:
        if self.run.writer.artifact is None:
            return [n for n in self.visible if n != COMMIT_TURN_TOOL]
        return list(self.visible)

    def spec(self) -> AgentSpec:
        run = self.run
        return AgentSpec(
            prompt=PromptAssembly(self.p.parent_system_sections),
            tools=self.registry,
            allowed_tools=self.visible,
            step_limit=AGENT_STEP_LIMIT,
            step_mask=self.step_mask,
            mode="agent",
            context_window=self.p.parent_window,
            deps=RpRunDeps(mode="agent", writer=run.writer, commit=run.commit, run=run),
            hooks=run,
        )

    async def finish(self) -> list[Diagnostic]:
        """The run is over: stop its workspace shell; the notes on its context refreshes."""
        if self.shell is not None:
            await self.shell.close()
        return [
            Diagnostic(
                "run.context_refreshed", f"the context was rebuilt mid-run (epoch {r['previousEpoch'][:12]} → {r['epoch'][:12]})", details=r
            )
            for r in self.refreshes
            if r.get("changed")
        ]

    async def _stream_body(self, session_id: str, turn_id: str, text: str) -> None:
        if text == self.streamed:
            return
        store = self.rt.store
        if self.streamed:
            await store.publish_chunk(session_id, {"type": ASSISTANT_CHUNK, "turnId": turn_id, "reset": True, "text": ""})
        for i in range(0, len(text), CHUNK):
            await store.publish_chunk(session_id, {"type": ASSISTANT_CHUNK, "turnId": turn_id, "text": text[i : i + CHUNK]})
        self.streamed = text


def agent_registry(
    rt: RoleplayRuntime,
    p: PreparedRun,
    *,
    check_open: Callable[[str], None],
    refreshing: Callable[[Tool], Any],
    on_outcome: Callable[[str, dict[str, Any] | None], None],
) -> tuple[ToolRegistry, PersistentShell | None]:
    """The Agent parent's tools for one prepared run (see the module docstring)."""
    registry = ToolRegistry()
    for name in _in_order(rt.tools):
        tool = rt.tools.get(name)
        if name == WRITE_TURN_TOOL:
            tool = _guarded(write_turn_tool(rt.service, agent_mode=True), check_open)
        elif name == COMMIT_TURN_TOOL:
            tool = _guarded(tool, check_open)
        elif name in REFRESHING_TOOLS:
            tool = replace(tool, handler=refreshing(tool))
        registry.register(tool)
    tools, shell = workspace_tools(p.workspace_root, p.session_id)
    for tool in tools:
        registry.register(tool)
    guide = guide_tool(rt.store, rt.guides, p.input_text)
    if guide is not None:
        registry.register(guide)
    if p.catalog:
        identity = p.parent_system_sections[0].text
        registry.register(
            subagent_tool(
                rt,
                p.catalog,
                conversation_route=p.parent_route or p.writer_route,
                identity=identity if isinstance(identity, str) else "",
                images=p.images,
                on_outcome=on_outcome,
            )
        )
    return registry, shell


def parent_system_preview(rt: RoleplayRuntime, p: PreparedRun) -> str:
    """The Agent parent's system prompt exactly as the run assembles it (``rp prompt``): the
    roleplay sections and the guidance of every tool the Agent is offered. Starts nothing."""
    registry, _ = agent_registry(rt, p, check_open=lambda _: None, refreshing=lambda t: t.handler, on_outcome=lambda *_: None)
    tools = registry.visible()
    assembly = PromptAssembly(p.parent_system_sections)
    for section in tool_sections(tools):
        assembly.add(section)
    return assembly.assemble(PromptContext(p.session_id, frozenset(t.name for t in tools))).text


def _in_order(registry: ToolRegistry) -> list[str]:
    """The registry's tools in registration order (``visible()`` keeps it)."""
    return [t.name for t in registry.visible()]


async def _call(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    value = tool.handler(args, ctx)
    if inspect.isawaitable(value):
        value = await value
    return value if isinstance(value, ToolOutput) else ToolOutput(str(value))


def _guarded(tool: Tool, check: Any) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        check(tool.name)
        return await _call(tool, args, ctx)

    return replace(tool, handler=handler)


def _body_argument(response: ModelResponse, tool: str) -> str | None:
    for call in response.tool_calls:
        if call.name != tool:
            continue
        try:
            args = json.loads(call.arguments) if isinstance(call.arguments, str) else call.arguments
        except ValueError:
            return None
        body = args.get("body") if isinstance(args, dict) else None
        return body if isinstance(body, str) else None
    return None


__all__ = ["AGENT_STEP_LIMIT", "AgentPolicy", "Refresh", "agent_registry", "parent_system_preview"]
