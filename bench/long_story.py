"""Long stories (issue 12 item 7): what a story costs as it grows to 1,000 turns.

Run by hand:
    .venv/bin/python bench/long_story.py [--turns 1000] [--postgres URL] [--window 128000]

Workload: a new story on the bundled sample card, played for N turns by the offline demo model
(which now plays indefinitely, issue 12 item 6) through the real Chat-mode path: prepare and
context build, the parent's steps, the Writer child session, the deliberate failed commit and its
retry patch, every append. SQLite always (a temporary file); PostgreSQL too when ``--postgres`` is
given (a fresh schema in that database, dropped afterwards). The demo route carries the configured
context window (``--window``, default 128,000 tokens), the window the Writer's history is fitted
to.

At turns 10, 100, 500 and 1,000 (those not past N, and N itself) it prints, per backend:
- engine p50/p95 over the last 10 turns: wall time of ``play_turn`` minus the time spent inside
  the model's ``stream`` (a wrapper times it; the demo model itself is instant);
- parent and Writer request tokens of that turn: the largest parent request (its last step) and
  the Writer request (also sized every 25 turns, for the flat-budget verdict), estimated with the
  project's one deterministic counter
  (``roleplay.harness.models.tokens.count_tokens``) over every message text, tool call and tool
  declaration, plus 4 tokens of framing per message;
- events: the story session's head and the rows of the whole events table (Writer children too);
- DB bytes: SQLite's file plus its WAL and shared-memory files; PostgreSQL's tables with their
  indexes and TOAST in the bench schema;
- RSS of this process (current and peak, from /proc; getrusage's peak where there is no /proc);
- PostgreSQL round trips per turn (median over the same 10 turns): every statement, prepare and
  transaction command psycopg sends, counted by wrapping psycopg's send paths (private API of
  psycopg 3.3; the bench says so when they are missing).

Then each target of the issue with its verdict. Targets are stated for turn 1,000; a shorter run
is judged at its last turn and says so. Exit status 1 when any target fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterator
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roleplay.assets.seeds import ensure_seeds  # noqa: E402
from roleplay.assets.service import AssetService  # noqa: E402
from roleplay.core.demo import WRITER_MARKER  # noqa: E402
from roleplay.core.run import play_turn  # noqa: E402
from roleplay.core.runtime import RoleplayRuntime  # noqa: E402
from roleplay.core.session_create import StoryRequest, create_story  # noqa: E402
from roleplay.features import build_runtime  # noqa: E402
from roleplay.harness.history import reply_reserve  # noqa: E402
from roleplay.harness.models.demo import DemoModel  # noqa: E402
from roleplay.harness.models.routes import Route  # noqa: E402
from roleplay.harness.models.tokens import count_tokens  # noqa: E402
from roleplay.harness.models.types import ModelRequest, StreamEvent  # noqa: E402
from roleplay.harness.store import EventStore, open_store  # noqa: E402
from roleplay.samples import SAMPLE_CARD, sample_card_bytes  # noqa: E402

CHECKPOINTS = (10, 100, 500, 1_000)
WINDOW_TURNS = 10  # percentiles at a checkpoint are over this many turns ending there
SAMPLE_EVERY = 25  # request tokens are sized at the checkpoints and every this many turns
FRAMING_PER_MESSAGE = 4
MB = 1024 * 1024

# The targets (figures at turn 1,000 of the demo story).
P50_GROWTH_MAX = 1.5
SQLITE_BYTES_MAX = 25 * MB
PG_ROUND_TRIPS_MAX = 30
PG_OVER_SQLITE_MAX = 1.5
FLAT_GROWTH_MAX = 1.05  # "flat": at most +5% from the turn the budget filled to the last turn
FILLED_SHARE = 0.95  # filled: within one exchange or so of what a request may spend (whole exchanges)

INPUTS = (
    "我推开铁门，说我只是想看看灯塔。",
    "我帮林汐擦拭铜镜，问她守灯多久了。",
    "I ask about the Morning Star and the night it sank.",
    "我们一起爬上灯室，看雾从海上涌进来。",
    "I offer her a flask of hot tea and sit by the lamp.",
    "我提起镇上关于她祖父的传闻。",
    "The fog thickens; I suggest we light the lamp early.",
    "我把在旧码头捡到的铜扣拿给她看。",
)


# -- the metered model ----------------------------------------------------------------------------


def request_tokens(request: ModelRequest) -> int:
    total = 0
    for message in request.messages:
        total += FRAMING_PER_MESSAGE + count_tokens(message.text())
        for call in message.tool_calls:
            total += count_tokens(call.name) + count_tokens(call.arguments)
    for tool in request.tools:
        total += count_tokens(json.dumps({"name": tool.name, "description": tool.description, "parameters": tool.parameters}))
    return total


@dataclass
class TurnMeter:
    model_seconds: float = 0.0
    model_cpu: float = 0.0  # the process's CPU time inside the model (all threads)
    parent: ModelRequest | None = None  # the largest parent request of the turn (its last step)
    writer: ModelRequest | None = None

    def reset(self) -> None:
        self.model_seconds, self.model_cpu, self.parent, self.writer = 0.0, 0.0, None, None

    def tokens(self) -> tuple[int, int]:
        """Sized after the turn and only on sampled turns: the estimator reads about 1 MB of text
        a second, and a parent request near turn 1,000 holds several megabytes."""
        return (request_tokens(self.parent) if self.parent else 0), (request_tokens(self.writer) if self.writer else 0)


class MeteredModel:
    """Wraps a model: times its own streaming (to subtract it) and keeps the turn's requests."""

    def __init__(self, inner: DemoModel, meter: TurnMeter) -> None:
        self.inner, self.meter = inner, meter
        self.provider, self.model, self.label, self.capabilities = inner.provider, inner.model, inner.label, inner.capabilities

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        t0, c0 = time.perf_counter(), time.process_time()
        system = request.messages[0].text() if request.messages and request.messages[0].role == "system" else ""
        if WRITER_MARKER in system and not request.tools:
            self.meter.writer = request
        elif self.meter.parent is None or len(request.messages) >= len(self.meter.parent.messages):
            self.meter.parent = request
        # Only the time inside the model counts as model time, not the consumer's work between
        # chunks (publishing them is engine work).
        stream = self.inner.stream(request).__aiter__()
        while True:
            try:
                event = await stream.__anext__()
            except StopAsyncIteration:
                break
            finally:
                self.meter.model_seconds += time.perf_counter() - t0
                self.meter.model_cpu += time.process_time() - c0
            yield event
            t0, c0 = time.perf_counter(), time.process_time()


