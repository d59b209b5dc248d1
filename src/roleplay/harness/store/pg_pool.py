"""The PostgreSQL store's statements take their connection from a short list of idle ones kept
out of the pool, and give it back there (issue 12).

``async with pool.connection()`` costs about 35 µs of CPU a statement (its context managers,
the pool's accounting, its checks on return), a third of what a short statement costs psycopg
in all, and a turn runs some two dozen. A connection taken from the pool once stays out while
idle, up to :data:`KEPT`; one found closed or broken goes back to the pool (which discards it),
as does one left inside a transaction (the pool rolls it back), any past the kept number, any
while a statement waits for the pool (all its connections taken): that one gets it, and every
one a minute after it was taken (:data:`RETURN_AFTER`), so the pool's lifetime rules hold. The
pool still bounds the connections: a kept one counts as taken, so the store never holds more
than ``max_size``. A dead server is noticed as before, by the first statement that fails on the
connection (the pool hands out connections unchecked too).
"""

from __future__ import annotations

import time
from typing import Any, Callable

KEPT = 8  # at most the main pool's default size: all of a busy process's connections, when idle
# A kept connection goes back to the pool this long after it was taken, so the pool's own rules
# (its connections' lifetime, its idle timeout, its size) still apply, a round a minute.
RETURN_AFTER = 60.0

_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE (libpq's PQTRANS_IDLE)


class KeptConnections:
    """Idle connections of ``pool`` kept at hand (module docstring)."""

    def __init__(self, pool: Any, kept: int = KEPT, clock: Callable[[], float] = time.monotonic) -> None:
        self._pool = pool
        self._clock = clock
        self._kept = kept
        self._idle: list[Any] = []
        self._waiting = 0  # callers inside pool.getconn(): a connection given back goes to them
        self._taken: dict[Any, float] = {}  # connection -> when it was taken from the pool

    async def get(self) -> Any:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not (conn.closed or conn.broken):
                return conn
            await self._give_back(conn)
        self._waiting += 1
        try:
            conn = await self._pool.getconn()
        finally:
            self._waiting -= 1
        self._taken[conn] = self._clock()
        return conn

    async def put(self, conn: Any) -> None:
        if (
            not self._waiting
            and len(self._idle) < self._kept
            and not (conn.closed or conn.broken)
            and conn.pgconn.transaction_status == _IDLE
            and self._clock() - self._taken.get(conn, 0.0) < RETURN_AFTER
        ):
            self._idle.append(conn)
        else:
            await self._give_back(conn)

    async def close(self) -> None:
        """Give every kept connection back to the pool (before the pool closes)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._give_back(conn)

    async def _give_back(self, conn: Any) -> None:
        self._taken.pop(conn, None)
        await self._pool.putconn(conn)
