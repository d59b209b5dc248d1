"""Effect and extension capabilities: what a turn commit may carry, and how each piece is checked.

The spec (产品边界, 事务与事件 5) keeps one global ``rp_commit_turn`` whose full branch is derived
*live* from "the globally registered effect capabilities" as a closed schema union, with parent-side
extensions "validated at their own capability boundary". This module is that registry; it knows
nothing about the commit tool itself (:mod:`roleplay.core.commit` reads it).

* An :class:`EffectCapability` owns one effect ``kind`` (``state.update``…): the JSON Schema of
  *one* effect of that kind (its ``properties.kind.const`` must be the kind, so the commit schema
  can discriminate the union by ``kind``) and a domain validator.
* The validator sees *every* effect of its kind in the commit at once, each with the JSON Pointer
  of that effect in the commit arguments, because some invariants span effects (``state.update``
  allows one effect per namespace). It returns every independent problem (pointers absolute in the
  commit arguments), the normalised effects (what is stored in ``meta.effects``) and diagnostics
  that do not block the commit. It is called even for an empty group, so a capability can report
  "nothing was done although a rule expects it" diagnostics.
* An :class:`ExtensionCapability` owns one extension key (``rp.reply-options``…) of the commit's
  ``extensions`` object, with the same kind of schema and validator for that one value.

Validators are pure: they read the :class:`CommitContext` frozen at prepare time and never write.
Core defines no capability: each is its domain's, registered by its plugin through the
``register_effect_capabilities`` hook (``state.update`` is ``roleplay.state.effect``'s).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from roleplay.core.types import CommitContext, Diagnostic
from roleplay.errors import Problem, ValidationError, pointer_from_parts


@dataclass(frozen=True)
class EffectItem:
    """One effect of the commit as a validator sees it: where it sits, and what it is."""

    pointer: str  # e.g. "/effects/2"
    effect: Any


@dataclass(frozen=True)
class EffectCheck:
    """A validator's verdict. ``effects`` (normalised, same order as the items) is only used when
    ``problems`` is empty."""

    problems: list[Problem] = field(default_factory=list)
    effects: list[Any] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


EffectValidator = Callable[[Sequence[EffectItem], CommitContext], EffectCheck]
ExtensionValidator = Callable[[Any, CommitContext, str], EffectCheck]


@dataclass(frozen=True)
class EffectCapability:
    kind: str
    schema: dict[str, Any]
    validate: EffectValidator
    description: str = ""


@dataclass(frozen=True)
class ExtensionCapability:
    key: str
    schema: dict[str, Any]
    validate: ExtensionValidator
    description: str = ""


def _check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValidationError("effects.invalid_schema", f"{where}: a capability schema must be an object schema", pointer="/schema")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValidationError(
            "effects.invalid_schema", f"{where}: {exc.message}", pointer="/schema" + pointer_from_parts(list(exc.path))
        ) from None


class EffectRegistry:
    """The effect capabilities, in registration order. ``revision`` moves on every registration,
    so whoever caches a schema derived from this registry can tell it is out of date."""

    def __init__(self, capabilities: Iterable[EffectCapability] = ()) -> None:
        self._caps: dict[str, EffectCapability] = {}
        self.revision = 0
        for cap in capabilities:
            self.register(cap)

    def register(self, cap: EffectCapability) -> None:
        if not isinstance(cap.kind, str) or not cap.kind:
            raise ValidationError("effects.invalid_kind", "an effect kind is a non-empty string", pointer="/kind")
        if cap.kind in self._caps:
            raise ValidationError("effects.duplicate", f"effect kind {cap.kind!r} is already registered", pointer="/kind")
        _check_schema(cap.schema, f"effect {cap.kind!r}")
        # The commit schema discriminates the union by this const; without it two capabilities
        # could both accept one effect and the oneOf would reject it as ambiguous.
        if cap.schema.get("properties", {}).get("kind", {}).get("const") != cap.kind:
            raise ValidationError(
                "effects.invalid_schema",
                f"effect {cap.kind!r}: schema must pin properties.kind.const to {cap.kind!r}",
                pointer="/schema/properties/kind/const",
            )
        if "kind" not in cap.schema.get("required", []):
            raise ValidationError("effects.invalid_schema", f"effect {cap.kind!r}: 'kind' must be required", pointer="/schema/required")
        self._caps[cap.kind] = cap
        self.revision += 1

    def get(self, kind: str) -> EffectCapability | None:
        return self._caps.get(kind)

    def kinds(self) -> list[str]:
        return list(self._caps)

    def capabilities(self) -> list[EffectCapability]:
        return list(self._caps.values())

    def __contains__(self, kind: object) -> bool:
        return kind in self._caps


class ExtensionRegistry:
    """Parent-side extensions, keyed by extension key. Same rules as :class:`EffectRegistry`,
    minus the discriminator: the key in ``extensions`` already says which capability applies."""

    def __init__(self, capabilities: Iterable[ExtensionCapability] = ()) -> None:
        self._caps: dict[str, ExtensionCapability] = {}
        self.revision = 0
        for cap in capabilities:
            self.register(cap)

    def register(self, cap: ExtensionCapability) -> None:
        if not isinstance(cap.key, str) or not cap.key:
            raise ValidationError("extensions.invalid_key", "an extension key is a non-empty string", pointer="/key")
        if cap.key in self._caps:
            raise ValidationError("extensions.duplicate", f"extension {cap.key!r} is already registered", pointer="/key")
        if not isinstance(cap.schema, dict):
            raise ValidationError("extensions.invalid_schema", f"extension {cap.key!r}: schema must be an object", pointer="/schema")
        try:
            Draft202012Validator.check_schema(cap.schema)
        except SchemaError as exc:
            raise ValidationError(
                "extensions.invalid_schema", f"extension {cap.key!r}: {exc.message}", pointer="/schema" + pointer_from_parts(list(exc.path))
            ) from None
        self._caps[cap.key] = cap
        self.revision += 1

    def get(self, key: str) -> ExtensionCapability | None:
        return self._caps.get(key)

    def keys(self) -> list[str]:
        return list(self._caps)

    def capabilities(self) -> list[ExtensionCapability]:
        return list(self._caps.values())

    def __contains__(self, key: object) -> bool:
        return key in self._caps
