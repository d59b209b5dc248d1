"""The EJS subset parser: template splitting, slurping, statements and refused syntax."""

import pytest

from roleplay.compat.mvu.ejs import (
    Binary,
    Call,
    If,
    Lit,
    Member,
    Name,
    Output,
    TemplateSyntaxError,
    Text,
    parse_template,
    split_template,
)


def test_whitespace_slurping_follows_ejs():
    pieces = split_template("a\n  <%_ if (x) { _%>\n  b\n<%_ } _%>\nc")
    assert pieces[0] == ("text", "a\n", 0)
    assert [p[0] for p in pieces] == ["text", "code", "text", "code", "text"]
    assert pieces[2][1] == "  b\n" and pieces[4][1] == "c"


def test_literal_percent_tag_and_comments():
    assert parse_template("<%% x %%> <%# note %>y")[0].text.startswith("<% x")


def test_if_else_if_else_tree():
    tree = parse_template("<% if (a < 1) { %>A<% } else if (a >= 2 && !b) { %>B<% } else { %>C<% } %>")
    (node,) = tree
    assert isinstance(node, If) and len(node.branches) == 2 and node.otherwise == [Text("C")]
    cond = node.branches[1][0]
    assert isinstance(cond, Binary) and cond.op == "&&"


def test_member_access_calls_and_output():
    (out,) = parse_template('<%= getvar("stat_data").理["好感度"][0] %>')
    assert isinstance(out, Output)
    expr = out.expr
    assert isinstance(expr, Member) and expr.key == Lit(0)
    assert isinstance(expr.target.target.target, Call) and expr.target.target.target.callee == Name("getvar", 4)


@pytest.mark.parametrize(
    "source",
    [
        "<% x = 1 %>",
        "<%= a ? b : c %>",
        "<%= 1 + 2 %>",
        "<% for (;;) {} %>",
        "<%= `${x}` %>",
        "<% if (a) { %>",
        "<% } %>",
        "<% if (a) { %><% } else { %><% } else { %><% } %>",
        "text <% unterminated",
        "<%= new Date() %>",
        "<% items.forEach(i => i) %>",
    ],
)
def test_syntax_outside_the_subset_is_refused(source):
    with pytest.raises(TemplateSyntaxError):
        parse_template(source)


def test_write_calls_are_named_as_writes():
    with pytest.raises(TemplateSyntaxError) as info:
        parse_template("<%_ setLocalVar('x', true); _%>")
    assert info.value.code == "mvu.template.write_forbidden"
