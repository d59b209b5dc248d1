"""Contention benchmark: 16 writers appending to one session with ``append_retrying``.

Run by hand:  .venv/bin/python bench/contention.py [--postgres URL] [--writers 16] [--appends 25]
(PostgreSQL is included when --postgres or RP_TEST_POSTGRES_URL is given.)

Each writer has its own store (its own connection pool or writer thread), as separate app
processes would, and appends one event per call at whatever the head is. Two kinds of event:
``command/done``-like events whose meaning does not depend on what precedes them, and messages,
which are checked against the surface at the head they land on.

Prints the share of appends that gave up with ``event.contended`` and the p50/p99 latency of one
``append_retrying`` call. Target (issue 18): no ``event.contended`` at all, p99 ≤ 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roleplay.errors import RpError  # noqa: E402
from roleplay.harness.events import EventDraft  # noqa: E402
from roleplay.harness.sessions import SessionService  # noqa: E402
from roleplay.harness.store import open_store  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eventlog import pg_schema_url  # noqa: E402

TARGET_P99_MS = 1000.0


def draft(kind: str, writer: int, i: int) -> EventDraft:
    if kind == "message":
        return EventDraft("user/message", {"messageId": f"w{writer}-{i}", "content": [{"type": "text", "text": "hi"}]})
    return EventDraft("command/done", {"commandId": f"w{writer}-{i}", "kind": "success"})


async def run_kind(url: str, kind: str, writers: int, appends: int) -> tuple[int, int, list[float]]:
    setup = open_store(url)
    await setup.migrate()
    session_id = (await setup.create_session(preset="bench")).id
    latencies: list[float] = []
    failures = 0

    async def writer(w: int) -> None:
        nonlocal failures
        store = open_store(url)
        # Seeded per writer: the jitter (if any) is reproducible and never touches the global RNG.
        service = SessionService(store, rng=random.Random(w))
        try:
            for i in range(appends):
                t0 = time.perf_counter()
                try:
                    await service.append_retrying(session_id, [draft(kind, w, i)])
                except RpError as exc:
                    if exc.code != "event.contended":
                        raise
                    failures += 1
                latencies.append((time.perf_counter() - t0) * 1000)
        finally:
            await store.close()

    try:
        await asyncio.gather(*(writer(w) for w in range(writers)))
        head = await setup.head(session_id)
        assert head == writers * appends - failures, f"head {head} after {writers * appends - failures} successful appends"
    finally:
        await setup.close()
    return writers * appends, failures, latencies


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--postgres", default=os.environ.get("RP_TEST_POSTGRES_URL"))
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--appends", type=int, default=25, help="appends per writer")
    args = ap.parse_args()
    rows: list[tuple[str, str, int, int, float, float]] = []
    backends: list[tuple[str, str | None]] = [("sqlite", None)]
    if args.postgres:
        backends.append(("postgres", args.postgres))
    for backend, base in backends:
        for kind in ("command", "message"):
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as tmp:
                    total, failed, lat = asyncio.run(run_kind(f"sqlite:///{Path(tmp) / 'bench.db'}", kind, args.writers, args.appends))
            else:
                assert base is not None
                url, schema = pg_schema_url(base)
                try:
                    total, failed, lat = asyncio.run(run_kind(url, kind, args.writers, args.appends))
                finally:
                    import psycopg

                    with psycopg.connect(base, autocommit=True) as conn:
                        conn.execute(f"DROP SCHEMA {schema} CASCADE")
            rows.append((backend, kind, total, failed, pct(lat, 50), pct(lat, 99)))
    print(f"{args.writers} writers on one session, {args.appends} appends each (append_retrying)")
    print(f"target: 0% event.contended, p99 ≤ {TARGET_P99_MS:.0f} ms")
    print(f"{'backend':<9} {'events':<8} {'appends':>7} {'contended':>10} {'p50 ms':>8} {'p99 ms':>8}  verdict")
    ok_all = True
    for backend, kind, total, failed, p50, p99 in rows:
        ok = failed == 0 and p99 <= TARGET_P99_MS
        ok_all &= ok
        print(f"{backend:<9} {kind:<8} {total:>7} {failed / total:>9.1%} {p50:>8.1f} {p99:>8.1f}  {'PASS' if ok else 'FAIL'}")
    print(f"verdict: {'PASS' if ok_all else 'FAIL'}")


if __name__ == "__main__":
    main()
