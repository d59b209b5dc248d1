"""Seeded hostile-text fuzz of the MVU adapter's parsers: the generator and the case runner.

Card text is untrusted and the adapter reads it at every ``rp new`` (``inspect_card``) and every
turn (``clean_card_text``), so no input may raise or take super-linear time. The cases are
*structured* hostility, not random bytes: nested and unbalanced control tags, fences that never
close, commands whose parentheses or quotes never close, YAML anchors and merge keys, EJS tags,
and huge repeats of one fragment (the shapes that make backtracking regexes quadratic).

``tests/compat/test_fuzz.py`` runs it small in CI; ``generate(seed, count, max_size=…)`` and
``run(…)`` take any size, and the CLI knobs are ``RP_FUZZ_CASES``, ``RP_FUZZ_SEED`` and
``RP_FUZZ_MVU_SIZE`` (largest case in characters). Cases and reports are the
:mod:`roleplay.testing.fuzz_assets` types, so one report printer serves both.
"""

from __future__ import annotations

import random
import time
from typing import Callable, Iterable, Iterator

from roleplay.assets.cards.model import CharacterCard
from roleplay.compat.mvu import extract_commands, inspect_card, parse_data, render_template, select_opening
from roleplay.compat.mvu.diagnostics import Loc
from roleplay.compat.mvu.initvar import greeting_initvar, parse_initvar_text
from roleplay.compat.mvu.integration import clean_card_text
from roleplay.compat.mvu.openings import apply_commands
from roleplay.compat.mvu.schema import derive_from_data
from roleplay.compat.mvu.templates import compile_template
from roleplay.testing import fuzz_assets
from roleplay.testing.fuzz_assets import Case, Report

TARGETS = ("extract_commands", "initvar", "parse_data", "clean_card_text", "templates", "inspect_card")

TAGS = [
    ("<UpdateVariable>", "</UpdateVariable>"),
    ("<update>", "</update>"),
    ("<Analysis>", "</Analysis>"),
    ("<JSONPatch>", "</JSONPatch>"),
    ("<json_patch>", "</jsonpatch>"),
    ("<jsonpatch>", "</JSONPATCH>"),
    ("<initvar>", "</initvar>"),
    ("<INITVAR>", "</initvar>"),
    ("<status_current_variable>", "</status_current_variables>"),
    ("<%", "%>"),
    ("<%=", "-%>"),
    ("<%_", "_%>"),
    ("```", "```"),
    ("```yaml\n", "\n```"),
    ("```json\n", "\n```"),
    ("_.set(", ");"),
    ("_.add('a', ", ");"),
    ("_.remove(", ")"),
    ("_.assign(", ");//理由\n"),
    ("(", ")"),
    ("[", "]"),
    ("{", "}"),
    ("'", "'"),
    ('"', '"'),
    ("`", "`"),
    ("“", "”"),
    ("{{get_message_variable::", "}}"),
]
ATOMS = [
    " ",
    "\t",
    "\n",
    "\r\n",
    "\u3000",
    "\u00a0",
    "\\",
    ";",
    ",",
    ":",
    "：",
    "，",
    "//",
    "/*",
    "*/",
    "#",
    "-",
    "- ",
    "~",
    "好感度",
    "悠纪",
    "a",
    "0",
    "1.5",
    "10:45",
    "2024-04-08",
    "null",
    "true",
    "undefined",
    "$meta",
    "$__META_EXTENSIBLE__$",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!python/object ",
    "%>",
    "<%",
    "</initvar>",
    "</JSONPatch>",
    "<StatusPlaceHolderImpl/>",
    "_.set('悠纪.好感度', 5);//初遇\n",
    "_.remove('物品', '毒药');",
    "_.insert('物品', '-', '刀');",
    "_.add('a', 1);",
    '<JSONPatch>[{"op": "replace", "path": "/a", "value": 1}]</JSONPatch>',
    '{"op": "delta", "path": "/a", "value": 2}',
    "<initvar>\n```yaml\na: 1\n```\n</initvar>",
    "a:\n  b: 1\n",
    "- [x, y]\n",
    '{"a": {"b": [1, 2]}}',
    "// c\n{a: 1,}",
    "<% if (getvar('stat_data.a') > 0) { %>x<% } %>",
    "<%= getvar('a') %>",
    "<% setvar('a', 1) %>",
]
STATE = {
    "a": 1,
    "悠纪": {"好感度": [0, "好感"]},
    "物品": ["剑", "毒药", "$__META_EXTENSIBLE__$"],
    "m": {"$meta": {"extensible": True}, "k": "v"},
}


def _soup(rng: random.Random, budget: int) -> str:
    out: list[str] = []
    size = 0
    while size < budget:
        piece = rng.choice(ATOMS) if rng.random() < 0.6 else rng.choice(rng.choice(TAGS))
        out.append(piece)
        size += len(piece)
    return "".join(out)


