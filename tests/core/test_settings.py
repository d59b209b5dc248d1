"""The global settings store (``core.settings``) on both backends, and its two consumers today:
the Writer's global default route and the ``harness:identity`` override in ``prepare_run``."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import pytest

from roleplay.core.profile import apply_profile
from roleplay.core.run import IDENTITY, play_turn, prepare_run
from roleplay.core.settings import (
    DEFS,
    FEATURES,
    SettingsStore,
    context_window_for,
    context_windows,
    parse_cli_value,
    read_settings,
    validate_setting,
)
from roleplay.core.sources import StoreAssetReader
from roleplay.errors import ConflictError, RpError, ValidationError
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ModelRequest, StreamEvent
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.store.migrations import MIGRATIONS
from tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


class RecordingDemo(DemoModel):
    """The offline demo model, keeping every request it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        async for event in super().stream(request):
            yield event


def refused(key: str, value: Any) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        validate_setting(key, value)
    return info.value


# -- the table -------------------------------------------------------------------------------------


def test_the_settings_table_is_an_appended_migration() -> None:
    names = [m.name for m in MIGRATIONS]
    assert "settings" in names and names.index("settings") > names.index("assets")


async def test_every_key_reads_its_default_at_revision_zero(store: EventStore) -> None:
    settings = SettingsStore(store)
    snapshot = await settings.snapshot()
    for key, d in DEFS.items():
        record = snapshot.record(key)
        assert (record.value, record.revision, record.is_default, record.updated_at) == (d.default, 0, True, None)
    assert snapshot.value("features.enabled") == list(FEATURES)
    assert snapshot.writer_default_route() is None and snapshot.identity() is None and snapshot.context_windows() == {}
    assert await settings.dump() == []  # reading writes nothing


async def test_set_get_and_reset_count_revisions_per_key(store: EventStore) -> None:
    settings = SettingsStore(store)
    first = await settings.set("replyOptions.count", 5)
    assert (first.value, first.revision, first.is_default) == (5, 1, False)
    assert await settings.get("replyOptions.count") == first
    other = await settings.set("quickReplies.cursor", "select")
    assert other.revision == 1  # revisions are per key
    second = await settings.set("replyOptions.count", 4, expected_revision=1)
    assert (second.value, second.revision) == (4, 2)
    reset = await settings.reset("replyOptions.count", expected_revision=2)
    assert (reset.value, reset.revision, reset.is_default) == (3, 3, True)
    # The row stays after a reset, so the revision never goes back.
    assert await settings.dump() == [
        ("quickReplies.cursor", '"select"', 1, other.updated_at),
        ("replyOptions.count", None, 3, reset.updated_at),
    ]
    again = await settings.set("replyOptions.count", 6)
    assert again.revision == 4


async def test_a_stale_write_is_refused_and_writes_nothing(store: EventStore) -> None:
    settings = SettingsStore(store)
    await settings.set("writer.defaultRoute", "demo")
    before = await settings.dump()
    for stale in (0, 2):
        with pytest.raises(ConflictError) as info:
            await settings.set("writer.defaultRoute", "deepseek/deepseek-flash", expected_revision=stale)
        assert info.value.code == "settings.conflict"
        assert info.value.details == {"key": "writer.defaultRoute", "expectedRevision": stale, "currentRevision": 1}
    with pytest.raises(ConflictError):
        await settings.reset("writer.defaultRoute", expected_revision=0)
    # A key never written is at revision 0; a stale expectation there must not create the row.
    with pytest.raises(ConflictError):
        await settings.set("prompt.identity", "You narrate.", expected_revision=3)
    assert await settings.dump() == before
    with pytest.raises(ValidationError) as bad:
        await settings.set("writer.defaultRoute", "demo", expected_revision=-1)
    assert bad.value.code == "settings.invalid_revision" and bad.value.pointer == "/expectedRevision"


