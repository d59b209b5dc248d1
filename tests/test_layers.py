"""Imports only point down the layers that docs/architecture.md draws:

shared → harness (+ cli_context) → domains (state, assets, guides) → core → adapters (compat) →
interfaces. A package's own ``cli`` module sits in its package's layer.

Read from the source with ``ast`` (no import side effects), so a lazy import inside a function
counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "roleplay"

# The first package component (or top-level module) → its layer.
LAYERS: dict[str, int] = {
    # shared: no roleplay imports above this line
    "__init__": 0, "errors": 0, "canonical": 0, "clock": 0, "config": 0, "redact": 0,
    "samples": 0, "names": 0,
    "hookspecs": 0,  # the plugin hook specifications: any layer may implement a hook
    "feature_catalog": 0,  # the hard dependencies between features (a table; rp --help reads it)
    "harness": 1,
    "cli_context": 1,  # the CLI toolkit of every package's `cli` module: opens stores, maps their faults
    "state": 2, "assets": 2, "guides": 2,
    "core": 3,
    "compat": 4,
    "quick_replies": 4,  # a feature above core (its /qr reaches play through the runtime)
    "reply_options": 4,  # a feature above core (an artifact generator; its choices reach play through the runtime)
    "cli": 5, "features": 5, "plugins": 5, "plugins_cli": 5,
    "testing": 6,  # test support may reach anything; nothing in the product imports it
}  # fmt: skip
# A feature's registration module sits next to its domain but above core: it builds core's
# context sources and plugs into the runtime's hooks. (Dotted module → layer; the longest match wins.)
MODULE_LAYERS: dict[str, int] = {
    "state.feature": 4,
    "assets.cards.feature": 4,
    "assets.lorebook.feature": 4,
    "assets.personas.feature": 4,
    "assets.presets.feature": 4,
    "assets.styles.feature": 4,
}
NAMES = {0: "shared", 1: "harness", 2: "domains", 3: "core", 4: "adapters", 5: "interfaces", 6: "testing"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    parts = module.split(".")
    if parts == ["roleplay"]:
        return 0
    for i in range(len(parts), 2, -1):
        found = MODULE_LAYERS.get(".".join(parts[1:i]))
        if found is not None:
            return found
    return LAYERS[parts[1]]


def imports_in(text: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) of every roleplay import in ``text``, read as ``module``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "roleplay"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] == "roleplay":
                found.append((node.lineno, target))
    return found


def upward_imports(text: str, module: str, is_package: bool = False) -> list[str]:
    own = layer_of(module)
    return [
        f"line {line}: {module} ({NAMES[own]}) imports {target} ({NAMES[layer_of(target)]})"
        for line, target in imports_in(text, module, is_package)
        if layer_of(target) > own
    ]


def test_every_top_level_name_has_a_layer() -> None:
    names = {p.stem if p.is_file() else p.name for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert names <= set(LAYERS), f"give these a layer in LAYERS: {sorted(names - set(LAYERS))}"


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_point_down(path: Path) -> None:
    upward = upward_imports(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
    assert not upward, "\n".join(upward)


def test_the_rule_catches_absolute_and_relative_upward_imports() -> None:
    text = "from roleplay.core.run import play_turn\nfrom ..state import x\nfrom .store import base\nimport roleplay.errors\n"
    found = upward_imports(text, "roleplay.harness.probe")
    assert found == [
        "line 1: roleplay.harness.probe (harness) imports roleplay.core.run (core)",
        "line 2: roleplay.harness.probe (harness) imports roleplay.state (domains)",
    ]
