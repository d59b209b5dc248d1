"""HTTP API under load: many sessions playing turns over SSE against ``rp serve``'s application.

Run by hand:  .venv/bin/python bench/serve.py [--sessions 200] [--turns 2] [--chunk-delay 0.02]
                 [--think 30] [--postgres URL] [--backend sqlite|postgres]
(PostgreSQL is included when --postgres or RP_TEST_POSTGRES_URL is given.)

Two loads are measured per backend.

The user load, which the targets are judged on: 200 people playing at once, each reading the reply
and typing the next message before posting (``--think`` seconds, default 30, jittered ±50 % with a
fixed seed so sessions do not march in step). Thirty seconds is short for roleplay: a 300-word
reply alone takes over a minute to read, and the player then writes a paragraph. Earlier runs used
5 s, which is 40 turns a second from 200 people — a chat bot, not a story; that load is still one
flag away (``--think 5``), and the saturation load below says what one process can take.

The saturation load: ``--think 0``, every session posts again the moment its turn ends. Turns queue
for the CPU by construction, so no latency target applies; it reports the capacity of one
process (turns/s, server CPU per turn). ``--only user|saturation`` runs one.

Three processes: the fake OpenAI-compatible provider (``roleplay.testing.fake_openai``, a fixed
delay between streamed frames), the server (this script's ``--child`` mode: the ``rp serve`` app on
uvicorn with an event-loop lag monitor), and this driver (httpx, one SSE stream per session).

Each session opens its event stream, then plays ``--turns`` turns: (after the think time) POST the
text, read the stream until that turn's ``turn/end``. Sessions start spread over the first think
time, as users arriving do. Measured per turn: time to first token (POST → first
``assistant/chunk``), the gaps between chunks, and every durable event id, which is checked
against the log afterwards (lost = in the log but never streamed; duplicated = streamed twice).

Engine overhead = time to first token − the provider's own time on that turn's path, which is its
whole answer to the parent's first call plus the Writer's call up to its first output. The fake
provider times each answer on its own side (from taking the request up to writing the first output
frame and the last; ``GET /_fake/timings``) and the turn's two requests are found by the turn's text
("Session n, turn t"). What remains is the engine's: building and sending the requests, reading the
answers, the run itself, the SSE relay, and the queueing behind other sessions on the server's loop.

The provider must be measured on the turn itself: it shares this machine's two cores with the
server and this driver, so under load its frames run late by milliseconds each (a thread of the
fake waits for its GIL and for a core), time a real provider on its own machines would not add and
that is not the engine's. The figure earlier runs used is still printed (``calibrated``): one
session alone (nine turns, the first left out), once with the chunk delay and once with none, the
difference taken as the provider's time to first token for every loaded turn.

Targets (issue 16): 0 errors, 0 lost, 0 duplicated; overhead p50 ≤ 30 ms, p99 ≤ 150 ms; the
server's event loop never blocked more than 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

HERE = Path(__file__).resolve()
API = "/api/v1"
TARGETS = {"overhead_p50_ms": 30.0, "overhead_p99_ms": 150.0, "loop_block_ms": 50.0}
# The turn a provider request belongs to: the last "Session n, turn t" in its messages (the text
# play_session posts); the fake's timings are keyed "n,t" by it.
TURN_KEY = r"Session (\d+), turn (\d+):"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# -- the server child ---------------------------------------------------------------------------------


def _cycle_kind(o: Any) -> str:
    """A garbage object's type, and for a frame or code object where it runs (which function's
    locals keep a cycle alive is what to fix)."""
    name = type(o).__name__
    code = getattr(o, "f_code", None) or getattr(o, "gi_code", None) or getattr(o, "cr_code", None) or getattr(o, "ag_code", None)
    if code is not None:
        return f"{name} {code.co_filename.rsplit('/', 2)[-1]}:{code.co_name}"
    if name == "function":
        return f"function {o.__module__}.{o.__qualname__}"
    return name


def child(url: str, port: int, stats_path: str) -> None:
    """The rp serve application on uvicorn, with a monitor of how late the event loop runs."""
    import collections
    from contextlib import asynccontextmanager

    import uvicorn

    from roleplay.assets.seeds import ensure_seeds
    from roleplay.features import open_runtime
    from roleplay.harness.models.routes import resolve_route
    from roleplay.harness.store import open_store
    from roleplay.web.app import WebConfig, create_app
    from roleplay.web.serve import server_options

    lags: list[float] = []
    held: list[float] = []  # each interval's share of its lateness the loop thread's CPU explains
    heap: dict[str, Any] = {}
    gc_pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    gc_cpu: dict[int, list[float]] = {0: [], 1: [], 2: []}  # the same collections' CPU: less than the pause when preempted
    gc_started = [0.0, 0.0]
    ready = [False]  # collections during start-up (imports, before gc.freeze) are not the served load's

    garbage: collections.Counter[str] = collections.Counter()

    def on_gc(phase: str, info: dict[str, int]) -> None:  # a collection holds the loop like any step
        if phase == "start":
            if info["generation"] == 2 and ready[0] and os.environ.get("RP_BENCH_GC_KINDS"):
                _largest_collection(heap)  # what the longest full collections walk
            gc_started[:] = time.perf_counter(), time.thread_time()
        else:
            if gc.garbage:  # RP_BENCH_GC_GARBAGE: what the cycles the collector frees are made of
                garbage.update(_cycle_kind(o) for o in gc.garbage)
                gc.garbage.clear()
            ms = (time.perf_counter() - gc_started[0]) * 1000
            cpu_ms = (time.thread_time() - gc_started[1]) * 1000
            if not ready[0]:
                return
            gc_pauses[info["generation"]].append(ms)
            gc_cpu[info["generation"]].append(cpu_ms)
            if os.environ.get("RP_BENCH_GC_LOG") and ms > 20:
                print(
                    f"gc gen{info['generation']} {ms:.1f} ms ({cpu_ms:.1f} ms CPU) collected {info['collected']} objects {len(gc.get_objects())}",
                    file=sys.stderr,
                )

    import gc

    gc.callbacks.append(on_gc)
    if os.environ.get("RP_BENCH_GC_GARBAGE"):
        gc.set_debug(gc.DEBUG_SAVEALL)
    if os.environ.get("RP_BENCH_GC_THRESHOLD"):  # experiments: "g0,g1,g2"
        gc.set_threshold(*(int(x) for x in os.environ["RP_BENCH_GC_THRESHOLD"].split(",")))

    blocked: collections.Counter[str] = collections.Counter()  # RP_BENCH_BLOCKED_STACKS: see _sample_blocked

    @asynccontextmanager
    async def opener():  # type: ignore[no-untyped-def]
        store = open_store(url)
        await store.migrate()
        rt = await open_runtime(store, entry_points=False)
        await ensure_seeds(rt.assets)
        monitor = asyncio.create_task(watch_loop(lags, held, ready))
        if os.environ.get("RP_BENCH_BLOCKED_STACKS"):
            sampler = asyncio.create_task(_sample_blocked(ready, blocked))
        heap["cpu_at_ready_s"] = time.process_time()  # start-up's share, left out of the per-turn figure
        if os.environ.get("RP_BENCH_SLOW_CALLBACKS"):  # asyncio names each step that held the loop
            import logging

            logging.basicConfig(level=logging.WARNING)
            loop = asyncio.get_running_loop()
            loop.set_debug(True)
            loop.slow_callback_duration = float(os.environ["RP_BENCH_SLOW_CALLBACKS"])
        try:
            yield rt
        finally:
            import collections
            import gc

            t0, c0 = time.perf_counter(), time.thread_time()
            gc.collect()
            full_ms = (time.perf_counter() - t0) * 1000
            full_cpu_ms = (time.thread_time() - c0) * 1000
            tracked = gc.get_objects()
            kinds = collections.Counter(type(o).__name__ for o in tracked)
            # The biggest containers: a full collection visits every reference each one holds.
            big = sorted(
                ((len(o), type(o).__name__, repr(o)[:100]) for o in tracked if isinstance(o, (dict, list, set, tuple))), reverse=True
            )
            if os.environ.get("RP_BENCH_HEAP_ROOTS"):  # which of the server's holders the tracked objects hang off
                heap["roots"] = _root_shares(rt, tracked)
            heap.update(
                tracked=len(tracked),
                frozen=gc.get_freeze_count(),
                top=kinds.most_common(8),
                full_collection_ms=round(full_ms, 1),
                full_collection_cpu_ms=round(full_cpu_ms, 1),
                biggest=big[:6],
            )
            del tracked, big
            monitor.cancel()
            if os.environ.get("RP_BENCH_BLOCKED_STACKS"):
                sampler.cancel()
            await rt.aclose()
            await store.close()

    app = create_app(None, WebConfig(default_route=resolve_route("openai/fake")), opener=opener)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            backlog=2048,
            # rp serve's, unless an experiment names others: RP_BENCH_UVICORN="asyncio,h11" serves on
            # the pure-Python loop and parser.
            **server_options()
            | (dict(zip(("loop", "http"), os.environ["RP_BENCH_UVICORN"].split(","))) if os.environ.get("RP_BENCH_UVICORN") else {}),
        )
    )
    profile = os.environ.get("RP_BENCH_PROFILE")  # a file: cProfile of the whole server run
    if profile:
        import cProfile

        profiler = cProfile.Profile(time.thread_time)  # the loop thread's CPU: waits on epoll are not work
        profiler.enable()
    try:
        server.run()
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the SIGINT it stopped on
    if profile:
        profiler.disable()
        profiler.dump_stats(f"{profile}.{url.split(':', 1)[0]}")  # one file a backend
    gc_max = {str(g): round(max(v), 1) if v else 0.0 for g, v in gc_pauses.items()}
    gc_max |= {f"{g} CPU": round(max(v), 1) if v else 0.0 for g, v in gc_cpu.items()}
    for stack, n in blocked.most_common(12):
        print(f"loop blocked, {n} samples ({n * BLOCK_SAMPLE_S * 1000:.0f} ms) in:\n{stack}", file=sys.stderr)
    if garbage:
        print("cyclic garbage freed, by kind:", *(f"  {n:8d} {k}" for k, n in garbage.most_common(40)), sep="\n", file=sys.stderr)
    Path(stats_path).write_text(json.dumps({"lags": lags, "held": held, "cpu_s": time.process_time(), "gc_max_ms": gc_max, "heap": heap}))


BLOCK_SAMPLE_S = 0.002  # _sample_blocked's period


async def _sample_blocked(ready: list[bool], stacks: Any, late_s: float = 0.012) -> None:
    """Which code holds the loop: a thread looks every ``BLOCK_SAMPLE_S`` whether the loop has
    ticked within ``late_s``, and when not, counts the loop thread's innermost frames (one sample
    is about ``BLOCK_SAMPLE_S`` of blocking). It found a new provider client loading the CA bundle
    on the loop. Cheap enough to leave the figures honest, unlike asyncio's debug mode, which
    records where every callback was made.

    Read the counts with their bias: the thread samples only when it holds the GIL, which the loop
    thread gives up at once in a C call that releases it (zlib, hashing, a system call) and
    otherwise only every switch interval (5 ms). Such calls are over-counted next to plain
    Python, the more so when other threads (SQLite's) want the GIL too."""
    import threading
    import traceback

    tick = [time.perf_counter()]
    loop_thread = threading.get_ident()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(BLOCK_SAMPLE_S):
            frame = sys._current_frames().get(loop_thread)
            if ready[0] and frame is not None and time.perf_counter() - tick[0] > late_s:
                summary = traceback.extract_stack(frame)[-14:]
                stacks["\n".join(f"  {f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}" for f in summary)] += 1

    threading.Thread(target=watch, daemon=True).start()
    try:
        while True:
            tick[0] = time.perf_counter()
            await asyncio.sleep(BLOCK_SAMPLE_S)
    finally:
        stop.set()


def _largest_collection(heap: dict[str, Any]) -> None:
    """``heap["kinds_at_max"]``: the tracked objects' kinds (``_cycle_kind``) at the full
    collection with the most of them so far (RP_BENCH_GC_KINDS: it walks the heap each time)."""
    import collections
    import gc

    tracked = gc.get_objects()
    if len(tracked) > heap.get("kinds_max", 0):
        heap["kinds_max"] = len(tracked)
        heap["kinds_at_max"] = collections.Counter(_cycle_kind(o) for o in tracked).most_common(40)


def _root_shares(rt: Any, tracked: list[Any]) -> dict[str, int]:
    """How many of the collector's tracked objects each holder reaches first (in this order: an
    object reached from two counts for the first)."""
    import gc

    from roleplay.harness.models import tokens

    import types

    alive = {id(o) for o in tracked}
    # Not walked through: from a module, a class or a function the whole program is reachable.
    opaque = (types.ModuleType, type, types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.CodeType)
    seen: set[int] = set()
    roots = {
        "projection cache": rt.service.cache,
        "surface folds": rt.service.folds,
        "token line memo": tokens._memo,
        "lore cache": rt.lore_cache,
        "asset cache": rt.asset_cache,
        "store": rt.store,
        "runtime": rt,
    }
    shares: dict[str, int] = {}
    for name, root in roots.items():
        count, todo = 0, [root]
        while todo:
            o = todo.pop()
            if id(o) in seen or isinstance(o, opaque):
                continue
            seen.add(id(o))
            count += id(o) in alive  # frozen objects are walked through (held by start-up's), not counted
            todo.extend(gc.get_referents(o))
        shares[name] = count
    shares["elsewhere"] = len(alive) - len(seen & alive)
    import collections

    rest = collections.Counter(type(o).__name__ for o in tracked if id(o) not in seen)
    shares |= {f"elsewhere {k}": n for k, n in rest.most_common(12)}
    by_projection: dict[str, int] = {}
    for (_sid, name, _v), entry in rt.service.cache._entries.items():
        count, todo, once = 0, [entry.state], set()
        while todo:
            o = todo.pop()
            if id(o) in once or id(o) not in alive:
                continue
            once.add(id(o))
            count += 1
            todo.extend(gc.get_referents(o))
        by_projection[name] = by_projection.get(name, 0) + count
    shares |= {f"cache {n}": c for n, c in by_projection.items()}
    return shares


async def watch_loop(lags: list[float], held: list[float], ready: list[bool], period: float = 0.005) -> None:
    """Sleep ``period`` over and over; how much later than asked each wake-up comes is how long
    something held the loop. It first runs once start-up is over (the app's last start-up step,
    the collection before ``gc.freeze``, included): ``ready`` from then on.

    The lateness is the verdict's figure, and it counts two things: the loop's own work, and time
    the OS gave the core to another process (the provider, the driver, PostgreSQL: four busy
    processes share two cores here). ``held`` separates them: the loop thread's CPU time in the
    same interval, capped at the lateness, is the most of it the server's own work can explain."""
    loop = asyncio.get_running_loop()
    ready[0] = True
    while True:
        t0, c0 = loop.time(), time.thread_time()
        await asyncio.sleep(period)
        lag = (loop.time() - t0 - period) * 1000
        lags.append(lag)
        held.append(min(lag, (time.thread_time() - c0) * 1000))
        if lag > 40 and os.environ.get("RP_BENCH_GC_LOG"):  # when: set against the driver's phases
            print(f"loop held {lag:.1f} ms, ending at {time.time():.3f}", file=sys.stderr)


# -- the driver -----------------------------------------------------------------------------------------


class Stats:
    def __init__(self) -> None:
        self.ttft_ms: list[float] = []
        self.ttft_turns: list[str] = []  # "n,t" of each ttft_ms entry, as the provider's timings key it
        self.gaps_ms: list[float] = []
        self.turns = 0
        self.errors: list[str] = []
        self.lost = 0
        self.duplicated = 0


async def read_messages(lines: Any) -> Any:
    event: dict[str, str] = {}
    async for line in lines:
        if not line:
            if "data" in event:
                yield event
            event = {}
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        event[key] = value


async def play_session(client: Any, n: int, turns: int, think: float, stats: Stats) -> None:
    import httpx

    rng = random.Random(n)  # the same think times on every run
    try:
        await asyncio.sleep(rng.uniform(0, think))  # users arrive spread out, not all at once
        r = await client.post(f"{API}/sessions", json={"sample": True, "model": "openai/fake"})
        r.raise_for_status()
        sid = r.json()["sessionId"]
        seen: list[int] = []
        async with client.stream("GET", f"{API}/sessions/{sid}/events", params={"after": 0}) as stream:
            messages = read_messages(stream.aiter_lines())
            for t in range(turns):
                if t:
                    await asyncio.sleep(think * rng.uniform(0.5, 1.5))  # reading the reply, typing
                t0 = time.perf_counter()
                posted = await client.post(f"{API}/sessions/{sid}/turns", json={"text": f"Session {n}, turn {t}: I knock."})
                if posted.status_code != 202:
                    stats.errors.append(f"turn {posted.status_code} {posted.text[:120]}")
                    return
                turn_id = posted.json()["turnId"]
                first = last = None
                async for message in messages:
                    if "id" in message:
                        seen.append(int(message["id"]))
                    kind = message.get("event")
                    now = time.perf_counter()
                    if kind == "assistant/chunk":
                        if first is None:
                            first = now
                            stats.ttft_ms.append((now - t0) * 1000)
                            stats.ttft_turns.append(f"{n},{t}")
                        elif last is not None:
                            stats.gaps_ms.append((now - last) * 1000)
                        last = now
                    if kind == "turn/end" and json.loads(message["data"])["payload"]["turnId"] == turn_id:
                        outcome = json.loads(message["data"])["payload"]["outcome"]
                        if outcome != "completed":
                            stats.errors.append(f"turn ended {outcome}")
                        stats.turns += 1
                        break
        log = (await client.get(f"{API}/sessions/{sid}/log", params={"limit": 10_000})).json()
        expected = [e["seq"] for e in log if e["seq"] <= (seen[-1] if seen else 0)]
        stats.lost += len(set(expected) - set(seen))
        stats.duplicated += len(seen) - len(set(seen))
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        stats.errors.append(f"{type(exc).__name__}: {exc}")


def start_fake(delay: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "roleplay.testing.fake_openai", "--port", str(port), "--chunk-delay", str(delay)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port)
    return proc, f"http://127.0.0.1:{port}/v1"


def wait_port(port: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


async def drive(url: str, delay: float, sessions: int, turns: int, think: float = 0.0) -> tuple[Stats, dict[str, Any], float]:
    import httpx

    driver_cpu = time.process_time()
    fake, fake_url = start_fake(delay)
    port = free_port()
    stats_file = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    env = {**os.environ, "OPENAI_BASE_URL": fake_url, "OPENAI_API_KEY": "sk-bench"}
    server = subprocess.Popen([sys.executable, str(HERE), "--child", url, str(port), stats_file], env=env)
    try:
        wait_port(port)
        stats = Stats()
        limits = httpx.Limits(max_connections=sessions * 3, max_keepalive_connections=sessions * 3)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=httpx.Timeout(300.0), limits=limits) as client:
            t0 = time.perf_counter()
            await asyncio.gather(*(play_session(client, n, turns, think, stats) for n in range(sessions)))
            elapsed = time.perf_counter() - t0
            if os.environ.get("RP_BENCH_GC_LOG"):
                print(f"driver: every session played at {time.time():.3f}", file=sys.stderr)
            timings = (await client.get(f"{fake_url}/_fake/timings", params={"key": TURN_KEY})).json()
    finally:
        if os.environ.get("RP_BENCH_GC_LOG"):
            print(f"driver: streams closed, stopping the server at {time.time():.3f}", file=sys.stderr)
        server.send_signal(signal.SIGINT)
        server.wait(60)
        provider_cpu = cpu_seconds(fake.pid)
        fake.terminate()
        fake.wait(10)
    server = json.loads(Path(stats_file).read_text()) if Path(stats_file).stat().st_size else {"lags": [], "cpu_s": None}
    server["provider_cpu_s"] = provider_cpu
    server["provider_timings"] = timings
    server["driver_cpu_s"] = time.process_time() - driver_cpu  # this process, for this load
    return stats, server, elapsed


def provider_own_ms(timings: list[dict[str, Any]]) -> dict[str, float]:
    """Per turn ("n,t"), the provider's own time on the way to the first token: its whole answer
    to the turn's first request (the parent's first step) and the next one's (the Writer's) up to
    its first output. A turn whose requests do not line up so is left out."""
    by_turn: dict[str, list[dict[str, Any]]] = {}
    for row in timings:
        if row["key"] is not None:
            by_turn.setdefault(row["key"], []).append(row)
    own = {}
    for key, rows in by_turn.items():
        rows.sort(key=lambda r: r["received"])
        if len(rows) < 2:
            continue
        parent, writer = rows[0], rows[1]
        if parent["done"] is None or writer["firstOutput"] is None or writer["received"] < parent["done"]:
            continue
        own[key] = ((parent["done"] - parent["received"]) + (writer["firstOutput"] - writer["received"])) * 1000
    return own


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a running process, from /proc (None where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sqlite_url() -> str:
    return f"sqlite:///{tempfile.mkdtemp(prefix='rp-bench-serve-')}/rp.db"


async def bench(label: str, make_url: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    # Nine turns each, the first left out (a fresh server's first turn warms caches): a median of
    # three moved the provider's figure, and so every overhead, by tens of milliseconds.
    calibrate_d, _, _ = await drive(make_url(), args.chunk_delay, 1, 9)
    calibrate_0, _, _ = await drive(make_url(), 0.0, 1, 9)
    provider_ms = statistics.median(calibrate_d.ttft_ms[1:]) - statistics.median(calibrate_0.ttft_ms[1:])
    if args.verbose:
        print(f"calibration: ttft {calibrate_d.ttft_ms} with the delay, {calibrate_0.ttft_ms} without", file=sys.stderr)
    loads = {"user": args.think, "saturation": 0.0}
    rows = []
    for load, think in loads.items():
        if args.only and args.only != load:
            continue
        stats, server, elapsed = await drive(make_url(), args.chunk_delay, args.sessions, args.turns, think)
        lags = server["lags"]
        own = provider_own_ms(server["provider_timings"])
        overhead = [t - own[k] for t, k in zip(stats.ttft_ms, stats.ttft_turns) if k in own]
        calibrated = [t - provider_ms for t in stats.ttft_ms]
        row = {
            "backend": label,
            "load": load,
            "think_s": think,
            "sessions": args.sessions,
            "turns": stats.turns,
            "turns_per_s": round(stats.turns / elapsed, 2),
            # The server process's CPU (start-up and session creation included) per turn played: what
            # bounds how many turns a second one process can serve.
            "server_cpu_ms_per_turn": round((server["cpu_s"] - server["heap"].get("cpu_at_ready_s", 0)) * 1000 / stats.turns, 1)
            if server["cpu_s"] and stats.turns
            else None,
            # The provider and this driver share the machine's cores with the server.
            "provider_cpu_ms_per_turn": round(server["provider_cpu_s"] * 1000 / stats.turns, 1)
            if server.get("provider_cpu_s") and stats.turns
            else None,
            "driver_cpu_ms_per_turn": round(server["driver_cpu_s"] * 1000 / stats.turns, 1) if stats.turns else None,
            "provider_ttft_p50_ms": round(pct(list(own.values()), 0.5), 1) if own else None,
            "provider_ttft_p99_ms": round(pct(list(own.values()), 0.99), 1) if own else None,
            "ttft_p50_ms": round(pct(stats.ttft_ms, 0.5), 1),
            "overhead_p50_ms": round(pct(overhead, 0.5), 1) if overhead else None,
            "overhead_p99_ms": round(pct(overhead, 0.99), 1) if overhead else None,
            "turns_without_provider_timings": len(stats.ttft_ms) - len(overhead),
            # As earlier runs measured it: the idle provider's time, taken for every loaded turn.
            "calibrated": {
                "provider_ttft_ms": round(provider_ms, 1),
                "overhead_p50_ms": round(pct(calibrated, 0.5), 1),
                "overhead_p99_ms": round(pct(calibrated, 0.99), 1),
            },
            "chunk_gap_p50_ms": round(pct(stats.gaps_ms, 0.5), 1),
            "chunk_gap_p99_ms": round(pct(stats.gaps_ms, 0.99), 1),
            "loop_block_max_ms": round(max(lags), 1) if lags else None,
            "loop_block_p99_ms": round(pct(lags, 0.99), 1) if lags else None,
            # The most of one wake-up's lateness the server's own CPU explains (``watch_loop``);
            # the rest of the longest was the OS running another process on the core.
            "loop_block_cpu_max_ms": round(max(server["held"]), 1) if server.get("held") else None,
            "gc_pause_max_ms": server.get("gc_max_ms"),  # per generation
            "heap_after": server.get("heap"),  # objects the collector tracks when the run ends
            "errors": len(stats.errors),
            "first_errors": stats.errors[:3],
            "lost": stats.lost,
            "duplicated": stats.duplicated,
        }
        # Saturation queues turns for the CPU by design: it measures capacity, not latency.
        judged = verdicts(row)
        if load == "saturation":
            judged = {k: v for k, v in judged.items() if k.startswith("0 errors")} | {"latency": "not judged (capacity run)"}
        row["verdicts"] = judged
        rows.append(row)
    return rows


def verdicts(row: dict[str, Any]) -> dict[str, str]:
    """Each issue-16 target against this run: "met" or "MISSED (value)"."""

    def v(ok: bool, value: Any) -> str:
        return "met" if ok else f"MISSED ({value})"

    block = row["loop_block_max_ms"]
    return {
        "0 errors/lost/duplicated": v(
            row["errors"] == row["lost"] == row["duplicated"] == 0, f"{row['errors']}/{row['lost']}/{row['duplicated']}"
        ),
        # Judged only when the provider's own time is known for every turn (else the figures
        # would leave out the turns where something went wrong).
        "provider timed on every turn": v(row["turns_without_provider_timings"] == 0, row["turns_without_provider_timings"]),
        f"overhead p50 <= {TARGETS['overhead_p50_ms']:.0f} ms": v(
            row["overhead_p50_ms"] is not None and row["overhead_p50_ms"] <= TARGETS["overhead_p50_ms"], row["overhead_p50_ms"]
        ),
        f"overhead p99 <= {TARGETS['overhead_p99_ms']:.0f} ms": v(
            row["overhead_p99_ms"] is not None and row["overhead_p99_ms"] <= TARGETS["overhead_p99_ms"], row["overhead_p99_ms"]
        ),
        f"loop never blocked > {TARGETS['loop_block_ms']:.0f} ms": v(block is not None and block <= TARGETS["loop_block_ms"], block),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--chunk-delay", type=float, default=0.02, help="the provider's seconds between streamed frames")
    ap.add_argument("--think", type=float, default=30.0, help="the user load's mean seconds a user reads and types between turns")
    ap.add_argument("--only", choices=("user", "saturation"), help="run one of the two loads")
    ap.add_argument("--postgres", default=os.environ.get("RP_TEST_POSTGRES_URL"))
    ap.add_argument("--backend", choices=("sqlite", "postgres"), help="run one backend (PostgreSQL needs --postgres)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    rows = asyncio.run(bench("sqlite", sqlite_url, args)) if args.backend != "postgres" else []
    if args.postgres and args.backend != "sqlite":
        sys.path.insert(0, str(HERE.parent))
        from eventlog import pg_schema_url

        rows += asyncio.run(bench("postgres", lambda: pg_schema_url(args.postgres)[0], args))
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    for row in rows:
        print(f"{row['backend']:>8} {row['load']:<10} " + " · ".join(f"{k}: {v}" for k, v in row["verdicts"].items()))
    print(f"targets: {TARGETS} · 0 errors, 0 lost, 0 duplicated")


if __name__ == "__main__":
    main()