async def test_racing_writers_with_the_same_expected_revision_one_wins(store: EventStore) -> None:
    settings = SettingsStore(store)
    results = await asyncio.gather(
        *(settings.set("replyOptions.count", n, expected_revision=0) for n in (1, 2, 3, 4)), return_exceptions=True
    )
    wins = [r for r in results if not isinstance(r, BaseException)]
    losses = [r for r in results if isinstance(r, BaseException)]
    assert len(wins) == 1 and wins[0].revision == 1
    assert all(isinstance(e, ConflictError) and e.code == "settings.conflict" for e in losses)
    assert (await settings.get("replyOptions.count")).value == wins[0].value


async def test_two_stores_on_one_database_see_each_others_settings(store_url: str) -> None:
    a, b = open_store(store_url), open_store(store_url)
    try:
        await a.migrate()
        await b.migrate()
        await SettingsStore(a).set("context.windows", {"deepseek-flash": 200_000})
        assert await context_windows(b) == {"deepseek/deepseek-flash": 200_000}
        with pytest.raises(ConflictError):
            await SettingsStore(b).set("context.windows", {}, expected_revision=0)
    finally:
        await a.close()
        await b.close()


async def test_invalid_values_and_unknown_keys_write_nothing(store: EventStore) -> None:
    settings = SettingsStore(store)
    with pytest.raises(ValidationError) as unknown:
        await settings.set("writer.model", "demo")
    assert unknown.value.code == "settings.unknown_key" and unknown.value.pointer == "/key"
    assert "writer.defaultRoute" in unknown.value.details["known"]
    with pytest.raises(ValidationError) as bad:
        await settings.set("replyOptions.count", "5")
    assert bad.value.code == "settings.invalid_value" and bad.value.pointer == "/value"
    with pytest.raises(ValidationError):
        await settings.reset("nope")
    assert await settings.dump() == []


async def test_a_stored_value_this_version_cannot_read_is_reported_not_guessed(store: EventStore) -> None:
    settings = SettingsStore(store)
    await settings.set("replyOptions.count", 5)
    await settings.set("quickReplies.cursor", "start")

    async def corrupt(tx: Any) -> None:  # as a later version with a wider range might store it
        await tx.conn.execute("UPDATE settings SET value='99' WHERE key='replyOptions.count'")

    await settings._runner.write(corrupt)
    snapshot = await settings.snapshot()
    with pytest.raises(RpError) as info:
        snapshot.value("replyOptions.count")
    assert info.value.code == "settings.stored_invalid" and info.value.details == {"key": "replyOptions.count"}
    assert snapshot.value("quickReplies.cursor") == "start"  # the other keys still read
    assert (await settings.dump())[1][1] == "99"  # and the stored value is kept as it was


# -- validation per key ------------------------------------------------------------------------------


def test_features_are_known_unique_and_stored_in_catalogue_order() -> None:
    assert validate_setting("features.enabled", ["rp-compat-mvu", "rp-state"]) == ["rp-state", "rp-compat-mvu"]
    assert validate_setting("features.enabled", []) == []
    twice = refused("features.enabled", ["rp-state", "rp-macro", "rp-state"])
    assert twice.problems[0].code == "settings.duplicate" and twice.pointer == "/value/2"
    unknown = refused("features.enabled", ["rp-state", "rp-nope"])
    assert unknown.problems[0].code == "settings.unknown_feature" and unknown.pointer == "/value/1"
    core = refused("features.enabled", ["rp-core"])
    assert core.problems[0].code == "settings.always_on"
    assert refused("features.enabled", "rp-state").problems[0].code == "settings.wrong_type"


def test_the_writer_route_is_stored_fully_qualified() -> None:
    assert validate_setting("writer.defaultRoute", "deepseek-v4-pro") == "deepseek/deepseek-v4-pro"
    assert validate_setting("writer.defaultRoute", " deepseek/deepseek-flash/high ") == "deepseek/deepseek-flash/high"
    assert validate_setting("writer.defaultRoute", "demo") == "demo/demo"
    assert validate_setting("writer.defaultRoute", None) is None
    bad = refused("writer.defaultRoute", "nope/model")
    assert bad.problems[0].code == "settings.bad_route" and bad.problems[0].details == {"cause": "model.unknown_provider"}
    assert refused("writer.defaultRoute", "").problems[0].code == "settings.blank"
    assert refused("writer.defaultRoute", 7).problems[0].code == "settings.wrong_type"


