"""``rp-lore-book`` as a plugin: the three lore slot sources (``rp.lore.world-description``,
``rp.lore.character-descriptions``, ``rp.lore.important-rules``) from the bound books, activated
once per run, and the timed-effect state the next run reads.

The lorebook does not need ``rp-state`` (spec): without State the run's state is None and every
``stateCondition`` entry fails closed (:func:`state_gate`). It runs after the card and persona
providers because activation scans their fields (``SourceRun.facts``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from roleplay.assets.cards import CharacterCard, st_depth_prompt
from roleplay.assets.lorebook import ActivationResult, GlobalScanData, LoreBook, LoreEngine, Slot, TurnInput
from roleplay.core.macros import expand
from roleplay.core.sources import (
    POSITION_LORE_CHARACTERS,
    POSITION_LORE_RULES,
    POSITION_LORE_WORLD,
    STAGE_LORE,
    TITLES,
    SourceInputs,
    SourceProvider,
    SourceRun,
    lorebook_of,
    rev,
)
from roleplay.core.types import LORE_CHARACTERS, LORE_RULES, LORE_WORLD, AssetView, ContextSource, Diagnostic
from roleplay.hookspecs import hookimpl
from roleplay.state import evaluate_condition
from roleplay.state.shape import namespace_values
from roleplay.names import LOREBOOK_FEATURE

FEATURE = LOREBOOK_FEATURE
LORE_SLOTS = {Slot.WORLD_DESCRIPTION: LORE_WORLD, Slot.CHARACTER_DESCRIPTIONS: LORE_CHARACTERS, Slot.IMPORTANT_RULES: LORE_RULES}
POSITIONS = {LORE_WORLD: POSITION_LORE_WORLD, LORE_CHARACTERS: POSITION_LORE_CHARACTERS, LORE_RULES: POSITION_LORE_RULES}


def state_gate(view: Mapping[str, Any] | None) -> Callable[[str], bool | None]:
    """The lorebook ``stateCondition`` evaluator: None (fail closed) when State is unavailable."""
    if view is None:
        return lambda _expr: None
    values = namespace_values(dict(view))
    return lambda expr: evaluate_condition(expr, values)[0]


def _substitute(inputs: SourceInputs, books: Sequence[tuple[AssetView, LoreBook]]) -> Callable[[str], str]:
    template = inputs.lore_template
    if template is None:
        return lambda text: expand(text, inputs.macros)
    titles: dict[str, str] | None = None

    def lookup(title: str) -> str | None:
        nonlocal titles
        if titles is None:  # built on the first getwi only: most turns never need it
            titles = {}
            for _, book in books:
                for entry in book.entries:
                    titles.setdefault(entry.comment, entry.content)
        return titles.get(title)

    return lambda text: expand(template(text, lookup), inputs.macros)


def lore_sources(
    books: Sequence[tuple[AssetView, LoreBook]], inputs: SourceInputs, card: CharacterCard | None, persona_description: str
) -> tuple[list[ContextSource], ActivationResult]:
    """Activate the bound books (binding order) for this run and build the three slot sources."""
    if inputs.lore_cache is not None:
        engine = inputs.lore_cache.engine(books, inputs.lore_settings)
    else:
        engine = LoreEngine([b for _, b in books], inputs.lore_settings)
    depth = st_depth_prompt(card) if card is not None else None
    scan = GlobalScanData(
        persona_description=persona_description,
        character_description=card.description if card else "",
        character_personality=card.personality if card else "",
        character_depth_prompt=depth.prompt if depth else "",
        scenario=card.scenario if card else "",
        creator_notes=card.creator_notes if card else "",
    )
    result = engine.activate(
        TurnInput(
            run_id=inputs.run_id,
            messages=inputs.lore_messages,
            chat_length=inputs.lore_chat_length,
            timed_state=inputs.lore_timed_state,
            state_condition=state_gate(inputs.state),
            global_scan_data=scan,
            generation_type=inputs.generation_type,
            character_name=card.name if card else None,
            character_tags=card.tags if card else None,
            substitute=_substitute(inputs, books),
        )
    )
    views = {b.id: v for v, b in books}
    out = []
    for slot, entries in result.slots().items():
        if not entries:
            continue
        used = list(dict.fromkeys(a.book_id for a in entries))
        sid = LORE_SLOTS[slot]
        out.append(
            ContextSource(
                sid,
                TITLES[sid],
                "\n".join(a.content for a in entries),
                "factual",
                shared_reference=True,
                revision={"assets": [rev(views[b]) for b in used]},
            )
        )
    return out, result


async def collect_lore(run: SourceRun) -> None:
    inputs = run.inputs
    books: list[tuple[AssetView, LoreBook]] = []
    for book_id in run.resources.lorebooks:
        view = await run.view("lorebook", book_id)
        if view is not None:
            book = run.parsed("lorebook", view, None, lambda: inputs.lore_cache.book(view) if inputs.lore_cache else lorebook_of(view))
            if book is not None:
                books.append((view, book))
    if not books:
        return
    # Without the card or persona feature their fields are simply not scanned.
    found, activation = lore_sources(books, inputs, run.facts.get("card"), run.facts.get("persona.description", ""))
    for source in found:
        run.add(source, POSITIONS[source.id])
    run.lore_activation = activation
    run.lore_timed_state = activation.timed_state
    run.diagnostics.extend(
        Diagnostic(p.code, p.message, None, {"pointer": p.pointer, **p.details} if p.pointer else dict(p.details))
        for p in activation.diagnostics
    )


@hookimpl
def register_context_sources(register: Any) -> None:
    register(SourceProvider("rp.lore", collect_lore, STAGE_LORE))


__all__ = ["FEATURE", "LORE_SLOTS", "collect_lore", "lore_sources", "state_gate"]
