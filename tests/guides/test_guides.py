"""Guide loader, both languages of every guide, and the accuracy of the preset guides against the
implementation (in each language)."""

from __future__ import annotations

import re

import pytest

from roleplay.assets.presets import EXAMPLE_PRESET_SEEDS
from roleplay.assets.presets.model import MAX_FIELDS, MAX_TOTAL_CONTENT
from roleplay.assets.presets.sillytavern import MARKER_REPLACEMENTS, ORDER_PREFERENCE, REPORT_CODES
from roleplay.assets.presets.st_classify import EXPRESSIVE_MIN_HITS
from roleplay.errors import NotFoundError, ValidationError
from roleplay.guides import _parse, helpers_of, list_guides, load_guide


def test_catalogue_and_parent_link():
    assert list_guides() == ["rp-guide-preset", "rp-guide-preset-sillytavern", "rp-guide-state"]
    helper = load_guide("rp-guide-preset-sillytavern")
    assert helper.parent == "rp-guide-preset"
    assert helpers_of("rp-guide-preset") == ["rp-guide-preset-sillytavern"]
    assert load_guide("rp-guide-preset").parent is None


CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_guide_has_metadata_and_a_body_in_each_language():
    for name in list_guides():
        zh, en = load_guide(name, "zh"), load_guide(name, "en")
        for guide in (zh, en):
            assert guide.name == name and guide.title and guide.description
            assert not guide.body.startswith("---")
            assert guide.to_dict()["body"] == guide.body
        assert CJK.search(zh.body) and CJK.search(zh.title)
        assert not CJK.search(en.title + en.description) and en.parent == zh.parent
        # English text, quoting only the Chinese names a user may meet (the zh seed, ST prompt words)
        assert len(CJK.findall(en.body)) < 60


def test_the_language_defaults_to_the_system_locale(monkeypatch: pytest.MonkeyPatch):
    assert load_guide("rp-guide-preset").title == "Presets guide"  # the tests' locale is English
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert load_guide("rp-guide-preset").title == "创作预设（Preset）指南"
    with pytest.raises(ValidationError) as err:
        load_guide("rp-guide-preset", "fr")
    assert err.value.code == "guide.unknown_language"


def test_unknown_and_malformed_names():
    for bad in ("nope", "../errors", "RP-GUIDE", "", None):
        with pytest.raises(NotFoundError) as err:
            load_guide(bad)
        assert err.value.code == "guide.not_found"
    with pytest.raises(NotFoundError):
        helpers_of("nope")


def test_front_matter_validation():
    ok = "---\nname: g\ntitle: T\ndescription: D\n---\n正文\n"
    assert _parse("g", ok).body == "正文\n"
    for text in (
        "正文",
        "---\nname: g\ntitle: T\n---\nx",
        "---\nname: h\ntitle: T\ndescription: D\n---\nx",
        "---\nname: g\ntitle: T\ndescription: D\nowner: me\n---\nx",
        "---\nname: g\n",
    ):
        with pytest.raises(ValidationError) as err:
            _parse("g", text)
        assert err.value.code == "guide.invalid"


@pytest.mark.parametrize("language", ["zh", "en"])
def test_preset_guide_matches_the_model(language: str):
    body = load_guide("rp-guide-preset", language).body
    for term in (
        "`top`",
        "`bottom`",
        "`sectionTag`",
        "rp.preset:<field-id>",
        "contextBuild",
        "rp-guide-preset-sillytavern",
        "`prompts`",
        "`prompt_order`",
        f"≤ {MAX_FIELDS}",
        f"≤ {MAX_TOTAL_CONTENT}",
    ):
        assert term in body, term
    # the seed table in the guide lists the real seed field ids and positions
    for f in EXAMPLE_PRESET_SEEDS[language].content["fields"]:
        assert f"| {f['title']} | `{f['id']}` | {f['position']} |" in body
    for code in (
        "preset.field_id_immutable",
        "preset.reorder_mismatch",
        "preset.index_out_of_range",
        "preset.duplicate_field_id",
        "preset.field_not_found",
    ):
        assert code in body


@pytest.mark.parametrize("language", ["zh", "en"])
def test_sillytavern_guide_documents_every_report_code_and_rule(language: str):
    body = load_guide("rp-guide-preset-sillytavern", language).body
    missing = [code for code in REPORT_CODES if code not in body]
    assert missing == []
    for marker in MARKER_REPLACEMENTS:
        assert marker in body
    for character_id in ORDER_PREFERENCE:
        assert str(character_id) in body
    assert (f"至少 {EXPRESSIVE_MIN_HITS} 次" if language == "zh" else f"at least {EXPRESSIVE_MIN_HITS} expressive hits") in body
    for term in ("sillytavern.invalid", "sillytavern.not_json", "<redacted>", "{{char}}", "{{user}}", "st-<identifier>"):
        assert term in body, term


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_state_guide_matches_the_implementation(language: str) -> None:
    from roleplay.state.config import ACTIONS
    from roleplay.state.definition import UPDATE_MODES
    from roleplay.state.rules import CADENCES
    from roleplay.state.schema import ALLOWED_KEYWORDS

    body = load_guide("rp-guide-state", language).body
    quoted = set(re.findall(r"`([A-Za-z_-]+)`", body))
    assert set(ALLOWED_KEYWORDS) <= quoted, set(ALLOWED_KEYWORDS) - quoted
    assert set(UPDATE_MODES) | set(CADENCES) | set(ACTIONS) <= quoted
    assert {"set", "increment", "append", "remove", "rp_state", "rp_state_read", "rp_commit_turn"} <= quoted