# -- PostgreSQL round trips -----------------------------------------------------------------------


class RoundTrips:
    """Counts what psycopg sends: cursor queries (plain, prepare, prepared) and connection commands
    (BEGIN, COMMIT, ROLLBACK, SET). Each is one round trip outside pipeline mode, which the store
    does not use. These are psycopg 3.3's private send paths: ``available`` is False (and the
    figure is not printed) when a psycopg upgrade moved them."""

    CURSOR = ("_execute_send", "_send_prepare", "_send_query_prepared")

    def __init__(self) -> None:
        self.count = 0
        self.available = False
        self._undo: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        try:
            from psycopg._connection_base import BaseConnection
            from psycopg._cursor_base import BaseCursor
        except ImportError:
            return
        targets = [(BaseCursor, name) for name in self.CURSOR] + [(BaseConnection, "_exec_command")]
        if not all(callable(getattr(cls, name, None)) for cls, name in targets):
            return
        for cls, name in targets:
            original = getattr(cls, name)
            setattr(cls, name, self._counting(original))
            self._undo.append((cls, name, original))
        self.available = True

    def _counting(self, original: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(*args, **kwargs)

        return wrapper

    def uninstall(self) -> None:
        for cls, name, original in reversed(self._undo):
            setattr(cls, name, original)
        self._undo.clear()


@contextlib.contextmanager
def fresh_schema(base: str) -> Iterator[str]:
    import psycopg

    schema = "bench_" + secrets.token_hex(6)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# -- one backend ---------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    turn: int
    p50_ms: float
    p95_ms: float
    cpu_p50_ms: float
    parent_tokens: int
    writer_tokens: int
    story_events: int
    all_events: int
    db_bytes: int
    rss_bytes: int
    peak_rss_bytes: int
    round_trips: float | None


@dataclass
class Run:
    backend: str
    engine: list[float] = field(default_factory=list)
    # The same, in this process's CPU time (all its threads): on a machine shared with other work,
    # wall time also counts the waits for a core; CPU time shows what the engine itself spends.
    engine_cpu: list[float] = field(default_factory=list)
    parent_tokens: dict[int, int] = field(default_factory=dict)  # sampled turns only
    round_trips: list[int] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    uncommitted: int = 0
    seconds: float = 0.0

    def all_p50_ms(self) -> float:
        return statistics.median(self.engine) * 1000


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def _proc_status(key: str) -> int | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) * 1024
    return None


