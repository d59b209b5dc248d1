"""Projections: named, versioned, pure folds over a session's events, with snapshots.

A projection's state must be plain JSON (dicts, lists, str, numbers, bools, None) so that a
snapshot round-trips exactly; ``apply`` may mutate the state it is given (the loader owns it) but
must not read anything but the state and the event. Bumping ``version`` invalidates every stored
snapshot of that projection, because snapshots are keyed by (session, name, version).

Snapshots are a disposable cache: loading = newest snapshot + the events after it, and the
property test in ``tests/harness/test_projections.py`` checks that this always equals a rebuild
from seq 0.

How often (issue 12): a snapshot serialises the whole state, and a long story's surface is
megabytes (9 MB, a fifth of a second, at turn 1,000 of the demo story), so one every fixed number
of events costs each event a share that grows with the story. A snapshot is written once the
events folded past the last one number ``snapshot_every`` or a quarter of that snapshot's seq,
whichever is more (:func:`snapshot_due`): the intervals grow with the state, so a snapshot's cost
per event stays flat, and a fresh process still folds at most about a fifth of the log on top of
the newest snapshot (folding an event costs about twice as much as a snapshot's share of it).

Off the event loop (issue 16): a large snapshot is serialised on a thread (``store.base.
prepare_snapshot``), which reads the state while the loop goes on. ``ProjectionCache`` keeps the
state it is writing as it is until the write ends: it stays cached meanwhile, and a fold of later
events into it folds into a copy instead (``Projection.copy``), so the snapshot holds exactly the
events up to its seq.

Packed at rest (issue 16): a server keeps the states of every story it serves, and each state is
dozens of dicts and lists that every full garbage collection walks while the event loop waits
(200 young stories' states were half of a loaded server's tracked objects). Only the most recently
used ``max_live`` entries stay as objects; the others are kept marshalled (one bytes object, which
the collector does not walk) and unmarshalled when next used: a few microseconds for a young
story's state, once per turn. States folded over more than ``PACK_MAX_SEQ`` events stay objects:
a long story's surface is megabytes, which would take milliseconds each way on the loop, and a
server has few of them. Each append used to unpack and repack every resting state of its session:
now its events wait with a resting state, marshalled, until the state is next used (at most
``PENDING_MAX`` appends), and a state only read since it was unpacked rests again as the bytes it
came from. A projection that reads another's state (``state_of``) shares its entry.
"""

from __future__ import annotations

import asyncio
import copy as copying
import json
import marshal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from roleplay.errors import NotFoundError, ValidationError

from .events import Event

if TYPE_CHECKING:  # pragma: no cover
    from .store.base import EventStore

DEFAULT_SNAPSHOT_EVERY = 500
# The events after a snapshot that call for the next one, at least: this share of its seq.
SNAPSHOT_GROWTH = 4  # a quarter


