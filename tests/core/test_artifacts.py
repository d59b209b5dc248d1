"""Artifact generators: ordered, fed the frozen final body, and never able to block a commit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roleplay.core.artifacts import ArtifactGenerator, ArtifactInput, ArtifactRegistry
from roleplay.core.run_context import RpRunDeps
from roleplay.core.types import CommitContext
from roleplay.errors import RpError, ValidationError

pytestmark = pytest.mark.anyio

CTX = CommitContext("run1", "turn1", "ses1", "chat", "ep", None, {}, {})
DEPS = RpRunDeps(mode="chat")
OPTIONS_SCHEMA = {"type": "object", "properties": {"options": {"type": "array", "items": {"type": "string"}}}, "required": ["options"]}


async def run(*gens: ArtifactGenerator, extensions: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Any]]:
    return await ArtifactRegistry(gens).run("最终正文", CTX, [{"kind": "state.update"}], extensions or {}, DEPS)


async def test_generators_run_in_order_and_see_earlier_outputs() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def first(view: ArtifactInput) -> Any:
        seen.append(("first", dict(view.extensions)))
        return {"options": ["a"]}

    async def second(view: ArtifactInput) -> Any:
        seen.append(("second", dict(view.extensions)))
        assert view.body == "最终正文" and view.commit is CTX and view.effects == ({"kind": "state.update"},) and view.run is DEPS
        return ["b"]

    final, diagnostics = await run(ArtifactGenerator("rp.first", first, OPTIONS_SCHEMA), ArtifactGenerator("rp.second", second))
    assert final == {"rp.first": {"options": ["a"]}, "rp.second": ["b"]}
    assert diagnostics == []
    assert seen == [("first", {}), ("second", {"rp.first": {"options": ["a"]}})]


async def test_the_input_cannot_be_mutated_by_a_generator() -> None:
    def sneaky(view: ArtifactInput) -> Any:
        view.extensions["rp.other"] = 1  # type: ignore[index]

    final, diagnostics = await run(ArtifactGenerator("rp.sneaky", sneaky))
    assert final == {} and [d.code for d in diagnostics] == ["artifact.crashed"]


async def test_none_means_nothing_to_add() -> None:
    final, diagnostics = await run(ArtifactGenerator("rp.quiet", lambda view: None))
    assert final == {} and diagnostics == []


async def test_a_generator_owns_its_key() -> None:
    final, _ = await run(
        ArtifactGenerator("rp.reply-options", lambda view: {"options": ["新"]}),
        extensions={"rp.reply-options": {"options": ["旧"]}, "rp.keep": 1},
    )
    assert final == {"rp.reply-options": {"options": ["新"]}, "rp.keep": 1}


async def slow(view: ArtifactInput) -> Any:
    await asyncio.sleep(10)


def fails(view: ArtifactInput) -> Any:
    raise RpError("subagent.structured_failed", "bad output")


def crashes(view: ArtifactInput) -> Any:
    raise KeyError("bug")


@pytest.mark.parametrize(
    ("gen", "code"),
    [
        (ArtifactGenerator("rp.x", fails), "artifact.failed"),
        (ArtifactGenerator("rp.x", slow, timeout=0.01), "artifact.timeout"),
        (ArtifactGenerator("rp.x", crashes), "artifact.crashed"),
        (ArtifactGenerator("rp.x", lambda v: {"options": [1]}, OPTIONS_SCHEMA), "artifact.invalid"),
        (ArtifactGenerator("rp.x", lambda v: {"options": ["很长" * 100]}, max_bytes=64), "artifact.too_large"),
        (ArtifactGenerator("rp.x", lambda v: {"n": float("nan")}), "artifact.invalid"),
        (ArtifactGenerator("rp.x", lambda v: {"s": {1, 2}}), "artifact.invalid"),
    ],
)
async def test_an_ordinary_failure_is_a_diagnostic_and_drops_only_that_extension(gen: ArtifactGenerator, code: str) -> None:
    ok = ArtifactGenerator("rp.ok", lambda view: ["fine"])
    final, diagnostics = await run(gen, ok, extensions={"rp.x": "parent value"})
    assert final == {"rp.ok": ["fine"]}
    assert [d.code for d in diagnostics] == [code]
    assert diagnostics[0].source_id == "rp.x"


async def test_failed_diagnostics_carry_the_error() -> None:
    _, (diagnostic,) = await run(ArtifactGenerator("rp.x", fails))
    assert diagnostic.details["error"]["code"] == "subagent.structured_failed"


async def test_an_invalid_value_names_where() -> None:
    _, (diagnostic,) = await run(ArtifactGenerator("rp.x", lambda v: {"options": ["a", 2]}, OPTIONS_SCHEMA))
    assert diagnostic.details == {"pointer": "/options/1"}


async def test_cancellation_propagates() -> None:
    async def cancelled(view: ArtifactInput) -> Any:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await run(ArtifactGenerator("rp.x", cancelled))


def test_registration_is_checked() -> None:
    registry = ArtifactRegistry([ArtifactGenerator("rp.a", lambda v: None)])
    for gen, code in [
        (ArtifactGenerator("rp.a", lambda v: None), "artifacts.duplicate"),
        (ArtifactGenerator("", lambda v: None), "artifacts.invalid_key"),
        (ArtifactGenerator("rp.b", lambda v: None, {"type": 7}), "artifacts.invalid_schema"),
    ]:
        with pytest.raises(ValidationError) as caught:
            registry.register(gen)
        assert caught.value.code == code
    assert registry.keys() == ["rp.a"]
