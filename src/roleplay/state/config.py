"""Explicit configuration (``rp_state``): create, update, reset and delete a namespace.

:func:`plan_config` is the write-time check: it validates a command against the current projection
and returns the canonical *result* that the native command event stores. The fold
(:func:`roleplay.state.projection.apply_config`) installs a stored result. A result holds the
complete namespace content, so replaying it does not depend on how the namespace looked before;
only its revision is recomputed from the projection being folded.

Commands (pointers in errors are relative to the command object)::

    {"action": "create", "namespace": "story", "expectedRevision": 0, "definition": {…}, "initialValue": …}
    {"action": "update", "namespace": …, "expectedRevision": n, "definition": {…}, "initialValue"?: …, "value"?: …}
    {"action": "reset",  "namespace": …, "expectedRevision": n}
    {"action": "delete", "namespace": …, "expectedRevision": n}

``namespace`` defaults to ``story``. ``update`` always replaces the whole definition; values are
replaced only when given, and a kept value must still validate under the new definition.
"""

from __future__ import annotations

from typing import Any, Mapping

from roleplay.errors import Problem, ValidationError
from roleplay.state import limits
from roleplay.state.definition import (
    DEFAULT_NAMESPACE,
    definition_warnings,
    namespace_name_problems,
    plain_copy,
    validate_definition,
)
from roleplay.state.schema import check_plain_json, validate_value
from roleplay.state.shape import namespace_entry

ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # action: (required fields, optional fields) besides "action"
    "create": (("expectedRevision", "definition", "initialValue"), ("namespace",)),
    "update": (("expectedRevision", "definition"), ("namespace", "initialValue", "value")),
    "reset": (("expectedRevision",), ("namespace",)),
    "delete": (("expectedRevision",), ("namespace",)),
}


def plan_config(projection: Mapping[str, Any], command: Any) -> dict[str, Any]:
    """The canonical result of ``command``, or :class:`ValidationError` ``state.config.rejected``."""
    problems: list[Problem] = []
    if not isinstance(command, dict):
        raise ValidationError(
            "state.config.rejected",
            "the configuration was rejected",
            problems=[Problem("state.config.command_invalid", "a configuration command must be an object", "")],
        )
    action = command.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        problems.append(Problem("state.config.action_invalid", f"'action' must be one of {', '.join(ACTIONS)}", "/action"))
        raise ValidationError("state.config.rejected", "the configuration was rejected", problems=problems)
    required, optional = ACTIONS[action]
    for key in sorted(command, key=str):
        if key != "action" and key not in required and key not in optional:
            problems.append(Problem("state.config.field_unknown", f"{action} does not take {key!r}", f"/{key}"))
    for key in required:
        if key not in command:
            problems.append(Problem("state.config.field_missing", f"{action} needs {key!r}", f"/{key}"))

    name = command.get("namespace", DEFAULT_NAMESPACE)
    name_problems = namespace_name_problems(name)
    problems.extend(name_problems)
    name_ok = not name_problems
    entry = projection["namespaces"].get(name) if name_ok else None
    current_revision = entry["revision"] if entry is not None else 0

    if "expectedRevision" in command:
        expected = command["expectedRevision"]
        if not isinstance(expected, int) or isinstance(expected, bool) or expected < 0:
            problems.append(
                Problem("state.config.revision_invalid", "expectedRevision must be a non-negative integer", "/expectedRevision")
            )
        elif action == "create" and expected != 0:
            problems.append(Problem("state.config.create_revision", "create requires expectedRevision 0", "/expectedRevision"))
        elif action == "create" and entry is not None:
            problems.append(
                Problem("state.config.namespace_exists", f"namespace {name!r} already exists at revision {current_revision}", "/namespace")
            )
        elif action != "create" and entry is None and name_ok:
            problems.append(Problem("state.config.namespace_unknown", f"no namespace {name!r}", "/namespace"))
        elif expected != current_revision:
            problems.append(
                Problem(
                    "state.config.revision_mismatch",
                    f"expected revision {expected} but namespace {name!r} is at {current_revision}",
                    "/expectedRevision",
                    {"currentRevision": current_revision},
                )
            )
    if action == "create" and len(projection["namespaces"]) >= limits.MAX_NAMESPACES and entry is None:
        problems.append(
            Problem("state.config.too_many_namespaces", f"a session holds at most {limits.MAX_NAMESPACES} namespaces", "/namespace")
        )

    if action in ("create", "update") and "definition" in command:
        problems.extend(_values_problems(action, command, entry))
    if problems:
        raise ValidationError("state.config.rejected", "the configuration was rejected", problems=problems)
    return _result(action, name, command, entry)


def _values_problems(action: str, command: dict, entry: Mapping[str, Any] | None) -> list[Problem]:
    definition = command["definition"]
    problems = validate_definition(definition, "/definition")
    schema_ok = not any(p.code.startswith("state.schema.") for p in problems) and isinstance(definition, dict) and "schema" in definition
    for key in ("initialValue", "value"):
        if key in command:
            candidate, pointer = command[key], f"/{key}"
        elif action == "update" and entry is not None:
            # Kept values must fit the new definition; pointing at the absent field tells the
            # agent which replacement value to supply.
            candidate, pointer = entry[key], f"/{key}"
        else:
            continue
        if schema_ok:
            found = validate_value(definition["schema"], candidate, pointer)
            if key not in command:
                for problem in found:
                    problem.code = "state.config.kept_value_invalid"
                    problem.message = f"the current {key} does not fit the new definition ({problem.message}); supply a replacement"
            problems.extend(found)
        else:
            problems.extend(check_plain_json(candidate, pointer))
    return problems


def _result(action: str, name: str, command: dict, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    revision = (entry["revision"] if entry is not None else 0) + 1
    result: dict[str, Any] = {"action": action, "namespace": name, "expectedRevision": command["expectedRevision"]}
    if action == "delete":
        result["entry"] = None
        return result
    if action == "reset":
        assert entry is not None
        new_entry = namespace_entry(
            revision=revision,
            definition=entry["definition"],
            initial_value=entry["initialValue"],
            value=entry["initialValue"],
            setup=entry["diagnostics"]["setup"],
        )
    else:
        definition = plain_copy(command["definition"])
        initial = plain_copy(command["initialValue"]) if "initialValue" in command else entry["initialValue"]  # type: ignore[index]
        if "value" in command:
            value = plain_copy(command["value"])
        elif action == "create":
            value = initial
        else:
            value = entry["value"]  # type: ignore[index]
        new_entry = namespace_entry(
            revision=revision,
            definition=definition,
            initial_value=initial,
            value=value,
            setup=definition_warnings(definition),
        )
    result["entry"] = plain_copy(new_entry)
    return result
