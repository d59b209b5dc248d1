"""Sessions: the harness API that everything above the store uses.

``SessionService`` adds to the raw store what needs knowledge of the event vocabulary:

- session creation with seed events and setup commands, all in one transaction
  (the spec's ``ctx.agents.create({seed, setup})``);
- appends whose surface replacements are checked against the current surface (the target must be
  on it) and stamped with ``sourceEventSeqs``, the seqs of the events they replace;
- commands (``command/run`` → handler → ``command/done``);
- projections loaded through snapshots; fork, archive, children.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import random
from dataclasses import dataclass
from typing import Any, Sequence

from roleplay.clock import IdGenerator, ulid_ids
from roleplay.errors import ConflictError, RpError, ValidationError
from roleplay.harness.names import COMMAND_DONE, COMMAND_RUN, COMPACTION_CHECKPOINT, SUMMARY_NODE_KIND, TOOL_RESULT

from .commands import CommandContext, CommandRegistry, CommandSpec, commands_projection
from .events import MESSAGE_TYPES, Event, EventDraft, validate_payload
from .fork_points import ForkPoint, closed_turn_fork_point
from .projections import Loaded, Projection, ProjectionCache, ProjectionRegistry, load
from .store.base import EventStore, SessionFilter, SessionRecord
from .surface_folds import SurfaceFolds
from .turns import turns_projection
from .surface import SURFACE, apply_surface, find_node, initial_surface, replaced_seqs, surface_projection

MAX_CAS_RETRIES = 50
BACKOFF_BASE_S, BACKOFF_CAP_S = 0.002, 0.1
SURFACE_TYPES = MESSAGE_TYPES | {TOOL_RESULT, COMPACTION_CHECKPOINT}


@dataclass(frozen=True)
class CommandOutcome:
    command_id: str
    ok: bool
    result: Any
    error: dict[str, Any] | None
    events: list[Event]


class SessionService:
    def __init__(
        self,
        store: EventStore,
        *,
        commands: CommandRegistry | None = None,
        projections: ProjectionRegistry | None = None,
        ids: IdGenerator | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        # Only retry timing draws from it; an own instance keeps the global RNG untouched.
        self.rng = rng or random.Random()
        self.commands = commands or CommandRegistry()
        self.projections = projections or ProjectionRegistry()
        store_ids: IdGenerator | None = getattr(store, "ids", None)
        self.ids: IdGenerator = ids or store_ids or ulid_ids
        self.cache = ProjectionCache()
        # Views derived from the log and kept across turns by their owners (the loop's converted
        # messages, a runtime's folds over the surface), by name. Each is a pure function of the
        # log, so dropping one changes no result.
        self.derived: dict[str, Any] = {}
        self.folds = SurfaceFolds()
        for builtin in (surface_projection, commands_projection):
            if builtin.name not in self.projections.names():
                self.projections.register(builtin)

    # -- creation --------------------------------------------------------------------------------
    async def create(
        self,
        preset: str,
        *,
        parent_id: str | None = None,
        title: str | None = None,
        workspace: str | None = None,
        seed: Sequence[EventDraft] = (),
        setup: Sequence[CommandSpec] = (),
        session_id: str | None = None,
        leased: bool = False,
    ) -> SessionRecord:
        """Create a session whose log starts with ``seed`` then each setup command's run+done.

        Setup commands run before anything is written; an unknown command or invalid seed
        creates nothing. A handler that rejects its args is recorded as ``command/done`` error
        (the session still exists, and that command does not count), exactly as it would be later.
        ``leased``: only inside ``leases.created_session_lease``, which holds the lease taken with it.
        """
        record, _ = await self.create_with_events(
            preset, parent_id=parent_id, title=title, workspace=workspace, seed=seed, setup=setup, session_id=session_id, leased=leased
        )
        return record

    async def create_with_events(
        self,
        preset: str,
        *,
        parent_id: str | None = None,
        title: str | None = None,
        workspace: str | None = None,
        seed: Sequence[EventDraft] = (),
        setup: Sequence[CommandSpec] = (),
        session_id: str | None = None,
        leased: bool = False,
    ) -> tuple[SessionRecord, list[Event]]:
        """``create``, with the events as appended. A ``leased`` session is its creator's: its
        first states are kept folded over them (the run's first step reads none of them back)."""
        session_id = session_id or self.ids("ses_")
        drafts = list(seed)
        stamped = self._stamp_surface_ops(initial_surface(), 0, drafts)
        for spec in setup:
            command_id = self.ids("cmd_")
            ok, value = self.commands.execute(spec, CommandContext(session_id, command_id))
            stamped.append(EventDraft(COMMAND_RUN, {"commandId": command_id, "name": spec.name, "args": spec.args}))
            stamped.append(_done_draft(command_id, ok, value))
        record, events = await self.store.create_session_with_events(
            preset=preset, session_id=session_id, parent_id=parent_id, workspace=workspace, title=title, events=stamped, leased=leased
        )
        # The session's first states, folded over the events it was created with, are what a load
        # would fold: its first step reads them at that seq (an event read each, and a snapshot
        # read where the session is not young, saved). A child session's run reads these two; a
        # story's first turn reads most of the registered ones (issue 16: five reads on
        # PostgreSQL). Fresh copies, as ``append`` keeps.
        if parent_id is None:
            seeded = [*(self.projections.get(name) for name in self.projections.names()), turns_projection]
        else:
            seeded = [surface_projection, turns_projection]
        self.cache.seed_empty(record.id, seeded)
        if events:
            self.cache.advance(record.id, 0, fresh_copies(events))
        return record, events

    # -- appends ---------------------------------------------------------------------------------
    async def append(self, session_id: str, drafts: Sequence[EventDraft], *, expected_seq: int) -> list[Event]:
        drafts = list(drafts)
        if any(d.type in MESSAGE_TYPES for d in drafts if isinstance(d, EventDraft)):
            # The surface at ``expected_seq`` exactly: when the cache holds it, nothing newer needs
            # reading (the append is a compare-and-swap at that seq anyway).
            loaded = await self.cache.load_at(self.store, session_id, surface_projection, expected_seq)
            if loaded.upto_seq != expected_seq:
                from .store.base import conflict

                raise conflict(session_id, expected_seq, loaded.upto_seq)
            # The cached surface is shared: validate against a surface of its own that starts
            # with only the batch's new nodes, the cached nodes joined in front (a shallow copy,
            # which keeps the cache untouched: the fold only rebinds list slots) only if a draft
            # rewrites the surface. A batch that only adds messages reads nothing else of it, and
            # copying a long story's node list (thousands of nodes, every one's reference count
            # touched) at every append was a cost growing with the story (issue 12).
            surface = {**loaded.state, "nodes": []}
            # Which ids are on it, kept across appends: a new message's duplicate check would
            # otherwise scan every node of a long story (issue 12).
            ids = self.folds.fold(SURFACE_IDS, session_id, loaded, _SurfaceIds).ids
            drafts = self._stamp_surface_ops(surface, expected_seq, drafts, ids, before=loaded.state["nodes"])
        events = await self.store.append(session_id, expected_seq, drafts)
        # What the cache would read back next: the same rows, as fresh copies of the payloads.
        copies = fresh_copies(events)
        self.cache.advance(session_id, expected_seq, copies)
        return events

    async def projection_at(self, session_id: str, name: str | Projection, seq: int) -> Loaded:
        """The projection for a caller that knows the session's head is ``seq`` (it holds the run
        lease and made the last append): no read of newer events when the cache is there."""
        proj = name if isinstance(name, Projection) else self.projections.get(name)
        return await self.cache.load_at(self.store, session_id, proj, seq)

    async def append_retrying(self, session_id: str, drafts: Sequence[EventDraft]) -> list[Event]:
        """Append at whatever the head is. Only for events whose meaning does not depend on what
        precedes them (e.g. a ``command/done`` for a run already logged).

        Without messages the store reads the head and appends in one locked transaction, so
        writers queue instead of conflicting. Messages must be checked against the surface at
        the head they land on, so they keep the read-then-CAS loop under the store's per-session
        write lock (an advisory lock on PostgreSQL), and a conflict with a writer outside it backs
        off with jitter from ``self.rng``, never the global RNG (issue 18)."""
        drafts = list(drafts)
        if not any(isinstance(d, EventDraft) and d.type in MESSAGE_TYPES for d in drafts):
            return await self.store.append_at_head(session_id, drafts)
        async with self.store.session_write_lock(session_id):
            for attempt in range(MAX_CAS_RETRIES):
                head = await self.store.head(session_id)
                try:
                    return await self.append(session_id, drafts, expected_seq=head)
                except ConflictError:
                    await asyncio.sleep(self.rng.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt)))
        raise RpError("event.contended", f"could not append to {session_id} after {MAX_CAS_RETRIES} conflicts")

    def added_nodes(self, head: int, drafts: Sequence[EventDraft]) -> builtins.list[dict[str, Any]]:
        """The surface nodes ``drafts`` add when appended at ``head``, validated as ``append``
        would (the loop builds a step's request over them before they are appended with it).
        Only for drafts that add nodes (no replacement, no checkpoint): the surface before them
        is not read. Raises as ``append`` would on an invalid payload."""
        surface = initial_surface()
        self._stamp_surface_ops(surface, head, list(drafts))
        nodes: builtins.list[dict[str, Any]] = surface["nodes"]
        return nodes

    def _stamp_surface_ops(
        self,
        surface: dict[str, Any],
        head: int,
        drafts: list[EventDraft],
        ids: set[str] | None = None,
        *,
        before: list[dict[str, Any]] | None = None,
    ) -> list[EventDraft]:
        """Validate message drafts against the surface they would apply to, in batch order, and
        record which event seqs each replacement replaces. Batch members will get seqs
        ``head + 1 …`` (the append is a CAS at ``head``), so a replacement may target a message
        earlier in the same batch. Raises before anything is written. ``ids``: the node ids on
        ``surface`` when the caller knows them (read only; the batch's own are kept aside).
        ``before``: the nodes that come before ``surface``'s own when its list holds only what
        the batch adds (read only); they are joined in front of them (a new list) before the
        first draft that rewrites the surface, the only kind that reads the nodes themselves."""
        added: set[str] = set()
        out: list[EventDraft] = []
        for i, draft in enumerate(drafts):
            if not isinstance(draft, EventDraft) or draft.type not in SURFACE_TYPES:
                out.append(draft)
                continue
            prefix = f"/{i}" if len(drafts) > 1 else ""
            payload = validate_payload(draft.type, draft.payload, index=i if len(drafts) > 1 else None)
            op = payload.get("surfaceOp") if draft.type in MESSAGE_TYPES else None
            if before is not None and (op or draft.type == COMPACTION_CHECKPOINT or ids is None):
                surface["nodes"] = [*before, *surface["nodes"]]
                before = None
            if op:
                at = find_node(surface["nodes"], op["targetMessageId"])
                if at >= 0 and surface["nodes"][at].get("kind") == SUMMARY_NODE_KIND:
                    # The spec: a checkpoint carries surface ownership of what it replaced, so it
                    # has no ordinary edit, delete or regenerate; forking before it is the way back.
                    raise ValidationError(
                        "surface.target_not_replaceable",
                        "a compaction summary cannot be edited, deleted or regenerated; fork before the checkpoint instead",
                        pointer=f"{prefix}/payload/surfaceOp/targetMessageId",
                    )
                seqs = replaced_seqs(surface, op)
                if seqs is None:
                    raise ValidationError(
                        "surface.target_not_found",
                        f"message {op['targetMessageId']!r} is not on the current surface",
                        pointer=f"{prefix}/payload/surfaceOp/targetMessageId",
                    )
                payload["surfaceOp"]["sourceEventSeqs"] = seqs
            elif draft.type in MESSAGE_TYPES and (
                payload["messageId"] in ids or payload["messageId"] in added
                if ids is not None
                else find_node(surface["nodes"], payload["messageId"]) >= 0
            ):
                raise ValidationError(
                    "surface.duplicate_message_id",
                    f"message id {payload['messageId']!r} is already on the surface; replace it with a surfaceOp",
                    pointer=f"{prefix}/payload/messageId",
                )
            count = len(surface["nodes"])
            apply_surface(surface, Event("", head + i + 1, draft.type, payload, ""))
            if op or draft.type == COMPACTION_CHECKPOINT:
                ids = None  # the rest of the batch checks the rewritten surface itself
            elif len(surface["nodes"]) > count:
                added.add(surface["nodes"][-1]["id"])
            out.append(EventDraft(draft.type, payload))
        return out

    # -- commands --------------------------------------------------------------------------------
    async def run_command(
        self,
        session_id: str,
        name: str,
        args: dict[str, Any],
        *,
        expected_seq: int | None = None,
        source: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
    ) -> CommandOutcome:
        """Log ``command/run``, execute the handler, log ``command/done``.

        The run is durable before the handler runs, so a crash in between leaves a run without a
        done, which never counts. ``expected_seq`` makes the run itself a CAS append.
        """
        self.commands.get(name)  # an unknown command fails before anything is written
        command_id = self.ids("cmd_")
        run_payload: dict[str, Any] = {"commandId": command_id, "name": name, "args": args}
        if source is not None:
            run_payload["source"] = source
        head = expected_seq if expected_seq is not None else await self.store.head(session_id)
        run_events = await self.append(session_id, [EventDraft(COMMAND_RUN, run_payload)], expected_seq=head)
        ok, value = self.commands.execute(CommandSpec(name, args), CommandContext(session_id, command_id, state or {}))
        done_events = await self.append_retrying(session_id, [_done_draft(command_id, ok, value)])
        return CommandOutcome(
            command_id=command_id,
            ok=ok,
            result=value if ok else None,
            error=None if ok else value,
            events=run_events + done_events,
        )

    # -- reads -----------------------------------------------------------------------------------
    async def get(self, session_id: str) -> SessionRecord:
        return await self.store.get_session(session_id)

    async def events(self, session_id: str, *, after_seq: int = 0, until_seq: int | None = None, limit: int | None = None) -> list[Event]:
        return await self.store.read(session_id, after_seq=after_seq, until_seq=until_seq, limit=limit)

    async def projection(self, session_id: str, name: str | Projection, **kw: Any) -> Loaded:
        """The projection's current state. Without options it comes from the in-process cache
        (shared, read-only); ``use_snapshot=False``/``until_seq``/… fold from the store instead."""
        proj = name if isinstance(name, Projection) else self.projections.get(name)
        if not kw:
            return await self.cache.load(self.store, session_id, proj)
        return await load(self.store, session_id, proj, **kw)

    async def surface(self, session_id: str) -> dict[str, Any]:
        return (await self.projection(session_id, SURFACE)).state

    async def list(
        self, *, archived: bool | None = False, parent_id: str | None = None, roots_only: bool = False, limit: int = 100, offset: int = 0
    ) -> builtins.list[SessionRecord]:  # `list` here is the method
        return await self.store.list_sessions(
            SessionFilter(archived=archived, parent_id=parent_id, roots_only=roots_only, limit=limit, offset=offset)
        )

    async def children(self, parent_id: str) -> builtins.list[SessionRecord]:
        await self.store.get_session(parent_id)
        return await self.store.list_sessions(SessionFilter(archived=None, parent_id=parent_id, limit=10_000))

    # -- lifecycle -------------------------------------------------------------------------------
    async def fork(self, session_id: str, at_seq: int, *, title: str | None = None) -> SessionRecord:
        return (await self.fork_between_turns(session_id, at_seq, title=title))[0]

    async def fork_between_turns(self, session_id: str, at_seq: int, *, title: str | None = None) -> tuple[SessionRecord, ForkPoint]:
        """Fork at ``at_seq``, snapped back to the end of the last closed turn when it falls inside
        a turn (``fork_points``); the point says where it cut and why."""
        point = await closed_turn_fork_point(self.store, session_id, at_seq)
        return await self.store.fork(session_id, point.at_seq, title=title), point

    async def archive(self, session_id: str, archived: bool = True) -> SessionRecord:
        return await self.store.set_archived(session_id, archived)