def rss_bytes() -> int:
    return _proc_status("VmRSS") or 0


def peak_rss_bytes() -> int:
    # One source with the current figure where there is one (/proc), else getrusage (kB on Linux).
    return _proc_status("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Backend:
    """Where the story is stored, and how to read its size and event count from outside."""

    name = ""

    def url(self) -> str:
        raise NotImplementedError

    def db_bytes(self) -> int:
        raise NotImplementedError

    def all_events(self) -> int:
        raise NotImplementedError


class SQLiteBackend(Backend):
    name = "SQLite"

    def __init__(self, directory: Path) -> None:
        self.path = directory / "long_story.db"

    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def db_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")) if p.exists())

    def all_events(self) -> int:
        with contextlib.closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


class PostgresBackend(Backend):
    name = "PostgreSQL"

    def __init__(self, url: str) -> None:
        self._url = url

    def url(self) -> str:
        return self._url

    def _scalar(self, sql: str) -> int:
        import psycopg

        with psycopg.connect(self._url, autocommit=True) as conn:
            row = conn.execute(sql).fetchone()
            return int(row[0]) if row and row[0] is not None else 0

    def db_bytes(self) -> int:
        return self._scalar(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')"
        )

    def all_events(self) -> int:
        return self._scalar("SELECT count(*) FROM events")


async def new_story(store: EventStore) -> tuple[RoleplayRuntime, str]:
    rt = build_runtime(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card))
    return rt, record.id


async def play(backend: Backend, turns: int, window: int, trips: RoundTrips | None) -> Run:
    run = Run(backend.name)
    marks = sorted({t for t in CHECKPOINTS if t <= turns} | {turns})
    store = open_store(backend.url())
    await store.migrate()
    rt, sid = await new_story(store)
    route = Route("demo", "demo", context_window=window)
    meter = TurnMeter()
    rt.models[route.spec] = MeteredModel(DemoModel(), meter)  # type: ignore[assignment]
    started = time.perf_counter()
    try:
        for n in range(1, turns + 1):
            meter.reset()
            before = trips.count if trips is not None else 0
            t0, c0 = time.perf_counter(), time.process_time()
            result = await play_turn(rt, sid, f"（第{n}轮）{INPUTS[n % len(INPUTS)]}", parent_route=route)
            total = time.perf_counter() - t0
            run.engine_cpu.append(time.process_time() - c0 - meter.model_cpu)
            if trips is not None:
                run.round_trips.append(trips.count - before)
            run.engine.append(total - meter.model_seconds)
            if not result.committed:
                run.uncommitted += 1
            if n in marks or n % SAMPLE_EVERY == 0:
                parent_tokens, writer_tokens = meter.tokens()
                meter.reset()  # the requests are not held while RSS is read
                run.parent_tokens[n] = parent_tokens
            if n in marks:
                window_times = run.engine[-WINDOW_TURNS:]
                run.checkpoints.append(
                    Checkpoint(
                        turn=n,
                        p50_ms=statistics.median(window_times) * 1000,
                        p95_ms=percentile(window_times, 0.95) * 1000,
                        cpu_p50_ms=statistics.median(run.engine_cpu[-WINDOW_TURNS:]) * 1000,
                        parent_tokens=parent_tokens,
                        writer_tokens=writer_tokens,
                        story_events=await store.head(sid),
                        all_events=backend.all_events(),
                        db_bytes=backend.db_bytes(),
                        rss_bytes=rss_bytes(),
                        peak_rss_bytes=peak_rss_bytes(),
                        round_trips=statistics.median(run.round_trips[-WINDOW_TURNS:]) if trips is not None else None,
                    )
                )
                print_checkpoint(run, run.checkpoints[-1], first=len(run.checkpoints) == 1)
    finally:
        run.seconds = time.perf_counter() - started
        await rt.aclose()
        await store.close()
    return run


