"""Hand-run benchmark of the pure state domain: `.venv/bin/python bench/state.py`.

Reports (median of repeated runs, no wall-clock dependence in the code under test):
* validate + apply of one 20-change `state.update` on a namespace whose value has ~2,000 nodes,
  in rules-required and schema-only modes (static checks, ordered execution with conditions,
  final schema over the whole value, and the projection fold);
* condition evaluations per second, for a cached expression and for fresh parsing.
"""

from __future__ import annotations

import statistics
import time

from roleplay.state.conditions import _parse_cached, evaluate_condition
from roleplay.state.projection import apply_bootstrap, apply_commit, bootstrap_payload, prepare_commit
from roleplay.state.shape import empty_projection, namespace_values

CHARACTERS = 180  # 180 characters x (1 object + 5 fields + 5 list items) + containers ~ 2,000 nodes


def character_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "affection": {"type": "integer", "minimum": -100, "maximum": 100},
            "mood": {"type": "string", "maxLength": 40},
            "alive": {"type": "boolean"},
            "location": {"type": ["string", "null"]},
            "items": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
        },
        "required": ["affection", "mood", "alive", "items"],
        "additionalProperties": False,
    }


def definition(mode: str) -> dict:
    rules = []
    for i in range(20):
        rules.append(
            {
                "id": f"aff-{i}",
                "target": f"/characters/c{i}/affection",
                "when": "trust changes",
                "condition": f'state("story", "/characters/c{i}/alive") == true && state("story", "/characters/c{i}/affection") < 100',
                "effect": {"op": "increment", "minimum": -5, "maximum": 5},
                "cadence": "when-applicable",
            }
        )
    return {
        "title": "bench",
        "updateMode": mode,
        "schema": {
            "type": "object",
            "properties": {
                "day": {"type": "integer", "minimum": 1},
                "characters": {"type": "object", "additionalProperties": character_schema()},
            },
            "required": ["day", "characters"],
            "additionalProperties": False,
        },
        "rules": rules,
    }


def value() -> dict:
    return {
        "day": 1,
        "characters": {
            f"c{i}": {"affection": 0, "mood": "calm", "alive": True, "location": None, "items": [f"item{j}" for j in range(5)]}
            for i in range(CHARACTERS)
        },
    }


def count_nodes(node) -> int:
    if isinstance(node, dict):
        return 1 + sum(count_nodes(v) for v in node.values())
    if isinstance(node, list):
        return 1 + sum(count_nodes(v) for v in node)
    return 1


def effect(mode: str) -> list[dict]:
    changes = []
    for i in range(20):
        change = {"op": "increment", "path": f"/characters/c{i}/affection", "by": 2, "reason": "bench"}
        if mode == "rules-required":
            change["ruleId"] = f"aff-{i}"
        changes.append(change)
    return [{"kind": "state.update", "namespace": "story", "expectedRevision": 1, "payload": {"changes": changes}}]


def median_ms(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    rows = []
    for mode in ("rules-required", "schema-only"):
        projection = apply_bootstrap(empty_projection(), bootstrap_payload(definition(mode), value()))
        nodes = count_nodes(projection["namespaces"]["story"]["value"])
        effects = effect(mode)

        def validate_and_apply() -> None:
            apply_commit(projection, prepare_commit(projection, effects))

        validate_and_apply()  # warm caches (compiled validator, parsed conditions)
        rows.append((f"20-change update, {mode}", f"{nodes} nodes", f"{median_ms(validate_and_apply, 30):.2f} ms"))

    values = namespace_values(apply_bootstrap(empty_projection(), bootstrap_payload(definition("schema-only"), value())))
    expr = 'exists("story", "/characters/c7") && state("story", "/characters/c7/affection") >= 0 || state("story", "/day") > 3'
    n = 50_000
    start = time.perf_counter()
    for _ in range(n):
        evaluate_condition(expr, values)
    cached = n / (time.perf_counter() - start)
    n_fresh = 5_000
    start = time.perf_counter()
    for _ in range(n_fresh):
        _parse_cached.cache_clear()
        evaluate_condition(expr, values)
    fresh = n_fresh / (time.perf_counter() - start)
    rows.append(("condition evaluation (parsed once)", "1 expression", f"{cached:,.0f} /s"))
    rows.append(("condition evaluation (parse each time)", "1 expression", f"{fresh:,.0f} /s"))

    widths = [max(len(r[i]) for r in rows + [("case", "size", "result")]) for i in range(3)]
    line = "  ".join
    print(line(h.ljust(w) for h, w in zip(("case", "size", "result"), widths)))
    print(line("-" * w for w in widths))
    for row in rows:
        print(line(c.ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
