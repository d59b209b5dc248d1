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

The app serves a plain request of this route before FastAPI's middleware and router
(``app.App``, after ``admit``); the route declared in ``routes_turns`` answers the rest
(refusals, errors) and documents it. Both stream with ``stream_events``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from roleplay.harness.names import ASSISTANT_CHUNK
from roleplay.harness.notify import Notification
from roleplay.harness.store.base import EventStore

from .security import Guard, request_headers

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
        await stream_events(
            receive,
            send,
            self.store,
            self.session_id,
            self.after_seq,
            follow=self.follow,
            ping_seconds=self.ping_seconds,
            send_timeout=self.send_timeout,
            shutdown=self.shutdown,
        )


# An open stream keeps everything its coroutines hold alive until its client leaves, and every
# full collection walks it all while the event loop waits (issue 16): the streams below hold no
# response object, no closures, and one helper task; the last notification written is dropped
# before the next wait.


async def stream_events(
    receive: Receive,
    send: Send,
    store: EventStore,
    session_id: str,
    after_seq: int | None,
    *,
    follow: bool = True,
    ping_seconds: float = 15.0,
    send_timeout: float = 10.0,
    shutdown: asyncio.Event | None = None,
) -> None:
    """``EventStream``'s body: the response on ``send`` until the log ends (``follow=False``), the
    client leaves, the server shuts down or the client is too slow."""
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    stop = _Stop(asyncio.current_task())
    stop.watch(receive)
    signal = shutdown if isinstance(shutdown, ShutdownSignal) else None
    unwatch = None
    if signal is not None:
        signal.watch(stop)
    elif shutdown is not None:
        unwatch = _on_shutdown(shutdown, stop)
    ended_cleanly = False
    try:
        # Not ``async with``: that holds the bound ``__aexit__`` for the stream's whole life.
        sub = store.subscribe(session_id, after_seq=after_seq)
        await sub.__aenter__()
        try:
            await _write(send, b": connected\n\n", stop, send_timeout)
            if not follow:
                head = await store.head(session_id)
                while sub.last_seq < head:
                    note = await sub.next()
                    if note.kind == "event":
                        await _write(send, frame(note), stop, send_timeout)
            while follow:
                # The ping timer is this stream's own (``_Stop``), not ``sub.next(timeout=…)``,
                # whose ``asyncio.timeout`` keeps four more objects per idle stream.
                stop.arm(ping_seconds)
                try:
                    note = await sub.__anext__()
                except asyncio.CancelledError:
                    if not stop.expired():
                        raise
                    await _write(send, b": ping\n\n", stop, send_timeout)
                    continue
                finally:
                    stop.disarm()
                # What else has arrived goes in the same write: under load, one send per reply
                # delta per stream was the server's largest cost.
                body = b"".join(frame(n) for n in (note, *sub.take_ready()))
                del note  # not held (with its event) while the stream waits for the next
                await _write(send, body, stop, send_timeout)
                del body
        finally:
            await sub.__aexit__(None, None, None)
        ended_cleanly = True
    except SlowClient:
        log.info("dropped a slow event-stream client of %s", session_id)
        return  # the connection is closed under it; it may resume with Last-Event-ID
    except asyncio.CancelledError:
        if not stop.ours():
            raise  # the server's own cancellation (or another's on top of ours)
    finally:
        stop.end()
        if signal is not None:
            signal.unwatch(stop)
        elif unwatch is not None:
            unwatch()
    if ended_cleanly or (shutdown is not None and shutdown.is_set()):
        try:
            with anyio.fail_after(1):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception:  # noqa: BLE001 - the client may already be gone
            pass


async def _write(send: Send, body: bytes, stop: _Stop, timeout: float) -> None:
    stop.arm(timeout)
    try:
        await send({"type": "http.response.body", "body": body, "more_body": True})
    except asyncio.CancelledError:
        if stop.expired():
            raise SlowClient from None
        raise
    finally:
        stop.disarm()


# The context the disconnect watchers and the timers run in: they read no context variables, and
# each task and each callback given none gets its own copy, one more object an open stream keeps
# alive. Task steps never nest (an eager task would, and none is started here), so sharing it is safe.
_QUIET_CONTEXT = contextvars.Context()
_TIMER = "timer"  # what the timer calls its _Stop with


