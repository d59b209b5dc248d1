"""Acceptance: every MVU input of the shared corpus becomes a schema-valid State v2 bootstrap.

Expected paths and values are stated for the official MVU Zod example card (呕吐内心的少女) and
for 理理's two InitVar files. Each namespace is folded by ``roleplay.state`` itself.
"""

import json

import pytest
from compat.mvu_support import EXAMPLE_CARD, LILI, STAGEDOG, entry, make_card

from roleplay.assets.cards import import_card_bytes
from roleplay.compat.mvu import inspect_card, parse_data, select_opening
from roleplay.compat.mvu.diagnostics import Loc
from roleplay.state import apply_bootstrap, empty_projection, validate_namespace_content


def assert_native(namespace):
    payload = namespace.bootstrap()
    entry_ = payload["namespaces"]["story"]
    assert validate_namespace_content(entry_["definition"], {"initialValue": entry_["initialValue"]}) == []
    folded = apply_bootstrap(empty_projection(), payload)["namespaces"]["story"]
    assert folded["value"] == namespace.initial_value
    assert folded["definition"]["updateMode"] == namespace.definition["updateMode"]
    if namespace.status == "disabled":
        assert any(d.details.get("severity") == "error" for d in namespace.diagnostics[1:])


@pytest.fixture
def example_report(mvu_corpus):
    return inspect_card(import_card_bytes((mvu_corpus / EXAMPLE_CARD).read_bytes()), user="青空黎")


def test_example_card_default_opening(example_report):
    ns = example_report.namespace
    assert_native(ns)
    value = ns.initial_value
    assert value["世界"]["当前时间"] == "2024-04-08 10:45"
    assert value["白娅"]["依存度"] == 35 and value["白娅"]["着装"]["饰品"] == "无"
    assert value["白娅"]["称号"]["逃避者"]["效果"] == "对来自青空黎的任何接触都会本能回避"
    assert value["主角"]["物品栏"]["薄荷糖"]["数量"] == 1
    definition = ns.definition
    assert definition["updateMode"] == "schema-only"
    targets = sorted({r["target"] for r in definition["rules"]})
    assert targets == [
        "/世界/当前时间",
        "/白娅/依存度",
        "/白娅/着装/上装",
        "/白娅/着装/下装",
        "/白娅/着装/内衣",
        "/白娅/着装/袜子",
        "/白娅/着装/鞋子",
        "/白娅/着装/饰品",
    ]
    dependence = definition["schema"]["properties"]["白娅"]["properties"]["依存度"]
    assert (dependence["type"], dependence["minimum"], dependence["maximum"]) == ("number", 0, 100)
    titles = definition["schema"]["properties"]["白娅"]["properties"]["称号"]
    assert titles["additionalProperties"]["required"] == ["效果"]
    default = select_opening(example_report)
    assert default.namespace.initial_value == value and not default.has_initvar
    assert "<StatusPlaceHolderImpl/>" not in default.opening_message_text
    assert default.opening_message_text.startswith("「啊，是新的转学生要来了呢。」")


def test_example_card_alternate_opening_replaces_initvar(example_report):
    alternate = select_opening(example_report, "alternate", 0)
    assert alternate.has_initvar
    assert_native(alternate.namespace)
    value = alternate.namespace.initial_value
    assert value["世界"]["当前时间"] == "2025-04-07 08:42"
    assert value["白娅"]["依存度"] == 15
    assert sorted(value["白娅"]["称号"]) == ["自毁倾向者", "转学生", "逃避者"]
    assert sorted(value["主角"]["物品栏"]) == ["旧手帕", "秒表"]
    text = alternate.opening_message_text
    assert "<UpdateVariable>" not in text and "<initvar>" not in text and "世界:" not in text
    assert text.endswith("</cross_channel>")


def test_lili_initvar_files_and_rules(mvu_corpus):
    files = [
        "[initvar]初始变量1.yaml",
        "[initvar]初始变量2.yaml",
        "[mvu_update]变量更新规则.md",
        "[mvu_update]格式强调-变量更新规则.md",
        "变量分阶段-好感度.md",
    ]
    entries = [
        entry(name.rsplit(".", 1)[0], (mvu_corpus / LILI / name).read_text("utf-8"), enabled=not name.startswith("[initvar]"), uid=i)
        for i, name in enumerate(files)
    ]
    report = inspect_card(make_card("早安", entries=entries, name="理"), user="牧师")
    ns = report.namespace
    assert_native(ns)
    value = ns.initial_value
    assert value["牧师"] == {"身份": "新来的牧师", "名字": "牧师", "当前位置": "教堂", "重要经历": "", "与理的关系": ""}
    assert value["理"]["好感度"] == 0 and value["理"]["情绪状态"]["pleasure"] == 0.1
    assert value["理"]["着装"].startswith("纯白长袖圣女长袍")
    assert (value["日期"], value["天数"], value["时间"]) == ("03月15日", 0, "09:00")
    assert value["地点"]["教堂"]["status"] == ""
    assert ns.vwd["/理/好感度"].startswith("[-30,100]之间")
    assert ns.definition["schema"]["properties"]["时间"] == {
        "type": "string",
        "description": "按照进行行动后实际经历的时间进行更新，每次行动后更新，格式为 hh:mm",
    }
    assert ns.definition["updateMode"] == "schema-only" and ns.definition["rules"] == []
    codes = [d.code for d in ns.diagnostics]
    assert codes.count("mvu.rules.protocol_dropped") == 2 and "mvu.vwd.split" in codes


def test_stagedog_source_tree_with_schema_json(mvu_corpus):
    base = mvu_corpus / STAGEDOG
    schema = json.loads((base / "schema.json").read_text("utf-8"))
    entries = [
        entry("[initvar]变量初始化勿开", (base / "世界书/变量/initvar.yaml").read_text("utf-8"), enabled=False, uid=1),
        entry("[mvu_update]变量更新规则", (base / "世界书/变量/变量更新规则.yaml").read_text("utf-8"), uid=2),
        entry("[mvu_update]变量输出格式", (base / "世界书/变量/变量输出格式.yaml").read_text("utf-8"), uid=3),
    ]
    greeting = (base / "第一条消息/1.txt").read_text("utf-8")
    report = inspect_card(make_card("默认", [greeting], entries=entries, name="白娅"), user="青空黎", zod_schema=schema)
    assert_native(report.namespace)
    assert report.namespace.definition["schema"]["properties"]["白娅"]["properties"]["着装"]["additionalProperties"] is False
    assert any(d.code == "mvu.rules.type_ignored" for d in report.namespace.diagnostics)
    opening = select_opening(report, "alternate", 0)
    assert_native(opening.namespace)
    assert opening.namespace.initial_value["白娅"]["依存度"] == 15


def test_tavern_sync_index_parses_with_non_ascii_anchors(mvu_corpus):
    parsed = parse_data((mvu_corpus / STAGEDOG / "index.yaml").read_text("utf-8"), Loc("index.yaml"))
    assert parsed.ok
    variables = next(group for group in parsed.value["条目"] if group.get("文件夹") == "变量")
    separator = variables["条目"][0]
    assert separator["名称"] == "===变量开始===" and separator["启用"] is False and separator["插入位置"]["顺序"] == 14720
    initvar = variables["条目"][1]
    assert initvar["名称"] == "[initvar]变量初始化勿开" and initvar["启用"] is False
