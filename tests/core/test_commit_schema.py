"""The ``rp_commit_turn`` schema: live derivation from the registries, full/retry exclusivity, and
schema failures mapped to precise pointers through discriminated unions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from roleplay.core.commit_schema import (
    MAX_RETRY_PATCHES,
    commit_schema,
    conditional_schema,
    effect_items_schema,
    retry_schema,
    schema_problems,
)
from roleplay.core.effects import (
    EffectCapability,
    EffectCheck,
    EffectRegistry,
    ExtensionCapability,
    ExtensionRegistry,
)
from roleplay.core.commit import commit_tool
from roleplay.harness.models.deepseek import DEEPSEEK_CAPABILITIES
from roleplay.harness.models.openai_compat import OpenAICompatModel
from roleplay.harness.models.types import Capabilities, ChatMessage, ModelRequest, complete
from roleplay.harness.models.wire import tools_to_wire
from roleplay.harness.tools import Tool, ToolRegistry
from roleplay.state import state_update_tool_schema
from roleplay.testing.fake_openai import declaration_error, serve_fake_openai
from tests_support import state_effect_registry

STATE_EFFECT = {
    "kind": "state.update",
    "namespace": "story",
    "expectedRevision": 1,
    "payload": {"changes": [{"op": "increment", "path": "/a", "by": 1, "reason": "r"}]},
}
FULL = {"references": {"writer": "call_w"}, "effects": [STATE_EFFECT]}
RETRY = {"retry": {"token": "rct_x", "patches": [{"op": "remove", "path": "/effects/0"}]}}


def inventory() -> EffectCapability:
    schema = {
        "type": "object",
        "properties": {"kind": {"const": "inventory.add"}, "item": {"type": "string"}},
        "required": ["kind", "item"],
        "additionalProperties": False,
    }
    return EffectCapability("inventory.add", schema, lambda items, ctx: EffectCheck(effects=[i.effect for i in items]))


def valid(schema: dict[str, Any], instance: Any) -> bool:
    return Draft202012Validator(schema).is_valid(instance)


def test_the_union_is_derived_from_the_registered_capabilities() -> None:
    registry = state_effect_registry()
    before = commit_schema(registry)
    assert before["oneOf"][0]["properties"]["effects"]["items"]["oneOf"] == [state_update_tool_schema()]
    assert not valid(before, {**FULL, "effects": [{"kind": "inventory.add", "item": "剑"}]})

    revision = registry.revision
    registry.register(inventory())
    after = commit_schema(registry)
    assert registry.revision == revision + 1
    assert [b["properties"]["kind"]["const"] for b in after["oneOf"][0]["properties"]["effects"]["items"]["oneOf"]] == [
        "state.update",
        "inventory.add",
    ]
    assert valid(after, {**FULL, "effects": [STATE_EFFECT, {"kind": "inventory.add", "item": "剑"}]})


def test_full_and_retry_are_mutually_exclusive() -> None:
    schema = commit_schema(state_effect_registry())
    assert valid(schema, FULL)
    assert valid(schema, RETRY)
    assert not valid(schema, {**FULL, **RETRY})
    assert not valid(schema, {"retry": RETRY["retry"], "summary": "x"})
    assert not valid(schema, {})
    assert not valid(schema, {"references": {"writer": "call_w"}})  # effects are required (may be empty)
    assert valid(schema, {"references": {"writer": "call_w"}, "effects": []})


def test_every_object_is_closed() -> None:
    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, where
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    registry = state_effect_registry()
    registry.register(inventory())
    walk(commit_schema(registry), "")


def test_retry_limits_are_declared() -> None:
    patches = retry_schema()["properties"]["retry"]["properties"]["patches"]
    assert patches["maxItems"] == MAX_RETRY_PATCHES == 64
    assert patches["items"]["properties"]["op"] == {"enum": ["add", "replace", "remove"]}


def test_without_capabilities_no_effect_is_accepted_and_the_schema_stays_valid() -> None:
    empty = EffectRegistry()
    assert effect_items_schema(empty) == {"type": "array", "maxItems": 0}
    schema = commit_schema(empty)
    Draft202012Validator.check_schema(schema)
    assert valid(schema, {"references": {"writer": "w"}, "effects": []})
    assert not valid(schema, FULL)


def test_extensions_are_declared_only_while_registered() -> None:
    assert "extensions" not in commit_schema(state_effect_registry(), ExtensionRegistry())["oneOf"][0]["properties"]
    ext = ExtensionRegistry([ExtensionCapability("rp.tag", {"type": "string", "maxLength": 5}, lambda v, c, p: EffectCheck())])
    schema = commit_schema(state_effect_registry(), ext)
    assert valid(schema, {**FULL, "extensions": {"rp.tag": "晴"}})
    assert not valid(schema, {**FULL, "extensions": {"rp.tag": "too long"}})
    assert not valid(schema, {**FULL, "extensions": {"rp.other": 1}})


def test_the_schema_is_a_valid_tool_declaration() -> None:
    schema = commit_schema(state_effect_registry())
    registry = ToolRegistry([Tool("rp_commit_turn", "commit", schema, lambda args, ctx: "ok")])
    assert registry.get("rp_commit_turn").spec().parameters is schema


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ({**FULL, "extra": 1}, {"/extra"}),
        ({"effects": []}, {"/references"}),
        ({**FULL, "effects": [{"kind": "nope"}]}, {"/effects/0/kind"}),
        ({**FULL, "effects": [{"item": "x"}]}, {"/effects/0/kind"}),
        ({**FULL, "effects": [{**STATE_EFFECT, "namespace": 3}]}, {"/effects/0/namespace"}),
        (
            {**FULL, "effects": [{**STATE_EFFECT, "payload": {"changes": [{"op": "increment", "path": "/a", "by": "x", "reason": "r"}]}}]},
            {"/effects/0/payload/changes/0/by"},
        ),
        (
            {**FULL, "effects": [{**STATE_EFFECT, "payload": {"changes": [{"op": "merge", "path": "/a", "reason": "r"}]}}]},
            {"/effects/0/payload/changes/0/op"},
        ),
        (
            {**FULL, "effects": [{**STATE_EFFECT, "payload": {"changes": [{"op": "set", "path": "/a", "reason": "r"}]}}]},
            {"/effects/0/payload/changes/0/value"},
        ),
    ],
)
def test_schema_problems_point_into_the_branch_the_instance_names(instance: Any, expected: set[str]) -> None:
    full = commit_schema(state_effect_registry())["oneOf"][0]
    problems = schema_problems(full, instance)
    assert {p.pointer for p in problems} == expected
    assert all(p.code == "commit.invalid_arguments" for p in problems)


def test_every_extra_property_gets_its_own_pointer_and_keys_are_escaped() -> None:
    full = commit_schema(state_effect_registry())["oneOf"][0]
    problems = schema_problems(full, {**FULL, "a/b": 1, "c~d": 2})
    assert sorted(p.pointer for p in problems) == ["/a~1b", "/c~0d"]


def test_an_undiscriminated_union_falls_back_to_the_plain_error() -> None:
    schema = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    (problem,) = schema_problems(schema, [], prefix="/x")
    assert problem.pointer == "/x" and problem.details["keyword"] == "oneOf"


SAMPLES: list[Any] = [
    FULL,
    RETRY,
    {**FULL, **RETRY},
    {"retry": RETRY["retry"], "summary": "x"},
    {},
    {"references": {"writer": "w"}},
    {"references": {"writer": "w"}, "effects": []},
    {**FULL, "summary": "s", "body": "b"},
    {**FULL, "summary": 3},
    {**FULL, "extra": 1},
    {**FULL, "effects": [{"kind": "inventory.add", "item": "剑"}]},
    {**FULL, "effects": [{"kind": "nope"}]},
    {"retry": {"token": "t", "patches": []}},
    {"retry": {"token": "t", "patches": [{"op": "move", "path": "/a"}]}},
    {"retry": {"token": "t", "patches": [{"op": "add", "path": "/a", "value": 1}] * 65}},
    {"retry": {"token": "t"}},
    {"retry": "t"},
    {**FULL, "extensions": {"rp.tag": "晴"}},
    {**FULL, "extensions": {"rp.tag": "too long"}},
    [],
    "text",
]


def test_the_conditional_form_accepts_exactly_what_the_one_of_form_accepts() -> None:
    registry = state_effect_registry()
    registry.register(inventory())
    ext = ExtensionRegistry([ExtensionCapability("rp.tag", {"type": "string", "maxLength": 5}, lambda v, c, p: EffectCheck())])
    one_of, conditional = commit_schema(registry, ext), conditional_schema(registry, ext)
    Draft202012Validator.check_schema(conditional)
    assert not {"oneOf", "anyOf", "allOf", "enum", "not"} & set(conditional)
    verdicts = [(valid(one_of, x), valid(conditional, x)) for x in SAMPLES]
    assert all(a == b for a, b in verdicts), [x for x, (a, b) in zip(SAMPLES, verdicts) if a != b]
    assert sum(a for a, _ in verdicts) == 6  # the samples exercise both answers


# -- the declaration a provider receives --------------------------------------------------------------


def test_the_raw_union_is_refused_by_openai_style_providers_and_the_wire_form_is_not() -> None:
    registry = state_effect_registry()
    registry.register(inventory())
    tool = commit_tool(registry)
    raw = tools_to_wire([tool.spec()], Capabilities(accepts_root_combinators=True))
    assert declaration_error(raw, "openai") is not None  # what every run used to send
    for caps in (Capabilities(), DEEPSEEK_CAPABILITIES):
        (wired,) = tools_to_wire([tool.spec()], caps)
        assert declaration_error([wired], "openai") is None and declaration_error([wired], "deepseek") is None
        declared = wired["function"]["parameters"]
        Draft202012Validator.check_schema(declared)
        # The declaration never refuses a commit the union accepts; the tool validates the rest.
        union = tool.parameters
        assert all(valid(declared, x) for x in SAMPLES if valid(union, x))
        assert "references, effects" in declared["description"] and "retry" in declared["description"]
        assert tool.parameters is union and "oneOf" in union  # validation keeps the full union


def test_the_commit_tool_goes_through_the_real_provider_path_to_an_openai_style_server() -> None:
    tool = commit_tool(state_effect_registry())
    request = ModelRequest([ChatMessage("user", "继续")], tools=[tool.spec()])

    async def send(base_url: str) -> str:
        model = OpenAICompatModel(model="gpt-4o-mini", base_url=base_url, api_key="sk-test")
        try:
            return (await complete(model, request)).text
        finally:
            await model.aclose()

    with serve_fake_openai(flavor="openai", strict=True) as fake:
        fake.enqueue("好的。")
        assert asyncio.run(send(fake.base_url)) == "好的。"
    sent = fake.chat_requests[0].body["tools"][0]["function"]
    assert sent["name"] == "rp_commit_turn" and sent["parameters"]["type"] == "object" and "oneOf" not in sent["parameters"]
