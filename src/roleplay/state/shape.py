"""The ``rp/state`` projection document (rp-state-v2 §Projection) and its versions.

::

    {"protocolVersion": 2, "revision": 7, "namespaces": {"story": {
        "revision": 4, "initialValue": …, "value": …, "definition": {…},
        "diagnostics": {"setup": [...], "lastCommit": [...]}}}}

Documents are plain JSON so that a snapshot is its canonical JSON and folds can be compared
byte for byte. Folds never mutate a document they were given; they build new ones.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from roleplay.errors import Problem
from roleplay.names import STATE_ACTIVITY_PROJECTION
from roleplay.names import STATE_PROJECTION as STATE_PROJECTION  # the name the state package exports

PROTOCOL_VERSION = 2
STATE_VERSION = 8  # version of the rp/state fold; bump when replay results would change
ACTIVITY_VERSION = 1  # version of the rp/state/activity fold

ACTIVITY_PROJECTION = STATE_ACTIVITY_PROJECTION


def empty_projection() -> dict[str, Any]:
    return {"protocolVersion": PROTOCOL_VERSION, "revision": 0, "namespaces": {}}


def empty_activity() -> dict[str, Any]:
    return {"namespaces": {}}


def diagnostics_json(problems: Iterable[Problem | dict]) -> list[dict]:
    return [p.to_dict() if isinstance(p, Problem) else dict(p) for p in problems]


def namespace_entry(
    *,
    revision: int,
    definition: dict,
    initial_value: Any,
    value: Any,
    setup: Iterable[Problem | dict] = (),
    last_commit: Iterable[Problem | dict] = (),
) -> dict[str, Any]:
    return {
        "revision": revision,
        "initialValue": initial_value,
        "value": value,
        "definition": definition,
        "diagnostics": {"setup": diagnostics_json(setup), "lastCommit": diagnostics_json(last_commit)},
    }


def with_namespaces(projection: dict[str, Any], namespaces: dict[str, Any]) -> dict[str, Any]:
    """A new projection with ``namespaces`` and the projection revision advanced by one."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "revision": projection["revision"] + 1,
        "namespaces": dict(sorted(namespaces.items())),
    }


def namespace_values(projection: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: value}`` as the condition evaluator (rules, lorebook ``stateCondition``) reads it."""
    return {name: entry["value"] for name, entry in projection["namespaces"].items()}
