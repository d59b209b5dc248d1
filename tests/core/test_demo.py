"""The offline demo model's roleplay policy (issue 12 item 6): it plays indefinitely.

Before, the demo added +1 trust every turn; at the sample card's maximum of 100 (turn 80) every
commit failed with ``commit.effect_invalid`` and its own no-effects fallback never ran (a fourth
tool round, past the demo's limit), so the runtime had to salvage each turn. Now the repair patch
steps back from a bound the refusal names, drops an effect that cannot be fixed, and a commit
that still fails is followed by a plain commit with no effects. Every turn still shows the
deliberate wrong commit and its ``retry.patches`` repair.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests_support import core_runtime

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.clock import CountingIds, FixedClock
from roleplay.core.chat_draft import PARENT_DID_NOT_COMMIT
from roleplay.core.demo import repair_patches
from roleplay.core.prompts import COMMIT_TURN_TOOL
from roleplay.core.run import CHAT_STEP_LIMIT, RunResult, play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore, open_store
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.state.events import state_document

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


async def story_on(store: EventStore, card: bytes = b"", name: str = SAMPLE_CARD) -> tuple[RoleplayRuntime, str]:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    asset = (await AssetService(store).import_file(card or sample_card_bytes(), name)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=asset))
    return rt, record.id


def sample_card_with(trust: int, *, minimum: int = 0, delta: tuple[int, int] = (-10, 10)) -> bytes:
    """The sample card with trust starting at ``trust``, its schema minimum and the trust rule's
    delta bounds changed."""
    card = json.loads(sample_card_bytes())
    state = card["data"]["extensions"]["roleplay"]["state"]
    state["initialValue"]["林汐"]["信任"] = trust
    state["definition"]["schema"]["properties"]["林汐"]["properties"]["信任"]["minimum"] = minimum
    rule = next(r for r in state["definition"]["rules"] if r["id"] == "trust-shift")
    rule["effect"]["minimum"], rule["effect"]["maximum"] = delta
    return json.dumps(card, ensure_ascii=False).encode()


async def story_revision(rt: RoleplayRuntime, sid: str) -> int:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["revision"]


async def trust_of(rt: RoleplayRuntime, sid: str) -> int:
    doc = state_document((await rt.service.projection(sid, "rp/state")).state)
    return doc["namespaces"]["story"]["value"]["林汐"]["信任"]


def check_demo_committed(result: RunResult) -> list[tuple[bool, str | None]]:
    """The turn committed through the demo's own commit call (never the runtime's salvage of a
    plain reply) and stayed within the step budget; returns (ok, code) per commit call."""
    turn = result.turn
    assert turn.outcome == "completed" and result.committed, turn.error
    assert turn.steps <= CHAT_STEP_LIMIT
    commits = [r for r in turn.tool_results if r.name == COMMIT_TURN_TOOL]
    assert all(r.ok is False for r in commits[:-1]) and commits[-1].ok
    assert PARENT_DID_NOT_COMMIT not in {d["code"] for d in commits[-1].meta["diagnostics"]}  # type: ignore[index]
    return [(r.ok, (r.error or {}).get("code")) for r in commits]


async def test_the_demo_plays_150_turns_past_the_trust_maximum_with_every_commit_its_own(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'rp.db'}", clock=FixedClock(), ids=CountingIds())
    await store.migrate()
    rt, sid = await story_on(store)
    seen = []
    for n in range(150):
        before = await trust_of(rt, sid)
        result = await play_turn(rt, sid, f"第{n}轮：我和林汐聊起灯塔。", parent_route=DEMO)
        codes = check_demo_committed(result)
        # The deliberate wrong writer reference, repaired by one retry.patches call, every turn.
        assert codes == [(False, "commit.reference_invalid"), (True, None)], (n, codes)
        after = await trust_of(rt, sid)
        assert 0 <= after <= 100 and abs(after - before) == 1, (n, before, after)
        seen.append(after)
    assert seen[79] == 100  # 20 + 80 steps up: the maximum
    assert set(seen[80:]) == {99, 100}  # then it steps back from the bound and on, indefinitely
    await rt.aclose()
    await store.close()


async def test_when_no_change_fits_the_repair_commits_with_no_effects(store: EventStore) -> None:
    # Trust at its maximum and a rule that only allows raising it: no trust change fits.
    rt, sid = await story_on(store, sample_card_with(100, delta=(1, 10)), "max.card.json")
    for n in range(3):
        revision = await story_revision(rt, sid)
        result = await play_turn(rt, sid, f"第{n}轮", parent_route=DEMO)
        assert check_demo_committed(result) == [(False, "commit.reference_invalid"), (True, None)]
        final = [r for r in result.turn.tool_results if r.name == COMMIT_TURN_TOOL][-1]
        assert final.meta["effects"] == []  # type: ignore[index]
        assert await trust_of(rt, sid) == 100
        assert await story_revision(rt, sid) == revision
    await rt.aclose()


async def test_a_repair_that_still_fails_is_followed_by_the_demos_own_commit_with_no_effects(store: EventStore) -> None:
    # A target whose schema admits 100 only: neither +1 nor the step back fits.
    rt, sid = await story_on(store, sample_card_with(100, minimum=100), "pinned.card.json")
    result = await play_turn(rt, sid, "我点亮了灯。", parent_route=DEMO)
    codes = check_demo_committed(result)
    assert codes == [(False, "commit.reference_invalid"), (False, "commit.effect_invalid"), (True, None)]
    final = [r for r in result.turn.tool_results if r.name == COMMIT_TURN_TOOL][-1]
    assert final.meta["effects"] == [] and await trust_of(rt, sid) == 100  # type: ignore[index]
    await rt.aclose()


def test_repair_patches_follow_the_listed_pointers() -> None:
    contract = {
        "namespaces": {
            "story": {"rules": [{"id": "up", "effect": {"op": "increment", "minimum": 1, "maximum": 3}}]},
            "world": {"rules": [{"id": "any", "effect": {"op": "increment", "minimum": -2, "maximum": 2}}]},
        }
    }

    def effect(ns: str, rule: str, by: int) -> dict[str, Any]:
        return {"kind": "state.update", "namespace": ns, "payload": {"changes": [{"op": "increment", "by": by, "ruleId": rule}]}}

    draft = {"references": {"writer": "w-x"}, "effects": [effect("story", "up", 1), effect("world", "any", 1), effect("world", "any", 1)]}
    error = (
        "Error [commit.reference_invalid]: rp_commit_turn was rejected; nothing was written. 4 problem(s):\n"
        "- /references/writer [commit.reference_mismatch] references.writer must be this run's Writer call id 'w'\n"
        "- /effects/0/payload/changes/0/by [state.update.schema_violation] 101 is greater than the maximum of 100\n"
        "- /effects/1/payload/changes/0/by [state.update.schema_violation] 11 is greater than the maximum of 10\n"
        "- /effects/2/expectedRevision [state.update.stale_revision] stale\n"
        'Repair all of them in ONE call: {"retry": {"token": "rct_x", "patches": [...]}}'
    )
    assert repair_patches(draft, error, "w", contract) == [
        {"op": "replace", "path": "/references/writer", "value": "w"},
        {"op": "replace", "path": "/effects/1/payload/changes/0/by", "value": -1},  # steps back
        {"op": "remove", "path": "/effects/2"},  # not a bound: dropped
        {"op": "remove", "path": "/effects/0"},  # its rule forbids a step down: dropped
    ]
    # A listing cut short ("… N more") may hide problems: every effect goes.
    cut = error.replace("Repair all", "- … 3 more\nRepair all")
    assert [p["path"] for p in repair_patches(draft, cut, "w", contract)] == [
        "/references/writer",
        "/effects/2",
        "/effects/1",
        "/effects/0",
    ]


def test_rp_say_with_the_demo_commits_a_story_whose_state_cannot_move(tmp_path: Path) -> None:
    """The same path through the ``rp`` CLI: import, new, say --json, and the state after."""
    from click.testing import CliRunner

    from roleplay.cli import cli
    from roleplay.cli_context import CliState

    clean = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}

    def rp(*args: str, input: str | None = None) -> Any:
        result = CliRunner().invoke(cli, ["--home", str(tmp_path), *args], env=clean, input=input, obj=CliState())
        assert result.exit_code == 0, result.output
        return result

    card = tmp_path / "pinned.card.json"
    card.write_bytes(sample_card_with(100, minimum=100))
    imported = json.loads(rp("import", str(card), "--json").stdout)
    story = json.loads(rp("new", "--card", imported[0]["assetId"], "--json").stdout)
    for text in ("我点亮了灯。", "我们说起晨星号。"):
        summary = json.loads(rp("say", story["sessionId"], text, "--model", "demo", "--json").stdout)
        assert summary["outcome"] == "completed" and summary["committed"]
        assert [(t["name"], t["ok"], t["error"]) for t in summary["tools"]] == [
            ("rp_write_turn", True, None),
            ("rp_commit_turn", False, "commit.reference_invalid"),
            ("rp_commit_turn", False, "commit.effect_invalid"),
            ("rp_commit_turn", True, None),
        ]
        assert PARENT_DID_NOT_COMMIT not in {d["code"] for d in summary["diagnostics"]}
    played = rp("play", "--session", story["sessionId"], "--model", "demo", input="/state\n/quit\n")
    assert '"信任": 100' in played.stdout
