"""``rp_guide``: enabled features' guides on demand; the SillyTavern helper comes with its parent."""

from __future__ import annotations

import pytest
from tests_support import sample_story

from roleplay.core.execution_mode import set_mode
from roleplay.core.guide_tools import guide_tool, offered_guides, sillytavern_material
from roleplay.core.run import play_turn
from roleplay.core.settings import SettingsStore
from roleplay.errors import RpError
from roleplay.guides import Guide, GuideRegistry
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.store import EventStore
from roleplay.harness.tools import ToolContext
from roleplay.plugins import plugin_manager

pytestmark = pytest.mark.anyio
CTX = ToolContext("ses", "turn", "step", "call")


def guides_of(features: list[str]) -> GuideRegistry:
    """What a runtime with ``features`` collects through the ``register_guides`` hook."""
    guides = GuideRegistry()
    plugin_manager(features, entry_points=False).hook.register_guides(register=guides.register)
    return guides


def test_only_enabled_features_contribute_guides() -> None:
    assert offered_guides(guides_of(["rp-state", "rp-preset"])) == ["rp-guide-preset", "rp-guide-state"]
    assert offered_guides(guides_of(["rp-preset"])) == ["rp-guide-preset"]
    assert guides_of(["rp-preset"]).helpers() == {"rp-guide-preset-sillytavern": "rp-guide-preset"}
    assert offered_guides(guides_of(["rp-lore-book"])) == []


def test_a_plugin_contributes_a_guide_of_its_own() -> None:
    guides = guides_of(["rp-state"])
    guides.register(Guide("weather-guide", "Weather", "load before changing the weather", "Rain falls on even turns.\n"))
    assert guides.offered() == ["rp-guide-state", "weather-guide"]
    assert guides.load("weather-guide", "zh").body == "Rain falls on even turns.\n"
    with pytest.raises(RpError) as twice:
        guides.register("rp-guide-state")
    assert twice.value.code == "guide.duplicate"
    with pytest.raises(RpError) as unknown:
        guides.register("rp-guide-nowhere")
    assert unknown.value.code == "guide.not_found"


def test_sillytavern_material() -> None:
    assert sillytavern_material("帮我导入这个酒馆预设")
    assert sillytavern_material("import my SillyTavern preset")
    assert sillytavern_material('{"prompts": [{"identifier": "main"}], "prompt_order": [{"order": []}]}')
    assert not sillytavern_material('{"prompts": []}') and not sillytavern_material("make a preset for horror")


async def test_the_helper_comes_with_its_parent(store: EventStore) -> None:
    assert guide_tool(store, guides_of(["rp-lore-book"]), "") is None
    plain = guide_tool(store, guides_of(["rp-preset", "rp-state"]), "make a preset")
    assert plain is not None and "rp-guide-state:" in (plain.guidance or "") and "sillytavern" not in (plain.guidance or "")
    with pytest.raises(RpError) as early:
        await plain.handler({"name": "rp-guide-preset-sillytavern"}, CTX)  # type: ignore[misc]
    assert early.value.code == "guide.not_available" and "load rp-guide-preset first" in early.value.message
    loaded = await plain.handler({"name": "rp-guide-preset"}, CTX)  # type: ignore[misc]
    assert loaded.meta["guides"] == ["rp-guide-preset"] and "rp-guide-preset-sillytavern (" in loaded.content  # type: ignore[index, union-attr]
    helper = await plain.handler({"name": "rp-guide-preset-sillytavern"}, CTX)  # type: ignore[misc]
    assert helper.meta["guides"] == ["rp-guide-preset-sillytavern"]  # type: ignore[index, union-attr]
    st = guide_tool(store, guides_of(["rp-preset"]), '把这个导进来：{"prompts": [], "prompt_order": []}')
    both = await st.handler({"name": "rp-guide-preset"}, CTX)  # type: ignore[misc, union-attr]
    assert both.meta["guides"] == ["rp-guide-preset", "rp-guide-preset-sillytavern"]  # type: ignore[index, union-attr]
    with pytest.raises(RpError):
        await plain.handler({"name": "rp-guide-mvu"}, CTX)  # type: ignore[misc]


async def test_an_agent_loads_the_state_guide_in_the_users_language(store: EventStore) -> None:
    await SettingsStore(store).set("language", "zh")
    rt, sid = await sample_story(store)
    route = Route("scripted", "scripted")
    model = ScriptedModel([{"tool_calls": [{"name": "rp_guide", "arguments": {"name": "rp-guide-state"}}]}, "好的，我们来配置变量。"])
    rt.models[route.spec] = model
    await set_mode(rt, sid, "agent")
    result = await play_turn(rt, sid, "帮我加一个天气变量。", parent_route=route)
    [loaded] = result.turn.tool_results
    assert loaded.ok and '<guide name="rp-guide-state" title="会话变量（State）指南">' in loaded.content  # type: ignore[operator]
    assert "## rp_guide" in model.requests[0].messages[0].text()
    await rt.aclose()
