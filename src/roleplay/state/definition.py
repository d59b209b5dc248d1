"""Namespace definitions and the invariant that definition, initial value and value all validate.

A definition is ``{title, description?, updateMode, schema, rules}`` and nothing else. It is
checked in dependency order so that one mistake yields one problem: the restricted schema first,
then rules against that schema (skipped when the schema itself is broken), then values against it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from roleplay.canonical import canonical_json
from roleplay.errors import Problem
from roleplay.harness.events import is_plain_json
from roleplay.state import limits
from roleplay.state.pointers import closed_object_problems
from roleplay.state.rules import validate_rules
from roleplay.state.schema import check_plain_json, check_restricted_schema, validate_value

DEFAULT_NAMESPACE = "story"
UPDATE_MODES = ("rules-required", "schema-only", "disabled")
DEFINITION_REQUIRED = ("title", "updateMode", "schema", "rules")
DEFINITION_OPTIONAL = ("description",)

# A namespace is a partition id, not a display name: characters live in paths, not namespaces.
_NAMESPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")


def namespace_name_problems(name: Any, pointer: str = "/namespace") -> list[Problem]:
    if not isinstance(name, str) or not _NAMESPACE_NAME.match(name) or len(name) > limits.MAX_NAMESPACE_NAME:
        return [
            Problem(
                "state.namespace.name_invalid",
                f"a namespace id is 1-{limits.MAX_NAMESPACE_NAME} ASCII letters, digits, '_' or '-', starting with a letter or digit",
                pointer,
            )
        ]
    return []


# Canonical texts of definitions found valid. A story folds the same few definitions again and
# again (each bootstrap, each story-state read that folds from the log), and checking one walks its
# whole schema and rules; its canonical text is a fraction of that. Bounded: it starts again.
_VALID: dict[str, None] = {}
_VALID_MAX = 512


def validate_definition(definition: Any, base: str = "") -> list[Problem]:
    """Every problem of a definition; pointers are ``base`` + the field path."""
    # Only plain JSON of exact types is known by its text: a tuple would read as the list it prints as.
    key = canonical_json(definition) if type(definition) is dict and is_plain_json(definition) else None
    if key is not None and key in _VALID:
        return []
    problems = _definition_problems(definition, base)
    if key is not None and not problems:
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID[key] = None
    return problems


def _definition_problems(definition: Any, base: str) -> list[Problem]:
    if not isinstance(definition, dict):
        return [Problem("state.definition.not_object", "a definition must be an object", base)]
    problems = closed_object_problems(
        definition,
        DEFINITION_REQUIRED,
        DEFINITION_OPTIONAL,
        code="state.definition",
        unknown="definition",
        needs="a definition needs",
        base=base,
    )
    title = definition.get("title")
    if "title" in definition and not (isinstance(title, str) and title.strip() and len(title) <= limits.MAX_TITLE):
        problems.append(
            Problem(
                "state.definition.title_invalid",
                f"'title' must be non-empty text of at most {limits.MAX_TITLE} characters",
                f"{base}/title",
            )
        )
    description = definition.get("description")
    if "description" in definition and not (isinstance(description, str) and len(description) <= limits.MAX_DESCRIPTION):
        problems.append(
            Problem(
                "state.definition.description_invalid",
                f"'description' must be text of at most {limits.MAX_DESCRIPTION} characters",
                f"{base}/description",
            )
        )
    if "updateMode" in definition and definition["updateMode"] not in UPDATE_MODES:
        problems.append(
            Problem("state.definition.update_mode_invalid", f"'updateMode' must be one of {', '.join(UPDATE_MODES)}", f"{base}/updateMode")
        )
    schema_ok = False
    if "schema" in definition:
        schema_problems = check_restricted_schema(definition["schema"], f"{base}/schema")
        problems.extend(schema_problems)
        schema_ok = not schema_problems
    if "rules" in definition:
        problems.extend(validate_rules(definition["rules"], definition["schema"] if schema_ok else None, f"{base}/rules"))
    return problems


def validate_namespace_content(definition: Any, values: dict[str, Any], base: str = "") -> list[Problem]:
    """The namespace invariant: the definition and every given value (``{"initialValue": …,
    "value": …}``, pointers ``base/<field>``) validate."""
    problems = validate_definition(definition, f"{base}/definition")
    schema_usable = (
        isinstance(definition, dict) and "schema" in definition and not any(p.code.startswith("state.schema.") for p in problems)
    )
    for key, value in values.items():
        if schema_usable:
            problems.extend(validate_value(definition["schema"], value, f"{base}/{key}"))
        else:
            # Without a usable schema, values can still be checked for being plain JSON.
            problems.extend(check_plain_json(value, f"{base}/{key}"))
    return problems


def definition_warnings(definition: dict) -> list[Problem]:
    """Setup diagnostics for a valid definition: legal but probably not what the author meant."""
    warnings: list[Problem] = []
    if definition["updateMode"] == "rules-required" and not definition["rules"]:
        warnings.append(
            Problem(
                "state.definition.no_rules",
                "updateMode is rules-required but there are no rules, so story commits cannot change this namespace",
                "/definition/rules",
            )
        )
    return warnings


def plain_copy(value: Any) -> Any:
    """An independent canonical copy, so stored results never alias caller-owned objects."""
    return json.loads(canonical_json(value))
