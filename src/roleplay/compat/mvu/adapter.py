"""``inspect_card``: one MVU card (plus bound lorebooks) → native ``story`` namespace and report.

The pipeline is the spec's "MVU 适配隔离与覆盖边界": InitVar → plain value + restricted schema
(:mod:`.initvar`, :mod:`.schema`), ``变量更新规则`` → rules and refinements (:mod:`.rules`),
then per greeting its ``<initvar>`` (replacing the card's) and its literal commands
(:mod:`.openings`). Everything ends in :func:`roleplay.state.bootstrap_payload`, so a namespace
that reaches the report is exactly what State accepts; anything that would not validate becomes
a ``disabled`` namespace with diagnostics instead. Scripts are listed and dropped, never run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem, RpError
from roleplay.state import (
    bootstrap_payload,
    limits,
    validate_namespace_content,
    validate_value,
)

from .commands import extract_commands
from .detect import Finding, detect, is_mvu
from .diagnostics import Loc, capped, diag
from .initvar import InitVarResult, greeting_initvar, load_initvar
from .openings import apply_commands, clean_opening_text
from .rules import derive_rules, uncovered
from .scan import ejs_tags
from .schema import derive_from_data, from_json_schema
from .sources import Book, BookEntry, CardSource, Greeting, expand_macros, read_book, read_card
from .templates import compile_template

NAMESPACE = "story"


@dataclass
class NamespaceBuild:
    status: str  # "ok" | "disabled"
    definition: dict[str, Any]
    initial_value: Any
    diagnostics: list[Problem] = field(default_factory=list)
    vwd: dict[str, str] = field(default_factory=dict)

    def bootstrap(self) -> dict[str, Any]:
        """The ``rp.state`` bootstrap payload (validated by the state package)."""
        return bootstrap_payload(self.definition, self.initial_value, namespace=NAMESPACE, setup_diagnostics=capped(self.diagnostics))

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "definition": self.definition,
            "initialValue": self.initial_value,
            "valueDescriptions": self.vwd,
            "diagnostics": [p.to_dict() for p in self.diagnostics],
        }


@dataclass
class OpeningReport:
    key: str
    source: str
    index: int | None
    namespace: NamespaceBuild
    commands: list[dict[str, Any]]
    opening_message_text: str
    has_initvar: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "source": self.source,
            "index": self.index,
            "hasInitvar": self.has_initvar,
            "commands": self.commands,
            "openingMessageText": self.opening_message_text,
            "namespace": self.namespace.to_dict(),
        }


@dataclass
class MvuReport:
    detected: bool
    findings: list[Finding]
    namespace: NamespaceBuild
    openings: list[OpeningReport]
    diagnostics: list[Problem]

    def to_dict(self) -> dict[str, Any]:
        return {
            "detected": self.detected,
            "findings": [f.to_dict() for f in self.findings],
            "namespace": self.namespace.to_dict(),
            "openings": [o.to_dict() for o in self.openings],
            "diagnostics": [p.to_dict() for p in self.diagnostics],
        }


def disabled(title: str, diagnostics: list[Problem], value: Any = None) -> NamespaceBuild:
    note = diag("mvu.namespace.disabled", "the MVU state could not be built safely; the namespace is read-only (disabled)", Loc("adapter"))
    return NamespaceBuild(
        "disabled",
        {"title": title, "updateMode": "disabled", "schema": {}, "rules": []},
        {} if value is None else value,
        [note, *diagnostics],
    )


@dataclass
class _Context:
    card: CardSource
    books: list[Book]
    user: str
    zod_schema: Any
    zod_loc: Loc

    @property
    def rule_entries(self) -> list[BookEntry]:
        return [e for b in self.books for e in b.entries]


def build_namespace(ctx: _Context, data: InitVarResult) -> NamespaceBuild:
    title = f"{ctx.card.name} (MVU)"[: limits.MAX_TITLE]
    problems = list(data.diagnostics)
    if not data.ok:
        return disabled(title, problems)
    if not data.value and not data.sources:
        problems.append(diag("mvu.initvar.none", "no [initvar] entry or <initvar> block: the state starts empty", Loc("adapter"), "info"))
    derived = derive_from_data(data.value, lines=data.lines)
    problems += derived.diagnostics
    schema = derived.schema
    zod = ctx.zod_schema is not None
    if zod:
        mapped, found = from_json_schema(ctx.zod_schema, ctx.zod_loc)
        problems += found
        if mapped is None:
            return disabled(title, problems)
        violations = validate_value(mapped, derived.value)
        if violations:
            problems += [
                diag(
                    "mvu.zod.value_invalid",
                    f"the InitVar value breaks schema.json at {v.pointer or '/'}: {v.message}",
                    ctx.zod_loc,
                    statePointer=v.pointer,
                )
                for v in violations[:20]
            ]
            return disabled(title, problems)
        schema = mapped
    rules = derive_rules(ctx.rule_entries, derived.value, schema, char=ctx.card.name, user=ctx.user, zod=zod)
    problems += rules.diagnostics
    mode = "rules-required"
    if not rules.rules:
        mode = "schema-only"
        if not rules.found:
            problems.append(
                diag("mvu.rules.none", "no structured 变量更新规则: updates are checked by the schema only", Loc("adapter"), "info")
            )
    elif rules.dynamic_groups:
        mode = "schema-only"
    else:
        missing = uncovered(derived.value, rules.rules)
        if missing:
            mode = "schema-only"
            problems.append(
                diag(
                    "mvu.rules.partial_coverage",
                    f"{len(missing)} variables have no rule (e.g. {', '.join(missing[:3])}); the namespace is schema-only so they stay writable",
                    Loc("adapter"),
                    "info",
                )
            )
    definition: dict[str, Any] = {"title": title, "updateMode": mode, "schema": rules.schema, "rules": rules.rules}
    description = "\n\n".join(g for g in rules.guidance if g)
    if description:
        definition["description"] = description[: limits.MAX_DESCRIPTION]
    invalid = validate_namespace_content(definition, {"initialValue": derived.value})
    if invalid:
        problems += [diag("mvu.namespace.invalid", f"{p.message}", Loc("adapter", p.pointer), problemCode=p.code) for p in invalid[:20]]
        return disabled(title, problems)
    try:
        bootstrap_payload(definition, derived.value, setup_diagnostics=problems)
    except RpError as exc:
        problems += [diag("mvu.namespace.invalid", p.message, Loc("adapter", p.pointer), problemCode=p.code) for p in exc.problems[:20]]
        return disabled(title, problems)
    # A refused construct (a rule type, a path) has already failed closed on its own; the
    # namespace itself is sound, so it stays enabled and carries those errors as diagnostics.
    return NamespaceBuild("ok", definition, derived.value, problems, derived.vwd)


def _expand_in(value: Any, char: str, user: str) -> Any:
    if isinstance(value, str):
        return expand_macros(value, char=char, user=user)
    if isinstance(value, list):
        return [_expand_in(v, char, user) for v in value]
    if isinstance(value, dict):
        return {k: _expand_in(v, char, user) for k, v in value.items()}
    return value


def adapt_opening(ctx: _Context, greeting: Greeting, card_level: InitVarResult, base: NamespaceBuild) -> OpeningReport:
    own = greeting_initvar(greeting.text, greeting.loc, char=ctx.card.name, user=ctx.user)
    if own is None:
        namespace = base
    elif not own.ok:
        namespace = build_namespace(ctx, own)
    else:
        # The greeting's blocks replace the character's InitVar; other books merge in again.
        merged = load_initvar(ctx.books, char=ctx.card.name, user=ctx.user, skip_character=True, base=own.value)
        merged.diagnostics = [*own.diagnostics, *merged.diagnostics]
        merged.lines = {**own.lines, **merged.lines}
        merged.sources = [*own.sources, *merged.sources]
        namespace = build_namespace(ctx, merged)
    commands, problems = extract_commands(greeting.text, greeting.loc)
    text = clean_opening_text(greeting.text, commands)
    records: list[dict[str, Any]] = []
    if namespace.status == "ok" and commands:
        for command in commands:
            command.args = [expand_macros(a, char=ctx.card.name, user=ctx.user) for a in command.args]
            if command.patch is not None:
                command.patch = _expand_in(command.patch, ctx.card.name, ctx.user)
        outcome = apply_commands(namespace.initial_value, namespace.definition["schema"], namespace.vwd, commands, greeting.loc)
        problems += outcome.diagnostics
        if outcome.ok:
            records = outcome.records
            namespace = NamespaceBuild("ok", namespace.definition, outcome.value, [*namespace.diagnostics, *problems], namespace.vwd)
        else:
            # A command the schema refuses is not a structure we failed to understand: the
            # namespace stays enabled and starts from the InitVar value, as if the group were absent.
            note = diag(
                "mvu.opening.commands_refused",
                f"the opening's {len(commands)} command(s) were refused as a group; the story state starts from the InitVar value",
                greeting.loc,
                "warning",
            )
            namespace = NamespaceBuild(
                "ok", namespace.definition, copy.deepcopy(namespace.initial_value), [*namespace.diagnostics, *problems, note], namespace.vwd
            )
    elif problems:
        namespace = NamespaceBuild(
            namespace.status, namespace.definition, namespace.initial_value, [*namespace.diagnostics, *problems], namespace.vwd
        )
    return OpeningReport(greeting.key, greeting.source, greeting.index, namespace, records, text, own is not None)


def _script_notes(card: CardSource, books: list[Book]) -> list[Problem]:
    notes: list[Problem] = []
    helper = card.extensions.get("tavern_helper")
    scripts = helper.get("scripts") if isinstance(helper, dict) else None
    for i, script in enumerate(scripts if isinstance(scripts, list) else []):
        name = script.get("name") if isinstance(script, dict) else None
        notes.append(
            diag(
                "mvu.script.dropped",
                f"TavernHelper script {name!r} is not executed (event listeners, zod transforms and lodash callbacks have no native equivalent)",
                Loc(card.source, f"/data/extensions/tavern_helper/scripts/{i}"),
                "info",
            )
        )
    regexes = card.extensions.get("regex_scripts")
    for i, regex in enumerate(regexes if isinstance(regexes, list) else []):
        name = regex.get("scriptName") if isinstance(regex, dict) else None
        notes.append(
            diag(
                "mvu.script.regex_dropped",
                f"regex script {name!r} is display/prompt formatting for MVU blocks; not applied by the adapter",
                Loc(card.source, f"/data/extensions/regex_scripts/{i}"),
                "info",
            )
        )
    for book in books:
        for entry in book.entries:
            if next(ejs_tags(entry.content), None) is None:
                continue
            compiled = compile_template(entry.content, entry.loc)
            notes += compiled.diagnostics
    return notes


def inspect_card(
    card_import: Any,
    lorebooks: list[tuple[str, Any]] | None = None,
    *,
    user: str = "User",
    global_lorebooks: list[tuple[str, Any]] | None = None,
    zod_schema: Any = None,
    zod_schema_source: str = "schema.json",
    custom_greeting: str | None = None,
) -> MvuReport:
    """Everything the adapter derives from a card: namespace, rules, openings and diagnostics.

    ``lorebooks`` are additional bound books as ``(source name, decoded JSON)``, loaded after the
    character's own book; ``global_lorebooks`` load before it (MVU's order). ``zod_schema`` is an
    optional MVU Zod ``schema.json`` document.
    """
    card, problems = read_card(card_import)
    books = list(card.books)
    for role, items in (("global", global_lorebooks or []), ("additional", lorebooks or [])):
        for name, value in items:
            book, found = read_book(value, name=name, source=name, role=role)
            problems += found
            if book is not None:
                books.append(book)
    ctx = _Context(card, books, user, zod_schema, Loc(zod_schema_source))
    findings = detect(card, [b for b in books if b.role != "character"])
    card_level = load_initvar(books, char=card.name, user=user)
    base = build_namespace(ctx, card_level)
    greetings = list(card.greetings)
    if custom_greeting is not None:
        greetings.append(Greeting("custom", None, custom_greeting, Loc("custom greeting")))
    openings = [adapt_opening(ctx, g, card_level, base) for g in greetings if g.text or g.source == "default"]
    problems += _script_notes(card, books)
    return MvuReport(is_mvu(findings), findings, base, openings, problems)


def select_opening(report: MvuReport, source: str = "default", index: int | None = None) -> OpeningReport:
    """The opening the session chose (``scene.openingSource`` / ``openingIndex``)."""
    for opening in report.openings:
        if opening.source == source and (source != "alternate" or opening.index == index):
            return opening
    raise RpError("mvu.opening.not_found", f"no {source} opening" + (f" #{index}" if index is not None else ""))
