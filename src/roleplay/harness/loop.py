"""The agent loop: one turn = steps of (model request → tool calls) until a final answer.

Everything lands in the session log in this order (DESIGN.md §3.3)::

    turn/start → user/message
      step/start → model/request → assistant/message (text, reasoning, toolCalls)
                 → [tool/call → tool/result]* → step/end
      … more steps while the model calls tools …
    turn/end {outcome: completed | step-limit | aborted | interrupted | error}

Rules kept here:

- The step limit is hard. A model that is still calling tools when it runs out ends the turn
  with ``step-limit``; no text is invented for it.
- Abort (an ``asyncio.Event``) is raced against the model stream and every tool call. The turn
  ends ``aborted``, and a partial stream is discarded, never stored as a message.
- A crash leaves a turn open. The next run closes it as ``interrupted`` before starting, together
  with the open turns of the child sessions (a Writer, a sub-agent) the crashed turn started.
- One run per session across processes (``leases.run_lease``); a second start gets ``run.busy``.
  A runtime that must read the log before the turn starts (the roleplay run prepares its context)
  takes the lease first and hands it to ``run_turn``, so nothing moves the log in between.
- The request always offers the run's visible tools, so the tool list and system prompt stay
  byte-stable for prompt caching (stack.md §2). A per-step mask narrows what may be *called*: a
  masked call gets a ``tool.not_available`` result, which the model sees and can recover from.
- The request's history is bounded (``harness.history``): the current turn goes whole, earlier
  turns through the runtime's ``LoopHooks.history`` view, newest whole exchanges first, within
  the route's context window. The log keeps everything; only the request is shortened.
- A step's request goes to a model that answers over the network (``sends_before_logged``)
  while its step/start and model/request are being appended, and that model holds its answer
  until they are (``models.types.REQUEST_LOGGED``): the log order is unchanged, and the provider
  starts one round trip sooner. An append that fails drops the request (a conflict sends it
  again, built over the log as it is then).
- Text and reasoning deltas go to live subscribers as ``assistant/chunk`` notifications. The
  durable ``assistant/message`` carries the whole text.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Sequence, TypeVar

from roleplay.clock import IdGenerator
from roleplay.errors import ConflictError, RpError
from roleplay.harness.names import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACTION_CHECKPOINT,
    MODEL_REQUEST,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

from .events import MESSAGE_TYPES, Event, EventDraft
from .history import (
    HistoryFit,
    fit_history,
    message_tokens,
    remember_request_runs,
    reply_reserve,
    request_fixed_tokens,
)
from .converted import CONVERTED, ConvertedMessages
from .leases import Lease, check_lease, run_lease
from .models.types import (
    ChatMessage,
    ChatModel,
    Completed,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    REQUEST_LOGGED,
    stream_batches,
)
from .projections import Loaded
from .prompts import PromptAssembly, PromptContext, tool_sections
from .sessions import SessionService
from .surface import initial_surface, surface_projection
from .tools import ToolContext, ToolRegistry, ToolResultData
from .turns import turns_projection

T = TypeVar("T")
DEFAULT_STEP_LIMIT = 20
# Creates the session with these first events of its turn and holds its run lease until exit;
# enters as the events appended.
Creator = Callable[[list[EventDraft]], AbstractAsyncContextManager[list[Event]]]


@dataclass(frozen=True)
class StepView:
    """What a per-step tool mask may look at."""

    index: int
    previous_calls: tuple[str, ...]  # names of the tools called in earlier steps of this turn


class LoopHooks:
    """Extension points for runtimes built on the loop (the roleplay run). The defaults do
    nothing, so a plain chat uses the loop unchanged."""

    # Publish the model's own text deltas to subscribers. A runtime that replaces the reply body
    # (Chat mode streams the Writer's text instead) turns this off.
    publish_deltas: bool = True

    def input_events(self, turn_id: str) -> list[EventDraft]:
        """Extra events appended right after the turn's user message (e.g. a run-context message)."""
        return []

    async def on_response(self, session_id: str, turn_id: str, step_id: str, response: ModelResponse) -> ModelResponse:
        """Inspect or rewrite a response before it is logged; may publish chunks itself."""
        return response

    async def history(self, session_id: str, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The request's view of the earlier turns' surface nodes (the current turn's are always
        sent whole). A runtime may project them, e.g. to the story's (input, reply) pairs; the
        log keeps every event. A node it rewrites must get an id of its own: converted messages
        are cached by (id, seq)."""
        return nodes

    async def history_view(self, session_id: str, surface: Loaded, split: int) -> Sequence[dict[str, Any]]:
        """``history`` of the surface's first ``split`` nodes (the turns before the running one).
        ``surface`` is the session service's cached projection, so a runtime may keep what it
        derives from it across turns (``SessionService.folds``) instead of deriving it again."""
        return await self.history(session_id, surface.state["nodes"][:split])

    def finished(self, results: list[ToolResultData]) -> bool:
        """True when this step's tool results complete the turn (no further model step). Raising
        an ``RpError`` ends the turn with outcome ``error`` (nothing further can succeed)."""
        return False


@dataclass
class AgentSpec:
    prompt: PromptAssembly
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    allowed_tools: Iterable[str] | None = None  # None: every registered tool
    step_limit: int = DEFAULT_STEP_LIMIT
    step_mask: Callable[[StepView], Iterable[str] | None] | None = None
    mode: str | None = None
    depth: int = 0
    max_tokens: int | None = None
    # The route's context window: earlier turns give way to it (``harness.history``). None: no
    # window is known, and the whole history is sent.
    context_window: int | None = None
    reasoning_effort: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    deps: object = None  # handed to tools as ToolContext.deps; opaque to the harness
    hooks: LoopHooks = field(default_factory=LoopHooks)


@dataclass
class TurnResult:
    session_id: str
    turn_id: str
    outcome: str
    text: str
    steps: int
    error: dict[str, Any] | None = None
    usage: dict[str, int] = field(default_factory=dict)
    tool_results: list[ToolResultData] = field(default_factory=list)
    history: HistoryFit | None = None  # the last request's history fit (None without a window)
    finish_reason: str | None = None  # the last model response's (the final answer's when completed)


class _Aborted(Exception):
    pass


class AgentLoop:
    def __init__(self, service: SessionService, model: ChatModel, spec: AgentSpec, *, ids: IdGenerator | None = None) -> None:
        if spec.step_limit < 1:
            raise RpError("loop.invalid_step_limit", "step_limit must be at least 1")
        self.service = service
        self.store = service.store
        self.model = model
        self.spec = spec
        self.ids = ids or service.ids
        self.visible = [t.name for t in spec.tools.visible(spec.allowed_tools, depth=spec.depth)]
        self.prompt = spec.prompt.copy()
        for section in tool_sections(spec.tools.visible(self.visible, depth=spec.depth)):
            if section.id not in self.prompt.ids():
                self.prompt.add(section)
        self.route = {"provider": model.provider, "model": model.model, "label": model.label}
        self._head = 0
        # ChatMessage and token count per surface node version, kept by the session service so
        # that a long session's history is converted and counted once, not at every step of
        # every turn (each turn has a loop of its own).
        self._converted = service.derived.setdefault(CONVERTED, ConvertedMessages())
        self._turn_seq = 0  # the running turn's turn/start seq: later surface nodes are this turn's
        self._cut = 0  # earlier-history messages left out by this turn's previous steps
        # A step's last events when they may also be the turn's last, and the turn's first events
        # (turn/start, the user message…): they go out with whatever is appended next, the turn's
        # end or the next step's step/start and model/request (its request built over the surface
        # with them folded in), one round trip on PostgreSQL instead of two (issues 12, 16).
        self._tail: list[EventDraft] = []
        self._create: tuple[Creator, AsyncExitStack] | None = None  # run_turn(create=…) until its first append
        self._start_held = False  # the held events begin with this turn's turn/start
        self._start_failed = False  # the append that carried turn/start failed: no turn to end

    # -- public ----------------------------------------------------------------------------------
    async def run_turn(
        self,
        session_id: str,
        content: str | list[dict[str, Any]],
        *,
        abort: asyncio.Event | None = None,
        source: dict[str, Any] | None = None,
        turn_id: str | None = None,
        lease: Lease | None = None,
        head: int | None = None,
        create: Creator | None = None,
    ) -> TurnResult:
        """Run one turn. Without ``lease`` the turn takes the session's run lease itself; a caller
        that already holds it (and has read the log under it) passes it in, with the ``head`` it
        read there when it knows it (a read saved). ``create``: the session does not exist yet (a
        sub-agent's child); the turn's first events create it, leased (``Creator``: one statement
        on PostgreSQL instead of two), so no run can have left a turn open there."""
        self._tail = []
        self._start_held = self._start_failed = False
        if create is not None:
            self._head = 0
            async with AsyncExitStack() as stack:
                self._create = (create, stack)
                try:
                    return await self._run(session_id, content, abort or asyncio.Event(), source, turn_id)
                finally:
                    self._create = None
        if lease is not None:
            if not lease.holds(self.store, session_id):
                raise RpError("run.lease_invalid", f"the lease handed to this turn is not held on session {session_id}")
            await self.close_interrupted(session_id, head=head)
            return await self._run(session_id, content, abort or asyncio.Event(), source, turn_id)
        async with run_lease(self.store, session_id):
            await self.close_interrupted(session_id)
            return await self._run(session_id, content, abort or asyncio.Event(), source, turn_id)

    async def close_interrupted(self, session_id: str, *, head: int | None = None) -> list[str]:
        """Close every turn a crash left open, as ``interrupted``, and the open turns of the child
        sessions started since (a run killed inside its Writer leaves the Writer's turn open too).
        The caller holds the session's lease (``head``: the head it has just read under it).
        Returns the closed turn ids of this session."""
        self._head = head if head is not None else await self.store.head(session_id)
        closed, since = await close_open_turns(self.service, session_id, self._append, head=self._head)
        if closed:
            await close_orphaned_children(self.service, session_id, since)
            self._head = await self.store.head(session_id)
        return closed

    # -- the turn --------------------------------------------------------------------------------
    async def _run(
        self, session_id: str, content: str | list[dict[str, Any]], abort: asyncio.Event, source: dict[str, Any] | None, turn_id: str | None
    ) -> TurnResult:
        turn_id = turn_id or self.ids("turn_")
        message_id = self.ids("msg_")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        user: dict[str, Any] = {"messageId": message_id, "content": blocks, "turnId": turn_id}
        if source is not None:
            user["source"] = source
        start: dict[str, Any] = {"turnId": turn_id, "inputMessageId": message_id}
        if self.spec.mode:
            start["mode"] = self.spec.mode
        extra = self.spec.hooks.input_events(turn_id)
        # Held for the first step's append (``_step``); the seq turn/start gets when appended at
        # the head we know (set again by ``_append`` from the events as appended).
        self._tail = [EventDraft(TURN_START, start), EventDraft(USER_MESSAGE, user), *extra]
        self._start_held = True
        self._turn_seq, self._cut = self._head + 1, 0

        result = TurnResult(session_id, turn_id, "completed", "", 0)
        called: list[str] = []
        try:
            for index in range(self.spec.step_limit):
                result.steps = index + 1
                done = await self._step(session_id, turn_id, index, called, abort, result)
                if done:
                    break
            else:
                result.outcome = "step-limit"
        except _Aborted:
            result.outcome = "aborted"
        except RpError as exc:
            if self._start_failed:
                raise  # turn/start was never logged (as when it was appended on its own)
            result.outcome = "error"
            result.error = exc.to_dict()
        end: dict[str, Any] = {"turnId": turn_id, "outcome": result.outcome}
        if result.error:
            end["error"] = {k: v for k, v in result.error.items() if k in ("code", "message", "pointer", "details")}
        await self._append(session_id, [EventDraft(TURN_END, end)])
        return result

    async def _step(self, session_id: str, turn_id: str, index: int, called: list[str], abort: asyncio.Event, result: TurnResult) -> bool:
        """One model request and its tool calls. True when the turn is finished."""
        if abort.is_set():
            raise _Aborted  # anything held goes out with the turn's end
        step_id = self.ids("step_")
        callable_now = set(self.visible)
        if self.spec.step_mask is not None:
            mask = self.spec.step_mask(StepView(index, tuple(called)))
            if mask is not None:
                callable_now &= set(mask)
        prompt = self.prompt.assemble(PromptContext(session_id, frozenset(self.visible), {"mode": self.spec.mode}))
        tools = [self.spec.tools.get(n).spec() for n in self.visible]
        floor = self._cut
        while True:
            # The events held (the turn's first ones, or the previous step's last) go out with
            # this step's start and request: the request is built over the surface at the head we
            # know with their nodes added, as it would be once they are appended.
            held = self._held_nodes()
            if held is None:
                await self._append(session_id, [])  # not foldable ahead (a rewrite): out first
            self._cut = floor
            try:
                request, drafts = await self._request(session_id, turn_id, step_id, index, prompt, tools, held or [], result)
            except RpError:
                raise  # the turn ends as an error: the held events go out with its turn/end
            except BaseException:
                if self._tail:  # logged, as when they went out before the step began
                    await self._append(session_id, [])
                raise
            holding = bool(self._tail)
            early = self._send_early(session_id, turn_id, step_id, request)
            try:
                await self._append(session_id, drafts, retry=not holding)
            except BaseException as exc:
                if early is not None:
                    abandon(early[0])
                if not (holding and isinstance(exc, ConflictError)):
                    raise
                # Another writer moved the log: the held events go out on their own at the new
                # head, and the request is built again over what is there now.
                await self._append(session_id, [])
                continue
            break
        if early is not None:
            early[1].set()  # logged: the answer may go up now
        try:
            response = await self._race(early[0] if early is not None else self._stream(session_id, turn_id, step_id, request), abort)
        except (_Aborted, RpError):
            await self._append(session_id, [EventDraft(STEP_END, {"turnId": turn_id, "stepId": step_id})])
            raise
        response = await self.spec.hooks.on_response(session_id, turn_id, step_id, response)
        result.finish_reason = response.finish_reason
        message = _assistant_payload(self.ids("msg_"), turn_id, step_id, response, self.route)
        for key, value in (response.usage.to_dict() if response.usage else {}).items():
            result.usage[key] = result.usage.get(key, 0) + value
        step_end: dict[str, Any] = {"turnId": turn_id, "stepId": step_id, "finishReason": response.finish_reason}
        if response.usage is not None:
            step_end["usage"] = response.usage.to_dict()
        # Events that follow one another with nothing in between are appended together (one round
        # trip on PostgreSQL): the message with the step's end or its first call, each result with
        # the next call or the step's end, a step that ends the turn with the turn's end (held in
        # ``_tail`` meanwhile). Every call is still logged before its tool runs.
        if not response.tool_calls:
            result.text = response.text
            # The turn ends here: these go out with its turn/end (``_run``, nothing in between).
            self._tail = [EventDraft(ASSISTANT_MESSAGE, message), EventDraft(STEP_END, step_end)]
            return True

        def call_draft(call: ToolCall) -> EventDraft:
            return EventDraft(
                TOOL_CALL, {"callId": call.id, "name": call.name, "arguments": call.arguments, "turnId": turn_id, "stepId": step_id}
            )

        await self._append(session_id, [EventDraft(ASSISTANT_MESSAGE, message), call_draft(response.tool_calls[0])])
        step_results: list[ToolResultData] = []
        ended = False
        try:
            for n, call in enumerate(response.tool_calls):
                ctx = ToolContext(session_id, turn_id, step_id, call.id, self.spec.depth, abort, self.spec.deps)
                try:
                    outcome = await self._race(self.spec.tools.execute(call, ctx, visible=callable_now), abort)
                except _Aborted:
                    # Every call the model made must get a result, or the next request would carry
                    # a dangling tool call that providers reject.
                    pending = response.tool_calls[n:]
                    await self._append(
                        session_id, [_unanswered(c, "tool.aborted", "the turn was aborted", turn_id, step_id) for c in pending]
                    )
                    raise
                result.tool_results.append(outcome)
                step_results.append(outcome)
                payload = {**outcome.payload(), "turnId": turn_id, "stepId": step_id}
                if n + 1 < len(response.tool_calls):
                    await self._append(session_id, [EventDraft(TOOL_RESULT, payload), call_draft(response.tool_calls[n + 1])])
                else:
                    # The step's last events: held until we know whether the turn ends with them.
                    self._tail = [EventDraft(TOOL_RESULT, payload), EventDraft(STEP_END, step_end)]
                    ended = True
                called.append(call.name)
        finally:
            if not ended:
                await self._append(session_id, [EventDraft(STEP_END, step_end)])
        try:
            finished = self.spec.hooks.finished(step_results)
        except RpError:
            raise  # the turn ends as an error: the held events go out with its turn/end
        except BaseException:
            if self._tail:
                await self._append(session_id, [])
            raise
        if finished:
            result.text = response.text
        return finished

    def _held_nodes(self) -> list[dict[str, Any]] | None:
        """The surface nodes the held events add once appended at the head we know; None when
        one of them rewrites the surface or does not validate (they are appended first then)."""
        if not self._tail:
            return []
        if any(d.type == COMPACTION_CHECKPOINT or (d.type in MESSAGE_TYPES and d.payload.get("surfaceOp")) for d in self._tail):
            return None
        try:
            return self.service.added_nodes(self._head, self._tail)
        except RpError:
            return None

    async def _request(
        self,
        session_id: str,
        turn_id: str,
        step_id: str,
        index: int,
        prompt: Any,
        tools: list[Any],
        held: list[dict[str, Any]],
        result: TurnResult,
    ) -> tuple[ModelRequest, list[EventDraft]]:
        """The step's model request over the surface at the head we know plus the ``held`` nodes,
        and its step/start and model/request drafts."""
        if self._create is not None:
            # The session is created with the turn's first events: nothing to read before them.
            surface = Loaded(state=initial_surface(), upto_seq=0, from_snapshot_seq=0, folded=0)
        else:
            # The loop made the last append (it holds the lease): the cache at that head needs no read.
            surface = await self.service.projection_at(session_id, surface_projection, self._head)
        history, (running, cut, current_costs), fit = await self._history(session_id, prompt.text, tools, surface, held)
        result.history = fit
        system = ChatMessage("system", prompt.text)
        messages = [system] + history
        # Its figures, for a caller that sums the request (the summary threshold) at every step:
        # from the kept running sums of the earlier history, not a list of the request's costs.
        remember_request_runs(messages, (message_tokens(system),), running, cut, current_costs)
        request = ModelRequest(
            messages=messages,
            tools=tools,
            max_tokens=self.spec.max_tokens,
            reasoning_effort=self.spec.reasoning_effort,
            temperature=self.spec.temperature,
            top_p=self.spec.top_p,
            frequency_penalty=self.spec.frequency_penalty,
            presence_penalty=self.spec.presence_penalty,
        )
        drafts = [
            EventDraft(STEP_START, {"turnId": turn_id, "stepId": step_id, "index": index}),
            EventDraft(
                MODEL_REQUEST,
                {
                    "turnId": turn_id,
                    "stepId": step_id,
                    "route": self.route,
                    "sections": prompt.section_ids,
                    "hash": prompt.hash,
                    "tools": self.visible,
                    **({"history": fit.to_dict()} if fit is not None else {}),
                    # What the request asks of the sampler (a preset's settings), as sent
                    # unless the provider's warnings on the answer say otherwise.
                    **({"sampling": request.sampling()} if request.sampling() else {}),
                    **({"maxTokens": request.max_tokens} if request.max_tokens is not None else {}),
                },
            ),
        ]
        return request, drafts

    async def _history(
        self, session_id: str, system: str, tools: list[Any], surface: Loaded, held: list[dict[str, Any]]
    ) -> tuple[list[ChatMessage], tuple[Sequence[int], int, list[int]], HistoryFit | None]:
        """The request's messages after the system prompt: the runtime's view of the earlier
        turns, fitted to the window (newest whole exchanges), then the current turn whole; and
        their ``message_tokens`` as (the earlier messages' running sums, the index the request
        keeps them from, the current turn's costs): ``history.remember_request_runs``. ``held``:
        the current turn's nodes not appended yet (after ``surface``'s own)."""
        nodes = surface.state["nodes"]
        split = len(nodes)
        while split > 0 and nodes[split - 1]["seq"] > self._turn_seq:
            split -= 1
        kept = self._converted.converted(session_id, await self.spec.hooks.history_view(session_id, surface, split))
        earlier = kept.messages
        current, current_costs = self._converted.convert(session_id, [*nodes[split:], *held] if held else nodes[split:])
        window = self.spec.context_window
        if window is None:
            return earlier + current, (kept.running, 0, current_costs), None
        cut, fit = fit_history(
            earlier,
            window=window,
            reply_reserve=reply_reserve(window, self.spec.max_tokens),
            fixed_tokens=request_fixed_tokens(system, tools, current, current_costs),
            floor=self._cut,
            costs=kept.costs,
            running=kept.running,
            starts=kept.starts,
        )
        self._cut = cut
        return earlier[cut:] + current, (kept.running, cut, current_costs), fit

    def _send_early(
        self, session_id: str, turn_id: str, step_id: str, request: ModelRequest
    ) -> tuple[asyncio.Task[ModelResponse], asyncio.Event] | None:
        """The step's stream started now, before its events are appended, with the event that
        lets its answer go up once they are (module doc); None for a model that cannot hold its
        answer, which is sent after the append as before."""
        if not getattr(self.model, "sends_before_logged", False):
            return None
        logged = asyncio.Event()
        token = REQUEST_LOGGED.set(logged)  # the task takes a copy of this context
        try:
            return asyncio.ensure_future(self._stream(session_id, turn_id, step_id, request)), logged
        finally:
            REQUEST_LOGGED.reset(token)

    async def _stream(self, session_id: str, turn_id: str, step_id: str, request: ModelRequest) -> ModelResponse:
        response: ModelResponse | None = None
        publish = self.spec.hooks.publish_deltas
        chunk = self.store.publish_chunk
        # A batch per read from the provider (``stream_batches``): one step of every wrapper layer
        # for all the frames that came together, and each delta still published on its own.
        async for batch in stream_batches(self.model, request):
            for event in batch:
                if isinstance(event, Completed):
                    response = event.response
                elif not publish:
                    continue
                elif isinstance(event, TextDelta):
                    if event.text:
                        await chunk(session_id, {"type": ASSISTANT_CHUNK, "turnId": turn_id, "stepId": step_id, "text": event.text})
                elif isinstance(event, ReasoningDelta) and event.text:
                    await chunk(session_id, {"type": ASSISTANT_CHUNK, "turnId": turn_id, "stepId": step_id, "reasoning": event.text})
        if response is None:
            raise RpError("model.protocol", f"{self.model.provider} stream ended without a response")
        return response

    async def _race(self, work: Awaitable[T], abort: asyncio.Event) -> T:
        """Await ``work`` unless ``abort`` fires first; then cancel it and raise _Aborted."""
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(abort.wait())
        try:
            done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            waiter.cancel()
        if task in done:
            return task.result()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the aborted work's fate is irrelevant
            pass
        raise _Aborted

    async def _append(self, session_id: str, drafts: list[EventDraft], *, retry: bool = True) -> list[Event]:
        """Append the held events and ``drafts`` at the head we know; the lease makes us the only
        runner, but commands from other writers (a UI binding a card, say) may interleave, so a
        conflict re-reads the head (and raises it without ``retry``, the held events still held).
        A lease lost with its connection stops the run here: another run may own the log by now."""
        starting = self._start_held
        try:
            events = await self._append_now(session_id, [*self._tail, *drafts], retry)
        except BaseException as exc:
            if retry or not isinstance(exc, ConflictError):
                self._start_failed = starting
            raise
        self._tail = []
        if starting:
            self._start_held = False
            self._turn_seq = events[0].seq
        return events

    async def _append_now(self, session_id: str, drafts: list[EventDraft], retry: bool) -> list[Event]:
        if self._create is not None:
            create, stack = self._create
            self._create = None
            # The lease is held from here to the end of the turn (the stack closes with run_turn).
            events = await stack.enter_async_context(create(drafts))
            self._head = events[-1].seq
            return events
        for _ in range(20):
            check_lease(self.store, session_id)
            try:
                events = await self.service.append(session_id, drafts, expected_seq=self._head)
            except ConflictError:
                self._head = await self.store.head(session_id)
                if not retry:
                    raise
                continue
            self._head = events[-1].seq
            return events
        raise RpError("event.contended", f"could not append to {session_id}: the log keeps moving")


def abandon(task: asyncio.Future[Any]) -> None:
    """Cancel work whose outcome is nobody's now (a request sent early whose step was not logged,
    a read no run took), its error retrieved so asyncio never reports it as lost."""
    task.cancel()
    task.add_done_callback(lambda t: None if t.cancelled() else t.exception())


def _assistant_payload(message_id: str, turn_id: str, step_id: str, response: ModelResponse, route: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if response.reasoning is not None:
        # Kept even when empty on tool turns: DeepSeek wants reasoning_content sent back for them.
        content.append({"type": "reasoning", "text": response.reasoning})
    if response.text:
        content.append({"type": "text", "text": response.text})
    payload: dict[str, Any] = {
        "messageId": message_id,
        "content": content,
        "turnId": turn_id,
        "stepId": step_id,
        "model": {k: route[k] for k in ("provider", "model")},
        "finishReason": response.finish_reason,
    }
    if response.tool_calls:
        payload["toolCalls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls]
    if response.warnings:
        payload["model"]["warnings"] = list(response.warnings)
    return payload


def _unanswered(call: ToolCall | dict[str, Any], code: str, message: str, turn_id: str | None, step_id: str | None) -> EventDraft:
    call_id, name = (call.id, call.name) if isinstance(call, ToolCall) else (call["id"], call["name"])
    payload: dict[str, Any] = {
        "callId": call_id,
        "name": name,
        "ok": False,
        "content": f"Error [{code}]: {message}",
        "error": {"code": code, "message": message},
    }
    if turn_id is not None:
        payload["turnId"] = turn_id
    if step_id is not None:
        payload["stepId"] = step_id
    return EventDraft(TOOL_RESULT, payload)


async def close_open_turns(
    service: SessionService,
    session_id: str,
    append: Callable[[str, list[EventDraft]], Awaitable[list[Event]]] | None = None,
    *,
    head: int | None = None,
) -> tuple[list[str], str | None]:
    """Answer the dangling tool calls and end every open turn of the session as ``interrupted``.
    Returns the closed turn ids and the time the oldest of them started (None when none was open).
    ``head``: the session's head, when the caller has just read it."""
    turns = await (
        service.projection(session_id, turns_projection) if head is None else service.projection_at(session_id, turns_projection, head)
    )
    state = turns.state
    open_turns = sorted(state["open"].items(), key=lambda kv: kv[1])
    if not open_turns:
        return [], None
    nodes = (await service.projection(session_id, surface_projection)).state["nodes"]
    drafts = [_unanswered(c, "tool.interrupted", "the run stopped before this call finished", None, None) for c in dangling_calls(nodes)]
    drafts += [EventDraft(TURN_END, {"turnId": t, "outcome": "interrupted"}) for t, _ in open_turns]
    first = open_turns[0][1]
    started = await service.events(session_id, after_seq=first - 1, until_seq=first)
    if append is not None:
        await append(session_id, drafts)
    else:
        await _append_at_head(service, session_id, drafts)
    return [t for t, _ in open_turns], started[0].created_at if started else ""


async def close_orphaned_children(service: SessionService, parent_id: str, since: str | None) -> list[str]:
    """Close the open turns of the parent's child sessions touched since ``since`` (when the
    parent's interrupted turn started). The caller holds the parent's lease, so no live run can
    own such a child; a child whose own lease is taken anyway is left alone."""
    closed: list[str] = []
    for child in await service.children(parent_id):
        if since is not None and child.updated_at < since:
            continue  # untouched since the interrupted turn began: not one of its children
        try:
            async with run_lease(service.store, child.id):
                ids, started = await close_open_turns(service, child.id)
                if ids:
                    await close_orphaned_children(service, child.id, started)
        except ConflictError as exc:
            if exc.code != "run.busy":
                raise
            continue
        closed += ids
    return closed


async def _append_at_head(service: SessionService, session_id: str, drafts: list[EventDraft]) -> list[Event]:
    for _ in range(20):
        try:
            return await service.append(session_id, drafts, expected_seq=await service.store.head(session_id))
        except ConflictError:
            continue
    raise RpError("event.contended", f"could not append to {session_id}: the log keeps moving")


def dangling_calls(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls on the surface that have no result after them."""
    answered = {n["toolCallId"] for n in nodes if n["role"] == "tool"}
    return [c for n in nodes if n["role"] == "assistant" for c in n.get("toolCalls", []) if c["id"] not in answered]
