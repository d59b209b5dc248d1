"""Command paths (lodash after MVU's pathFix), patch pointers and semantic rule keys."""

import pytest

from roleplay.compat.mvu.paths import (
    PathError,
    Segment,
    command_tokens,
    patch_tokens,
    rule_segments,
    split_lodash,
)


@pytest.mark.parametrize(
    "path,tokens",
    [
        ('foo."bar".baz', ["foo", "bar", "baz"]),
        ("root.'字段 名'.子", ["root", "字段 名", "子"]),
        ("foo['123']", ["foo", "123"]),
        ("foo[  12  ]", ["foo", "12"]),
        ("武器栏['衔尾蛇']", ["武器栏", "衔尾蛇"]),
        ("弹药系统[7.62mm ETC弹匣]", ["弹药系统", "7.62mm ETC弹匣"]),
        (
            '测试员."物品&装备".武器栏[衔尾蛇OICW原型].弹药系统[ 7.62mm ETC弹匣 ].载弹量',
            ["测试员", "物品&装备", "武器栏", "衔尾蛇OICW原型", "弹药系统", "7.62mm ETC弹匣", "载弹量"],
        ),
        ("理.好感度.[0]", ["理", "好感度", "0"]),
        ("foo[bar baz].x", ["foo", "bar baz", "x"]),
        ("", []),
    ],
)
def test_lodash_paths(path, tokens):
    assert split_lodash(path) == tokens


@pytest.mark.parametrize("path", ["a..b", ".a", "a.", "a[", "a[]", "a['x]"])
def test_malformed_paths_are_refused(path):
    with pytest.raises(PathError):
        split_lodash(path)


def test_command_paths_strip_quotes_and_the_stat_data_prefix():
    assert command_tokens("'stat_data.白娅.依存度'") == (["白娅", "依存度"], True)
    assert command_tokens('"悠纪.好感度[0]"') == (["悠纪", "好感度", "0"], False)


def test_patch_paths_take_an_optional_leading_slash():
    assert patch_tokens("/主角/持有物品/-") == ["主角", "持有物品", "-"]
    assert patch_tokens("主角/备忘录/楼道露出任务") == ["主角", "备忘录", "楼道露出任务"]
    assert patch_tokens("/a~1b/c~0d") == ["a/b", "c~d"]
    assert patch_tokens("/") == []


def test_rule_keys_with_alternatives_and_wildcards():
    assert rule_segments("着装.${上装|下装}") == [Segment("key", ("着装",)), Segment("any", ("上装", "下装"), "")]
    assert rule_segments("${部位: 头 | 身}") == [Segment("any", ("头", "身"), "部位")]
    assert rule_segments("${角色}.好感度") == [Segment("wild", (), "角色"), Segment("key", ("好感度",))]
    assert rule_segments("物品栏.*") == [Segment("key", ("物品栏",)), Segment("wild", (), "*")]
    assert rule_segments("上装 | 下装") == [Segment("any", ("上装", "下装"), "")]
    assert rule_segments("a[0].b") == [Segment("key", ("a",)), Segment("key", ("0",)), Segment("key", ("b",))]


@pytest.mark.parametrize("key", ["", "${a", "x${a}", "${}", "a|"])
def test_bad_rule_keys(key):
    with pytest.raises(PathError):
        rule_segments(key)
