"""Feature toggles (issue 11 acceptance): for each feature turned off, its tools, sources, prompt
sections, projections and commands are absent, its dependents go with it, and a story on the
sample card still plays with the demo model. And the state round trip: a story with state, a turn
played with ``rp-state`` off, then on again; the rebuilt ``rp/state`` is the fresh fold's, byte for
byte."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from roleplay.canonical import canonical_json
from roleplay.cli import COMMAND_FEATURES, cli
from roleplay.cli_context import CliState
from roleplay.core.feature_set import closure, dependents
from roleplay.core.macros import MacroContext
from roleplay.core.run import RpRun, play_turn, prepare_run
from roleplay.core.settings import FEATURES
from roleplay.features import build_runtime, open_runtime
from roleplay.harness.models.routes import Route
from roleplay.harness.projections import fold
from roleplay.harness.store import EventStore
from roleplay.state.events import state_document, state_projection
from tests_support import sample_story

pytestmark = pytest.mark.anyio

DEMO = Route("demo", "demo")


@dataclass(frozen=True)
class Parts:
    tools: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    source_prefixes: tuple[str, ...] = ()  # source ids (and so section members) of a sample turn
    projections: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()  # `rp` commands


# What each feature with a built-in plugin contributes; the sample card binds every asset kind,
# carries a lorebook and a native state namespace, so every source shows up when it is on.
PARTS: dict[str, Parts] = {
    "rp-state": Parts(("rp_state_read", "rp_state"), ("rp.state",), ("rp.state",), ("rp/state", "rp/state/activity"), ("state",)),
    "rp-character-card": Parts(providers=("rp.card",), source_prefixes=("rp.card",), commands=("export",)),
    "rp-lore-book": Parts(providers=("rp.lore",), source_prefixes=("rp.lore.",), commands=("lorebook",)),
    "rp-persona": Parts(providers=("rp.persona",), source_prefixes=("rp.persona",), commands=("persona",)),
    "rp-preset": Parts(providers=("rp.preset",), source_prefixes=("rp.preset:",), commands=("preset",)),
    "rp-writing-style": Parts(providers=("rp.writing-style",), source_prefixes=("rp.writing-style:",), commands=("style",)),
    "rp-asset-tools": Parts(tools=("rp_asset_read", "rp_asset")),
    "rp-reply-options": Parts(projections=("rp/reply-options",)),
    "rp-quick-replies": Parts(commands=("quick-replies",)),
    "rp-compat-mvu": Parts(commands=("mvu",)),
    "rp-library": Parts(commands=("assets", "import")),
    "rp-conversation-summary": Parts(projections=("rp/summary",)),
    "rp-subagent-manager": Parts(commands=("subagents", "writer-route")),
    "rp-macro": Parts(),  # no part of its own: the identity names (see the test below)
    "rp-message-actions": Parts(commands=("messages", "edit", "delete", "regenerate", "swipe", "branch", "metrics")),
}


def without(feature: str) -> tuple[str, ...]:
    """The set ``rp features disable FEATURE`` leaves: the feature and what needs it go."""
    gone = {feature, *dependents(feature, FEATURES)}
    return closure(f for f in FEATURES if f not in gone)


def test_every_command_of_a_feature_is_in_the_table() -> None:
    assert {c for p in PARTS.values() for c in p.commands} == set(COMMAND_FEATURES)


async def test_with_everything_on_every_part_is_there(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt = build_runtime(store, entry_points=False)
    prepared = await prepare_run(rt, sid, "我推开灯塔的门。", parent_route=DEMO)
    ids = set(prepared.build.sources)
    for feature, parts in PARTS.items():
        assert set(parts.tools) <= set(rt.tools.names()), feature
        assert set(parts.providers) <= {p.name for p in rt.source_providers}, feature
        assert set(parts.projections) <= set(rt.service.projections.names()), feature
        for prefix in parts.source_prefixes:
            assert any(i.startswith(prefix) for i in ids), (feature, prefix)
    await rt.aclose()


@pytest.mark.parametrize("feature", sorted(PARTS))
async def test_a_feature_turned_off_leaves_nothing_of_its_own_and_the_story_plays(store: EventStore, feature: str) -> None:
    _, sid = await sample_story(store)  # created with every asset feature on: the bindings exist
    enabled = without(feature)
    rt = build_runtime(store, enabled=enabled, entry_points=False)
    assert rt.features == frozenset(enabled) and feature not in rt.features
    gone = [PARTS[f] for f in (feature, *dependents(feature, FEATURES)) if f in PARTS]
    for parts in gone:
        assert not set(parts.tools) & set(rt.tools.names())
        assert not set(parts.providers) & {p.name for p in rt.source_providers}
        assert not set(parts.projections) & set(rt.service.projections.names())

    prepared = await prepare_run(rt, sid, "我推开灯塔的门。", parent_route=DEMO)
    # Bindings are never cleared by turning an asset feature off.
    assert prepared.build.bindings["characterId"] and prepared.build.bindings["personaId"] and prepared.build.bindings["lorebookIds"]
    members = {i for section in prepared.build.sections for i in section.source_ids}
    parent_sections = {s.id for s in prepared.parent_system_sections}
    for parts in gone:
        for prefix in parts.source_prefixes:
            assert not any(i.startswith(prefix) for i in (*prepared.build.sources, *members)), prefix
        assert not {f"tool:{t}" for t in parts.tools} & parent_sections

    result = await play_turn(rt, sid, "我推开灯塔的门。", parent_route=DEMO)
    assert result.committed and result.reply.strip()
    await rt.aclose()


def invoke(home: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env={"RP_DATABASE_URL": "", "RP_MODEL": ""}, obj=CliState())


@pytest.mark.parametrize("feature", sorted(f for f, p in PARTS.items() if p.commands))
def test_the_commands_of_a_feature_turned_off_are_absent(tmp_path: Path, feature: str) -> None:
    assert invoke(tmp_path, "features", "disable", feature).exit_code == 0
    listed = invoke(tmp_path, "--help").stdout
    for command in PARTS[feature].commands:
        assert f"\n  {command} " not in listed
        refused = invoke(tmp_path, command, "--help")
        assert refused.exit_code == 2 and f"belongs to {feature}, which is turned off" in refused.stderr
    assert invoke(tmp_path, "features", "enable", feature).exit_code == 0
    for command in PARTS[feature].commands:
        assert f"\n  {command} " in invoke(tmp_path, "--help").stdout
        assert invoke(tmp_path, command, "--help").exit_code == 0


async def test_the_commit_tool_declares_the_effect_kinds_of_the_enabled_features(store: EventStore) -> None:
    on = build_runtime(store, entry_points=False)
    off = build_runtime(store, enabled=without("rp-state"), entry_points=False)
    assert '"state.update"' in json.dumps(on.tools.get("rp_commit_turn").parameters)
    assert '"state.update"' not in json.dumps(off.tools.get("rp_commit_turn").parameters)


async def test_without_rp_macro_identity_macros_stay_as_written(store: EventStore) -> None:
    _, sid = await sample_story(store)
    on = build_runtime(store, entry_points=False)
    off = build_runtime(store, enabled=without("rp-macro"), entry_points=False)
    expanded = await prepare_run(on, sid, "{{char}}，你好。", parent_route=DEMO)
    kept = await prepare_run(off, sid, "{{char}}，你好。", parent_route=DEMO)
    assert expanded.input_text == "林汐，你好。" and "{{char}}" not in expanded.build.writer_prompt
    assert kept.input_text == "{{char}}，你好。" and "{{char}}" in kept.build.sources["rp.card"].text
    assert kept.macros == MacroContext()


async def test_the_saved_set_applies_to_the_next_runtime(store: EventStore) -> None:
    from roleplay.core.feature_set import FeatureManager

    before = await open_runtime(store, entry_points=False)
    await FeatureManager(store).disable("rp-state")
    after = await open_runtime(store, entry_points=False)
    assert "rp_state_read" in before.tools and "rp_state_read" not in after.tools  # the open one keeps its set
    assert after.features == frozenset(without("rp-state"))


async def test_state_round_trip_rebuilds_the_identical_projection(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    first = await play_turn(rt, sid, "我帮林汐擦亮铜镜。", parent_route=DEMO)
    assert first.committed
    with_state = state_document((await rt.service.projection(sid, "rp/state")).state)
    assert with_state["namespaces"]  # the sample card's native namespace
    await rt.aclose()

    off = build_runtime(store, enabled=without("rp-state"), entry_points=False)
    prepared = await prepare_run(off, sid, "我问起晨星号。", parent_route=DEMO)
    assert prepared.state is None and "rp.state" not in prepared.build.sources and not prepared.build.commit_context.strip()
    played = await play_turn(off, sid, "我问起晨星号。", parent_route=DEMO)
    assert played.committed
    await off.aclose()

    on = build_runtime(store, entry_points=False)  # a fresh runtime: nothing cached
    rebuilt = (await on.service.projection(sid, "rp/state")).state
    fresh = fold(state_projection, await on.service.events(sid))
    assert canonical_json(rebuilt) == canonical_json(fresh)
    # The turn played without State changed no namespace (its commit carried no state effect).
    assert canonical_json(state_document(rebuilt)["namespaces"]) == canonical_json(with_state["namespaces"])
    again = await play_turn(on, sid, "我递给她一壶热茶。", parent_route=DEMO)
    assert again.committed
    await on.aclose()


def test_a_story_plays_from_rp_with_features_off(tmp_path: Path) -> None:
    for feature in ("rp-state", "rp-lore-book", "rp-preset", "rp-reply-options"):
        assert invoke(tmp_path, "features", "disable", feature).exit_code == 0
    new = invoke(tmp_path, "new", "--sample", "--model", "demo", "--json")
    assert new.exit_code == 0, new.output
    sid = json.loads(new.stdout)["sessionId"]
    said = invoke(tmp_path, "say", sid, "我推开灯塔的门。", "--model", "demo", "--json")
    assert said.exit_code == 0, said.output
    turn = json.loads(said.stdout)
    assert turn["committed"] and turn["choices"] == []
    sections = json.loads(invoke(tmp_path, "prompt", sid, "--json").stdout)["writer"]["sections"]
    assert {"character", "persona", "player", "conversation", "current-input"} <= set(sections)
    # No state, no lore slots (world, rules), no preset fields.
    assert not {s for s in sections if s in ("state", "world", "important-rules") or s.startswith("preset-")}


async def test_an_agent_mode_story_plays_without_state(store: EventStore) -> None:
    _, sid = await sample_story(store, mode="agent")
    rt = build_runtime(store, enabled=without("rp-state"), entry_points=False)
    prepared = await prepare_run(rt, sid, "我推开灯塔的门。", parent_route=DEMO)
    assert prepared.state is None and not {"rp_state", "rp_state_read"} & set(RpRun(rt, prepared).spec().allowed_tools)
    result = await play_turn(rt, sid, "我推开灯塔的门。", parent_route=DEMO)
    assert result.committed
    await rt.aclose()
