"""The event store interface shared by the SQLite and PostgreSQL backends.

A backend implements a handful of dialect-specific primitives (``_insert_session``,
``_append_rows``, …); everything that must behave identically on both (payload validation, CAS
semantics, error codes, live notifications) lives here, so the shared conformance suite in
``tests/harness/test_store.py`` tests one behaviour, twice.

Append semantics: ``append(session_id, expected_seq, drafts)`` succeeds only when the session's
head is exactly ``expected_seq``; the drafts get ``expected_seq + 1 …``. Both backends do the
compare-and-swap as a conditional ``UPDATE sessions SET head_seq = … WHERE head_seq = expected``
(row-locked, so concurrent writers in several processes serialise on it) and keep
``UNIQUE(session_id, seq)`` on events as a second guard. Rows are never updated or deleted.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, AsyncIterator, Iterable, Sequence

from roleplay.clock import Clock, IdGenerator, iso, system_clock, ulid_ids
from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError

from ..events import MAX_EVENT_BYTES, Event, EventDraft, event_version, validate_payload
from ..notify import Broker, Subscription
from .texts import (
    MIN_EXTERNAL_BYTES,
    SNAPSHOT_TEXT_MARKER,
    Externalised,
    LargeStrings,
    blanked_json,
    compress_payload,
    externalise_snapshot,
    externalise_strings,
    json_bytes_at_most,
    large_strings,
    reassemble,
    reassemble_snapshot,
)

MAX_BATCH = 10_000


@dataclass(frozen=True)
class SessionRecord:
    id: str
    preset: str
    parent_id: str | None = None
    forked_from: str | None = None
    forked_at_seq: int | None = None
    workspace: str | None = None
    title: str | None = None
    archived: bool = False
    head_seq: int = 0
    created_at: str = ""
    updated_at: str = ""

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> "SessionRecord":
        """A ``sessions`` row in the column order both backends select (``SESSION_COLUMNS``)."""
        return cls(
            id=row[0],
            preset=row[1],
            parent_id=row[2],
            forked_from=row[3],
            forked_at_seq=row[4],
            workspace=row[5],
            title=row[6],
            archived=bool(row[7]),
            head_seq=row[8],
            created_at=row[9],
            updated_at=row[10],
        )

    def to_row(self) -> tuple[Any, ...]:
        """The record as a ``sessions`` row, in ``SESSION_COLUMNS`` order (``from_row``'s inverse)."""
        return (
            self.id,
            self.preset,
            self.parent_id,
            self.forked_from,
            self.forked_at_seq,
            self.workspace,
            self.title,
            self.archived,
            self.head_seq,
            self.created_at,
            self.updated_at,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            "id": d["id"],
            "preset": d["preset"],
            "parentId": d["parent_id"],
            "forkedFrom": d["forked_from"],
            "forkedAtSeq": d["forked_at_seq"],
            "workspace": d["workspace"],
            "title": d["title"],
            "archived": d["archived"],
            "headSeq": d["head_seq"],
            "createdAt": d["created_at"],
            "updatedAt": d["updated_at"],
        }


@dataclass(frozen=True)
class Snapshot:
    session_id: str
    name: str
    version: int
    upto_seq: int
    state: Any


@dataclass(frozen=True)
class PreparedEvent:
    """A validated draft with its normalised payload serialised once, ready for the backend."""

    type: str
    version: int
    payload: dict[str, Any]
    # The payload's JSON as its row keeps it: whole, or with its large strings blanked when they
    # are stored as shared parts (``external``, texts.py).
    payload_json: str
    external: Externalised | None = None
    # ``payload_json`` compressed (texts.compress_payload); the row's payload column then holds ``{}``.
    compressed: bytes | None = None

    @property
    def stored_json(self) -> str:
        return "{}" if self.compressed is not None else self.payload_json


@dataclass
class SessionFilter:
    archived: bool | None = False
    parent_id: str | None = None
    roots_only: bool = False
    limit: int = 100
    offset: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


SESSION_COLUMNS = "id, preset, parent_id, forked_from, forked_at_seq, workspace, title, archived, head_seq, created_at, updated_at"


def session_listing_sql(flt: SessionFilter, mark: str, archived_value: Any = None) -> tuple[str, list[Any]]:
    """The listing query for both dialects; ``mark`` is the placeholder (``?`` or ``%s``).
    ``archived_value`` converts the flag (SQLite stores it as an integer)."""
    where, args = [], []
    if flt.archived is not None:
        where.append(f"archived={mark}")
        args.append(archived_value(flt.archived) if archived_value else flt.archived)
    if flt.parent_id is not None:
        where.append(f"parent_id={mark}")
        args.append(flt.parent_id)
    elif flt.roots_only:
        where.append("parent_id IS NULL")
    sql = f"SELECT {SESSION_COLUMNS} FROM sessions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY updated_at DESC, id DESC LIMIT {mark} OFFSET {mark}"
    return sql, [*args, flt.limit, flt.offset]


def snapshot_upsert_sql(mark: str) -> str:
    """Save a snapshot unless a newer one is already stored (both dialects; ``mark`` as above)."""
    values = ",".join([mark] * 6)
    return (
        f"INSERT INTO snapshots(session_id, name, version, upto_seq, state, texts) VALUES ({values}) "
        "ON CONFLICT (session_id, name, version) DO UPDATE SET upto_seq=excluded.upto_seq, state=excluded.state, "
        "texts=excluded.texts WHERE excluded.upto_seq > snapshots.upto_seq"
    )


async def prepare_snapshot(snapshot: Snapshot) -> tuple[str, Externalised | None]:
    """The snapshot's stored JSON and, for a large one, its texts to keep as parts: its large
    strings (shared with the events that hold them) and the rest of the state as one text, one
    node per line (``texts.externalise_snapshot``), so that a snapshot rewritten every few hundred
    events stores only the parts that changed, not the whole surface again (issue 12). The row
    then keeps ``SNAPSHOT_TEXT_MARKER`` as its state.

    A large state is prepared on a thread (issue 16: a long story's surface held the event loop
    for a fifth of a second), so ``snapshot.state`` must not change until this returns, nor after
    a cancellation, while the thread may still read it (``projections.ProjectionCache`` keeps the
    state it snapshots as it is and folds later events into a copy)."""
    text = _small_state_json(snapshot.state)
    if text is not None:
        return text, None
    external = await asyncio.to_thread(externalise_snapshot, snapshot.state)
    return external.stored_json, external


# ``json.dumps(state, ensure_ascii=False, separators=(",", ":"))``, the JSON a small snapshot's row
# keeps, as an encoder whose ``iterencode`` (the pure-Python encoder, the same text in pieces)
# sizes a state without serialising all of it.
_STATE_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _small_state_json(state: Any) -> str | None:
    """The state's JSON when it is shorter than ``MIN_EXTERNAL_BYTES`` characters, else None,
    having serialised no more than about that much of it: the whole state's JSON, only ever
    measured, was a single C call of 63 ms on a long story's surface, holding the GIL even on a
    thread."""
    size = 0
    for piece in _STATE_JSON.iterencode(state):
        size += len(piece)
        if size >= MIN_EXTERNAL_BYTES:
            return None
    return _STATE_JSON.encode(state)


def snapshot_state(stored: str, texts: str | None, parts: dict[int, bytes], *, where: str) -> Any:
    """The state of a snapshot row: its JSON with its large strings put back (rows written before
    issue 12's snapshot texts), or rebuilt from its texts (``prepare_snapshot``)."""
    state = json.loads(stored)
    if not texts:
        return state
    if state == SNAPSHOT_TEXT_MARKER:
        return reassemble_snapshot(texts, parts, where=where)
    return reassemble(state, texts, parts, where=where)


def snapshot_row(snapshot: Snapshot, stored: str, texts: str | None) -> tuple[Any, ...]:
    return (snapshot.session_id, snapshot.name, snapshot.version, snapshot.upto_seq, stored, texts)


def prepare_drafts(drafts: Sequence[EventDraft]) -> list[PreparedEvent]:
    """Validate every draft before any I/O: a bad batch writes nothing."""
    if not isinstance(drafts, (list, tuple)) or not drafts:
        raise ValidationError("event.empty_batch", "an append needs at least one event")
    if len(drafts) > MAX_BATCH:
        raise ValidationError("event.batch_too_large", f"at most {MAX_BATCH} events per append")
    prepared = []
    for i, draft in enumerate(drafts):
        if not isinstance(draft, EventDraft):
            raise ValidationError("event.invalid_draft", "events must be EventDraft values", pointer=f"/{i}")
        payload = validate_payload(draft.type, draft.payload, index=i if len(drafts) > 1 else None)
        found = large_strings(payload)
        inline = _payload_json(payload, found, i)
        external: Externalised | None = None
        if (
            found
            and len(inline) + sum(len(text) for _, text in found) >= MIN_EXTERNAL_BYTES
            and json_bytes_at_most(inline, found) <= MAX_EVENT_BYTES
        ):
            # Within the limit whatever its large strings hold, and they go to parts: the whole
            # payload is never serialised (a long story's Writer prompt is a megabyte).
            external = externalise_strings(found, inline)
        else:
            # The rule, exactly: the payload's JSON in UTF-8 at most MAX_EVENT_BYTES; externalised
            # when that JSON has at least MIN_EXTERNAL_BYTES characters.
            text = _payload_json(payload, [], i) if found else inline
            if len(text.encode("utf-8")) > MAX_EVENT_BYTES:
                raise ValidationError("event.too_large", f"event payload exceeds {MAX_EVENT_BYTES} bytes", pointer=f"/{i}/payload")
            if found and len(text) >= MIN_EXTERNAL_BYTES:
                external = externalise_strings(found, inline)
            else:
                inline = text
        compressed = compress_payload(inline)
        prepared.append(PreparedEvent(draft.type, event_version(draft.type), payload, inline, external, compressed))
    return prepared


def _payload_json(payload: dict[str, Any], found: LargeStrings, index: int) -> str:
    """The payload's JSON, with the ``found`` strings blanked."""
    try:
        return blanked_json(payload, found)
    except ValueError as exc:
        raise ValidationError("event.invalid_payload", f"payload is not valid JSON: {exc}", pointer=f"/{index}/payload") from None


def conflict(session_id: str, expected: int, head: int) -> ConflictError:
    return ConflictError(
        "event.seq_conflict",
        f"session {session_id} is at seq {head}, not at the expected seq {expected}; re-read and retry",
        details={"sessionId": session_id, "expectedSeq": expected, "headSeq": head},
    )


def session_not_found(session_id: str) -> NotFoundError:
    return NotFoundError("session.not_found", f"no session {session_id!r}", details={"sessionId": session_id})


class EventStore(ABC):
    """Async event store. Subclasses implement the primitives marked abstract."""

    # A backend whose session insert itself reports a missing parent as ``session.not_found``
    # (PostgreSQL: the foreign key) sets this, saving the parent's read.
    insert_checks_parent = False

    dialect: str = ""

    def __init__(self, *, clock: Clock = system_clock, ids: IdGenerator = ulid_ids) -> None:
        self.clock = clock
        self.ids = ids
        self.broker = Broker(self)
        # Weak values: a session's lock lives only while some writer holds or awaits it.
        self._writer_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # -- lifecycle -------------------------------------------------------------------------------
    @abstractmethod
    async def migrate(self) -> list[int]:
        """Apply pending numbered migrations; return the numbers applied now."""

    @abstractmethod
    async def schema_version(self) -> int: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> "EventStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def now(self) -> str:
        value = self.clock()
        return iso(value) if isinstance(value, datetime) else str(value)

    # -- sessions --------------------------------------------------------------------------------
    async def create_session(
        self,
        *,
        preset: str,
        session_id: str | None = None,
        parent_id: str | None = None,
        workspace: str | None = None,
        title: str | None = None,
        events: Sequence[EventDraft] = (),
        leased: bool = False,
    ) -> SessionRecord:
        """Create a session and its initial events in one transaction. ``leased``: for a run that
        starts on it at once (``leases.created_session_lease``): a backend whose run leases live
        in the database takes it with the insert (PostgreSQL, one statement, the events
        included), so that no other process ever sees the session unleased; the caller must adopt
        it or release it."""
        record, _ = await self.create_session_with_events(
            preset=preset, session_id=session_id, parent_id=parent_id, workspace=workspace, title=title, events=events, leased=leased
        )
        return record

    async def create_session_with_events(
        self,
        *,
        preset: str,
        session_id: str | None = None,
        parent_id: str | None = None,
        workspace: str | None = None,
        title: str | None = None,
        events: Sequence[EventDraft] = (),
        leased: bool = False,
    ) -> tuple[SessionRecord, list[Event]]:
        """``create_session``, with the events as appended (what a read would give back)."""
        if not isinstance(preset, str) or not preset.strip():
            raise ValidationError("session.invalid_preset", "a session needs a non-empty preset name", pointer="/preset")
        prepared = prepare_drafts(events) if events else []
        if parent_id is not None and not self.insert_checks_parent:
            await self.get_session(parent_id)
        now = self.now()
        record = SessionRecord(
            id=session_id or self.ids("ses_"),
            preset=preset,
            parent_id=parent_id,
            workspace=workspace,
            title=title,
            head_seq=len(prepared),
            created_at=now,
            updated_at=now,
        )
        await self._insert_session(record, prepared, now, leased=leased)
        appended = self._as_events(record.id, 0, prepared, now)
        if appended:
            self.broker.publish_events(record.id, appended)
        return record, appended

    @abstractmethod
    async def _insert_session(self, record: SessionRecord, events: list[PreparedEvent], now: str, *, leased: bool = False) -> None:
        """``leased``: see ``create_session``; a backend whose leases are local ignores it."""

    @abstractmethod
    async def get_session(self, session_id: str) -> SessionRecord:
        """Raise ``session.not_found`` when absent."""

    @abstractmethod
    async def list_sessions(self, flt: SessionFilter | None = None) -> list[SessionRecord]: ...

    async def set_archived(self, session_id: str, archived: bool = True) -> SessionRecord:
        await self.get_session(session_id)
        await self._set_archived(session_id, archived, self.now())
        return await self.get_session(session_id)

    @abstractmethod
    async def _set_archived(self, session_id: str, archived: bool, now: str) -> None: ...

    async def fork(self, source_id: str, at_seq: int, *, session_id: str | None = None, title: str | None = None) -> SessionRecord:
        """New session holding events 1..at_seq of the source; the source is untouched."""
        source = await self.get_session(source_id)
        if not isinstance(at_seq, int) or isinstance(at_seq, bool) or at_seq < 0 or at_seq > source.head_seq:
            raise ValidationError(
                "session.fork_out_of_range",
                f"cannot fork {source_id} at seq {at_seq}: valid seqs are 0..{source.head_seq}",
                pointer="/atSeq",
                details={"sessionId": source_id, "atSeq": at_seq, "headSeq": source.head_seq},
            )
        now = self.now()
        record = replace(
            source,
            id=session_id or self.ids("ses_"),
            forked_from=source_id,
            forked_at_seq=at_seq,
            title=title if title is not None else source.title,
            archived=False,
            head_seq=at_seq,
            created_at=now,
            updated_at=now,
        )
        await self._fork(source, record, at_seq)
        return record

    @abstractmethod
    async def _fork(self, source: SessionRecord, record: SessionRecord, at_seq: int) -> None: ...

    # -- events ----------------------------------------------------------------------------------
    async def append(self, session_id: str, expected_seq: int, drafts: Sequence[EventDraft]) -> list[Event]:
        if not isinstance(expected_seq, int) or isinstance(expected_seq, bool) or expected_seq < 0:
            raise ValidationError("event.invalid_expected_seq", "expected_seq must be an integer ≥ 0", pointer="/expectedSeq")
        prepared = prepare_drafts(drafts)
        now = self.now()
        await self._append_rows(session_id, expected_seq, prepared, now)
        events = self._as_events(session_id, expected_seq, prepared, now)
        self.broker.publish_events(session_id, events)
        return events

    @abstractmethod
    async def _append_rows(self, session_id: str, expected_seq: int, events: list[PreparedEvent], now: str) -> None:
        """Atomically CAS the head and insert; raise ``conflict`` / ``session_not_found``."""

    async def append_at_head(self, session_id: str, drafts: Sequence[EventDraft]) -> list[Event]:
        """Append after whatever the head is when the transaction runs; never a seq conflict.

        Only for events whose meaning does not depend on what precedes them (a ``command/done``
        for a run already logged). Reading the head and appending in one transaction, under the
        session row lock, serialises any number of writers in any number of processes: a
        read-then-CAS loop instead livelocks once enough writers share a session (issue 18)."""
        prepared = prepare_drafts(drafts)
        now = self.now()
        start = await self._append_rows_at_head(session_id, prepared, now)
        events = self._as_events(session_id, start, prepared, now)
        self.broker.publish_events(session_id, events)
        return events

    @abstractmethod
    async def _append_rows_at_head(self, session_id: str, events: list[PreparedEvent], now: str) -> int:
        """Lock the session row, insert after its head, advance it; return the old head."""

    @asynccontextmanager
    async def session_write_lock(self, session_id: str) -> AsyncIterator[None]:
        """Serialise read-the-head-then-append sequences on one session: this store's writers take
        turns on an in-process lock, then each backend adds what serialises processes. Writers
        that do not take it (plain CAS appends) still conflict as usual, so it is an aid against
        livelock, never a correctness mechanism."""
        lock = self._writer_locks.get(session_id)
        if lock is None:
            lock = self._writer_locks[session_id] = asyncio.Lock()
        async with lock, self._cross_process_write_lock(session_id):
            yield

    def _cross_process_write_lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """SQLite needs none: one writer thread per process, and cross-process writers on a local
        file are few (bench/contention.py measures no give-ups with 16 of them)."""
        return nullcontext()

    @abstractmethod
    async def read(self, session_id: str, *, after_seq: int = 0, until_seq: int | None = None, limit: int | None = None) -> list[Event]:
        """Events with after_seq < seq ≤ until_seq in seq order; ``session.not_found`` if absent."""

    async def head(self, session_id: str) -> int:
        return (await self.get_session(session_id)).head_seq

    async def iter_events(self, session_id: str, *, after_seq: int = 0, page: int = 2000) -> AsyncIterator[Event]:
        cursor = after_seq
        while True:
            batch = await self.read(session_id, after_seq=cursor, limit=page)
            for ev in batch:
                yield ev
            if len(batch) < page:
                return
            cursor = batch[-1].seq

    @abstractmethod
    async def dump(self) -> list[tuple[Any, ...]]:
        """Every row of the event and session tables in a stable order (byte-identity tests)."""

    # -- snapshots -------------------------------------------------------------------------------
    @abstractmethod
    async def save_snapshot(self, snapshot: Snapshot) -> None: ...

    @abstractmethod
    async def load_snapshot(self, session_id: str, name: str, version: int) -> Snapshot | None: ...

    @abstractmethod
    async def delete_snapshots(self, session_id: str | None = None) -> int: ...

    # -- live notifications ----------------------------------------------------------------------
    def subscribe(self, session_id: str, *, after_seq: int | None = None) -> Subscription:
        """Appended events (in seq order, gaps filled from the log) and transient chunks."""
        return self.broker.subscribe(session_id, after_seq=after_seq)

    async def publish_chunk(self, session_id: str, data: dict[str, Any]) -> None:
        """A transient ``assistant/chunk`` delta: delivered to subscribers, never stored."""
        self.broker.publish_chunk(session_id, data)

    async def _remote_listen(self) -> None:
        """Backends that can deliver across processes start a listener here (PostgreSQL)."""
        return None

    # -- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _as_events(session_id: str, start: int, prepared: Iterable[PreparedEvent], now: str) -> list[Event]:
        return [Event(session_id, start + i + 1, p.type, p.payload, now, p.version) for i, p in enumerate(prepared)]


def check_page_args(after_seq: int, until_seq: int | None, limit: int | None) -> None:
    if not isinstance(after_seq, int) or after_seq < 0:
        raise ValidationError("event.invalid_range", "after_seq must be an integer ≥ 0", pointer="/afterSeq")
    if until_seq is not None and (not isinstance(until_seq, int) or until_seq < 0):
        raise ValidationError("event.invalid_range", "until_seq must be an integer ≥ 0", pointer="/untilSeq")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValidationError("event.invalid_range", "limit must be a positive integer", pointer="/limit")


__all__ = [
    "EventStore",
    "SessionRecord",
    "SessionFilter",
    "Snapshot",
    "PreparedEvent",
    "RpError",
    "conflict",
    "session_not_found",
    "check_page_args",
]