def _nest(rng: random.Random, budget: int, depth: int = 0) -> str:
    """Tags inside tags; a closing tag goes missing (or comes twice) a third of the time."""
    if depth > 6 or budget < 8:
        return _soup(rng, budget)
    opening, closing = rng.choice(TAGS)
    inner = "".join(_nest(rng, budget // 3, depth + 1) for _ in range(rng.randint(1, 3)))
    roll = rng.random()
    if roll < 0.25:
        closing = ""
    elif roll < 0.35:
        closing *= 2
    return opening + inner + closing


def _repeat(rng: random.Random, budget: int) -> str:
    """One fragment (a tag opener, a fence, a short soup) repeated up to the size budget."""
    unit = rng.choice([rng.choice(rng.choice(TAGS)), rng.choice(ATOMS), _soup(rng, rng.randint(2, 24)), rng.choice(TAGS)[0] + "```"])
    count = max(1, budget // max(1, len(unit)))
    text = unit * rng.randint(max(1, count // 2), count)
    if rng.random() < 0.3:
        text += rng.choice(TAGS)[1]  # one closer at the very end: every opener scans to it
    return text


SHAPES: dict[str, Callable[[random.Random, int], str]] = {"soup": _soup, "nest": _nest, "repeat": _repeat}


def generate(seed: int, count: int, targets: tuple[str, ...] = TARGETS, *, max_size: int = 4000) -> Iterator[Case]:
    """``count`` cases, round-robin over ``targets``, from ``random.Random(seed)`` alone.

    Each case is one to three shaped parts joined; a case never exceeds ``max_size`` characters
    by more than one fragment.
    """
    unknown = set(targets) - set(TARGETS)
    if unknown or not targets:
        raise ValueError(f"MVU fuzz targets are {', '.join(TARGETS)}; got {sorted(targets)}")
    rng = random.Random(seed)
    for index in range(count):
        target = targets[index % len(targets)]
        budget = rng.choice([max_size // 50, max_size // 10, max_size // 2, max_size])
        names, parts = [], []
        for _ in range(rng.choice([1, 1, 2, 3])):
            name = rng.choice(list(SHAPES))
            names.append(name)
            parts.append(SHAPES[name](rng, max(1, budget // 2)))
        text = "".join(parts)[: max_size + 64]
        yield Case(index, target, "+".join(names), text.encode("utf-8", "surrogatepass"))


def _card(greeting: str, initvar: str, rules: str) -> object:
    from types import SimpleNamespace

    book = {
        "name": "fuzz",
        "entries": [
            {"id": 0, "comment": "[initvar]", "content": initvar, "enabled": False, "keys": []},
            {"id": 1, "comment": "[mvu_update]规则", "content": "变量更新规则:\n" + rules, "enabled": True, "keys": []},
            {"id": 2, "comment": "事件", "content": greeting, "enabled": True, "keys": []},
        ],
    }
    card = CharacterCard(name="Fuzz", first_mes=greeting, alternate_greetings=[initvar], description=rules, extensions={})
    return SimpleNamespace(card=card, lorebook=book, raw={"spec": "chara_card_v3", "data": {}})


def run_target(case: Case) -> None:
    """One case through its entry points; a broken invariant raises ``AssertionError``."""
    text = case.data.decode("utf-8", "surrogatepass")
    loc = Loc("fuzz")
    if case.target == "extract_commands":
        derived = derive_from_data(STATE)
        commands, _problems = extract_commands(text, loc)
        outcome = apply_commands(derived.value, derived.schema, derived.vwd, commands, loc)
        assert outcome.ok or (outcome.value == derived.value and outcome.records == [])
    elif case.target == "initvar":
        value, _lines, _notes = parse_initvar_text(text, loc, char="c", user="u")
        assert value is None or isinstance(value, dict)
        result = greeting_initvar(text, loc, char="c", user="u")
        assert result is None or result.ok or result.value == {}
    elif case.target == "parse_data":
        parsed = parse_data(text, loc, want="any")
        assert parsed.ok or (parsed.value is None and parsed.diagnostics)
    elif case.target == "clean_card_text":
        cleaned = clean_card_text(text)
        assert isinstance(cleaned, str) and len(cleaned) <= len(text)
    elif case.target == "templates":
        compile_template(text, loc)
        rendered = render_template(text, STATE)
        assert (rendered.text is not None) == rendered.ok
    else:
        third = len(text) // 3
        report = inspect_card(_card(text[:third], text[third : 2 * third], text[2 * third :]))
        for namespace in [report.namespace, select_opening(report).namespace, *(o.namespace for o in report.openings)]:
            namespace.bootstrap()


def run(cases: Iterable[Case], *, slow_seconds: float, timeout_seconds: float, clock: Callable[[], float] = time.perf_counter) -> Report:
    """Every case through :func:`run_target`. Nothing may escape, not even an ``RpError``: the
    adapter reports problems as diagnostics."""
    return fuzz_assets.run(
        cases, slow_seconds=slow_seconds, timeout_seconds=timeout_seconds, clock=clock, target=run_target, coded_errors_pass=False
    )