def test_identity_text_is_kept_verbatim_but_never_blank_or_with_controls() -> None:
    text = "  You are the storyteller.\nKeep every thread.\n"
    assert validate_setting("prompt.identity", text) == text
    assert refused("prompt.identity", " \n ").problems[0].code == "settings.blank"
    nul = refused("prompt.identity", "You\x00are")
    assert nul.pointer == "/value" and nul.problems[0].details["offset"] == 3
    assert refused("prompt.identity", "x" * 16_001).problems[0].code == "settings.too_long"


def test_context_windows_are_keyed_by_model_with_bounded_tokens() -> None:
    assert validate_setting("context.windows", {"deepseek-flash": 128_000, "openai/gpt-4o": 128_000}) == {
        "deepseek/deepseek-flash": 128_000,
        "openai/gpt-4o": 128_000,
    }
    effort = refused("context.windows", {"deepseek/deepseek-flash/high": 9000})
    assert effort.pointer == "/value/deepseek~1deepseek-flash~1high" and effort.problems[0].code == "settings.bad_route"
    twice = refused("context.windows", {"deepseek-flash": 9000, "deepseek/deepseek-flash": 8000})
    assert twice.problems[0].code == "settings.duplicate"
    small = refused("context.windows", {"openai/gpt-4o": 10})
    assert small.pointer == "/value/openai~1gpt-4o" and small.problems[0].code == "settings.greater_than_equal"
    assert refused("context.windows", {"openai/gpt-4o": 9000.0}).problems[0].code == "settings.wrong_type"
    assert refused("context.windows", {"openai/x?tools=off": 9000}).problems[0].code == "settings.bad_route"
    windows = validate_setting("context.windows", {"openai/gpt-4o": 64_000})
    assert context_window_for(windows, Route("openai", "gpt-4o", "high")) == 64_000
    assert context_window_for(windows, Route("openai", "gpt-4o-mini")) is None


def test_reply_options_and_quick_replies() -> None:
    assert validate_setting("replyOptions.maxCharacters", 120) == 120
    assert refused("replyOptions.count", 0).problems[0].code == "settings.greater_than_equal"
    assert refused("replyOptions.count", True).problems[0].code == "settings.wrong_type"
    assert validate_setting("replyOptions.keywords", ["温柔", "冲突"]) == ["温柔", "冲突"]
    assert refused("replyOptions.keywords", ["a"] * 21).problems[0].code == "settings.too_many"
    items = [{"label": "问好", "text": "你好，{{char}}。"}]
    assert validate_setting("quickReplies.items", items) == items
    bad = refused("quickReplies.items", [{"label": "ok", "text": " "}, {"label": "x", "text": "y", "color": "red"}])
    assert [(p.code, p.pointer) for p in bad.problems] == [
        ("settings.blank", "/value/0/text"),
        ("settings.unknown_key", "/value/1/color"),
    ]
    assert refused("quickReplies.cursor", "middle").problems[0].code == "settings.bad_value"


def test_quick_reply_labels_are_unique_even_when_set_as_a_whole_list() -> None:
    # /qr LABEL names one snippet: a second with the same label (after trimming) could never be chosen.
    twice = refused("quickReplies.items", [{"label": "问好", "text": "你好。"}, {"label": " 问好", "text": "嗨。"}])
    assert [(p.code, p.pointer) for p in twice.problems] == [("settings.duplicate", "/value/1/label")]


def test_command_line_values_are_json_or_text_for_text_keys() -> None:
    assert parse_cli_value("replyOptions.count", "4") == 4
    assert parse_cli_value("writer.defaultRoute", "deepseek/deepseek-flash") == "deepseek/deepseek-flash"
    assert parse_cli_value("writer.defaultRoute", "null") is None
    assert parse_cli_value("prompt.identity", "You narrate.") == "You narrate."
    assert parse_cli_value("prompt.identity", '"42"') == "42"
    with pytest.raises(ValidationError) as info:
        parse_cli_value("replyOptions.keywords", "[calm")
    assert info.value.code == "settings.invalid_json" and info.value.pointer == "/value"


