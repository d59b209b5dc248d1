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
    "web": 5,  # the HTTP API (rp serve): an interface beside cli.py
    "testing": 6,  # test support may reach anything; nothing in the product imports it
}  # fmt: skip
# A feature's registration module sits next to its domain but above core: it builds core's
# context sources and plugs into the runtime's hooks. (Dotted module → layer; the longest match wins.)
MODULE_LAYERS: dict[str, int] = {
    "state.feature": 4,
    "state.effect": 4,  # the state.update commit capability (core's effect types)
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


def runtime_imports(text: str, module: str, is_package: bool) -> set[str]:
    """Every module ``module`` imports when it runs (lazy imports too; ``if TYPE_CHECKING:``
    blocks never run, so they do not count). ``from x import y`` counts ``x.y`` as well, in case
    ``y`` is a module."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    tree = ast.parse(text)
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            typing_only |= {id(n) for sub in node.body for n in ast.walk(sub)}  # type: ignore[attr-defined]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)] if node.level else []
            target = ".".join([*base, node.module] if node.module else base) if node.level else node.module or ""
            found |= {target, *(f"{target}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (depth-first, three colours), or None."""
    colour: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        path.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if node not in colour and (found := visit(node)):
            return found
    return None


def test_core_modules_import_each_other_without_cycles() -> None:
    """A cycle hidden behind a function-local import still ties the modules together (issue 11:
    runtime ↔ session_create ↔ message_actions ↔ run); core's modules must form a DAG."""
    modules = {module_name(p): p for p in (SRC / "core").rglob("*.py")}
    graph = {
        name: {t for t in runtime_imports(path.read_text(encoding="utf-8"), name, path.name == "__init__.py") if t in modules and t != name}
        for name, path in modules.items()
    }
    cycle = import_cycle(graph)
    assert cycle is None, " → ".join(cycle)


def test_the_cycle_rule_sees_lazy_imports_and_skips_type_checking_blocks() -> None:
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\ndef f():\n    from . import c\n"
    assert runtime_imports(text, "roleplay.core.a", False) >= {"roleplay.core", "roleplay.core.c"}
    assert "roleplay.core.b" not in runtime_imports(text, "roleplay.core.a", False)
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": set()}) is None


# What a feature above core may use of it (the plugin API): the shared vocabulary, the source and
# capability seams, the texts and run helpers features build on. Anything else in core is internal.
CORE_PUBLIC = {
    f"roleplay.core.{m}"
    for m in (
        "types",
        "sources",
        "macros",
        "effects",
        "artifacts",
        "prompts",
        "play_draft",
        "settings",
        "subagent_run",
        "session_runtime",
        "runtime",
        "prompt_history",  # the register_history_transformers seam's contract
    )
}


FEATURE_MODULES = sorted(p for p in SRC.rglob("*.py") if layer_of(module_name(p)) == 4)


@pytest.mark.parametrize("path", FEATURE_MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_features_use_only_cores_public_modules(path: Path) -> None:
    module = module_name(path)
    used = {t for _, t in imports_in(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")}
    internal = sorted({t for t in used if t.startswith("roleplay.core.")} - CORE_PUBLIC)
    assert not internal, f"{module} reaches into core internals {internal}; use (or extend, deliberately) CORE_PUBLIC"


# The command-line interface is spread over each package's own ``cli`` module (a feature ships its
# commands, as a datasette or llm plugin does), but it is one layer: only these modules touch
# click, and nothing outside them imports one of them. The first component names a module group.
def is_cli_module(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return (
        last in {"cli", "cli_context", "chat", "serve", "play_loop", "line_editor"}
        or last.endswith("_cli")
        or last.endswith("_play")
        or module in {"roleplay.cli"}
    )


# What may import a CLI module: another CLI module, the plugin wiring that registers commands, and
# the test support package.
CLI_IMPORTERS = {"roleplay.plugins", "roleplay.features"}


def imports_click(text: str) -> bool:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "click" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "click":
            return True
    return False


ALL_MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", ALL_MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_only_the_command_line_interface_touches_click(path: Path) -> None:
    module = module_name(path)
    text = path.read_text(encoding="utf-8")
    if imports_click(text):
        assert is_cli_module(module), f"{module} imports click but is not a CLI module; move its commands into a `cli` module"
    if is_cli_module(module) or module in CLI_IMPORTERS or module.startswith("roleplay.testing"):
        return
    reached = sorted({t for _, t in imports_in(text, module, path.name == "__init__.py") if is_cli_module(t)})
    assert not reached, f"{module} imports the command-line interface {reached}"
