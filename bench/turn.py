"""Engine overhead per roleplay turn, model time excluded.

Run by hand:  .venv/bin/python bench/turn.py [--turns 30] [--messages 1000] [--entries 5000]

Setup: the sample card in a session that already holds 1,000 messages, bound to 3 lorebooks
with 5,000 entries in total, on SQLite. Each turn runs the real Chat-mode path (prepare +
context build, Writer child session, commit validation, every append) against an instant
scripted model whose own time is measured and subtracted. The first turn (which compiles the
lorebooks once per revision) is reported separately; the table gives p50/p95 over the rest.

Target (issue 6): p50 ≤ 30 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import roleplay.core.run as run_module  # noqa: E402
from roleplay.assets.seeds import ensure_seeds  # noqa: E402
from roleplay.assets.service import AssetService  # noqa: E402
from roleplay.core.run import play_turn  # noqa: E402
from roleplay.core.session_create import StoryRequest, create_story  # noqa: E402
from roleplay.features import build_runtime  # noqa: E402
from roleplay.harness.events import EventDraft  # noqa: E402
from roleplay.harness.models.routes import Route  # noqa: E402
from roleplay.harness.models.scripted import ScriptedModel  # noqa: E402
from roleplay.harness.models.types import ModelRequest  # noqa: E402
from roleplay.harness.sessions import SessionService  # noqa: E402
from roleplay.harness.store import open_store  # noqa: E402
from roleplay.harness.tools import ToolRegistry  # noqa: E402
from roleplay.samples import SAMPLE_CARD, sample_card_bytes  # noqa: E402

WORDS = ["harbor", "lantern", "fog", "bell", "keeper", "reef", "tide", "ledger", "wreck", "oil", "mirror", "stairs"]
TIMES: dict[str, list[float]] = defaultdict(list)
CURRENT: dict[str, float] = defaultdict(float)


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            CURRENT[name] += time.perf_counter() - t0

    return wrapper


def timed_sync(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            CURRENT[name] += time.perf_counter() - t0

    return wrapper


def lorebook(n: int, offset: int) -> dict[str, Any]:
    entries = {}
    for i in range(n):
        k = offset + i
        keys = [f"{WORDS[k % len(WORDS)]}{k}", f"token{k}"]
        entries[str(i)] = {
            "uid": i,
            "key": keys,
            "content": f"Lore entry {k}: " + "details of the town and its people. " * 3,
            "comment": f"entry {k}",
            "position": k % 5,
            "order": k % 100,
        }
    return {"name": f"bench book {offset}", "book": {"entries": entries}}


class InstantModel(ScriptedModel):
    """A scripted model that answers the normal path (write, then a correct commit) and records
    how long its own streaming took, so that time can be subtracted."""

    def __init__(self) -> None:
        super().__init__(responder=self.respond, model="instant")

    @staticmethod
    def respond(request: ModelRequest) -> dict[str, Any]:
        if not request.tools:
            return {"text": "The fog shifts; the bell is silent tonight. " * 6}
        context = next(m for m in reversed(request.messages) if m.role == "user" and "<roleplay_request" in m.text())
        start = request.messages.index(context)
        tail = request.messages[start + 1 :]
        writer = next((c.id for m in tail for c in m.tool_calls if c.name == "rp_write_turn"), None)
        if writer is None:
            return {"tool_calls": [{"name": "rp_write_turn", "arguments": {"action": "write"}}]}
        revision = int(re.search(r'"expectedRevision":(\d+)', context.text()).group(1))  # type: ignore[union-attr]
        change = {"op": "increment", "path": "/林汐/信任", "by": 1, "ruleId": "trust-shift", "reason": "bench"}
        effect = {"kind": "state.update", "namespace": "story", "expectedRevision": revision, "payload": {"changes": [change]}}
        return {"tool_calls": [{"name": "rp_commit_turn", "arguments": {"references": {"writer": writer}, "effects": [effect]}}]}

    async def stream(self, request: ModelRequest):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        async for event in super().stream(request):
            CURRENT["model"] += time.perf_counter() - t0
            yield event
            t0 = time.perf_counter()
        CURRENT["model"] += time.perf_counter() - t0


async def main(turns: int, messages: int, entries: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        await store.migrate()
        rt = build_runtime(store)
        await ensure_seeds(rt.assets)
        card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
        sizes = [entries // 3, entries // 3, entries - 2 * (entries // 3)]
        books, offset = [], 0
        for n in sizes:
            books.append((await rt.assets.create("lorebook", lorebook(n, offset))).id)
            offset += n
        linked = [r.id for r in await rt.assets.read(lambda tx: tx.linked_lorebooks(card))]
        record, _ = await create_story(rt, StoryRequest(card=card, lorebooks=linked + books))
        sid = record.id
        head = await store.head(sid)
        drafts = []
        for i in range(messages // 2):
            word = WORDS[i % len(WORDS)]
            drafts.append(
                EventDraft("user/message", {"messageId": f"bu{i}", "content": [{"type": "text", "text": f"I look at the {word}{i * 7}."}]})
            )
            drafts.append(EventDraft("assistant/message", {"messageId": f"ba{i}", "content": [{"type": "text", "text": PROSE}]}))
        for i in range(0, len(drafts), 200):
            await rt.service.append(sid, drafts[i : i + 200], expected_seq=head)
            head += len(drafts[i : i + 200])

        route = Route("scripted", "instant")
        rt.models[route.spec] = InstantModel()
        run_module.collect_sources = timed("context: sources + lore", run_module.collect_sources)  # type: ignore[assignment]
        run_module.freeze = timed_sync("context: freeze", run_module.freeze)  # type: ignore[assignment]
        run_module.prepare_run = timed("prepare (all)", run_module.prepare_run)  # type: ignore[assignment]
        SessionService.append = timed("appends", SessionService.append)  # type: ignore[method-assign]
        original_execute = ToolRegistry.execute

        async def execute(self: ToolRegistry, call: Any, ctx: Any, *, visible: Any = None) -> Any:
            t0 = time.perf_counter()
            try:
                return await original_execute(self, call, ctx, visible=visible)
            finally:
                CURRENT[f"tool: {call.name}"] += time.perf_counter() - t0

        ToolRegistry.execute = execute  # type: ignore[method-assign]

        first = None
        for n in range(turns + 1):
            CURRENT.clear()
            t0 = time.perf_counter()
            result = await play_turn(rt, sid, f"I ask about the harbor{n} and the bell{n * 3}.", parent_route=route)
            total = time.perf_counter() - t0
            assert result.committed, result.turn.error
            overhead = total - CURRENT["model"]
            if n == 0:
                first = overhead
                continue
            TIMES["TURN (model excluded)"].append(overhead)
            for key, value in CURRENT.items():
                TIMES[key].append(value)
        await rt.aclose()
        await store.close()

    print(f"session: {messages:,} messages, 3 lorebooks / {entries:,} entries; {turns} turns (SQLite, 2 cores)")
    print(f"first turn (compiles the lorebooks once per revision): {first * 1000:.1f} ms")  # type: ignore[operator]
    print(f"{'component':<34} {'p50 ms':>9} {'p95 ms':>9}")
    print("-" * 54)
    order = ["TURN (model excluded)", "prepare (all)", "context: sources + lore", "context: freeze", "tool: rp_write_turn",
             "tool: rp_commit_turn", "appends", "model"]  # fmt: skip
    for key in order + sorted(k for k in TIMES if k not in order):
        values = TIMES.get(key)
        if values:
            values = sorted(values)
            p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
            print(f"{key:<34} {statistics.median(values) * 1000:>9.2f} {p95 * 1000:>9.2f}")
    print("(tool: rp_write_turn includes the Writer child session's appends; appends are also counted on their own)")


PROSE = "The lantern swung in the wind, and the keeper counted the waves under her breath. " * 4

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--entries", type=int, default=5000)
    args = ap.parse_args()
    asyncio.run(main(args.turns, args.messages, args.entries))