# -- output --------------------------------------------------------------------------------------


def print_checkpoint(run: Run, c: Checkpoint, *, first: bool) -> None:
    if first:
        print(f"\n{run.backend}")
        print(
            f"{'turn':>5} {'engine p50 ms':>14} {'p95 ms':>8} {'CPU p50 ms':>11} {'parent tok':>11} {'Writer tok':>11} {'story events':>13} "
            f"{'all events':>11} {'DB MB':>8} {'RSS MB':>7} {'peak MB':>8}" + (f" {'round trips':>12}" if c.round_trips is not None else "")
        )
    print(
        f"{c.turn:>5} {c.p50_ms:>14.1f} {c.p95_ms:>8.1f} {c.cpu_p50_ms:>11.1f} {c.parent_tokens:>11,} {c.writer_tokens:>11,} {c.story_events:>13,} "
        f"{c.all_events:>11,} {c.db_bytes / MB:>8.1f} {c.rss_bytes / MB:>7.0f} {c.peak_rss_bytes / MB:>8.0f}"
        + (f" {c.round_trips:>12.0f}" if c.round_trips is not None else ""),
        flush=True,
    )


@dataclass
class Verdict:
    measure: str
    target: str
    measured: str
    ok: bool | None  # None: not judged (says why in measured)


def flat_after_fill(tokens: dict[int, int], window: int) -> Verdict:
    """Judged on the sampled turns: from the first one at 95% of what a request may spend (the window less the reply reserve), the rest may
    grow by 5% at most. Not judged when the budget never filled or filled at the last sample."""
    measure = "parent request tokens flat after the budget fills"
    target = f"≤ +{(FLAT_GROWTH_MAX - 1) * 100:.0f}% after reaching {FILLED_SHARE:.0%} of the window less the reply reserve"
    turns = sorted(tokens)
    # A request may spend the window less the reply reserve (harness.history), never all of it.
    capacity = window - reply_reserve(window, None)
    filled = next((t for t in turns if tokens[t] >= FILLED_SHARE * capacity), None)
    if filled is None:
        return Verdict(measure, target, f"not filled in {turns[-1]:,} turns (max {max(tokens.values()):,})", None)
    later = [t for t in turns if t > filled]
    if not later:
        return Verdict(measure, target, f"filled at turn {filled}: too late to judge", None)
    growth = max(tokens[t] for t in later) / tokens[filled]
    return Verdict(measure, target, f"filled by turn {filled}, then ×{growth:.2f} to turn {later[-1]:,}", growth <= FLAT_GROWTH_MAX)


