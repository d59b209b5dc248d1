"""The two model-facing views of State.

* Writer side (:func:`render_writer_view`): for each namespace only its name, description and
  current value. No revision, protocol, schema, rules or diagnostics: the Writer narrates, it does
  not commit.
* Parent side (:func:`render_commit_contract`): the v2 ``state_commit_contract`` as one line of
  canonical JSON, delivered through the context source's ``parentText``. Its envelope and
  operation table come from :mod:`roleplay.state.operations`, the same specification as the
  registered ``state.update`` schema. Per namespace it carries ``expectedRevision``,
  ``updateMode``, ``currentValue`` and what that mode needs:

  - ``rules-required``: the applicable rules; ``set``/``append`` rules carry the ``valueSchema``
    of what they write (the target schema, resp. the array's item schema), ``increment`` and
    ``remove`` rules carry none, and the root schema is not repeated;
  - ``schema-only``: the root ``schema`` (plus applicable rules, whose ids stay optional);
  - ``disabled``: no schema and no rules, since nothing can be written.

  A rule is applicable when it has no condition or its condition is active on the current state.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from roleplay.canonical import canonical_json
from roleplay.state.conditions import evaluate_condition
from roleplay.state.definition import DEFAULT_NAMESPACE
from roleplay.state.operations import contract_operations
from roleplay.state.pointers import parse_pointer
from roleplay.state.schema import item_schema, schema_at
from roleplay.state.shape import namespace_values

CONTRACT_NAME = "state_commit_contract"
CONTRACT_VERSION = 2


def _ordered_names(projection: Mapping[str, Any]) -> list[str]:
    # The default namespace leads; the rest follow in id order, so the text is stable.
    names = sorted(projection["namespaces"])
    return ([DEFAULT_NAMESPACE] if DEFAULT_NAMESPACE in names else []) + [n for n in names if n != DEFAULT_NAMESPACE]


def render_writer_view(projection: Mapping[str, Any]) -> str:
    """Compact Writer text; empty when there is no namespace (the source is then unavailable)."""
    blocks = []
    for name in _ordered_names(projection):
        entry = projection["namespaces"][name]
        lines = [f"namespace: {name}"]
        description = entry["definition"].get("description")
        if description:
            lines.append(f"description: {description}")
        lines.append("value:")
        lines.append(json.dumps(entry["value"], ensure_ascii=False, sort_keys=True, indent=2))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _contract_rule(rule: Mapping[str, Any], schema: dict, with_value_schema: bool) -> dict[str, Any]:
    out = {key: rule[key] for key in ("id", "target", "when", "effect", "cadence", "condition", "guidance") if key in rule}
    op = rule["effect"]["op"]
    if with_value_schema and op in ("set", "append"):
        node = schema_at(schema, parse_pointer(rule["target"]))
        if node is not None and op == "append":
            node = item_schema(node)
        if node is not None:
            out["valueSchema"] = node
    return out


def state_commit_contract(projection: Mapping[str, Any]) -> dict[str, Any]:
    values = namespace_values(projection)
    namespaces: dict[str, Any] = {}
    for name in _ordered_names(projection):
        entry = projection["namespaces"][name]
        definition = entry["definition"]
        mode = definition["updateMode"]
        item: dict[str, Any] = {"expectedRevision": entry["revision"], "updateMode": mode, "currentValue": entry["value"]}
        if mode != "disabled":
            applicable = [
                rule for rule in definition["rules"] if "condition" not in rule or evaluate_condition(rule["condition"], values)[0]
            ]
            if mode == "schema-only":
                item["schema"] = definition["schema"]
            if mode == "rules-required" or applicable:
                item["rules"] = [_contract_rule(r, definition["schema"], mode == "rules-required") for r in applicable]
        namespaces[name] = item
    return {"contract": CONTRACT_NAME, "version": CONTRACT_VERSION, **contract_operations(), "namespaces": namespaces}


def render_commit_contract(projection: Mapping[str, Any]) -> str:
    """The contract as single-line canonical JSON (sorted keys, no whitespace, UTF-8 kept)."""
    return canonical_json(state_commit_contract(projection))
