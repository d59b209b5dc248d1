"""The PostgreSQL store's kept idle connections (pg_pool.py), against a stand-in pool."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from roleplay.harness.store.pg_pool import KeptConnections

pytestmark = pytest.mark.anyio


@dataclass(eq=False)
class _PG:
    transaction_status: int = 0


@dataclass(eq=False)
class _Conn:
    closed: bool = False
    broken: bool = False
    pgconn: _PG = field(default_factory=_PG)


class _Pool:
    """At most ``size`` connections out; getconn waits for one to come back."""

    def __init__(self, size: int) -> None:
        self.size, self.out, self.made, self.back = size, 0, 0, 0
        self._free: list[_Conn] = []
        self._returned = asyncio.Condition()

    async def getconn(self) -> _Conn:
        async with self._returned:
            await self._returned.wait_for(lambda: self._free or self.out < self.size)
            self.out += 1
            if self._free:
                return self._free.pop()
            self.made += 1
            return _Conn()

    async def putconn(self, conn: _Conn) -> None:
        async with self._returned:
            self.out -= 1
            self.back += 1
            conn.pgconn.transaction_status = 0  # rolled back, as the pool does
            if not (conn.closed or conn.broken):
                self._free.append(conn)
            self._returned.notify_all()


async def test_idle_connections_are_kept_and_reused_without_the_pool() -> None:
    pool = _Pool(4)
    kept = KeptConnections(pool, kept=2)
    a = await kept.get()
    await kept.put(a)
    assert await kept.get() is a and pool.made == 1 and pool.back == 0
    b, c = await kept.get(), await kept.get()
    for conn in (a, b, c):
        await kept.put(conn)
    assert pool.back == 1  # one past the kept number went back
    await kept.close()
    assert pool.out == 0


async def test_broken_or_mid_transaction_connections_go_back_to_the_pool() -> None:
    pool = _Pool(4)
    kept = KeptConnections(pool)
    a, b = await kept.get(), await kept.get()
    a.broken = True
    b.pgconn.transaction_status = 2  # INTRANS
    await kept.put(a)
    await kept.put(b)
    assert pool.back == 2 and pool.out == 0
    c = await kept.get()
    await kept.put(c)
    c.closed = True  # died while idle: found out when taken, handed back
    d = await kept.get()
    assert d is not c and pool.out == 1


async def test_a_statement_waiting_for_the_pool_gets_the_connection_given_back() -> None:
    """Many more statements than connections: each given-back connection goes to a waiter
    instead of the idle list, so none waits forever."""
    pool = _Pool(2)
    kept = KeptConnections(pool)

    async def statement() -> None:
        conn: Any = await kept.get()
        await asyncio.sleep(0.001)
        await kept.put(conn)

    await asyncio.wait_for(asyncio.gather(*(statement() for _ in range(50))), 5)
    assert pool.made <= 2


async def test_a_kept_connection_goes_back_to_the_pool_a_while_after_it_was_taken() -> None:
    """So the pool's own lifetime and idle rules still apply to it."""
    from roleplay.harness.store import pg_pool

    now = [1000.0]
    pool = _Pool(4)
    kept = KeptConnections(pool, clock=lambda: now[0])
    a = await kept.get()
    await kept.put(a)
    assert pool.back == 0
    assert await kept.get() is a
    now[0] += pg_pool.RETURN_AFTER
    await kept.put(a)
    assert pool.back == 1 and pool.out == 0
