"""SurfaceFolds: a fold continued across appends equals a fresh fold over the same nodes, and
starts again after replacements, compactions, other writers' rewrites and in forks."""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest

from roleplay.harness.events import EventDraft
from roleplay.harness.projections import Loaded
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.surface import SURFACE, rewrites_surface
from roleplay.harness.surface_folds import SurfaceFolds

pytestmark = pytest.mark.anyio


class IdsFold:
    """Every node's (id, seq, text) in order; counts what it was fed."""

    def __init__(self) -> None:
        self.out: list[tuple[str, int, str]] = []
        self.fed = 0

    def feed(self, node: dict[str, Any]) -> None:
        self.fed += 1
        content = node.get("content") or []
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
        self.out.append((node["id"], node["seq"], text))


class UntilFold(IdsFold):
    """Stops at the first node whose text is "stop" (like a projection that ends at the input)."""

    def feed(self, node: dict[str, Any]) -> bool:  # type: ignore[override]
        content = node.get("content")
        if isinstance(content, list) and content and content[0].get("text") == "stop":
            return False
        super().feed(node)
        return True


def fresh(nodes: list[dict[str, Any]], make: Callable[[], IdsFold] = IdsFold, count: int | None = None) -> list[Any]:
    fold = make()
    for node in nodes[:count]:
        if fold.feed(node) is False:
            break
    return fold.out


def msg(role: str, mid: str, text: str, op: dict[str, Any] | None = None) -> EventDraft:
    payload: dict[str, Any] = {"messageId": mid, "content": [{"type": "text", "text": text}] if text else []}
    if op:
        payload["surfaceOp"] = op
    return EventDraft(f"{role}/message", payload)


async def surface(service: SessionService, sid: str) -> Loaded:
    return await service.projection(sid, SURFACE)


class Story:
    """Random appends and rewrites through the session service."""

    def __init__(self, service: SessionService, sid: str, rng: random.Random) -> None:
        self.service, self.sid, self.rng, self.n = service, sid, rng, 0

    async def step(self) -> str:
        rng, n = self.rng, self.n
        self.n += 1
        nodes = (await surface(self.service, self.sid)).state["nodes"]
        targets = [x for x in nodes if x.get("kind") != "compaction/summary" and x["role"] in ("user", "assistant")]
        kind = rng.choice(["user", "assistant", "assistant", "tool", "other", "edit", "suffix", "empty", "compact"])
        if kind in ("edit", "suffix", "empty") and targets:
            target = rng.choice(targets)
            op = {"op": "replace", "range": "suffix" if kind == "suffix" else "node", "targetMessageId": target["id"]}
            role = "assistant" if kind == "empty" else target["role"]
            drafts = [msg(role, f"r{n}", "" if kind == "empty" else f"edited {n}", op)]
        elif kind == "compact" and nodes:
            seqs = sorted({x["seq"] for x in nodes if rng.random() < 0.7})
            drafts = [EventDraft("compaction/checkpoint", {"checkpointId": f"c{n}", "summary": f"summary {n}", "sourceEventSeqs": seqs})]
        elif kind == "tool":
            drafts = [EventDraft("tool/result", {"callId": f"t{n}", "name": "x", "ok": True, "content": f"result {n}"})]
        elif kind == "other":
            drafts = [EventDraft("turn/start", {"turnId": f"turn{n}", "inputMessageId": f"u{n}"})]
        else:
            drafts = [msg("user" if kind == "user" else "assistant", f"m{n}", rng.choice(["", "stop", f"text {n}"]))]
        await self.service.append_retrying(self.sid, drafts)
        return kind


@pytest.mark.parametrize("seed", range(8))
async def test_a_continued_fold_equals_a_fresh_one_after_every_append_and_rewrite(store: EventStore, seed: int) -> None:
    service = SessionService(store)
    sid = (await service.create("chat")).id
    story = Story(service, sid, random.Random(seed))
    for _ in range(40):
        before = service.folds.fold("ids", sid, await surface(service, sid), IdsFold)
        fed_before, nodes_before = before.fed, len(before.out)
        kind = await story.step()
        loaded = await surface(service, sid)
        nodes = loaded.state["nodes"]
        got = service.folds.fold("ids", sid, loaded, IdsFold)
        assert got.out == fresh(nodes)
        until = service.folds.fold("until", sid, loaded, UntilFold)
        assert until.out == fresh(nodes, UntilFold)
        half = len(nodes) // 2
        assert service.folds.fold("half", sid, loaded, IdsFold, count=half).out == fresh(nodes, count=half)
        if got is before:  # continued: only the new nodes were fed
            assert got.fed - fed_before == len(nodes) - nodes_before
        if kind in ("user", "assistant", "tool", "other"):
            assert got is before, "an append must continue the fold, not start it again"


