"""Event log benchmark: append throughput and long-session load times, SQLite and PostgreSQL.

Run by hand:  .venv/bin/python bench/eventlog.py [--postgres URL] [--events 20000]
(PostgreSQL is included when --postgres or RP_TEST_POSTGRES_URL is given.)

Prints one table. Targets (issue 2): loading a 20,000-event session from its snapshot takes
≤ 20 ms on SQLite here; a rebuild from seq 0 grows linearly with the event count.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roleplay.harness.events import EventDraft  # noqa: E402
from roleplay.harness.projections import load, write_snapshot  # noqa: E402
from roleplay.harness.store import EventStore, open_store  # noqa: E402
from roleplay.harness.surface import surface_projection  # noqa: E402

PROSE = (
    "The lantern light trembled across the wet cobbles as she turned, her cloak heavy with rain. "
    "Somewhere above, a shutter banged twice and was still. "
)


def turn_events(t: int) -> list[EventDraft]:
    """One agent turn as the loop logs it: 10 events, two of them on the surface plus a tool pair."""
    tid, sid = f"t{t}", f"s{t}"
    return [
        EventDraft(
            "user/message", {"messageId": f"u{t}", "content": [{"type": "text", "text": f"Turn {t}: I look around. " + PROSE[:80]}]}
        ),
        EventDraft("turn/start", {"turnId": tid}),
        EventDraft("step/start", {"turnId": tid, "stepId": sid, "index": 0}),
        EventDraft(
            "model/request",
            {
                "turnId": tid,
                "stepId": sid,
                "route": {"provider": "demo", "model": "demo"},
                "sections": ["identity", "rules"],
                "hash": "0" * 64,
            },
        ),
        EventDraft("tool/call", {"callId": f"c{t}", "name": "rp_write_turn", "arguments": '{"action":"write"}'}),
        EventDraft(
            "tool/result",
            {"callId": f"c{t}", "name": "rp_write_turn", "ok": True, "content": "written", "meta": {"kind": "rp-agent/writer-result"}},
        ),
        EventDraft("assistant/message", {"messageId": f"a{t}", "content": [{"type": "text", "text": PROSE * 3}]}),
        EventDraft("step/end", {"turnId": tid, "stepId": sid, "usage": {"promptTokens": 1200, "completionTokens": 300}}),
        EventDraft("command/run", {"commandId": f"k{t}", "name": "noop", "args": {}}),
        EventDraft("turn/end", {"turnId": tid, "outcome": "completed"}),
    ]


async def fill(store: EventStore, n_events: int, batch: int = 500) -> str:
    rec = await store.create_session(preset="bench")
    drafts = [d for t in range(n_events // 10 + 1) for d in turn_events(t)][:n_events]
    head = 0
    for i in range(0, len(drafts), batch):
        chunk = drafts[i : i + batch]
        await store.append(rec.id, head, chunk)
        head += len(chunk)
    return rec.id


async def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """Median wall time in ms over ``repeat`` runs (after one warm-up)."""
    await fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


async def bench_backend(name: str, url: str, n_events: int) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    store = open_store(url)
    await store.migrate()
    try:
        # Append throughput: single-event CAS appends, as a turn writes them.
        rec = await store.create_session(preset="bench")
        drafts = [d for t in range(100) for d in turn_events(t)][:1000]
        t0 = time.perf_counter()
        for i, d in enumerate(drafts):
            await store.append(rec.id, i, [d])
        dt = time.perf_counter() - t0
        rows.append((name, "append, 1 event per call", f"{len(drafts) / dt:,.0f} events/s"))
        rec2 = await store.create_session(preset="bench")
        t0 = time.perf_counter()
        for i in range(0, len(drafts), 100):
            await store.append(rec2.id, i, drafts[i : i + 100])
        dt = time.perf_counter() - t0
        rows.append((name, "append, 100 events per call", f"{len(drafts) / dt:,.0f} events/s"))

        # Rebuild from zero at growing sizes (linearity), then the snapshot load at full size.
        sizes = [n_events // 4, n_events // 2, n_events]
        rebuild_ms = []
        sid = ""
        for size in sizes:
            sid = await fill(store, size)
            ms = await timed(lambda: load(store, sid, surface_projection, use_snapshot=False, snapshot_every=None), 3)
            rebuild_ms.append(ms)
            rows.append((name, f"load {size:,} events, no snapshot", f"{ms:.1f} ms ({ms / size * 1000:.2f} µs/event)"))
        await write_snapshot(store, sid, surface_projection)
        ms = await timed(lambda: load(store, sid, surface_projection, snapshot_every=None), 20)
        rows.append((name, f"load {n_events:,} events from snapshot", f"{ms:.2f} ms"))
        await store.append(sid, n_events, [d for t in range(10) for d in turn_events(100_000 + t)])
        ms = await timed(lambda: load(store, sid, surface_projection, snapshot_every=None), 20)
        rows.append((name, "  … snapshot + 100 newer events", f"{ms:.2f} ms"))
        ratio = (rebuild_ms[-1] / sizes[-1]) / (rebuild_ms[0] / sizes[0])
        rows.append((name, "rebuild cost per event, largest/smallest", f"{ratio:.2f}× (1.0 = linear)"))
    finally:
        await store.close()
    return rows


def pg_schema_url(base: str) -> tuple[str, str]:
    schema = "bench_" + secrets.token_hex(4)
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}", schema


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--postgres", default=os.environ.get("RP_TEST_POSTGRES_URL"))
    ap.add_argument("--events", type=int, default=20_000)
    args = ap.parse_args()
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows += asyncio.run(bench_backend("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}", args.events))
    if args.postgres:
        url, schema = pg_schema_url(args.postgres)
        try:
            rows += asyncio.run(bench_backend("postgres", url, args.events))
        finally:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    w = max(len(r[1]) for r in rows)
    print(f"{'backend':<9} {'measure':<{w}}  result")
    print("-" * (w + 32))
    for backend, what, result in rows:
        print(f"{backend:<9} {what:<{w}}  {result}")


if __name__ == "__main__":
    main()
