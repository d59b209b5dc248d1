"""Fixtures for the state domain: one realistic ``story`` namespace and effect builders.

The story keeps characters under ``/characters/<name>/…`` (the reference's own example path) with
an every-turn affection rule guarded by a condition, an append rule and a set rule.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from roleplay.state.projection import apply_bootstrap, bootstrap_payload
from roleplay.state.shape import empty_projection

AFFECTION = "/characters/李钰/好感度"


def story_definition(mode: str = "rules-required") -> dict[str, Any]:
    return {
        "title": "故事",
        "description": "主线状态",
        "updateMode": mode,
        "schema": {
            "type": "object",
            "properties": {
                "day": {"type": "integer", "minimum": 1},
                "weather": {"type": "string", "enum": ["晴", "雨", "雪"]},
                "characters": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "好感度": {"type": "integer", "minimum": 0, "maximum": 100},
                            "mood": {"type": "string", "minLength": 1, "maxLength": 20},
                            "items": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                            "secret": {"type": ["string", "null"]},
                        },
                        "required": ["好感度", "items"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["day", "characters"],
            "additionalProperties": False,
        },
        "rules": [
            {
                "id": "liyu-affection",
                "target": AFFECTION,
                "when": "李钰的信任发生变化",
                "condition": 'state("story", "/characters/李钰/好感度") < 100',
                "effect": {"op": "increment", "minimum": -5, "maximum": 5},
                "guidance": "小幅变化",
                "cadence": "every-turn",
            },
            {
                "id": "liyu-items",
                "target": "/characters/李钰/items",
                "when": "李钰得到物品",
                "effect": {"op": "append"},
                "cadence": "when-applicable",
            },
            {
                "id": "liyu-mood",
                "target": "/characters/李钰/mood",
                "when": "情绪变化",
                "effect": {"op": "set"},
                "cadence": "when-applicable",
            },
            {
                "id": "liyu-secret-clear",
                "target": "/characters/李钰/secret",
                "when": "秘密被揭开",
                "condition": 'exists("story", "/characters/李钰/secret")',
                "effect": {"op": "remove"},
                "cadence": "when-applicable",
            },
            {
                "id": "next-day",
                "target": "/day",
                "when": "过了一夜",
                "effect": {"op": "increment", "minimum": 1, "maximum": 1},
                "cadence": "when-applicable",
            },
            {
                "id": "weather",
                "target": "/weather",
                "when": "天气变化",
                "effect": {"op": "set"},
                "cadence": "when-applicable",
            },
        ],
    }


def story_value() -> dict[str, Any]:
    return {"day": 1, "characters": {"李钰": {"好感度": 10, "items": ["玉佩"], "mood": "平静", "secret": "身世"}}}


def bootstrapped(mode: str = "rules-required", value: Any = None) -> dict[str, Any]:
    payload = bootstrap_payload(story_definition(mode), story_value() if value is None else value)
    return apply_bootstrap(empty_projection(), payload)


def effect(changes: list[Any], *, namespace: str = "story", revision: int = 1) -> dict[str, Any]:
    return {"kind": "state.update", "namespace": namespace, "expectedRevision": revision, "payload": {"changes": changes}}


def change(op: str, path: str, *, rule: str | None = None, reason: str = "剧情需要", **operand: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"op": op, "path": path, "reason": reason, **operand}
    if rule is not None:
        out["ruleId"] = rule
    return out


@pytest.fixture
def definition() -> dict[str, Any]:
    return story_definition()


@pytest.fixture
def projection() -> dict[str, Any]:
    return bootstrapped()


@pytest.fixture
def schema_only() -> dict[str, Any]:
    return bootstrapped("schema-only")


@pytest.fixture
def make() -> Callable[..., Any]:
    """``make.effect(...)``, ``make.change(...)``, ``make.bootstrapped(mode)`` and copies of the
    story definition/value, so tests do not import from this conftest (importlib mode)."""

    class Make:
        pass

    m = Make()
    m.effect = effect  # type: ignore[attr-defined]
    m.change = change  # type: ignore[attr-defined]
    m.bootstrapped = bootstrapped  # type: ignore[attr-defined]
    m.definition = lambda mode="rules-required": copy.deepcopy(story_definition(mode))  # type: ignore[attr-defined]
    m.value = lambda: copy.deepcopy(story_value())  # type: ignore[attr-defined]
    m.AFFECTION = AFFECTION  # type: ignore[attr-defined]
    return m
