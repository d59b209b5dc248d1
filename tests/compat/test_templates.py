"""Read-only template evaluation at activation: aliases, pair view, macros, fail-closed refusals."""

from compat.mvu_support import EXAMPLE_CARD, LILI

from roleplay.assets.cards import import_card_bytes
from roleplay.compat.mvu.diagnostics import Loc
from roleplay.compat.mvu.sources import read_card
from roleplay.compat.mvu.templates import (
    TemplateHook,
    expand_variable_macros,
    js_string,
    pair_view,
    render_template,
    to_yaml,
)

STORY = {"白娅": {"依存度": 35, "$隐藏": 1}, "时间": "10:45", "列表": [1, 2]}


def render(text, story=STORY, **kw):
    return render_template(text, story, loc=Loc("entry", "/entries/1/content", "角色阶段"), **kw)


def test_getvar_conditions_choose_the_branch():
    text = "<%_ if (getvar('stat_data.白娅.依存度') < 20) { _%>\n低\n<%_ } else if (getvar('display_data.白娅.依存度') < 40) { _%>\n中\n<%_ } else { _%>\n高\n<%_ } _%>\n"
    assert render(text).text == "中\n"
    assert render(text, {"白娅": {"依存度": 90}}).text == "高\n"


def test_defaults_missing_values_and_js_semantics():
    assert (
        render("<%= getvar('stat_data.无', {defaults: 0}) %>|<%= getvar('stat_data.无') %>|<%= getvar('stat_data.列表') %>").text
        == "0||1,2"
    )
    assert render("<% if (getvar('stat_data.无') !== undefined) { %>x<% } else { %>y<% } %>").text == "y"
    assert render("<% if (getvar('stat_data.时间') == '10:45' && !getvar('stat_data.无')) { %>ok<% } %>").text == "ok"
    assert render("<% if (getvar('stat_data.无') < 5 || getvar('stat_data.无') >= 5) { %>x<% } %>").text == ""
    assert js_string(2.0) == "2" and js_string({"a": 1}) == "[object Object]" and js_string(None) == ""


def test_pair_view_restores_value_with_description_for_old_cards():
    story = {"理": {"好感度": 25}}
    vwd = {"/理/好感度": "desc"}
    assert pair_view(story, vwd) == {"理": {"好感度": [25, "desc"]}}
    text = '<% if (_.has(getvar("stat_data"), \'理.好感度.[0]\')) {%><% if (getvar("stat_data").理["好感度"][0] >= 20 && getvar("stat_data").理["好感度"][0] < 40) { %>二阶段<% } %><% } %>'
    assert render(text, story, vwd=vwd).text == "二阶段"
    assert render(text, story).text == ""


def test_getwi_renders_the_named_entry():
    entries = {"天气-晴天": "晴<%= getvar('stat_data.时间') %>"}
    assert render("<% print(await getwi('天气-晴天')) %>!", lookup=entries.get).text == "晴10:45!"
    missing = render("<%= getwi('无') %>", lookup=entries.get)
    assert not missing.ok and missing.diagnostics[0].code == "mvu.template.getwi_missing"


def test_variable_macros_hide_dollar_keys_and_indent_yaml():
    text = "<status>\n  {{format_message_variable::stat_data.白娅}}\n</status>|{{get_message_variable::stat_data.白娅}}|{{get_message_variable::stat_data.时间}}"
    out = expand_variable_macros(text, {"stat_data": {"白娅": {"依存度": 35, "$隐藏": 1, "着装": {"上装": "a"}}, "时间": "10:45"}})
    assert out == '<status>\n  依存度: 35\n  着装:\n    上装: a\n</status>|{"依存度":35,"着装":{"上装":"a"}}|10:45'


def test_yaml_rendering_quotes_only_when_needed():
    assert (
        to_yaml({"a": "10:45", "b": "true", "c": "x: y", "d": "多\n行", "e": [1, {"f": None}]})
        == 'a: 10:45\nb: "true"\nc: "x: y"\nd: |-\n  多\n  行\ne:\n  - 1\n  - f: null'
    )


def test_refusals_fail_closed_with_located_diagnostics():
    for text, code in (
        ("a\n<% setvar('x', 1) %>", "mvu.template.write_forbidden"),
        ("<%= getvar('x.y') %>", "mvu.template.scope_forbidden"),
        ("<%= getvar('stat_data.a', {scope: 'global'}) %>", "mvu.template.scope_forbidden"),
        ("<%= foo('x') %>", "mvu.template.call_forbidden"),
        ("<%= _.filter(getvar('stat_data.列表'), 'x') %>", "mvu.template.call_forbidden"),
        ("<%= window %>", "mvu.template.unknown_name"),
        ("<%= getvar(key) %>", "mvu.template.not_literal"),
        ("<%= getvar('stat_data.无').x %>", "mvu.template.undefined_access"),
    ):
        result = render(text)
        assert not result.ok and result.text is None
        assert result.diagnostics[0].code == code, text
        assert result.diagnostics[0].details["entry"] == "角色阶段"
    assert render("a\n<% setvar('x', 1) %>").diagnostics[0].details["line"] == 2


def test_hook_passes_plain_text_and_blanks_failed_entries():
    hook = TemplateHook(STORY, entries={"t": "T"})
    assert hook("plain {{user}}") == "plain {{user}}"
    assert hook("<%= getvar('stat_data.时间') %>") == "10:45"
    assert hook("<% eval('x') %>") == "" and hook.diagnostics[0].code == "mvu.template.unsupported"


def test_example_card_stage_entry(mvu_corpus):
    card, _ = read_card(import_card_bytes((mvu_corpus / EXAMPLE_CARD).read_bytes()))
    stage = next(e for e in card.books[0].entries if e.title == "角色阶段")
    low = render_template(stage.content, {"白娅": {"依存度": 15}})
    high = render_template(stage.content, {"白娅": {"依存度": 95}})
    assert low.ok and "消极自毁" in low.text and "渴求注视" not in low.text and "依存度为15" in low.text
    assert high.ok and "柔软依存" in high.text and "<%" not in high.text


def test_lili_affection_stages(mvu_corpus):
    text = (mvu_corpus / LILI / "变量分阶段-好感度.md").read_text("utf-8")
    vwd = {"/理/好感度": "好感度"}
    stages = [render_template(text, {"理": {"好感度": v}}, vwd=vwd) for v in (-10, 30, 95)]
    assert all(s.ok for s in stages)
    assert len({s.text for s in stages}) == 3
