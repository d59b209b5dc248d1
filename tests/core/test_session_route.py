"""A session's own conversation route (``runtime.route``) and the order routes are chosen in."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from tests_support import core_runtime

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.profile import SessionProfile, apply_profile, parse_profile, profile_of, session_projection
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.core.session_route import resolve_session_route, route_profile_json, stored_route
from roleplay.core.sources import StoreAssetReader
from roleplay.errors import RpError, ValidationError
from roleplay.harness.leases import lease_taken
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.samples import SAMPLE_CARD, sample_card_bytes

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_model_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RP_MODEL"):
        monkeypatch.delenv(name, raising=False)


async def _story(store: EventStore, route: Route | None) -> tuple[RoleplayRuntime, str]:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card, route=route))
    return rt, record.id


def test_a_profile_without_a_route_serialises_as_before() -> None:
    assert "route" not in SessionProfile().to_json_dict()["runtime"]
    assert parse_profile(SessionProfile().to_json_dict()).runtime.route is None


def test_the_stored_route_is_provider_model_and_effort_only() -> None:
    route = Route("openai", "gpt-x", "high", max_output_tokens=900, base_url="http://u:p@host/v1")
    assert route_profile_json(route) == {"provider": "openai", "model": "gpt-x", "reasoningEffort": "high"}
    with pytest.raises(ValidationError) as exc:
        parse_profile({"runtime": {"route": {"provider": "openai", "model": "m", "baseUrl": "http://host"}}})
    assert exc.value.code == "profile.invalid" and exc.value.problems[0].pointer == "/runtime/route/baseUrl"
    with pytest.raises(ValidationError):
        parse_profile({"runtime": {"route": {"provider": "openai"}}})  # a route needs its model


def test_route_options_are_stored_with_the_route() -> None:
    route = Route("openai", "llama3", tools=False, json_mode=False)
    stored = route_profile_json(route)
    assert stored == {"provider": "openai", "model": "llama3", "tools": False, "jsonMode": False}
    profile = parse_profile({"runtime": {"route": stored}})
    assert stored_route(profile) == route and stored_route(profile).spec == "openai/llama3?tools=off&json=off"  # type: ignore[union-attr]
    with pytest.raises(ValidationError):
        parse_profile({"runtime": {"route": {"provider": "openai", "model": "m", "tools": "off"}}})  # a boolean only


async def test_a_tool_free_route_is_remembered(store: EventStore) -> None:
    rt, sid = await _story(store, Route("demo", "demo", tools=False))
    assert (await resolve_session_route(rt, sid)).spec == "demo/demo?tools=off"
    assert (await resolve_session_route(rt, sid, "demo")).spec == "demo/demo"  # an explicit route, options and all


async def test_explicit_then_stored_then_environment(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, sid = await _story(store, Route("demo", "demo"))
    assert (await resolve_session_route(rt, sid)).spec == "demo/demo"
    assert (await resolve_session_route(rt, sid, "deepseek/deepseek-flash")).spec == "deepseek/deepseek-flash"
    monkeypatch.setenv("RP_MODEL", "openai/from-env")
    assert (await resolve_session_route(rt, sid)).spec == "demo/demo"  # the session's own route beats RP_MODEL

    plain = (await create_story(rt, StoryRequest(card=(await rt.assets.list("card")).items[0].id)))[0].id
    assert (await resolve_session_route(rt, plain)).spec == "openai/from-env"
    monkeypatch.delenv("RP_MODEL")
    with pytest.raises(RpError) as exc:
        await resolve_session_route(rt, plain)
    assert exc.value.code == "model.not_configured"


async def test_the_route_changes_through_rp_session_apply(store: EventStore) -> None:
    rt, sid = await _story(store, None)
    patch = {"patch": {"runtime": {"route": route_profile_json(Route("demo", "demo", "high"))}}}
    changed = await apply_profile(rt.service, sid, patch, StoreAssetReader(rt.assets))
    assert changed.applied
    profile = profile_of((await rt.service.projection(sid, session_projection)).state)
    assert stored_route(profile) == Route("demo", "demo", "high")
    assert (await resolve_session_route(rt, sid)).spec == "demo/demo/high"


async def test_an_unknown_stored_provider_is_a_coded_error_and_an_explicit_route_still_works(store: EventStore) -> None:
    rt, sid = await _story(store, None)
    await apply_profile(rt.service, sid, {"patch": {"runtime": {"route": {"provider": "gone", "model": "m"}}}}, StoreAssetReader(rt.assets))
    with pytest.raises(RpError) as exc:
        await resolve_session_route(rt, sid)
    assert exc.value.code == "model.unknown_provider"
    assert (await resolve_session_route(rt, sid, "demo")).provider == "demo"


async def test_a_turn_given_no_route_plays_on_the_stored_one_else_the_default(store: EventStore) -> None:
    """``play_turn(parent_route=None)`` (the server's POST …/turns) reads the route from the profile
    it reads under its lease: the stored route, else ``default_route``."""
    rt, sid = await _story(store, Route("demo", "demo", "high"))
    played = await play_turn(rt, sid, "我敲了敲铁门。", parent_route=None, default_route=Route("demo", "demo"))
    assert played.committed and played.prepared.parent_route == Route("demo", "demo", "high")
    plain = (await create_story(rt, StoryRequest(card=(await rt.assets.list("card")).items[0].id)))[0].id
    played = await play_turn(rt, plain, "我敲了敲铁门。", parent_route=None, default_route=Route("demo", "demo"))
    assert played.committed and played.prepared.parent_route == Route("demo", "demo")


async def test_a_turn_on_an_unknown_stored_provider_writes_nothing(store: EventStore) -> None:
    rt, sid = await _story(store, None)
    await apply_profile(rt.service, sid, {"patch": {"runtime": {"route": {"provider": "gone", "model": "m"}}}}, StoreAssetReader(rt.assets))
    head = await store.head(sid)
    with pytest.raises(RpError) as exc:
        await play_turn(rt, sid, "我敲了敲铁门。", parent_route=None, default_route=Route("demo", "demo"))
    assert exc.value.code == "model.unknown_provider"
    assert await store.head(sid) == head and not await lease_taken(store, sid)


@pytest.mark.parametrize("kind", ["continue", "regenerate"])
async def test_continue_and_regenerate_given_no_route_play_on_the_one_stored_while_they_waited_for_the_lease(
    store: EventStore, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The route is read under the run's lease: a route stored just before the lease was taken (by
    another tab, another process) is the one the run plays, not the one stored when it was asked."""
    import roleplay.core.continue_turn as continue_module
    import roleplay.core.run as run_module
    from roleplay.core.continue_turn import continue_turn
    from roleplay.core.regenerate import regenerate

    rt, sid = await _story(store, Route("demo", "demo"))
    await play_turn(rt, sid, "我敲了敲铁门。", parent_route=None)
    module = continue_module if kind == "continue" else run_module
    real_lease = module.run_lease
    changed = Route("demo", "demo", "high")

    @asynccontextmanager
    async def route_changed_first(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        patch = {"patch": {"runtime": {"route": route_profile_json(changed)}}}
        assert (await apply_profile(rt.service, sid, patch, StoreAssetReader(rt.assets))).applied
        async with real_lease(*args, **kwargs) as lease:
            yield lease

    monkeypatch.setattr(module, "run_lease", route_changed_first)
    if kind == "continue":
        played = await continue_turn(rt, sid, parent_route=None, default_route=Route("demo", "demo", "low"))
    else:
        played = await regenerate(rt, sid, parent_route=None, default_route=Route("demo", "demo", "low"))
    assert played.turn.outcome == "completed" and played.prepared.parent_route == changed
