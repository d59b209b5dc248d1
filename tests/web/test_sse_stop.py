"""How an event stream is ended from outside: its client's disconnect and the server's shutdown
end it quietly; anyone else's cancellation of its task still goes through."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from roleplay.harness.store import open_store
from roleplay.web.sse import EventStream, ShutdownSignal, _on_shutdown

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Any]:
    s = open_store(f"sqlite:///{tmp_path / 'rp.db'}")
    await s.migrate()
    yield s
    await s.close()


async def session(store: Any) -> str:
    return str((await store.create_session(preset="p")).id)


class Client:
    """The ASGI side of one stream: what was sent, and a disconnect to deliver on demand."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def bodies(self) -> list[bytes]:
        return [m.get("body", b"") for m in self.sent if m["type"] == "http.response.body"]


async def started(client: Client, task: asyncio.Future[Any]) -> None:
    while b": connected\n\n" not in client.bodies():
        if task.done():
            task.result()  # its error, if it failed
        await asyncio.sleep(0.01)


async def test_a_disconnect_ends_the_stream_without_an_error_or_a_closing_write(store: Any) -> None:
    client = Client()
    task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=60)({}, client.receive, client.send))
    await started(client, task)
    client.gone.set()
    await asyncio.wait_for(task, 5)
    assert task.result() is None
    assert client.bodies() == [b": connected\n\n"]  # nobody is left to read a closing write


async def test_the_shutdown_signal_ends_every_open_stream_with_a_closing_write(store: Any) -> None:
    shutdown = ShutdownSignal()
    clients = [Client() for _ in range(3)]
    sid = await session(store)
    tasks = [
        asyncio.ensure_future(EventStream(store, sid, 0, ping_seconds=60, shutdown=shutdown)({}, c.receive, c.send))
        for i, c in enumerate(clients)
    ]
    for c, t in zip(clients, tasks):
        await started(c, t)
    assert len(shutdown._callbacks) == 3
    shutdown.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    for c in clients:
        assert c.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert not shutdown._callbacks


async def test_a_stream_that_ended_withdraws_from_the_shutdown_signal(store: Any) -> None:
    shutdown = ShutdownSignal()
    client = Client()
    task = asyncio.ensure_future(
        EventStream(store, await session(store), 0, ping_seconds=60, shutdown=shutdown)({}, client.receive, client.send)
    )
    await started(client, task)
    client.gone.set()
    await asyncio.wait_for(task, 5)
    assert not shutdown._callbacks


async def test_another_cancellation_of_the_stream_task_is_not_swallowed(store: Any) -> None:
    client = Client()
    task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=60)({}, client.receive, client.send))
    await started(client, task)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_a_plain_event_still_ends_streams_through_a_waiting_task(store: Any) -> None:
    shutdown = asyncio.Event()
    client = Client()
    task = asyncio.ensure_future(
        EventStream(store, await session(store), 0, ping_seconds=60, shutdown=shutdown)({}, client.receive, client.send)
    )
    await started(client, task)
    shutdown.set()
    await asyncio.wait_for(task, 5)
    assert client.sent[-1]["more_body"] is False


async def test_on_shutdown_calls_at_once_when_already_set_and_not_after_withdrawal() -> None:
    calls: list[str] = []
    done = ShutdownSignal()
    done.set()
    _on_shutdown(done, lambda: calls.append("late"))
    later = ShutdownSignal()
    withdraw = _on_shutdown(later, lambda: calls.append("withdrawn"))
    _on_shutdown(later, lambda: calls.append("kept"))
    withdraw()
    later.set()
    assert calls == ["late", "kept"]


async def test_a_request_body_part_is_skipped_and_the_disconnect_still_ends_the_stream(store: Any) -> None:
    class WithBody(Client):
        def __init__(self) -> None:
            super().__init__()
            self.parts = [
                {"type": "http.request", "body": b"x", "more_body": True},
                {"type": "http.request", "body": b"", "more_body": False},
            ]

        async def receive(self) -> dict[str, Any]:
            if self.parts:
                return self.parts.pop(0)
            return await super().receive()

    client = WithBody()
    task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=60)({}, client.receive, client.send))
    await started(client, task)
    await asyncio.sleep(0.05)
    assert not client.parts and not task.done()  # both parts read, still streaming
    client.gone.set()
    await asyncio.wait_for(task, 5)
    assert task.result() is None and client.bodies() == [b": connected\n\n"]


async def test_a_failing_receive_ends_the_stream(store: Any) -> None:
    client = Client()

    async def broken() -> dict[str, Any]:
        raise OSError("the connection broke")

    task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=60)({}, broken, client.send))
    await asyncio.wait_for(task, 5)
    assert task.result() is None


async def test_an_idle_stream_pings_on_its_own_timer_and_keeps_going(store: Any) -> None:
    client = Client()
    task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=0.02)({}, client.receive, client.send))
    await started(client, task)
    while client.bodies().count(b": ping\n\n") < 3:
        assert not task.done()
        await asyncio.sleep(0.01)
    assert task.cancelling() == 0  # each ping's cancellation was withdrawn
    client.gone.set()
    await asyncio.wait_for(task, 5)
    assert task.result() is None


async def test_a_ping_due_as_the_client_leaves_ends_the_stream_quietly(store: Any) -> None:
    for _ in range(20):  # the timer and the disconnect land together, in either order
        client = Client()
        task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=0.01)({}, client.receive, client.send))
        await started(client, task)
        await asyncio.sleep(0.01)
        client.gone.set()
        await asyncio.wait_for(task, 5)
        assert task.result() is None


async def test_another_cancellation_with_a_ping_due_still_goes_through(store: Any) -> None:
    client = Client()
    task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=0.05)({}, client.receive, client.send))
    await started(client, task)
    await asyncio.sleep(0.049)  # the ping's timer about to run
    task.cancel()
    await asyncio.sleep(0.01)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_a_stream_keeps_no_timer_or_watcher_once_ended(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from roleplay.web import sse

    stops: list[Any] = []
    made = sse._Stop

    def tracked(task: Any) -> Any:
        stops.append(made(task))
        return stops[-1]

    monkeypatch.setattr(sse, "_Stop", tracked)
    client = Client()
    task = asyncio.ensure_future(EventStream(store, await session(store), 0, ping_seconds=60)({}, client.receive, client.send))
    await started(client, task)
    (stop,) = stops
    assert stop.timer is not None and stop.watcher is not None
    client.gone.set()
    await asyncio.wait_for(task, 5)
    assert stop.timer is None and stop.watcher is None and stop.cancels == 0
