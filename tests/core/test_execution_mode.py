"""A session's execution mode and Writer route override: CAS changes on its profile."""

from __future__ import annotations

import pytest
from tests_support import sample_story

from roleplay.core.execution_mode import set_mode, set_writer_route
from roleplay.errors import ConflictError, ValidationError
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio


async def test_the_mode_switches_and_an_unknown_mode_is_refused_with_its_pointer(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    view = await set_mode(rt, sid, "agent")
    assert view["executionMode"] == "agent"
    assert (await set_mode(rt, sid, "chat"))["executionMode"] == "chat"
    with pytest.raises(ValidationError) as refused:
        await set_mode(rt, sid, "autopilot")
    assert (refused.value.code, refused.value.pointer) == ("mode.invalid", "/mode")


async def test_a_stale_revision_is_a_conflict_and_changes_nothing(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    first = await set_mode(rt, sid, "agent")
    with pytest.raises(ConflictError):
        await set_mode(rt, sid, "chat", expected_revision=first["profileRevision"] - 1)
    assert (await set_writer_route(rt, sid, "follow"))["executionMode"] == "agent"


async def test_a_change_overtaken_by_another_is_a_conflict_that_names_its_command(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command ran, but another profile change took effect first (its snapshot was stale):
    a conflict, as the binding tools report it, never a plain refusal."""
    from dataclasses import replace

    import roleplay.core.execution_mode as execution_mode

    rt, sid = await sample_story(store)
    real = execution_mode.apply_profile

    async def overtaken(*args: object, **kwargs: object) -> object:
        return replace(await real(*args, **kwargs), applied=False)  # type: ignore[arg-type]

    monkeypatch.setattr(execution_mode, "apply_profile", overtaken)
    with pytest.raises(ConflictError) as stale:
        await set_mode(rt, sid, "agent")
    assert (stale.value.code, stale.value.pointer) == ("profile.stale_apply", "/expectedRevision")
    assert stale.value.details["commandId"].startswith("cmd_")


async def test_the_writer_route_override_is_a_route_follow_or_removed(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    assert (await set_writer_route(rt, sid, "demo/demo"))["writerRoute"]["model"] == "demo"
    followed = (await set_writer_route(rt, sid, "follow"))["writerRoute"]
    assert followed["followConversation"] is True and followed.get("model") is None
    assert (await set_writer_route(rt, sid, "default"))["writerRoute"] is None