# -- the consumers -----------------------------------------------------------------------------------


async def test_the_writer_uses_the_global_default_route_read_at_each_prepare(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    parent = Route("demo", "demo", max_output_tokens=900)
    assert (await prepare_run(rt, sid, "你好。", parent_route=parent)).writer_route == parent  # nothing set: follow
    settings = SettingsStore(store)
    await settings.set("writer.defaultRoute", "openai/gpt-4o/high")
    prepared = await prepare_run(rt, sid, "你好。", parent_route=parent)
    # The parent's explicit output limit is inherited (spec).
    assert prepared.writer_route == Route("openai", "gpt-4o", "high", 900)
    await settings.set("writer.defaultRoute", "deepseek/deepseek-flash")
    assert (await prepare_run(rt, sid, "你好。", parent_route=parent)).writer_route.model == "deepseek-flash"
    # RP_WRITER_MODEL (the runtime's writer_default) is a per-process override of the setting.
    rt.writer_default = Route("demo", "demo")
    assert (await prepare_run(rt, sid, "你好。", parent_route=parent)).writer_route == Route("demo", "demo")
    # A session override wins over both.
    fixed = {"provider": "openai", "model": "gpt-4o-mini"}
    reader = StoreAssetReader(rt.assets)
    assert (await apply_profile(rt.service, sid, {"patch": {"runtime": {"writerRoute": fixed}}}, reader)).applied
    assert (await prepare_run(rt, sid, "你好。", parent_route=parent)).writer_route == Route("openai", "gpt-4o-mini", None, 900)


async def test_the_identity_override_replaces_only_harness_identity_for_parent_and_writer(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    before = await prepare_run(rt, sid, "你好。", parent_route=DEMO)
    assert before.writer_system.startswith(str(IDENTITY.text))
    own = "You are 雾港's chronicler. Stay in the harbour's voice."
    await SettingsStore(store).set("prompt.identity", own)
    after = await prepare_run(rt, sid, "你好。", parent_route=DEMO)
    assert after.writer_system.startswith(own) and str(IDENTITY.text) not in after.writer_system
    # Everything after the identity is unchanged.
    assert after.writer_system[len(own) :] == before.writer_system[len(str(IDENTITY.text)) :]
    ids = [s.id for s in after.parent_system_sections]
    assert ids == [s.id for s in before.parent_system_sections] and ids.count("harness:identity") == 1
    identity = next(s for s in after.parent_system_sections if s.id == "harness:identity")
    assert identity.text == own and identity.order == IDENTITY.order
    assert after.parent_system_sections[1:] == before.parent_system_sections[1:]
    # A played turn sends it: every request (parent steps and the Writer) opens with it.
    recorder = RecordingDemo()
    rt.models[DEMO.spec] = recorder
    result = await play_turn(rt, sid, "我敲门。", parent_route=DEMO)
    assert result.committed
    systems = [str(r.messages[0].content) for r in recorder.requests]
    assert len(systems) >= 3 and any(not r.tools for r in recorder.requests)  # parent steps and the Writer
    assert all(s.startswith(own) and str(IDENTITY.text) not in s for s in systems)
    # Reset: the harness's own identity comes back from the next prepare.
    await SettingsStore(store).reset("prompt.identity")
    assert (await prepare_run(rt, sid, "你好。", parent_route=DEMO)).writer_system == before.writer_system


async def test_read_settings_is_one_snapshot_of_every_key(store: EventStore) -> None:
    await SettingsStore(store).set("features.enabled", ["rp-state"])
    snapshot = await read_settings(store)
    assert snapshot.value("features.enabled") == ["rp-state"]
    assert [r.key for r in snapshot.records()] == list(DEFS)
