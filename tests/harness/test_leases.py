"""One active run per session, across processes; the lease dies with its holder."""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import os
import signal

import pytest

from roleplay.errors import ConflictError
from roleplay.harness.leases import held_lease, run_lease, session_lease
from roleplay.harness.store import EventStore, open_store

pytestmark = pytest.mark.anyio


def _hold(url: str, session_id: str, ready: "multiprocessing.synchronize.Event", release: "multiprocessing.synchronize.Event") -> None:
    async def run() -> None:
        store = open_store(url)
        try:
            async with run_lease(store, session_id):
                ready.set()
                while not release.is_set():
                    await asyncio.sleep(0.02)
        finally:
            await store.close()

    asyncio.run(run())


async def _wait(event: "multiprocessing.synchronize.Event") -> None:
    assert await asyncio.get_running_loop().run_in_executor(None, event.wait, 60)


async def test_lease_held_in_another_process_refuses_and_is_released(store: EventStore, store_url: str) -> None:
    sid = (await store.create_session(preset="chat")).id
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(store_url, sid, ready, release))
    proc.start()
    try:
        await _wait(ready)
        with pytest.raises(ConflictError) as exc:
            async with run_lease(store, sid):
                pass
        assert exc.value.code == "run.busy" and exc.value.details == {"sessionId": sid}
        release.set()
        await asyncio.get_running_loop().run_in_executor(None, proc.join, 30)
        async with run_lease(store, sid):
            pass  # free again once the holder let go
    finally:
        release.set()
        proc.join(5)


async def test_a_crashed_holder_does_not_lock_the_session_forever(store: EventStore, store_url: str) -> None:
    sid = (await store.create_session(preset="chat")).id
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(store_url, sid, ready, release))
    proc.start()
    await _wait(ready)
    os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
    await asyncio.get_running_loop().run_in_executor(None, proc.join, 30)
    for _ in range(50):  # PostgreSQL notices the dead connection shortly after the kill
        try:
            async with run_lease(store, sid):
                return
        except ConflictError:
            await asyncio.sleep(0.1)
    pytest.fail("the lease of a killed process was never released")


async def test_same_process_second_lease_is_refused(store: EventStore) -> None:
    sid = (await store.create_session(preset="chat")).id
    async with run_lease(store, sid):
        with pytest.raises(ConflictError):
            async with run_lease(store, sid):
                pass


async def test_session_lease_reuses_the_lease_this_context_holds_and_nothing_else(store: EventStore) -> None:
    sid = (await store.create_session(preset="chat")).id
    assert held_lease(store, sid) is None
    async with run_lease(store, sid) as lease:
        assert held_lease(store, sid) is lease and not lease.nested
        async with session_lease(store, sid) as inner:  # the holder's own work (a tool of its run)
            assert inner.nested and inner.holds(store, sid)
        assert not inner.holds(store, sid)  # a reused lease is not a token to keep after its scope

        async def child_task() -> bool:
            async with session_lease(store, sid) as reused:
                return reused.nested

        assert await asyncio.ensure_future(child_task())  # tasks the holder starts share its lease

        async def stranger() -> None:
            async with session_lease(store, sid):
                pass

        with pytest.raises(ConflictError) as exc:  # a task from elsewhere (a UI request) does not
            await asyncio.create_task(stranger(), context=contextvars.Context())
        assert exc.value.code == "run.busy"
    assert held_lease(store, sid) is None and not lease.active
    async with session_lease(store, sid) as fresh:
        assert not fresh.nested
