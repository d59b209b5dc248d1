"""Writer prompts in a long story (issue 12 item 4): exact, and stored in linear space.

Run by hand:  .venv/bin/python bench/writer_prompts.py [--turns 300]

Workload: a new story on the bundled sample card, played for N turns by the offline demo model
through the real Chat-mode path, on SQLite (a temporary home). Then, from a store opened afresh:
- the Writer prompt of turn 1 is read back from its child session and compared byte for byte with
  the prompt the model was sent at turn 1, and its sha256 with the ``promptHash`` the turn stored;
- every Writer prompt's verbatim size is summed and set beside what the store holds for them
  (their rows' payload and part references plus the compressed parts they use);
- the database file's size (after a WAL checkpoint) and the files left under ``locks/``.

Targets: turn 1's prompt exact with a matching sha256; Writer prompts stored in at most a tenth of
their verbatim size after 300 turns (verbatim grows with the square of the story); one lock file.
The DB size target for 1,000 turns (≤ 25 MB) is bench/long_story.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roleplay.assets.seeds import ensure_seeds  # noqa: E402
from roleplay.assets.service import AssetService  # noqa: E402
from roleplay.core.run import play_turn  # noqa: E402
from roleplay.core.session_create import StoryRequest, create_story  # noqa: E402
from roleplay.core.writer import WRITER_RESULT_KIND  # noqa: E402
from roleplay.features import build_runtime  # noqa: E402
from roleplay.harness.events import message_text  # noqa: E402
from roleplay.harness.models.routes import Route  # noqa: E402
from roleplay.harness.store import open_store  # noqa: E402
from roleplay.samples import SAMPLE_CARD, sample_card_bytes  # noqa: E402

DEMO = Route("demo", "demo")


class Recording:
    """The demo model, keeping the first Writer request (the one without tools)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.first_writer_prompt: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def stream(self, request: Any) -> Any:
        if not request.tools and self.first_writer_prompt is None:
            self.first_writer_prompt = request.messages[-1].content
        return self.inner.stream(request)


async def play(url: str, turns: int) -> tuple[str, str]:
    store = open_store(url)
    await store.migrate()
    rt = build_runtime(store)
    model = Recording(rt.model_for(DEMO))
    rt.models[DEMO.spec] = model
    try:
        await ensure_seeds(rt.assets)
        card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
        record, _ = await create_story(rt, StoryRequest(card=card))
        started = time.perf_counter()
        for turn in range(turns):
            result = await play_turn(rt, record.id, f"我沿着第{turn}号码头走去，问起晨星号的事。", parent_route=DEMO)
            if result.turn.outcome != "completed":
                print(f"turn {turn + 1}: {result.turn.outcome} {result.turn.error}")
            if (turn + 1) % 50 == 0:
                print(f"  {turn + 1} turns, {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        await rt.aclose()
        await store.close()
    assert model.first_writer_prompt is not None
    return record.id, model.first_writer_prompt


async def inspect(url: str, story: str) -> dict[str, Any]:
    store = open_store(url)
    try:
        results = [
            e.payload["meta"]
            for e in await store.read(story)
            if e.type == "tool/result" and (e.payload.get("meta") or {}).get("kind") == WRITER_RESULT_KIND
        ]
        first = results[0]
        [event] = [e for e in await store.read(first["childSessionId"]) if e.type == "user/message"]
        children = {m["childSessionId"] for m in results}
        verbatim = 0
        for child in children:
            verbatim += sum(len(message_text(e.payload).encode("utf-8")) for e in await store.read(child) if e.type == "user/message")
        stored, used = 0, set()
        dump = await store.dump()
        for row in dump:
            if row[0] == "event" and row[1] in children and row[3] == "user/message":
                stored += len(str(row[5]).encode("utf-8")) + len(row[6] or "")
                used |= {i for entry in json.loads(row[6] or "[]") for i in entry[2]}
        stored += sum(len(row[4]) for row in dump if row[0] == "text_part" and row[1] in used)
        return {"first": message_text(event.payload), "hash": first["promptHash"], "verbatim": verbatim, "stored": stored}
    finally:
        await store.close()


async def main(turns: int) -> int:
    with tempfile.TemporaryDirectory() as home:
        db = Path(home) / "rp.db"
        url = f"sqlite:///{db}"
        story, sent = await play(url, turns)
        got = await inspect(url, story)
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        size = db.stat().st_size
        locks = sorted(p.name for p in (Path(home) / "locks").iterdir()) if (Path(home) / "locks").exists() else []
    exact = got["first"] == sent
    hash_ok = hashlib.sha256(got["first"].encode("utf-8")).hexdigest() == got["hash"]
    ratio = got["stored"] / got["verbatim"]
    print(f"\n{turns} turns on SQLite")
    print(f"  DB file                     {size / 1e6:8.2f} MB")
    print(f"  Writer prompts verbatim     {got['verbatim'] / 1e6:8.2f} MB")
    print(f"  Writer prompts as stored    {got['stored'] / 1e6:8.2f} MB  ({ratio:.1%} of verbatim)")
    print(f"  files under locks/          {len(locks)} {locks}")
    rows = [
        ("turn 1 Writer prompt recovered byte for byte", exact),
        ("its sha256 matches the stored promptHash", hash_ok),
        ("Writer prompts stored in ≤ 10% of verbatim", ratio <= 0.10),
        ("at most one lock file", len(locks) <= 1),
    ]
    for name, ok in rows:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(ok for _, ok in rows) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.turns)))