def snapshot_due(folded: int, snapshot_seq: int, every: int | None) -> bool:
    """Whether ``folded`` events past the snapshot at ``snapshot_seq`` (0: none) call for a new
    one: ``every`` of them (None: never), and at least a quarter of ``snapshot_seq``."""
    return every is not None and folded >= max(every, snapshot_seq // SNAPSHOT_GROWTH)


@dataclass(frozen=True)
class Projection:
    name: str
    version: int
    initial: Callable[[], Any]
    apply: Callable[[Any, Event], Any]
    # True for an event that changes what the state already holds (the surface: a replacement or a
    # compaction). Every other event may only add to the state, which lets a reader extend what it
    # derived from an earlier state instead of deriving it again (``Loaded.appends_since``). None:
    # the projection does not say, and nothing derived from it is reused.
    rewrites: Callable[[Event], bool] | None = None
    # A copy of a state that folding later events into leaves the original as it was, for a
    # snapshot being written from it meanwhile (only then: rare). None: a deep copy. The surface's
    # is its node list copied (a node never changes once on it), not megabytes of nodes.
    copy: Callable[[Any], Any] | None = None
    # A projection whose state *is* this other projection's (same initial state, same apply; a
    # reader reads another part of it): loaded, cached and snapshotted as that one, so each event
    # is folded and each state kept (and packed) once, not twice (issue 16: ``rp/state/activity``).
    state_of: "Projection | None" = None


def folded_as(projection: Projection) -> Projection:
    """The projection whose state ``projection`` reads (itself unless it names ``state_of``)."""
    return projection if projection.state_of is None else projection.state_of


@dataclass(frozen=True)
class Loaded:
    state: Any
    upto_seq: int
    from_snapshot_seq: int  # 0 when folded from scratch
    folded: int  # events folded on top of the snapshot
    # The state at ``upto_seq`` is the state at any seq from this one on plus additions only (the
    # events since did not rewrite it). None: unknown (a fold from the store, or a projection
    # without ``rewrites``). Only the in-process cache knows it, since it saw every event since.
    appends_since: int | None = None


def fold(projection: Projection, events: Iterable[Event], state: Any = None) -> Any:
    if state is None:
        state = projection.initial()
    apply = projection.apply
    for event in events:
        state = apply(state, event)
    return state


class ProjectionRegistry:
    def __init__(self, projections: Iterable[Projection] = ()) -> None:
        self._by_name: dict[str, Projection] = {}
        for p in projections:
            self.register(p)

    def register(self, projection: Projection) -> None:
        existing = self._by_name.get(projection.name)
        if existing is not None and existing is not projection:
            raise ValidationError("projection.duplicate", f"projection {projection.name!r} is already registered", pointer="/name")
        self._by_name[projection.name] = projection

    def get(self, name: str) -> Projection:
        try:
            return self._by_name[name]
        except KeyError:
            raise NotFoundError("projection.not_found", f"no projection {name!r}; known: {', '.join(sorted(self._by_name))}") from None

    def names(self) -> list[str]:
        return sorted(self._by_name)


async def load(
    store: "EventStore",
    session_id: str,
    projection: Projection,
    *,
    use_snapshot: bool = True,
    snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY,
    until_seq: int | None = None,
) -> Loaded:
    """Fold ``projection`` for a session, starting from its snapshot when there is one.

    A new snapshot is written when the events folded past the old one make it due
    (:func:`snapshot_due`; ``snapshot_every`` None disables writing). ``until_seq`` folds a
    prefix (no snapshot is read past it)."""
    projection = folded_as(projection)
    state: Any = None
    start = 0
    if use_snapshot:
        snap = await store.load_snapshot(session_id, projection.name, projection.version)
        if snap is not None and (until_seq is None or snap.upto_seq <= until_seq):
            state, start = snap.state, snap.upto_seq
    if state is None:
        state = projection.initial()  # (the read below says session.not_found for a missing session)
    folded = 0
    upto = start
    async for event in store.iter_events(session_id, after_seq=start):
        if until_seq is not None and event.seq > until_seq:
            break
        state = projection.apply(state, event)
        folded += 1
        upto = event.seq
    if until_seq is None and snapshot_due(folded, start, snapshot_every):
        from .store.base import Snapshot

        await store.save_snapshot(Snapshot(session_id, projection.name, projection.version, upto, state))
    return Loaded(state=state, upto_seq=upto, from_snapshot_seq=start, folded=folded)


async def write_snapshot(store: "EventStore", session_id: str, projection: Projection) -> Loaded:
    """Fold and store a snapshot now, whatever the threshold."""
    projection = folded_as(projection)
    loaded = await load(store, session_id, projection, snapshot_every=None)
    from .store.base import Snapshot

    await store.save_snapshot(Snapshot(session_id, projection.name, projection.version, loaded.upto_seq, loaded.state))
    return loaded


@dataclass
class _Entry:
    state: Any
    upto_seq: int
    snapshot_seq: int
    appends_since: int
    projection: Projection | None = None
    # The state a snapshot write in flight reads (None: no write): not to be folded into.
    writing: Any = None
    # The state marshalled while the entry rests (``state`` is None then): module docstring.
    packed: bytes | None = None
    # While the entry is live: the bytes it was unpacked from, as long as nothing was folded into
    # the state since (states handed out are read-only). Packing it again is then dropping the
    # state: a state only read between two rests (most of a turn's reads) is marshalled once.
    clean: bytes | None = None
    # Events appended by this process while the entry rested, marshalled, not folded yet: folded
    # when it is next used (``_unpack``), so an append does not unpack and repack each of the
    # session's resting states (issue 16). ``upto_seq`` counts them.
    pending: list[bytes] | None = None


def _unshared(entry: _Entry, projection: Projection) -> Any:
    """The entry's state, to fold events into: a copy when a snapshot write is reading it."""
    if entry.writing is not None and entry.writing is entry.state:
        entry.state = projection.copy(entry.state) if projection.copy is not None else clone(entry.state)
    entry.clean = None  # (events are folded into it next)
    return entry.state


_MAX_RETIRED = 64  # retired entries kept at most (``ProjectionCache.retire``)
# Entries folded over more events than this are never packed (module docstring).
PACK_MAX_SEQ = 2_000
# Appends a resting entry keeps unfolded at most (``_Entry.pending``): one nothing reads (the
# commands' state) would otherwise keep a copy of every event appended since it was last used.
PENDING_MAX = 16


def _unpack(entry: _Entry) -> None:
    if entry.packed is not None:
        entry.state, entry.clean, entry.packed = marshal.loads(entry.packed), entry.packed, None
        pending, entry.pending = entry.pending, None
        if pending and entry.projection is not None:
            state, apply = entry.state, entry.projection.apply
            try:
                for blob in pending:
                    for sid, seq, kind, payload, created_at, version in marshal.loads(blob):
                        state = apply(state, Event(sid, seq, kind, payload, created_at, version))
            except BaseException:
                # As it rested (its seq counts the waiting events): never a state short of them.
                entry.state, entry.packed, entry.clean, entry.pending = None, entry.clean, None, pending
                raise
            entry.state, entry.clean = state, None


def _marshal_events(events: list[Event]) -> bytes | None:
    """``events`` as one bytes object for resting entries to fold later (each unmarshalling gives
    fresh copies, as ``advance`` requires); None when marshal refuses them."""
    try:
        return marshal.dumps([(e.session_id, e.seq, e.type, e.payload, e.created_at, e.version) for e in events])
    except ValueError:
        return None


def _pack(entry: _Entry) -> None:
    """Marshal ``entry``'s state unless it is large, being written to a snapshot, or not plain
    JSON after all (marshal refuses other types and subclasses: such a state stays an object).
    A state unchanged since it was unpacked goes back to the bytes it came from."""
    if entry.packed is not None or entry.writing is not None or entry.upto_seq > PACK_MAX_SEQ:
        return
    packed = entry.clean
    if packed is None:
        try:
            packed = marshal.dumps(entry.state)
        except ValueError:
            return
    entry.state, entry.packed, entry.clean = None, packed, None


class ProjectionCache:
    """The latest state of each (session, projection) kept in memory and advanced by folding only
    the events appended since: a long session costs one indexed read of its new events per load
    instead of a snapshot parse plus a tail fold.

    Correct across processes because the log is append-only: whatever another process appended
    is read and folded the next time. States handed out are *shared and read-only*; a caller that
    needs to change one copies it first (``SessionService._stamp_surface_ops`` does). A snapshot is
    still written when enough events were folded past the last (:func:`snapshot_due`) so a fresh
    process loads fast.
    """

    # Bounded twice. A long session's surface is megabytes, so the events the states are folded
    # over (their seqs, a proxy for their size) are: 3M is the 128 entries once kept, at a
    # 1,000-turn demo story's ~23,000 events. A server holds many sessions, and when their states
    # do not all fit, every turn of each story reloads each of them (issue 16: a snapshot read
    # and a full event read per projection, with 30 young stories and 128 entries), so the count
    # is bounded far above a story's share (~9 states): young stories' states are small.
    # ``max_live``: entries kept as objects, the most recently used; the others are packed (module
    # docstring). A loaded server plays a few stories at any moment, about ten entries each.
    def __init__(
        self,
        max_entries: int = 4096,
        snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY,
        max_folded: int = 3_000_000,
        max_live: int = 128,
    ) -> None:
        self._entries: dict[tuple[str, str, int], _Entry] = {}
        self._live: dict[tuple[str, str, int], None] = {}  # unpacked entries, least recently used first
        self._max_live = max(1, max_live)
        # Each session's keys: an append advances only its own session's states, and a scan of
        # thousands of entries for them would cost every append (issue 16).
        self._sessions: dict[str, dict[tuple[str, str, int], None]] = {}  # least recently used first
        self._retired: dict[tuple[str, str, int], None] = {}  # evicted first, oldest first
        self._max = max_entries
        self._max_folded = max_folded
        self._folded = 0  # the entries' upto_seq, summed
        self._snapshot_every = snapshot_every

    def _keep(self, key: tuple[str, str, int], entry: _Entry) -> None:
        """(Re)insert ``entry`` as the most recently used, then evict from the least recently used
        end (retired sessions' entries first: they were moved there) until within bounds; the
        entry just kept stays whatever its size."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._folded -= old.upto_seq
        self._entries[key] = entry
        self._touch(key)
        self._use(key, entry)
        self._folded += entry.upto_seq
        self._trim(keep=key)

    def _touch(self, key: tuple[str, str, int]) -> None:
        """``key``'s entry was just kept or used: the most recent of its session, not retired."""
        keys = self._sessions.setdefault(key[0], {})
        keys.pop(key, None)
        keys[key] = None
        self._retired.pop(key, None)

    def _use(self, key: tuple[str, str, int], entry: _Entry) -> None:
        """``entry``'s state as an object, and the most recently used of the live ones; the least
        recently used beyond ``max_live`` are packed."""
        _unpack(entry)
        live = self._live
        live.pop(key, None)
        live[key] = None
        while len(live) > self._max_live:
            oldest = next(iter(live))
            del live[oldest]
            resting = self._entries.get(oldest)
            if resting is not None:
                _pack(resting)

    def _take(self, key: tuple[str, str, int]) -> _Entry | None:
        """Remove ``key``'s entry (to be kept again or dropped); its folded count is the caller's."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            keys = self._sessions.get(key[0])
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._sessions[key[0]]
            self._retired.pop(key, None)
            self._live.pop(key, None)
        return entry

    def _trim(self, keep: tuple[str, str, int] | None = None) -> None:
        entries = self._entries
        while len(entries) > 1 and (len(entries) > self._max or self._folded > self._max_folded):
            # Retired sessions' entries first, then the least recently used; never the entry
            # just kept, whatever its size.
            victim = next((k for k in self._retired if k != keep), None) or next((k for k in entries if k != keep), None)
            if victim is None:
                return
            taken = self._take(victim)
            assert taken is not None
            self._folded -= taken.upto_seq

    async def load(self, store: "EventStore", session_id: str, projection: Projection, *, use_snapshot: bool = True) -> Loaded:
        projection = folded_as(projection)
        key = (session_id, projection.name, projection.version)
        entry = self._take(key)  # (a concurrent load of it meanwhile starts its own)
        if entry is None:
            loaded = await load(store, session_id, projection, use_snapshot=use_snapshot, snapshot_every=None)
            entry = _Entry(
                loaded.state,
                loaded.upto_seq,
                loaded.from_snapshot_seq,
                loaded.upto_seq,  # a new state object: nothing derived earlier is known to match it
                projection,
            )
            folded = loaded.folded
        else:
            self._folded -= entry.upto_seq
            folded = 0
            _unpack(entry)
            state = entry.state
            rewrites = projection.rewrites
            async for event in store.iter_events(session_id, after_seq=entry.upto_seq):
                if not folded:
                    state = _unshared(entry, projection)
                state = projection.apply(state, event)
                entry.upto_seq = event.seq
                if rewrites is not None and rewrites(event):
                    entry.appends_since = event.seq
                folded += 1
            entry.state = state
        self._keep(key, entry)  # most recently used last
        result = Loaded(
            state=entry.state,
            upto_seq=entry.upto_seq,
            from_snapshot_seq=entry.upto_seq - folded,
            folded=folded,
            appends_since=entry.appends_since if projection.rewrites is not None else None,
        )
        if snapshot_due(entry.upto_seq - entry.snapshot_seq, entry.snapshot_seq, self._snapshot_every):
            await _write_kept(store, session_id, projection, entry)
        return result

    def seed_empty(self, session_id: str, projections: Sequence[Projection]) -> None:
        """Keep the initial states of a session this process has just created: what a load would
        fold (no snapshot, no event), to be ``advance``d over the events it was created with, so a
        first ``load_at`` at its head needs no read. A plain ``load`` still reads whatever another
        process appended since."""
        for projection in map(folded_as, projections):
            key = (session_id, projection.name, projection.version)
            if key not in self._entries:
                self._keep(key, _Entry(projection.initial(), 0, 0, 0, projection))

    async def load_at(self, store: "EventStore", session_id: str, projection: Projection, seq: int) -> Loaded:
        """``load`` for a caller that knows the session's head is ``seq`` (it holds the run lease
        and made the last append): a state already folded to ``seq`` is returned without asking
        the store for newer events (one round trip less on PostgreSQL). Otherwise a plain load."""
        projection = folded_as(projection)
        key = (session_id, projection.name, projection.version)
        entry = self._entries.get(key)
        if entry is None or entry.upto_seq != seq:
            # A young session has no snapshot to find (the first is due ``snapshot_every`` events
            # in), and folding its few events from the start is one read either way: the snapshot
            # read, a round trip on PostgreSQL, is skipped. Same state: a fold from scratch is
            # what snapshot + tail equals (the property test).
            young = seq < (self._snapshot_every if self._snapshot_every is not None else DEFAULT_SNAPSHOT_EVERY)
            return await self.load(store, session_id, projection, use_snapshot=not young)
        self._entries[key] = self._entries.pop(key)  # most recently used last
        self._touch(key)
        self._use(key, entry)
        return Loaded(
            state=entry.state,
            upto_seq=entry.upto_seq,
            from_snapshot_seq=entry.upto_seq,
            folded=0,
            appends_since=entry.appends_since if projection.rewrites is not None else None,
        )

    def advance(self, session_id: str, after_seq: int, events: list[Event]) -> None:
        """Fold events this process has just appended after ``after_seq`` into the session's states
        kept at exactly that seq, as a load would after reading them back (``events`` must be fresh
        copies: the states keep parts of them)."""
        blob: bytes | None = None
        failed: list[tuple[str, str, int]] = []
        for key in self._sessions.get(session_id, ()):
            entry = self._entries[key]
            projection = entry.projection
            if projection is None or entry.upto_seq != after_seq or not events:
                continue
            if entry.packed is not None:
                # A resting state: the events wait with it until it is used (``_Entry.pending``).
                if blob is None:
                    blob = _marshal_events(events) or b""
                if blob and len(entry.pending or ()) < PENDING_MAX:
                    entry.pending = [*(entry.pending or ()), blob]
                    if projection.rewrites is not None:
                        for event in events:
                            if projection.rewrites(event):
                                entry.appends_since = event.seq
                    self._folded += events[-1].seq - entry.upto_seq
                    entry.upto_seq = events[-1].seq
                    continue
            self._use(key, entry)
            state = _unshared(entry, projection)
            try:
                for event in events:
                    state = projection.apply(state, event)
                    if projection.rewrites is not None and projection.rewrites(event):
                        entry.appends_since = event.seq
            except Exception:  # noqa: BLE001 - the reader of this projection is told, below
                # The events are in the log: the append happened, whatever one fold makes of
                # them. The state goes (it may be half folded); the next load folds the log
                # again and raises to whoever reads this projection, not to the appender, which
                # would take a written event for one that failed (and write it again).
                failed.append(key)
                continue
            self._folded += events[-1].seq - entry.upto_seq
            entry.state, entry.upto_seq = state, events[-1].seq
        for key in failed:
            taken = self._take(key)
            if taken is not None:
                self._folded -= taken.upto_seq
        self._trim()

    def retire(self, session_id: str) -> None:
        """A session whose run is over and that nothing is expected to read again soon (a
        sub-agent's child after its one turn): its states go first when the cache is full, instead
        of pushing out the states of the stories still being played. They stay usable meanwhile."""
        for key in self._sessions.get(session_id, ()):
            self._retired[key] = None
        # Not many of them stay, full or not: a server plays a Writer child per turn, and every
        # object kept is one more that each full collection walks while the event loop waits
        # (issue 16: 800 children's states were a fifth of a loaded server's heap).
        while len(self._retired) > _MAX_RETIRED:
            oldest = next(iter(self._retired))
            del self._retired[oldest]
            taken = self._take(oldest)
            if taken is not None:
                self._folded -= taken.upto_seq


async def _write_kept(store: "EventStore", session_id: str, projection: Projection, entry: _Entry) -> None:
    """Write a snapshot of a cached state while it stays cached: until the write ends, a fold
    into the entry folds into a copy (``_unshared``), whatever happens to this coroutine (a
    cancelled loader leaves the write to finish: the thread serialising the state cannot be
    stopped). A failed write is due again at the next load, as before it was tried."""
    from .store.base import Snapshot

    state, before = entry.state, entry.snapshot_seq
    entry.writing, entry.snapshot_seq = state, entry.upto_seq
    write = asyncio.ensure_future(store.save_snapshot(Snapshot(session_id, projection.name, projection.version, entry.upto_seq, state)))

    def done(task: "asyncio.Future[None]") -> None:
        if entry.writing is state:
            entry.writing = None
        if task.cancelled() or task.exception() is not None:  # (retrieved: the loader, if any, raises it)
            entry.snapshot_seq = min(entry.snapshot_seq, before)

    write.add_done_callback(done)
    await asyncio.shield(write)


def roundtrip(state: Any) -> Any:
    """What a snapshot would give back: used by tests and by callers that must not share state."""
    return json.loads(json.dumps(state, ensure_ascii=False))


def clone(state: Any) -> Any:
    return copying.deepcopy(state)