async def test_rewrites_are_what_the_surface_fold_replaces_or_compacts() -> None:
    from roleplay.harness.events import Event

    assert rewrites_surface(Event("s", 1, "compaction/checkpoint", {"checkpointId": "c", "summary": "x", "sourceEventSeqs": []}, ""))
    op = {"op": "replace", "range": "node", "targetMessageId": "m"}
    assert rewrites_surface(Event("s", 1, "assistant/message", {"messageId": "a", "content": [], "surfaceOp": op}, ""))
    assert not rewrites_surface(Event("s", 1, "assistant/message", {"messageId": "a", "content": []}, ""))
    assert not rewrites_surface(Event("s", 1, "tool/result", {"callId": "c", "name": "x", "ok": True, "content": "", "surfaceOp": op}, ""))


async def test_another_writers_rewrite_starts_the_fold_again(make_store: Callable[..., EventStore]) -> None:
    """A second process (its own store and caches) edits a message: the first one's fold, which
    never saw that append happen, still answers the edited surface."""
    a, b = make_store(), make_store()
    await a.migrate()
    try:
        mine, theirs = SessionService(a), SessionService(b)
        sid = (await mine.create("chat", seed=[msg("user", "u1", "hello"), msg("assistant", "a1", "hi")])).id
        first = mine.folds.fold("ids", sid, await surface(mine, sid), IdsFold)
        assert [x[2] for x in first.out] == ["hello", "hi"]
        await theirs.append_retrying(sid, [msg("user", "u2", "more")])
        await theirs.append_retrying(sid, [msg("user", "u1e", "hello again", {"op": "replace", "range": "node", "targetMessageId": "u1"})])
        loaded = await surface(mine, sid)
        got = mine.folds.fold("ids", sid, loaded, IdsFold)
        assert got.out == fresh(loaded.state["nodes"])
        assert [x[2] for x in got.out] == ["hello again", "hi", "more"]
        await theirs.append_retrying(sid, [msg("assistant", "a2", "and more")])
        again = mine.folds.fold("ids", sid, await surface(mine, sid), IdsFold)
        assert again is got and again.fed == 4  # an append from elsewhere continues it
    finally:
        await b.close()
        await a.close()


async def test_a_fork_has_a_fold_of_its_own(store: EventStore) -> None:
    service = SessionService(store)
    sid = (await service.create("chat", seed=[msg("user", "u1", "one"), msg("assistant", "a1", "two")])).id
    await service.append_retrying(sid, [msg("user", "u2", "three")])
    service.folds.fold("ids", sid, await surface(service, sid), IdsFold)
    fork = await store.fork(sid, 2)
    await service.append_retrying(fork.id, [msg("user", "u3", "other")])
    got = service.folds.fold("ids", fork.id, await surface(service, fork.id), IdsFold)
    assert [x[2] for x in got.out] == ["one", "two", "other"]
    assert [x[2] for x in service.folds.fold("ids", sid, await surface(service, sid), IdsFold).out] == ["one", "two", "three"]


async def test_an_older_state_is_answered_without_moving_the_fold(store: EventStore) -> None:
    service = SessionService(store)
    sid = (await service.create("chat", seed=[msg("user", "u1", "one")])).id
    old = await service.projection(sid, SURFACE, use_snapshot=False)  # not the cache's state
    old = Loaded(old.state, old.upto_seq, 0, old.folded, appends_since=old.upto_seq)
    await service.append_retrying(sid, [msg("user", "u2", "two")])
    kept = service.folds.fold("ids", sid, await surface(service, sid), IdsFold)
    assert service.folds.fold("ids", sid, old, IdsFold).out == [("u1", 1, "one")]
    assert service.folds.fold("ids", sid, await surface(service, sid), IdsFold) is kept


async def test_without_appends_since_nothing_is_reused(store: EventStore) -> None:
    service = SessionService(store)
    sid = (await service.create("chat", seed=[msg("user", "u1", "one")])).id
    loaded = await service.projection(sid, SURFACE, use_snapshot=False)
    assert loaded.appends_since is None
    first = service.folds.fold("ids", sid, loaded, IdsFold)
    assert service.folds.fold("ids", sid, loaded, IdsFold) is not first


def test_folds_are_bounded() -> None:
    folds = SurfaceFolds(max_entries=2)
    state = Loaded({"nodes": []}, 0, 0, 0, appends_since=0)
    for sid in ("a", "b", "c"):
        folds.fold("ids", sid, state, IdsFold)
    assert len(folds._kept) == 2
    folds.drop("c")
    assert len(folds._kept) == 1
