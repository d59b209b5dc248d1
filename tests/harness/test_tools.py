"""Tool registration, argument validation, stable error codes, trimming."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roleplay.errors import NotFoundError, RpError, ValidationError
from roleplay.harness.models.types import ToolCall
from roleplay.harness.tools import Tool, ToolContext, ToolOutput, ToolRegistry, trim

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1}, "count": {"type": "integer", "minimum": 0}},
    "required": ["name"],
    "additionalProperties": False,
}


def ctx() -> ToolContext:
    return ToolContext("ses", "turn", "step", "call")


def registry(handler: Any = None, **kw: Any) -> ToolRegistry:
    return ToolRegistry([Tool("greet", "Greets.", SCHEMA, handler or (lambda a, c: f"hi {a['name']}"), **kw)])


async def run(reg: ToolRegistry, args: str, name: str = "greet", visible: Any = None) -> Any:
    return await reg.execute(ToolCall("c1", name, args), ctx(), visible=visible)


def test_registration_checks_name_schema_and_duplicates() -> None:
    reg = registry()
    with pytest.raises(ValidationError) as exc:
        reg.register(Tool("greet", "again", SCHEMA, lambda a, c: ""))
    assert exc.value.code == "tool.duplicate"
    with pytest.raises(ValidationError) as exc:
        reg.register(Tool("bad name!", "x", SCHEMA, lambda a, c: ""))
    assert exc.value.code == "tool.invalid_name"
    with pytest.raises(ValidationError) as exc:
        reg.register(Tool("t2", "x", {"type": "object", "properties": {"a": {"type": "nope"}}}, lambda a, c: ""))
    assert exc.value.code == "tool.invalid_schema" and exc.value.pointer.startswith("/parameters")  # type: ignore[union-attr]
    with pytest.raises(ValidationError) as exc:
        reg.register(Tool("t3", "x", {"type": "string"}, lambda a, c: ""))
    assert exc.value.pointer == "/parameters/type"
    with pytest.raises(NotFoundError):
        reg.get("missing")
    assert reg.names() == ["greet"]


async def test_success_with_meta_and_plain_returns() -> None:
    result = await run(registry(lambda a, c: ToolOutput("done", meta={"kind": "x/y"})), '{"name": "A"}')
    assert (result.ok, result.content, result.meta, result.error) == (True, "done", {"kind": "x/y"}, None)
    result = await run(registry(lambda a, c: {"n": a["name"]}), '{"name": "A"}')
    assert result.content == '{"n": "A"}'

    async def async_handler(a: dict[str, Any], c: ToolContext) -> str:
        return c.call_id

    assert (await run(registry(async_handler), '{"name":"A"}')).content == "call"


@pytest.mark.parametrize(
    "args, code, pointer",
    [
        ("{not json", "tool.invalid_json", ""),
        ("[1, 2]", "tool.invalid_json", ""),
        ("{}", "tool.invalid_arguments", "/name"),
        ('{"name": ""}', "tool.invalid_arguments", "/name"),
        ('{"name": "a", "count": -1}', "tool.invalid_arguments", "/count"),
        ('{"name": "a", "extra": 1}', "tool.invalid_arguments", "/extra"),
    ],
)
async def test_invalid_arguments_never_reach_the_handler(args: str, code: str, pointer: str) -> None:
    calls: list[Any] = []
    result = await run(registry(lambda a, c: calls.append(a) or "x"), args)
    assert not result.ok and result.error["code"] == code and result.error.get("pointer") == pointer
    assert result.content.startswith(f"Error [{code}]") and calls == []


async def test_error_propagation_codes() -> None:
    def raises_rp(a: dict[str, Any], c: ToolContext) -> str:
        raise RpError("feature.nope", "the feature said no", pointer="/name")

    def raises_bug(a: dict[str, Any], c: ToolContext) -> str:
        raise KeyError("oops")

    r = await run(registry(raises_rp), '{"name":"a"}')
    assert r.error == {"code": "feature.nope", "message": "the feature said no", "pointer": "/name"}
    r = await run(registry(raises_bug), '{"name":"a"}')
    assert r.error["code"] == "tool.failed" and "KeyError" in r.error["message"]
    r = await run(registry(), '{"name":"a"}', name="ghost")
    assert r.error["code"] == "tool.unknown"
    r = await run(registry(), '{"name":"a"}', visible=["other"])
    assert r.error["code"] == "tool.not_available"
    r = await run(registry(lambda a, c: 42), '{"name":"a"}')
    assert r.error["code"] == "tool.failed"


async def test_timeout() -> None:
    async def slow(a: dict[str, Any], c: ToolContext) -> str:
        await asyncio.sleep(5)
        return "late"

    r = await run(registry(slow, timeout=0.05), '{"name":"a"}')
    assert r.error["code"] == "tool.timeout"


async def test_oversized_results_are_trimmed_with_a_marker() -> None:
    r = await run(registry(lambda a, c: "x" * 1000 + "END", max_result_chars=100), '{"name":"a"}')
    assert r.ok and r.meta == {"trimmed": 903}
    assert "903 characters trimmed" in r.content and r.content.endswith("END") and r.content.startswith("x" * 75)


def test_trim_blocks_and_short_text() -> None:
    assert trim("short", 10) == ("short", 0)
    blocks, cut = trim(
        [{"type": "text", "text": "a" * 8}, {"type": "image", "mediaType": "image/png", "data": ""}, {"type": "text", "text": "b" * 8}], 10
    )
    assert cut == 6 and blocks[0]["text"] == "a" * 8 and blocks[1]["type"] == "image" and blocks[2]["text"].startswith("bb")


def test_visible_sets_and_no_spawning_inside_subagents() -> None:
    reg = ToolRegistry(
        [
            Tool("a", "", {"type": "object"}, lambda x, c: ""),
            Tool("spawn", "", {"type": "object"}, lambda x, c: "", spawns_subagent=True),
        ]
    )
    assert [t.name for t in reg.visible()] == ["a", "spawn"]
    assert [t.name for t in reg.visible(["spawn", "missing"])] == ["spawn"]
    assert [t.name for t in reg.visible(depth=1)] == ["a"]
    assert reg.visible([]) == []


async def test_the_run_s_deps_reach_the_handler_untouched() -> None:
    lent = object()
    seen: list[object] = []
    reg = registry(lambda a, c: seen.append(c.deps) or "ok")
    await reg.execute(ToolCall("c1", "greet", '{"name": "A"}'), ToolContext("ses", "turn", "step", "c1", deps=lent))
    await run(reg, '{"name": "B"}')  # a plain chat run lends nothing
    assert seen[0] is lent and seen[1] is None
