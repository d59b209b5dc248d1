"""Guide loader and the accuracy of the preset guides against the implementation."""

from __future__ import annotations

import re

import pytest

from roleplay.assets.presets import EXAMPLE_PRESET_SEED
from roleplay.assets.presets.model import MAX_FIELDS, MAX_TOTAL_CONTENT
from roleplay.assets.presets.sillytavern import MARKER_REPLACEMENTS, ORDER_PREFERENCE, REPORT_CODES
from roleplay.assets.presets.st_classify import EXPRESSIVE_MIN_HITS
from roleplay.errors import NotFoundError, ValidationError
from roleplay.guides import _parse, helpers_of, list_guides, load_guide


def test_catalogue_and_parent_link():
    assert list_guides() == ["rp-guide-preset", "rp-guide-preset-sillytavern"]
    helper = load_guide("rp-guide-preset-sillytavern")
    assert helper.parent == "rp-guide-preset"
    assert helpers_of("rp-guide-preset") == ["rp-guide-preset-sillytavern"]
    assert load_guide("rp-guide-preset").parent is None


def test_every_guide_has_metadata_and_a_chinese_body():
    for name in list_guides():
        guide = load_guide(name)
        assert guide.name == name and guide.title and guide.description
        assert not guide.body.startswith("---")
        assert re.search(r"[\u4e00-\u9fff]", guide.body)
        assert guide.to_dict()["body"] == guide.body


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


def test_preset_guide_matches_the_model():
    body = load_guide("rp-guide-preset").body
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
    for f in EXAMPLE_PRESET_SEED.content["fields"]:
        assert f"| {f['title']} | `{f['id']}` | {f['position']} |" in body
    for code in (
        "preset.field_id_immutable",
        "preset.reorder_mismatch",
        "preset.index_out_of_range",
        "preset.duplicate_field_id",
        "preset.field_not_found",
    ):
        assert code in body


def test_sillytavern_guide_documents_every_report_code_and_rule():
    body = load_guide("rp-guide-preset-sillytavern").body
    missing = [code for code in REPORT_CODES if code not in body]
    assert missing == []
    for marker in MARKER_REPLACEMENTS:
        assert marker in body
    for character_id in ORDER_PREFERENCE:
        assert str(character_id) in body
    assert f"至少 {EXPRESSIVE_MIN_HITS} 次" in body
    for term in ("sillytavern.invalid", "sillytavern.not_json", "<redacted>", "{{char}}", "{{user}}", "st-<identifier>"):
        assert term in body, term
