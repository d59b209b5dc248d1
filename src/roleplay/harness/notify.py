"""Live notifications: appended events and transient ``assistant/chunk`` deltas, in order.

Within a process the store publishes straight to the broker after each commit. On PostgreSQL a
listener also turns ``NOTIFY`` messages from other processes into the same publications
(``store/postgres.py``). Delivery is at-least-once from the broker's side, so each subscription
keeps its own cursor: it drops events it has already delivered and fills any gap from the log
before yielding, which makes the stream exactly-once and gapless in seq order for the reader
(and makes resuming an SSE stream from ``Last-Event-ID`` a matter of passing ``after_seq``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .events import Event

if TYPE_CHECKING:  # pragma: no cover
    from .store.base import EventStore

MAX_QUEUE = 10_000


@dataclass(frozen=True)
class Notification:
    kind: str  # "event" | "chunk"
    event: Event | None = None
    data: dict[str, Any] | None = None


class Subscription:
    def __init__(self, broker: "Broker", session_id: str, after_seq: int | None) -> None:
        self._broker = broker
        self.session_id = session_id
        self._start = after_seq
        self.last_seq = after_seq if after_seq is not None else 0
        self._queue: asyncio.Queue[Notification] = asyncio.Queue(MAX_QUEUE)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[Notification] = []
        self._closed = False

    async def __aenter__(self) -> "Subscription":
        store = self._broker.store
        self._loop = asyncio.get_running_loop()
        await store._remote_listen()
        # Register before reading the head so nothing appended in between is missed.
        self._broker._add(self)
        try:
            if self._start is None:
                self.last_seq = await store.head(self.session_id)
            else:  # (the read says session.not_found for an unknown session)
                self._pending.extend(Notification("event", e) for e in await store.read(self.session_id, after_seq=self.last_seq))
        except BaseException:
            self.close()  # an unknown session, a failed read: not left registered
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._broker._remove(self)

    def _offer(self, note: Notification) -> None:
        if self._loop is None or self._closed:
            return
        if _running_loop() is self._loop:
            # Published from the reader's own loop (every store publishes there): queue it now. The
            # thread-safe hand-off costs a self-pipe write and a wake-up per chunk, which with
            # hundreds of live streams was a measurable share of a loaded server's CPU.
            self._put(note)
            return
        try:
            self._loop.call_soon_threadsafe(self._put, note)
        except RuntimeError:  # loop closed: the reader is gone
            self.close()

    def _put(self, note: Notification) -> None:
        try:
            self._queue.put_nowait(note)
        except asyncio.QueueFull:
            # A reader that stopped reading must not grow memory without bound. Dropping events
            # is safe (the gap is refilled from the log); dropping chunks only loses cosmetics.
            pass

    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> Notification:
        while True:
            if self._pending:
                note = self._pending.pop(0)
            else:
                note = await self._queue.get()
            verdict = self._admit(note)
            if verdict:
                return note
            if verdict is None:
                assert note.event is not None
                missing = await self._broker.store.read(self.session_id, after_seq=self.last_seq, until_seq=note.event.seq - 1)
                self._pending = [Notification("event", e) for e in missing] + [note] + self._pending

    def _admit(self, note: Notification) -> bool | None:
        """Whether ``note`` is next: True (and the cursor moves past it), False for an event already
        delivered, None when events before it must be read from the log first."""
        if note.kind == "chunk":
            return True
        assert note.event is not None
        seq = note.event.seq
        if seq <= self.last_seq:
            return False
        if seq > self.last_seq + 1:
            return None
        self.last_seq = seq
        return True

    def take_ready(self, limit: int = 256) -> list[Notification]:
        """The notifications that are next and already here, without waiting: a busy reader writes
        them out together instead of one wake-up and one write each."""
        ready: list[Notification] = []
        while len(ready) < limit and (self._pending or not self._queue.empty()):
            note = self._pending.pop(0) if self._pending else self._queue.get_nowait()
            verdict = self._admit(note)
            if verdict:
                ready.append(note)
            elif verdict is None:
                self._pending.insert(0, note)  # the gap is read by the next awaited call
                break
        return ready

    async def next(self, timeout: float | None = None) -> Notification:
        # asyncio.timeout, not wait_for: wait_for wraps every call in a new task.
        async with asyncio.timeout(timeout):
            return await self.__anext__()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Broker:
    def __init__(self, store: "EventStore") -> None:
        self.store = store
        self._subs: dict[str, set[Subscription]] = {}
        # Set by a backend that tells other processes which sessions have subscribers here
        # (PostgreSQL sends chunks across only to those: store/pg_watchers.py). Called when a
        # session gains its first subscriber or loses its last.
        self.on_watch_change: Callable[[], None] | None = None

    def subscribe(self, session_id: str, *, after_seq: int | None = None) -> Subscription:
        return Subscription(self, session_id, after_seq)

    def sessions(self) -> list[str]:
        """The sessions that have subscribers now."""
        return list(self._subs)

    def _add(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.session_id)
        if subs is None:
            self._subs[sub.session_id] = {sub}
            if self.on_watch_change is not None:
                self.on_watch_change()
        else:
            subs.add(sub)

    def _remove(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.session_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                self._subs.pop(sub.session_id, None)
                if self.on_watch_change is not None and _running_loop() is not None:
                    self.on_watch_change()

    def has_subscribers(self, session_id: str) -> bool:
        return bool(self._subs.get(session_id))

    def publish_events(self, session_id: str, events: list[Event]) -> None:
        for sub in list(self._subs.get(session_id, ())):
            for ev in events:
                sub._offer(Notification("event", ev))

    def publish_chunk(self, session_id: str, data: dict[str, Any]) -> None:
        for sub in list(self._subs.get(session_id, ())):
            sub._offer(Notification("chunk", data=data))