SURFACE_IDS = "harness.sessions.surface_ids"


class _SurfaceIds:
    """The ids of the surface's nodes (a fold kept by ``SessionService.folds``)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def feed(self, node: dict[str, Any]) -> None:
        self.ids.add(node["id"])


def fresh_copies(events: list[Event]) -> list[Event]:
    """The events with their own copies of the payloads, for the shared cache (a deep copy costs
    per object, not per character: a Writer's whole prompt is one string)."""
    return [Event(e.session_id, e.seq, e.type, json_copy(e.payload), e.created_at, e.version) for e in events]


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def json_copy(value: Any) -> Any:
    """``copy.deepcopy`` of a stored payload (JSON: dicts, lists and immutable scalars, no object
    twice), at a third of its cost: no memo, no dispatch by type for every scalar. Anything else is
    left to ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _IMMUTABLE else json_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _IMMUTABLE else json_copy(v) for v in value]
    return value if kind in _IMMUTABLE else copy.deepcopy(value)


def _done_draft(command_id: str, ok: bool, value: Any) -> EventDraft:
    if ok:
        payload: dict[str, Any] = {"commandId": command_id, "kind": "success"}
        if value is not None:
            payload["result"] = value
        return EventDraft(COMMAND_DONE, payload)
    return EventDraft(COMMAND_DONE, {"commandId": command_id, "kind": "error", "error": value})