def verdicts(sqlite: Run, postgres: Run | None, turns: int, window: int) -> list[Verdict]:
    at = "1,000" if turns == 1_000 else f"{turns:,} (target: 1,000)"
    last, first = sqlite.checkpoints[-1], sqlite.checkpoints[0]
    out = [
        Verdict(
            f"parent request tokens at turn {at}", f"≤ {window:,} (the window)", f"{last.parent_tokens:,}", last.parent_tokens <= window
        ),
        flat_after_fill(sqlite.parent_tokens, window),
    ]
    if first.turn == last.turn:
        out.append(Verdict(f"engine p50 at turn {at} ÷ at turn {first.turn} (SQLite)", f"≤ {P50_GROWTH_MAX}×", "one checkpoint only", None))
    else:
        growth = last.p50_ms / first.p50_ms
        out.append(
            Verdict(
                f"engine p50 at turn {at} ÷ at turn {first.turn} (SQLite)",
                f"≤ {P50_GROWTH_MAX}×",
                f"{growth:.1f}× ({last.p50_ms:.0f} / {first.p50_ms:.0f} ms; CPU {last.cpu_p50_ms / first.cpu_p50_ms:.1f}×)",
                growth <= P50_GROWTH_MAX,
            )
        )
    out.append(
        Verdict(
            f"DB size after {turns:,} turns (SQLite)",
            f"≤ {SQLITE_BYTES_MAX / MB:.0f} MB",
            f"{last.db_bytes / MB:.1f} MB",
            last.db_bytes <= SQLITE_BYTES_MAX,
        )
    )
    if postgres is None:
        return out + [
            Verdict("PostgreSQL round trips per turn", f"≤ {PG_ROUND_TRIPS_MAX}", "not run (give --postgres URL)", None),
            Verdict("PostgreSQL engine p50 ÷ SQLite, same run", f"≤ {PG_OVER_SQLITE_MAX}×", "not run (give --postgres URL)", None),
        ]
    trips = postgres.checkpoints[-1].round_trips
    if trips is None:
        out.append(Verdict("PostgreSQL round trips per turn", f"≤ {PG_ROUND_TRIPS_MAX}", "unavailable (psycopg send paths moved)", None))
    else:
        out.append(
            Verdict(
                f"PostgreSQL round trips per turn (median, turns {max(1, turns - WINDOW_TURNS + 1)}–{turns})",
                f"≤ {PG_ROUND_TRIPS_MAX}",
                f"{trips:.0f} (median over all turns {statistics.median(postgres.round_trips):.0f})",
                trips <= PG_ROUND_TRIPS_MAX,
            )
        )
    ratio = postgres.all_p50_ms() / sqlite.all_p50_ms()
    out.append(
        Verdict(
            "PostgreSQL engine p50 ÷ SQLite, same run (all turns)",
            f"≤ {PG_OVER_SQLITE_MAX}×",
            f"{ratio:.1f}× ({postgres.all_p50_ms():.0f} / {sqlite.all_p50_ms():.0f} ms)",
            ratio <= PG_OVER_SQLITE_MAX,
        )
    )
    return out


def print_verdicts(rows: list[Verdict]) -> None:
    print(f"\n{'measure':<62} {'target':<44} {'measured':<46} verdict")
    print("-" * 162)
    for v in rows:
        verdict = "n/a" if v.ok is None else ("PASS" if v.ok else "FAIL")
        print(f"{v.measure:<62} {v.target:<44} {v.measured:<46} {verdict}")


async def main(turns: int, postgres: str | None, window: int) -> int:
    print(f"long story: {turns:,} demo turns on the sample card; window {window:,} tokens; {os.cpu_count()} cores")
    print(f"checkpoints: engine p50/p95 over the {WINDOW_TURNS} turns ending at each; tokens estimated by count_tokens")
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await play(SQLiteBackend(Path(tmp)), turns, window, None)
    print(f"SQLite: {turns:,} turns in {sqlite.seconds:.0f} s, {sqlite.uncommitted} not committed")
    pg_run = None
    if postgres:
        trips = RoundTrips()
        trips.install()
        try:
            with fresh_schema(postgres) as url:
                pg_run = await play(PostgresBackend(url), turns, window, trips if trips.available else None)
        finally:
            trips.uninstall()
        print(f"PostgreSQL: {turns:,} turns in {pg_run.seconds:.0f} s, {pg_run.uncommitted} not committed")
    rows = verdicts(sqlite, pg_run, turns, window)
    print_verdicts(rows)
    return 1 if any(v.ok is False for v in rows) or sqlite.uncommitted or (pg_run and pg_run.uncommitted) else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=1_000, help="turns to play (default 1,000)")
    ap.add_argument("--postgres", metavar="URL", help="also play on this PostgreSQL database (a fresh schema, dropped afterwards)")
    ap.add_argument("--window", type=int, default=128_000, help="the demo route's context window in tokens (default 128,000)")
    args = ap.parse_args()
    if args.turns < 1 or args.window < 1:
        ap.error("--turns and --window must be positive")
    sys.exit(asyncio.run(main(args.turns, args.postgres, args.window)))
