"""The MVU adapter inside the runtime: the official example card plays 3 turns with the demo
model; its opening's <initvar> seeds native state, commits update it through native rules, and a
getvar-gated lorebook entry switches with the state."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.profile import profile_of
from roleplay.core.run import play_turn, prepare_run
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.core.settings import FEATURES
from roleplay.features import build_runtime
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import ModelRequest
from roleplay.harness.store import EventStore
from roleplay.state.events import state_document

pytestmark = pytest.mark.anyio
EXAMPLE = "呕吐内心的少女_头像.png"
DEMO = Route("demo", "demo")


async def example_story(store: EventStore, corpus: Path, rt: RoleplayRuntime | None = None) -> tuple[RoleplayRuntime, str]:
    rt = rt or build_runtime(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file((corpus / "cards" / EXAMPLE).read_bytes(), EXAMPLE)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card, opening="card", opening_index=1))
    return rt, record.id


async def story(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]


async def test_example_card_plays_three_turns(store: EventStore, corpus_dir: Path) -> None:
    rt, sid = await example_story(store, corpus_dir)
    ns = await story(rt, sid)
    # The alternate opening's own <initvar> seeded the state (not the card's: 依存度 35 there).
    assert ns["value"]["白娅"]["依存度"] == 15 and ns["value"]["世界"]["当前时间"] == "2025-04-07 08:42"
    assert ns["definition"]["updateMode"] == "schema-only"
    opening = (await rt.service.surface(sid))["nodes"][0]["content"][0]["text"]
    assert opening.startswith("四月的阳光") and "<initvar>" not in opening.lower() and "<UpdateVariable>" not in opening
    profile = profile_of((await rt.service.projection(sid, "rp/session")).state)
    assert "<initvar>" in profile.scene.opening_text.lower()  # the persisted source is unchanged

    for n, text in enumerate(["我走进教室。", "我和白娅打招呼。", "我问她最近怎么样。"], start=1):
        result = await play_turn(rt, sid, text, parent_route=DEMO)
        assert result.turn.outcome == "completed" and result.committed
        assert (await story(rt, sid))["value"]["白娅"]["依存度"] == 15 + n  # the native increment rule

    prompt = (await prepare_run(rt, sid, "继续", parent_route=DEMO)).build.writer_prompt
    assert "消极自毁" in prompt and "暗中靠近" not in prompt and "<%" not in prompt and "getvar" not in prompt

    # A commit raising 依存度 into 40..60 switches the gated entry to its other branch.
    def responder(request: ModelRequest) -> dict[str, Any]:
        if not request.tools:
            return {"text": "她抬起头，看了你很久。"}
        context = next(m.text() for m in reversed(request.messages) if "<roleplay_request" in m.text())
        writer = next((c.id for m in request.messages for c in m.tool_calls if c.name == "rp_write_turn"), None)
        turn_calls = [c for m in request.messages[[m.text() for m in request.messages].index(context) :] for c in m.tool_calls]
        if not any(c.name == "rp_write_turn" for c in turn_calls):
            return {"tool_calls": [{"name": "rp_write_turn", "arguments": {"action": "write"}}]}
        writer = next(c.id for c in turn_calls if c.name == "rp_write_turn")
        revision = int(re.search(r'"expectedRevision":(\d+)', context).group(1))  # type: ignore[union-attr]
        change = {"op": "set", "path": "/白娅/依存度", "value": 45, "ruleId": "mvu:/白娅/依存度:set", "reason": "她终于开口了"}
        effect = {"kind": "state.update", "namespace": "story", "expectedRevision": revision, "payload": {"changes": [change]}}
        return {"tool_calls": [{"name": "rp_commit_turn", "arguments": {"references": {"writer": writer}, "effects": [effect]}}]}

    rt.models["scripted/scripted"] = ScriptedModel(responder=responder)
    result = await play_turn(rt, sid, "我等她说话。", parent_route=Route("scripted", "scripted"))
    assert result.committed and (await story(rt, sid))["value"]["白娅"]["依存度"] == 45
    prompt = (await prepare_run(rt, sid, "继续", parent_route=DEMO)).build.writer_prompt
    assert "暗中靠近" in prompt and "消极自毁" not in prompt


async def test_without_the_feature_the_card_is_plain_and_existing_state_keeps_working(store: EventStore, corpus_dir: Path) -> None:
    rt_on, sid = await example_story(store, corpus_dir)
    # The adapter disabled: no materializer, no template step, no text cleaning.
    plain = build_runtime(store, enabled=[f for f in FEATURES if f != "rp-compat-mvu"])
    assert plain.materializers == [m for m in plain.materializers if "mvu" not in m.__module__]
    assert (await story(plain, sid))["value"]["白娅"]["依存度"] == 15  # native state from the log
    result = await play_turn(plain, sid, "我走进教室。", parent_route=DEMO)
    assert result.committed and (await story(plain, sid))["value"]["白娅"]["依存度"] == 16
    card = (await AssetService(store).import_file((corpus_dir / "cards" / EXAMPLE).read_bytes(), EXAMPLE)).asset_id
    record, m = await create_story(plain, StoryRequest(card=card))
    assert m.state_bootstrap is None and (await story_or_none(plain, record.id)) is None


async def story_or_none(rt: RoleplayRuntime, sid: str) -> Any:
    return state_document((await rt.service.projection(sid, "rp/state")).state).get("namespaces", {}).get("story")


def test_template_step_fails_closed_and_passes_plain_text() -> None:
    from roleplay.compat.mvu.integration import clean_card_text, lore_template

    state = {"namespaces": {"story": {"value": {"白娅": {"依存度": 50}}}}}
    render = lore_template(state)
    assert render("plain lore", lambda t: None) == "plain lore"
    gated = "<% if (getvar('stat_data.白娅.依存度') >= 40) { %>亲近<% } else { %>疏远<% } %>"
    assert render(gated, lambda t: None) == "亲近"
    assert lore_template({"namespaces": {"story": {"value": {"白娅": {"依存度": 5}}}}})(gated, lambda t: None) == "疏远"
    assert render("<% setvar('x', 1) %>写入", lambda t: None) == ""  # a write is refused: not injected
    assert render("<%= getwi('角色') %>", lambda t: "资料" if t == "角色" else None) == "资料"
    assert clean_card_text("她笑了。<UpdateVariable>_.set('a', 1);</UpdateVariable>") == "她笑了。"
    assert clean_card_text("no control text") == "no control text"


def test_card_text_is_cleaned_once_per_text_and_runtime(monkeypatch) -> None:
    from types import SimpleNamespace

    from roleplay.compat.mvu import integration

    calls = []
    real = integration.clean_card_text
    monkeypatch.setattr(integration, "clean_card_text", lambda text: calls.append(text) or real(text))
    transformers: list[Any] = []
    integration.register_text_transformers(register=transformers.append)  # what a runtime's build does
    rt = SimpleNamespace(card_text_transform=transformers[0])
    text = "她笑了。<UpdateVariable>_.set('a', 1);</UpdateVariable>" * 3
    for _ in range(3):
        # Each turn re-reads the card: an equal text in a new string object.
        assert rt.card_text_transform(text[:-1] + text[-1]) == "她笑了。" * 3
    assert len(calls) == 1
    assert rt.card_text_transform("新版本的描述") == "新版本的描述"  # a new revision's text is cleaned anew
    assert len(calls) == 2


def test_card_text_cache_is_bounded_by_size() -> None:
    from roleplay.compat.mvu.integration import CardTextCache

    cache = CardTextCache(max_chars=100)
    for i in range(10):
        cache(f"{i}" * 20)
    assert sum(len(k) + len(v) for k, v in cache._entries.items()) <= 100
    assert cache("x" * 200) == "x" * 200 and ("x" * 200) not in cache._entries
