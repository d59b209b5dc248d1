"""SillyTavern chat-completion preset migration, on the corpus and on targeted inputs."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from roleplay.assets.presets.sillytavern import (
    REPORT_CODES,
    looks_like_sillytavern_preset,
    migrate_sillytavern_preset,
    parse_sillytavern_json,
)
from roleplay.errors import ValidationError


def load(corpus_dir, name):
    return parse_sillytavern_json((corpus_dir / "presets" / name).read_bytes())


def prompt(identifier, content="", **extra):
    return {"identifier": identifier, "name": extra.pop("name", identifier), "content": content, **extra}


def marker(identifier):
    return {"identifier": identifier, "name": identifier, "marker": True, "system_prompt": True}


def preset(prompts, order, character_id=100001, **settings):
    return {
        "prompts": prompts,
        "prompt_order": [{"character_id": character_id, "order": [{"identifier": i, "enabled": e} for i, e in order]}],
        **settings,
    }


# --- corpus -----------------------------------------------------------------------------------


def test_default_json(corpus_dir):
    data = load(corpus_dir, "Default.json")
    assert looks_like_sillytavern_preset(data)
    result = migrate_sillytavern_preset(data, name="Default")
    report = result.report

    assert report.order_character_id == 100001  # not the legacy 100000 list
    assert [(f.id, f.title, f.position) for f in result.preset.fields] == [("st-main", "Main Prompt", "top")]
    assert result.preset.fields[0].content == "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
    assert result.writing_styles == ()
    assert [(m.identifier, m.target, m.classification.rule) for m in report.migrated] == [("main", "/fields/st-main", "builtin")]

    codes = Counter(report.codes())
    assert codes["sillytavern.marker"] == 8
    assert codes["sillytavern.order.ignored_list"] == 1
    assert {p.details["identifier"] for p in report.items("sillytavern.marker")} == {
        "chatHistory",
        "dialogueExamples",
        "worldInfoBefore",
        "worldInfoAfter",
        "charDescription",
        "charPersonality",
        "scenario",
        "personaDescription",
    }
    disabled = report.items("sillytavern.prompt.disabled")
    assert [(p.details["identifier"], p.details["hasContent"], p.pointer) for p in disabled] == [("enhanceDefinitions", True, "/prompts/7")]
    assert {p.details["identifier"] for p in report.items("sillytavern.prompt.empty")} == {"nsfw", "jailbreak"}
    macros = {p.details["macro"]: (p.details["count"], p.details["handling"]) for p in report.items("sillytavern.macro")}
    assert macros == {"char": (2, "kept"), "user": (1, "kept")}

    settings = {p.details["key"]: (p.code, p.details["value"]) for p in report.not_migrated if p.code.startswith("sillytavern.setting.")}
    # Issue 13 item 6: the samplers and limits a Writer request takes are carried, not reported.
    assert result.preset.sampling is not None
    assert result.preset.sampling.given() == {
        "temperature": 1,
        "top_p": 1,
        "frequency_penalty": 0,
        "presence_penalty": 0,
        "max_tokens": 300,
        "context_size": 4095,
    }
    assert not settings.keys() & {
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        "openai_max_tokens",
        "openai_max_context",
    }
    assert settings["top_k"] == ("sillytavern.setting.sampler", 0)  # no route sends top_k
    assert settings["openai_model"] == ("sillytavern.setting.connection", "gpt-4-turbo")
    assert settings["scenario_format"][0] == "sillytavern.setting.template"
    assert settings["stream_openai"] == ("sillytavern.setting.behavior", True)
    assert "proxy_password" not in settings and "custom_url" not in settings  # empty values carry nothing
    assert all(p.pointer == f"/{p.details['key']}" for p in report.not_migrated if p.code.startswith("sillytavern.setting."))
    assert not report.items("sillytavern.extension")


def test_example_preset_from_tavern_helper(corpus_dir):
    result = migrate_sillytavern_preset(load(corpus_dir, "示例预设.json"), name="示例预设")
    report = result.report
    assert report.order_character_id == 100001
    assert result.preset.fields == () and result.writing_styles == () and report.migrated == ()
    # main, nsfw and jailbreak exist but are not ordered, so SillyTavern never sends them
    unordered = report.items("sillytavern.prompt.unordered")
    assert [(p.details["identifier"], p.pointer) for p in unordered] == [
        ("main", "/prompts/9"),
        ("nsfw", "/prompts/10"),
        ("jailbreak", "/prompts/11"),
    ]
    assert [p.details["identifier"] for p in report.items("sillytavern.prompt.empty")] == ["enhanceDefinitions"]
    assert len(report.items("sillytavern.marker")) == 8
    ext = report.items("sillytavern.extension")
    assert [(p.pointer, p.details.get("scriptNames")) for p in ext] == [("/extensions/tavern_helper", "自动更新预设")]
    settings = {p.details["key"]: p.details["value"] for p in report.not_migrated if p.code.startswith("sillytavern.setting.")}
    assert result.preset.sampling is not None and result.preset.sampling.context_size == 2_000_000
    assert "openai_max_context" not in settings and settings["reasoning_effort"] == "min"
    assert not report.items("sillytavern.order.ignored_list")


def test_corpus_migration_is_deterministic_and_serialisable(corpus_dir):
    for name in ("Default.json", "示例预设.json"):
        a = migrate_sillytavern_preset(load(corpus_dir, name), name=name).to_dict()
        b = migrate_sillytavern_preset(load(corpus_dir, name), name=name).to_dict()
        assert a == b
        assert json.loads(json.dumps(a, ensure_ascii=False)) == a
        assert set(p["code"] for p in a["report"]["notMigrated"]) <= set(REPORT_CODES)


# --- targeted behaviour -------------------------------------------------------------------------


def test_chat_history_splits_top_and_bottom_and_expressive_becomes_style():
    data = preset(
        [
            prompt("main", "你是故事的写作者。"),
            prompt("a1b2-uuid", "第三人称，句式长短交替，修辞克制。", name="文风"),
            marker("chatHistory"),
            prompt("rules", "回复不超过八百字。", name="输出格式"),
            prompt("jailbreak", "记得推进剧情。"),
        ],
        [("main", True), ("a1b2-uuid", True), ("chatHistory", True), ("rules", True), ("jailbreak", True)],
    )
    result = migrate_sillytavern_preset(data, name="测试")
    assert [(f.id, f.position) for f in result.preset.fields] == [("st-main", "top"), ("st-rules", "bottom"), ("st-jailbreak", "bottom")]
    assert [(s.name, s.requirements) for s in result.writing_styles] == [("文风", "第三人称，句式长短交替，修辞克制。")]
    assert "测试" in result.writing_styles[0].applicability
    kinds = [(m.identifier, m.target_kind, m.target) for m in result.report.migrated]
    assert kinds == [
        ("main", "preset-field", "/fields/st-main"),
        ("a1b2-uuid", "writing-style", "/writingStyles/0"),
        ("rules", "preset-field", "/fields/st-rules"),
        ("jailbreak", "preset-field", "/fields/st-jailbreak"),
    ]


def test_order_preference_100001_then_100000_then_first():
    prompts = [prompt("a", "甲"), prompt("b", "乙")]
    lists = [
        {"character_id": 7, "order": [{"identifier": "a", "enabled": True}]},
        {"character_id": 100000, "order": [{"identifier": "b", "enabled": True}]},
    ]
    legacy = migrate_sillytavern_preset({"prompts": prompts, "prompt_order": lists}, name="x")
    assert legacy.report.order_character_id == 100000 and legacy.preset.field_ids() == ("st-b",)
    first = migrate_sillytavern_preset({"prompts": prompts, "prompt_order": lists[:1]}, name="x")
    assert first.report.order_character_id == 7 and first.preset.field_ids() == ("st-a",)


def test_without_prompt_order_prompts_are_walked_in_file_order():
    data = {"prompts": [prompt("a", "甲"), prompt("b", "乙", enabled=False), marker("chatHistory"), prompt("c", "丙")]}
    result = migrate_sillytavern_preset(data, name="x")
    assert [(f.id, f.position) for f in result.preset.fields] == [("st-a", "top"), ("st-c", "bottom")]
    assert result.report.codes()[0] == "sillytavern.order.missing"
    assert [p.details["identifier"] for p in result.report.items("sillytavern.prompt.disabled")] == ["b"]
    assert not result.report.items("sillytavern.prompt.unordered")


def test_injection_semantics_are_reported():
    data = preset(
        [
            prompt("deep", "在最近几条消息里提醒状态。", injection_position=1, injection_depth=2, injection_order=50),
            marker("chatHistory"),
            prompt("u", "（用户视角的提示）", role="user", injection_trigger=["continue"], forbid_overrides=True),
        ],
        [("deep", True), ("chatHistory", True), ("u", True)],
    )
    result = migrate_sillytavern_preset(data, name="x")
    assert result.preset.field("st-deep").position == "bottom"  # absolute injections sit in the history
    report = result.report
    absolute = report.items("sillytavern.injection.absolute")[0]
    assert absolute.details["depth"] == 2 and absolute.details["order"] == 50
    assert report.items("sillytavern.injection.role")[0].details["role"] == "user"
    assert report.items("sillytavern.injection.trigger")[0].details["trigger"] == "continue"
    assert len(report.items("sillytavern.injection.forbid_overrides")) == 1


def test_unsupported_macros_are_kept_verbatim_and_reported():
    text = "{{char}}看向{{user}}。{{random::晴::雨}}{{setvar::mood::1}}<BOT>"
    result = migrate_sillytavern_preset(preset([prompt("m", text)], [("m", True)]), name="x")
    assert result.preset.field("st-m").content == text
    handling = {p.details["macro"]: p.details["handling"] for p in result.report.items("sillytavern.macro")}
    assert handling == {"char": "kept", "user": "kept", "random": "unsupported", "setvar": "unsupported", "<bot>": "unsupported"}
    assert {p.details["target"] for p in result.report.items("sillytavern.macro")} == {"/fields/st-m/content"}


def test_odd_order_entries_and_missing_chat_history():
    data = preset(
        [prompt("a", "甲"), prompt("a", "重复定义"), {"name": "no id"}, prompt("不安全/id", "乙")],
        [("a", True), ("ghost", True), ("a", True), ("不安全/id", True)],
    )
    result = migrate_sillytavern_preset(data, name="x")
    report = result.report
    assert report.items("sillytavern.order.dangling")[0].details["identifier"] == "ghost"
    assert report.items("sillytavern.order.duplicate")[0].details["identifier"] == "a"
    assert report.items("sillytavern.prompt.malformed")[0].pointer == "/prompts/2"
    assert len(report.items("sillytavern.order.no_chat_history")) == 1
    assert result.preset.field("st-a").content == "甲"  # the first definition wins, as in SillyTavern
    ids = result.preset.field_ids()
    assert ids[0] == "st-a" and ids[1].startswith("st-id") and all(f.position == "top" for f in result.preset.fields)


def test_non_ascii_identifiers_get_a_stable_hash_id_and_collisions_a_suffix():
    data = preset(
        [prompt("文风", "甲", name="规则"), prompt("a b", "乙"), prompt("a-b", "丙")], [("文风", True), ("a b", True), ("a-b", True)]
    )
    first = migrate_sillytavern_preset(data, name="x").preset.field_ids()
    assert first[0].startswith("st-") and len(first[0]) == 15
    assert first[1:] == ("st-a-b", "st-a-b-2")
    assert migrate_sillytavern_preset(data, name="x").preset.field_ids() == first


def test_secrets_are_redacted_and_extensions_summarised():
    data = preset(
        [],
        [],
        proxy_password="hunter2",
        reverse_proxy="https://p.example",
        temperature=0.7,
        custom_include_headers="Authorization: x",
        openrouter_api_key="sk-1",
        openai_max_tokens=500,
        extensions={"regex_scripts": [{}, {}], "empty": {}},
    )
    report = migrate_sillytavern_preset(data, name="x").report
    values = {p.details["key"]: p.details["value"] for p in report.not_migrated if "key" in p.details and "value" in p.details}
    assert values["proxy_password"] == "<redacted>"
    assert values["reverse_proxy"] == "<redacted>"
    assert values["custom_include_headers"] == "<redacted>"
    assert values["openrouter_api_key"] == "<redacted>"
    assert "temperature" not in values and "openai_max_tokens" not in values  # carried into the preset
    assert "hunter2" not in json.dumps(report.to_dict()) and "sk-1" not in json.dumps(report.to_dict())
    ext = report.items("sillytavern.extension")
    assert [(p.details["key"], p.details["items"]) for p in ext] == [("regex_scripts", 2)]


def test_size_limits_are_reported_not_fatal():
    huge = prompt("huge", "字" * 100_001)
    many = [prompt(f"p{i}", "内容") for i in range(66)]
    result = migrate_sillytavern_preset(preset([huge, *many], [("huge", True)] + [(f"p{i}", True) for i in range(66)]), name="x")
    assert len(result.preset.fields) == 64
    assert result.report.items("sillytavern.prompt.too_long")[0].details["identifier"] == "huge"
    assert [p.details["identifier"] for p in result.report.items("sillytavern.prompt.too_many")] == ["p64", "p65"]
    long_name = migrate_sillytavern_preset(preset([prompt("n", "甲", name="名" * 100)], [("n", True)]), name="x")
    assert len(long_name.preset.fields[0].title) == 80
    assert len(long_name.report.items("sillytavern.prompt.title_truncated")) == 1


def test_invalid_inputs():
    with pytest.raises(ValidationError) as not_obj:
        migrate_sillytavern_preset([], name="x")
    assert not_obj.value.code == "sillytavern.invalid"
    with pytest.raises(ValidationError) as no_prompts:
        migrate_sillytavern_preset({"temperature": 1}, name="x")
    assert (no_prompts.value.code, no_prompts.value.pointer) == ("sillytavern.invalid", "/prompts")
    with pytest.raises(ValidationError) as bad_json:
        parse_sillytavern_json(b'{"prompts": [}')
    assert bad_json.value.code == "sillytavern.not_json" and bad_json.value.details["line"] == 1
    with pytest.raises(ValidationError) as bad_utf8:
        parse_sillytavern_json(b"\xff\xfe{}")
    assert bad_utf8.value.code == "sillytavern.not_json"
    assert parse_sillytavern_json("\ufeff{}".encode("utf-8")) == {}
    assert not looks_like_sillytavern_preset({"prompts": []})


def test_one_unstorable_prompt_is_reported_and_the_rest_still_migrates():
    data = preset([prompt("bad", "控制\x1b字符"), prompt("good", "正常内容")], [("bad", True), ("good", True)])
    result = migrate_sillytavern_preset(data, name="带\x00控制符的名字")
    assert result.preset.field_ids() == ("st-good",)
    assert result.preset.name == "带控制符的名字"
    invalid = result.report.items("sillytavern.prompt.invalid")
    assert [(p.details["identifier"], p.details["problem"], p.details["at"]) for p in invalid] == [
        ("bad", "preset.control_char", "/content")
    ]


# --- legacy flat presets (SillyTavern 2023, before the prompt manager) -----------------------


LEGACY_2023 = {
    "chat_completion_source": "openai",
    "openai_model": "gpt-3.5-turbo",
    "temperature": 0.9,
    "frequency_penalty": 0.7,
    "presence_penalty": 0.7,
    "openai_max_context": 4095,
    "openai_max_tokens": 300,
    "nsfw_toggle": True,
    "enhance_definitions": False,
    "wrap_in_quotes": False,
    "nsfw_first": False,
    "main_prompt": "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}.",
    "nsfw_prompt": "Mature themes are allowed when the story calls for them.",
    "jailbreak_prompt": "[System note: stay in character and keep the story moving.]",
    "impersonation_prompt": "[Write your next reply from the point of view of {{user}}.]",
    "new_chat_prompt": "[Start a new chat]",
    "nsfw_avoidance_prompt": "Keep the story free of mature content.",
    "jailbreak_system": True,
}


def test_legacy_flat_preset_migrates_main_nsfw_and_jailbreak():
    """Issue 10 item 9: a flat 2023 preset is migrated, not rejected."""
    result = migrate_sillytavern_preset(LEGACY_2023, name="Legacy")
    fields = {f.id: (f.position, f.content) for f in result.preset.fields}
    assert list(fields) == ["st-main", "st-nsfw", "st-jailbreak"]
    assert fields["st-main"] == ("top", LEGACY_2023["main_prompt"])
    assert fields["st-nsfw"] == ("top", LEGACY_2023["nsfw_prompt"])
    assert fields["st-jailbreak"] == ("bottom", LEGACY_2023["jailbreak_prompt"])
    sources = {m.identifier: m.source for m in result.report.migrated}
    assert sources == {"main": "/main_prompt", "nsfw": "/nsfw_prompt", "jailbreak": "/jailbreak_prompt"}
    [legacy] = result.report.items("sillytavern.legacy")
    assert legacy.pointer == ""
    # The rest is reported exactly as for the modern form, with pointers into the file.
    template = {p.details["key"]: p.pointer for p in result.report.items("sillytavern.setting.template")}
    assert template == {"impersonation_prompt": "/impersonation_prompt", "new_chat_prompt": "/new_chat_prompt"}
    # Samplers and limits a request takes are carried into the preset (issue 13 item 6).
    assert not result.report.items("sillytavern.setting.sampler") and not result.report.items("sillytavern.setting.limit")
    assert result.preset.sampling is not None
    assert result.preset.sampling.given() == {
        "temperature": 0.9,
        "frequency_penalty": 0.7,
        "presence_penalty": 0.7,
        "max_tokens": 300,
        "context_size": 4095,
    }
    # The legacy switches were applied, not left over as unmigrated settings.
    reported = {p.details.get("key") for p in result.report.not_migrated}
    assert not reported & {
        "main_prompt",
        "nsfw_prompt",
        "jailbreak_prompt",
        "nsfw_toggle",
        "nsfw_first",
        "jailbreak_system",
        "nsfw_avoidance_prompt",
    }
    macros = {(p.details["macro"], p.pointer) for p in result.report.items("sillytavern.macro")}
    assert ("char", "/main_prompt") in macros
    assert set(REPORT_CODES) >= set(result.report.codes())
    json.dumps(result.to_dict(), ensure_ascii=False)


def test_legacy_switches_nsfw_toggle_nsfw_first_and_jailbreak_system():
    off = migrate_sillytavern_preset({**LEGACY_2023, "nsfw_toggle": False, "jailbreak_system": False}, name="x")
    fields = {f.id: f.content for f in off.preset.fields}
    # nsfw_toggle off: ST sent the avoidance prompt in the NSFW prompt's place.
    assert list(fields) == ["st-main", "st-nsfwAvoidance"]
    assert fields["st-nsfwAvoidance"] == LEGACY_2023["nsfw_avoidance_prompt"]
    disabled = {p.details["identifier"]: p.pointer for p in off.report.items("sillytavern.prompt.disabled")}
    assert disabled == {"nsfw": "/nsfw_prompt", "jailbreak": "/jailbreak_prompt"}
    first = migrate_sillytavern_preset({**LEGACY_2023, "nsfw_first": True}, name="x")
    assert first.preset.field_ids() == ("st-nsfw", "st-main", "st-jailbreak")


def test_legacy_oddities_are_reported_not_dropped():
    odd = {
        "main_prompt": 5,
        "nsfw_prompt": "Mature themes are allowed.",
        "nsfw_first": "yes",
        "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}],
    }
    result = migrate_sillytavern_preset(odd, name="x")
    assert result.preset.field_ids() == ("st-nsfw",)
    assert [p.pointer for p in result.report.items("sillytavern.prompt.malformed")] == ["/main_prompt"]
    assert [p.pointer for p in result.report.items("sillytavern.order.ignored_list")] == ["/prompt_order"]
    behavior = {p.details["key"]: p.details["value"] for p in result.report.items("sillytavern.setting.behavior")}
    assert behavior == {"nsfw_first": "yes"}  # not a switch SillyTavern could read: reported, not applied


def test_legacy_preset_without_any_prompt_text_is_still_rejected():
    with pytest.raises(ValidationError) as err:
        migrate_sillytavern_preset({"temperature": 1, "openai_max_context": 4095}, name="x")
    assert (err.value.code, err.value.pointer) == ("sillytavern.invalid", "/prompts")


@pytest.mark.anyio
async def test_legacy_flat_preset_file_imports_as_a_preset(store):
    from roleplay.assets.importing import import_file
    from roleplay.assets.store import AssetStore

    assets = AssetStore(store)
    result = await import_file(assets, json.dumps(LEGACY_2023).encode(), "Legacy 2023.json")
    assert result.kind == "preset" and not result.duplicate
    record = await assets.get(result.asset_id, kind="preset")
    assert [f["id"] for f in record.data["fields"]] == ["st-main", "st-nsfw", "st-jailbreak"]
    assert "sillytavern.legacy" in {p["code"] for p in result.report["notMigrated"]}


def test_a_sampler_a_request_cannot_take_is_reported_not_carried():
    data = {**LEGACY_2023, "temperature": 7, "top_p": "high", "top_k": 40}
    result = migrate_sillytavern_preset(data, name="Legacy")
    assert result.preset.sampling is not None and "temperature" not in result.preset.sampling.given()
    reported = {p.details["key"]: p.message for p in result.report.items("sillytavern.setting.sampler")}
    assert set(reported) == {"temperature", "top_p", "top_k"}
    assert "does not accept" in reported["temperature"] and "no equivalent" in reported["top_k"]
    stored = result.preset.to_json_dict()
    assert stored["sampling"] == {"frequencyPenalty": 0.7, "presencePenalty": 0.7, "maxTokens": 300, "contextSize": 4095}
