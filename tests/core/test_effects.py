"""Effect and extension capability registries (core defines no capability: ``state.update`` is the
state domain's, ``tests/state/test_effect.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from roleplay.core.effects import (
    EffectCapability,
    EffectCheck,
    EffectRegistry,
    ExtensionCapability,
    ExtensionRegistry,
)
from roleplay.state.effect import state_update_capability
from roleplay.errors import ValidationError
from roleplay.state import (
    state_update_tool_schema,
)


def noop_capability(kind: str = "inventory.add", **schema_over: Any) -> EffectCapability:
    schema = {"type": "object", "properties": {"kind": {"const": kind}}, "required": ["kind"], "additionalProperties": False, **schema_over}
    return EffectCapability(kind, schema, lambda items, ctx: EffectCheck(effects=[i.effect for i in items]))


# -- registries -----------------------------------------------------------------------------------


def test_a_registry_holds_state_update_with_the_state_schema() -> None:
    registry = EffectRegistry([state_update_capability()])
    assert registry.kinds() == ["state.update"]
    assert registry.get("state.update").schema == state_update_tool_schema()  # type: ignore[union-attr]
    assert "state.update" in registry and "x" not in registry


@pytest.mark.parametrize(
    ("cap", "code", "pointer"),
    [
        (EffectCapability("", {"type": "object"}, lambda i, c: EffectCheck()), "effects.invalid_kind", "/kind"),
        (EffectCapability("x", {"type": "array"}, lambda i, c: EffectCheck()), "effects.invalid_schema", "/schema"),
        (
            EffectCapability(
                "x",
                {"type": "object", "properties": {"kind": {"const": "x"}}, "required": ["kind"], "minProperties": -1},
                lambda i, c: EffectCheck(),
            ),
            "effects.invalid_schema",
            "/schema/minProperties",
        ),
        (
            EffectCapability(
                "x", {"type": "object", "properties": {"kind": {"const": "y"}}, "required": ["kind"]}, lambda i, c: EffectCheck()
            ),
            "effects.invalid_schema",
            "/schema/properties/kind/const",
        ),
        (
            EffectCapability("x", {"type": "object", "properties": {"kind": {"const": "x"}}}, lambda i, c: EffectCheck()),
            "effects.invalid_schema",
            "/schema/required",
        ),
        (state_update_capability(), "effects.duplicate", "/kind"),
    ],
)
def test_registration_is_checked(cap: EffectCapability, code: str, pointer: str) -> None:
    registry = EffectRegistry([state_update_capability()])
    revision = registry.revision
    with pytest.raises(ValidationError) as caught:
        registry.register(cap)
    assert (caught.value.code, caught.value.pointer) == (code, pointer)
    assert registry.revision == revision and registry.kinds() == ["state.update"]


def test_registration_order_is_kept() -> None:
    registry = EffectRegistry([noop_capability("b.one"), noop_capability("a.two")])
    assert registry.kinds() == ["b.one", "a.two"] and registry.revision == 2


def test_extension_registry_rules() -> None:
    ext = ExtensionRegistry([ExtensionCapability("rp.tag", {"type": "string"}, lambda v, c, p: EffectCheck())])
    assert ext.keys() == ["rp.tag"] and "rp.tag" in ext and ext.revision == 1
    for cap, code in [
        (ExtensionCapability("rp.tag", {"type": "string"}, lambda v, c, p: EffectCheck()), "extensions.duplicate"),
        (ExtensionCapability("", {}, lambda v, c, p: EffectCheck()), "extensions.invalid_key"),
        (ExtensionCapability("rp.x", {"type": 5}, lambda v, c, p: EffectCheck()), "extensions.invalid_schema"),
        (ExtensionCapability("rp.y", "no", lambda v, c, p: EffectCheck()), "extensions.invalid_schema"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(ValidationError) as caught:
            ext.register(cap)
        assert caught.value.code == code
    assert ext.keys() == ["rp.tag"]
