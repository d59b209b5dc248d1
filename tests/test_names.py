"""Every name in ``roleplay/names.py`` (tool, command, event-kind, effect, projection, source-id,
source-marker and feature names) and in ``roleplay/harness/names.py`` (the harness's event types) is spelled
once: no other module under ``src/`` may write one as a string literal.

Read with ``ast``, so text that merely mentions a name (docstrings, prompts, messages such as
"call rp_commit_turn next") is fine; a literal that *is* the name, anywhere else, fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from roleplay import names
from roleplay.harness import names as harness_names

SRC = Path(__file__).resolve().parents[1] / "src" / "roleplay"
NAMES_MODULES = {SRC / "names.py": names, SRC / "harness" / "names.py": harness_names}


def constants(module: object) -> dict[str, str]:
    return {key: value for key, value in vars(module).items() if key.isupper() and isinstance(value, str)}


NAMES: dict[str, str] = {value: f"{m.__name__}.{key}" for m in NAMES_MODULES.values() for key, value in constants(m).items()}


def literals_of_names(text: str) -> list[str]:
    """``"line N: 'value' (CONSTANT)"`` for every string constant in ``text`` equal to a name."""
    return [
        f"line {node.lineno}: {node.value!r} (use {NAMES[node.value]})"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]


@pytest.mark.parametrize("module", list(NAMES_MODULES.values()), ids=lambda m: m.__name__)
def test_the_names_are_distinct_and_the_module_exports_them_all(module: object) -> None:
    found = constants(module)
    assert len(set(found.values())) == len(found), "two constants share one value"
    assert set(module.__all__) == set(found)  # type: ignore[attr-defined]


def test_no_name_is_in_both_modules() -> None:
    assert not set(constants(names).values()) & set(constants(harness_names).values())


@pytest.mark.parametrize("path", sorted(p for p in SRC.rglob("*.py") if p not in NAMES_MODULES), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_spells_a_name_itself(path: Path) -> None:
    found = literals_of_names(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(SRC)}:\n" + "\n".join(found)


def test_the_rule_catches_a_literal_but_not_a_mention() -> None:
    text = 'TOOL = "rp_commit_turn"\nHELP = "call rp_commit_turn next"\n\n\ndef f():\n    """Uses ``rp_commit_turn``."""\n'
    assert literals_of_names(text) == ["line 1: 'rp_commit_turn' (use roleplay.names.COMMIT_TURN_TOOL)"]


def test_the_feature_names_are_the_feature_managers_catalogue() -> None:
    from roleplay.core.settings import ALWAYS_ON, FEATURES

    features = {value for key, value in constants(names).items() if key.endswith("_FEATURE")}
    assert features == set(FEATURES) | set(ALWAYS_ON)
    assert not set(FEATURES) & set(ALWAYS_ON)


def test_the_rule_catches_a_feature_name_written_out() -> None:
    text = 'FEATURE = "rp-state"\nCOMMANDS = {"mvu": "rp-compat-mvu"}\nHELP = "turn rp-state on first"\n'
    assert literals_of_names(text) == [
        "line 1: 'rp-state' (use roleplay.names.STATE_FEATURE)",
        "line 2: 'rp-compat-mvu' (use roleplay.names.COMPAT_MVU_FEATURE)",
    ]
