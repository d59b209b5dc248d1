"""``GET /api/v1/sessions/{id}/events``: the session's log as Server-Sent Events.

Framing: each durable event is ``id: <seq>`` / ``event: <type>`` / ``data: <the event as JSON>``;
a transient reply delta is ``event: assistant/chunk`` with its JSON and *no* id, so a browser's
``EventSource`` never resumes from one. ``: ping`` comments keep idle connections open through
proxies. The cursor is ``Last-Event-ID`` (what ``EventSource`` sends on reconnect) or ``?after=SEQ``;
without one the stream starts at the current head. The store's subscription fills any gap from the
log and drops duplicates, so a resumed stream has neither.

Each stream is its own ASGI task. A client that does not take a write within ``send_timeout`` is
dropped (it can resume), so one slow reader never holds memory or anyone else. A disconnect or the
server's shutdown ends the stream at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from roleplay.harness.names import ASSISTANT_CHUNK
from roleplay.harness.notify import Notification
from roleplay.harness.store.base import EventStore

log = logging.getLogger("roleplay.web")

HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: do not buffer the stream
]


class SlowClient(Exception):
    pass


def frame(note: Notification) -> bytes:
    """One SSE message for a notification."""
    if note.kind == "chunk":
        data = note.data or {}
        return f"event: {data.get('type', ASSISTANT_CHUNK)}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
    assert note.event is not None
    ev = note.event
    return f"id: {ev.seq}\nevent: {ev.type}\ndata: {json.dumps(ev.to_dict(), ensure_ascii=False)}\n\n".encode()


class EventStream(Response):
    """An ASGI response streaming one session's notifications after ``after_seq``.

    ``follow=False`` sends the durable events up to the head as it was when the stream opened,
    then ends (a catch-up read; also what in-process tests use)."""

    def __init__(
        self,
        store: EventStore,
        session_id: str,
        after_seq: int | None,
        *,
        follow: bool = True,
        ping_seconds: float = 15.0,
        send_timeout: float = 10.0,
        shutdown: asyncio.Event | None = None,
    ) -> None:
        super().__init__(status_code=200, media_type="text/event-stream")
        self.store = store
        self.session_id = session_id
        self.after_seq = after_seq
        self.follow = follow
        self.ping_seconds = ping_seconds
        self.send_timeout = send_timeout
        self.shutdown = shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        # One helper task per stream (the disconnect watcher) and no task group: every open
        # stream's objects are traversed by each full collection, which holds the event loop.
        stop = _Stop(asyncio.current_task())
        watcher = asyncio.ensure_future(_watch_disconnect(receive, stop))
        unwatch = _on_shutdown(self.shutdown, stop) if self.shutdown is not None else None
        ended_cleanly = False
        try:
            await self._stream(send)
            ended_cleanly = True
        except SlowClient:
            log.info("dropped a slow event-stream client of %s", self.session_id)
            return  # the connection is closed under it; it may resume with Last-Event-ID
        except asyncio.CancelledError:
            if not stop.ours():
                raise  # the server's own cancellation (or another's on top of ours)
        finally:
            stop.streaming = False
            watcher.cancel()
            if unwatch is not None:
                unwatch()
        if ended_cleanly or (self.shutdown is not None and self.shutdown.is_set()):
            try:
                with anyio.fail_after(1):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            except Exception:  # noqa: BLE001 - the client may already be gone
                pass

    async def _write(self, send: Send, body: bytes) -> None:
        try:
            async with asyncio.timeout(self.send_timeout):
                await send({"type": "http.response.body", "body": body, "more_body": True})
        except TimeoutError:
            raise SlowClient from None

    async def _stream(self, send: Send) -> None:
        async with self.store.subscribe(self.session_id, after_seq=self.after_seq) as sub:
            await self._write(send, b": connected\n\n")
            if not self.follow:
                head = await self.store.head(self.session_id)
                while sub.last_seq < head:
                    note = await sub.next()
                    if note.kind == "event":
                        await self._write(send, frame(note))
                return
            while True:
                try:
                    note = await sub.next(timeout=self.ping_seconds)
                except asyncio.TimeoutError:
                    await self._write(send, b": ping\n\n")
                    continue
                # What else has arrived goes in the same write: under load, one send per reply
                # delta per stream was the server's largest cost.
                await self._write(send, b"".join(frame(n) for n in (note, *sub.take_ready())))


class _Stop:
    """Ends a stream's task from outside (its client left, the server shuts down) by cancelling
    it while it streams, and tells that cancellation apart from anyone else's."""

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.task = task
        self.streaming = True
        self.fired = False

    def __call__(self) -> None:
        if self.streaming and not self.fired and self.task is not None:
            self.fired = True
            self.task.cancel()

    def ours(self) -> bool:
        """True when the stream was cancelled by this alone; its cancellation is then withdrawn."""
        task = self.task
        if not self.fired or task is None or task.cancelling() != 1:
            return False
        task.uncancel()
        return True


async def _watch_disconnect(receive: Receive, stop: _Stop) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    finally:
        stop()  # a no-op once the stream has ended (this task is cancelled then)


class ShutdownSignal(asyncio.Event):
    """The server's shutdown event, which also calls back the streams registered on it when set:
    no task per open stream waits on it."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: set[Callable[[], None]] = set()

    def set(self) -> None:
        super().set()
        callbacks, self._callbacks = self._callbacks, set()
        for callback in callbacks:
            callback()


def _on_shutdown(event: asyncio.Event, callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` when ``event`` is set; returns the function that withdraws it."""
    if event.is_set():
        callback()
        return _nothing
    if isinstance(event, ShutdownSignal):
        callbacks = event._callbacks
        callbacks.add(callback)
        return lambda: callbacks.discard(callback)

    async def wait() -> None:  # any other event: a task waits on it
        await event.wait()
        callback()

    waiter = asyncio.ensure_future(wait())
    return lambda: None if waiter.cancel() else None


def _nothing() -> None:
    return None


def parse_cursor(last_event_id: str | None, after: int | None) -> int | None:
    """The seq to resume after: ``Last-Event-ID`` wins over ``?after``; None starts at the head."""
    from roleplay.errors import ValidationError

    if last_event_id is not None and last_event_id.strip():
        text = last_event_id.strip()
        if not text.isdecimal():
            raise ValidationError("events.invalid_cursor", f"Last-Event-ID must be an event seq, got {text!r}", pointer="/Last-Event-ID")
        return int(text)
    return after


__all__ = ["EventStream", "ShutdownSignal", "frame", "parse_cursor"]