class _Stop:
    """Ends a stream's task from outside by cancelling it while it streams (its client left, the
    server shuts down: ``ours``; its timer ran out: ``expired``), and tells those cancellations
    apart from anyone else's.

    It also watches for the disconnect: one task awaits the client's next message (``receive``)
    and calls this back when it comes; a part of the request body is skipped and the next awaited.
    The timer is the stream's one deadline at a time (the next ping, a write's): a ``TimerHandle``
    and nothing else, where ``asyncio.timeout`` adds its own object, a bound method and a context
    per wait. Every callback is this object itself, not a closure or bound method: fewer objects
    per stream."""

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.task = task
        self.streaming = True
        self.fired = False  # cancelled because the client left or the server stops
        self.timed_out = False  # cancelled by the timer
        self.cancels = 0  # this object's cancellations of the task not yet withdrawn
        self.receive: Receive | None = None
        self.watcher: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None

    def watch(self, receive: Receive) -> None:
        self.receive = receive
        message = receive()  # a coroutine from uvicorn; any other awaitable is awaited by one
        coroutine = message if asyncio.iscoroutine(message) else _received(message)
        self.watcher = asyncio.get_running_loop().create_task(coroutine, context=_QUIET_CONTEXT)
        self.watcher.add_done_callback(self, context=_QUIET_CONTEXT)

    def arm(self, seconds: float) -> None:
        self.timer = asyncio.get_running_loop().call_later(seconds, self, _TIMER, context=_QUIET_CONTEXT)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def __call__(self, cause: object = None) -> None:
        if cause is _TIMER:
            if self.timer is not None and self.streaming and not self.fired and self.task is not None:
                self.timer = None
                self.timed_out = True
                self._cancel()
            return
        if cause is not None and cause is self.watcher:
            assert isinstance(cause, asyncio.Task)
            if cause.cancelled():
                return
            # A failed receive ends the stream too: nothing would tell of the disconnect any more.
            if cause.exception() is None and cause.result()["type"] != "http.disconnect" and self.streaming:
                assert self.receive is not None
                self.watch(self.receive)
                return
        if self.streaming and not self.fired and self.task is not None:
            self.fired = True
            self._cancel()

    def _cancel(self) -> None:
        assert self.task is not None
        self.cancels += 1
        self.task.cancel()

    def end(self) -> None:
        self.streaming = False
        self.disarm()
        if self.watcher is not None:
            self.watcher.cancel()
            self.watcher = None

    def expired(self) -> bool:
        """True when the timer alone cancelled the stream; its cancellation is then withdrawn."""
        if not self.timed_out or self.fired or not self._withdraw():
            return False
        self.timed_out = False
        return True

    def ours(self) -> bool:
        """True when the stream was cancelled by this alone; its cancellation is then withdrawn."""
        return self.fired and self._withdraw()

    def _withdraw(self) -> bool:
        task = self.task
        if task is None or task.cancelling() != self.cancels:
            return False  # someone else cancelled it too: theirs goes through
        while self.cancels:
            task.uncancel()
            self.cancels -= 1
        return True


async def _received(message: Awaitable[Any]) -> Any:
    return await message


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

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when set (at once when it already is); ``unwatch`` withdraws it."""
        if self.is_set():
            callback()
        else:
            self._callbacks.add(callback)

    def unwatch(self, callback: Callable[[], None]) -> None:
        self._callbacks.discard(callback)


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


async def admit(store: EventStore, guard: Guard, scope: Scope, session_id: str) -> tuple[int | None, bool] | None:
    """For a request of ``GET /sessions/{id}/events`` served outside the router (``app.App`` says
    why): its cursor and ``follow`` when the declared route would stream it as is, else None, having
    neither received nor sent, and the router's route answers it: the guard refuses it, a parameter
    is not plain, or the route would answer with an error. Nothing here answers in its own words,
    so every refusal and error is the route's, in the error envelope."""
    headers = request_headers(scope)
    if guard.refusal(scope, headers) is not None or "transfer-encoding" in headers:
        return None  # (a body of unknown length: the stack's cap on it applies)
    params = _plain_params(scope)
    if params is None:
        return None
    after, follow = params
    try:
        cursor = await stream_cursor(store, session_id, headers.get("last-event-id"), after)
    except Exception:  # noqa: BLE001 - the route reads it again and answers the error
        return None
    return cursor, follow


async def stream_cursor(store: EventStore, session_id: str, last_event_id: str | None, after: int | None) -> int | None:
    """The seq a stream of ``session_id`` resumes after (``parse_cursor``), once the session is
    known to exist and the cursor not to be past its head (``events.cursor_ahead``)."""
    cursor = parse_cursor(last_event_id, after)
    await store.get_session(session_id)
    if cursor is not None:
        head = await store.head(session_id)
        if cursor > head:
            from roleplay.errors import ValidationError

            raise ValidationError("events.cursor_ahead", f"seq {cursor} is past the log's head {head}", pointer="/after")
    return cursor


_FOLLOW = {"true": True, "false": False, "1": True, "0": False}


def _plain_params(scope: Scope) -> tuple[int | None, bool] | None:
    """``after`` and ``follow`` as the route reads them, or None when either is anything but
    plain (repeated, not digits, another spelling of a bool), or ``Last-Event-ID`` is repeated:
    what FastAPI makes of those is its own to say."""
    if sum(1 for name, _ in scope["headers"] if name.lower() == b"last-event-id") > 1:
        return None
    after: int | None = None
    follow = True
    seen: set[str] = set()
    for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
        if key in seen and key in ("after", "follow"):
            return None
        seen.add(key)
        if key == "after":
            if not (value.isascii() and value.isdigit()):
                return None
            after = int(value)
        elif key == "follow":
            if value not in _FOLLOW:
                return None
            follow = _FOLLOW[value]
    return after, follow


def parse_cursor(last_event_id: str | None, after: int | None) -> int | None:
    """The seq to resume after: ``Last-Event-ID`` wins over ``?after``; None starts at the head."""
    from roleplay.errors import ValidationError

    if last_event_id is not None and last_event_id.strip():
        text = last_event_id.strip()
        if not text.isdecimal():
            raise ValidationError("events.invalid_cursor", f"Last-Event-ID must be an event seq, got {text!r}", pointer="/Last-Event-ID")
        return int(text)
    return after


__all__ = ["EventStream", "ShutdownSignal", "admit", "stream_events", "frame", "parse_cursor"]
