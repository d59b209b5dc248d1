"""MVU command grammar and JSON Patch dialect (mvu.md §2.6, §2.7, §2.10 and the peer tests)."""

from roleplay.compat.mvu.commands import (
    UNDEFINED,
    extract_commands,
    parse_value,
    split_arguments,
)
from roleplay.compat.mvu.diagnostics import Loc

L = Loc("greeting")


def cmds(text):
    commands, problems = extract_commands(text, L)
    return commands, [p.code for p in problems]


def test_set_with_reason_keeps_raw_arguments():
    (c,), codes = cmds("_.set('name', 'John', 'Jane');//更新名字")
    assert (c.kind, c.args, c.reason) == ("set", ["'name'", "'John'", "'Jane'"], "更新名字")
    assert codes == []


def test_missing_semicolon_or_arguments_drop_the_command_with_a_diagnostic():
    assert cmds("_.set('name', 'old', 'new')") == ([], ["mvu.command.missing_semicolon"])
    assert cmds("_.set('name', 'old') ;") == ([], ["mvu.command.missing_semicolon"])
    assert cmds("_.set('a', 1）；") == ([], ["mvu.command.unclosed"])
    assert cmds("_.set('name');//只有一个参数") == ([], ["mvu.command.arity"])
    assert cmds("_.add('a', 1, 2);") == ([], ["mvu.command.arity"])


def test_nested_parentheses_and_quotes():
    (c,), _ = cmds("_.set('data', {arr: [1, 2, {nested: \"value)}\"}]}, {arr: [3, 4]});//更新数据")
    assert parse_value(c.args[1])[0] == {"arr": [1, 2, {"nested": "value)}"}]}
    (c,), _ = cmds("_.set('path', \"value with \\\"quotes\\\"\", 'new value');")
    assert parse_value(c.args[1])[0] == 'value with "quotes"'


def test_reason_comment_may_sit_on_the_next_line_as_in_mvu():
    (c,), _ = cmds("_.set('a', 1);\n  // 理由")
    assert c.reason == "理由"


def test_aliases_and_retired_names():
    commands, codes = cmds(
        "_.assign('', '新角色', {});_.remove('a');_.unset('b');_.delete('c');_.insert('d', 1);_.move('a', 'b');_.alter('x', 1);"
    )
    assert [(c.kind, c.name) for c in commands] == [
        ("insert", "assign"),
        ("delete", "remove"),
        ("delete", "unset"),
        ("delete", "delete"),
        ("insert", "insert"),
    ]
    assert commands[0].args == ["''", "'新角色'", "{}"]
    assert codes == ["mvu.command.retired", "mvu.command.retired"]


def test_json_patch_dialect_in_position_order():
    text = '_.set(\'x\', 1);\n<JSONPatch>\n```json\n[{"op": "delta", "path": "/测试", "value": 10},\n{"op": "insert", "path": "主角/物品/-", "value": "刀"},\n{"op": "move", "from": "/a", "to": "/b"},\n{"op": "copy", "from": "/a", "path": "/c"}]\n```\n</JSONPatch>\n_.add(\'y\', 2);'
    commands, codes = cmds(text)
    assert [(c.kind, c.origin) for c in commands] == [
        ("set", "command"),
        ("add", "json_patch"),
        ("insert", "json_patch"),
        ("move", "json_patch"),
        ("add", "command"),
    ]
    assert commands[2].args == ["主角/物品/-"] and codes == ["mvu.patch.op_unsupported"]


def test_patch_without_brackets_and_lowercase_tag():
    commands, _ = cmds('<json_patch>\n{"op": "replace", "path": "/a", "value": 1}\n{"op": "remove", "path": "/b"}\n</json_patch>')
    assert [c.kind for c in commands] == ["set", "delete"]


def test_unreadable_patch_is_reported():
    commands, codes = cmds("<JSONPatch>not json at all</JSONPatch>")
    assert commands == [] and "mvu.patch.parse_failed" in codes


def test_values_follow_mvu_zod_without_math():
    assert parse_value("'hello'") == ("hello", None)
    assert parse_value('"09:15"') == ("09:15", None)
    assert parse_value("10:45") == ("10:45", None)
    assert parse_value("2000-01-01") == ("2000-01-01", None)
    assert parse_value("10 + 2") == ("10 + 2", "arithmetic is not evaluated; the value stays text")
    assert parse_value("开心") == ("开心", None)
    assert parse_value("“开心”") == ("“开心”", None)
    assert parse_value("[75, '描述']") == ([75, "描述"], None)
    assert parse_value("null") == (None, None) and parse_value("undefined")[0] is UNDEFINED
    assert parse_value("{foo: 'bar',}") == ({"foo": "bar"}, None)


def test_argument_splitting_respects_brackets_and_quotes():
    assert split_arguments("'a,b', [1, 2], {x: (1, 2)}, \"c\"") == ["'a,b'", "[1, 2]", "{x: (1, 2)}", '"c"']
    # Chinese quotes are not quotes for MVU: the comma inside splits.
    assert split_arguments("'a', “x，y”, “p,q”") == ["'a'", "“x，y”", "“p", "q”"]


def test_hostile_unclosed_blocks_and_commands_take_linear_time():
    import time

    for text in ("<jsonpatch>```" * 2_000, "_.set('a', ((" * 2_500, "<JSONPatch>\n" + "_.set(" * 4_000):
        start = time.perf_counter()
        commands, problems = extract_commands(text, L)
        # The backtracking regex / per-command scan takes tens of seconds here; this catches that.
        assert time.perf_counter() - start < 2
        assert commands == []
    assert {p.code for p in problems} == {"mvu.command.unclosed"}


def test_a_patch_block_after_many_unclosed_openers_is_still_found():
    text = "<jsonpatch>```" * 300 + '\n<jsonpatch>\n[{"op": "replace", "path": "/a", "value": 1}]\n</jsonpatch>'
    (c,), _codes = cmds(text)
    assert (c.kind, c.args, c.line) == ("set", ["/a"], 2)
