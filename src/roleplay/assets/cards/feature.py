"""``rp-character-card`` as a plugin: the ``rp.card`` and ``rp.card.depth-prompt`` sources, and the
card's regex scripts over the conversation the Writer prompt reads (``card_prompt_scripts``).

A feature module above core (``tests/test_layers.py`` gives it the adapters' layer): it reads the
bound card through the run's :class:`~roleplay.core.sources.SourceRun` and adds its two sources.
Turning the feature off removes both; the session's card binding stays (spec: disabling an asset
feature never clears a binding), and the identity macros still read the card's name (``rp-macro``
finds the live card at the call boundary).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic

from roleplay.assets.cards import CharacterCard, IsolatedPrompts, st_depth_prompt
from roleplay.assets.cards.regex_scripts import has_regex_scripts, prompt_scripts
from roleplay.core.macros import MacroContext, expand
from roleplay.core.prompt_history import PromptHistory
from roleplay.core.prompts import CARD_NOTE
from roleplay.core.sources import (
    POSITION_CARD,
    POSITION_CARD_DEPTH,
    STAGE_CARD,
    TITLES,
    SourceProvider,
    SourceRun,
    blocks,
    rev,
)
from roleplay.core.types import CARD, CARD_DEPTH_PROMPT, CONVERSATION, AssetReader, AssetView, ContextSource, Diagnostic
from roleplay.hookspecs import hookimpl
from roleplay.names import CHARACTER_CARD_FEATURE

FEATURE = CHARACTER_CARD_FEATURE
REGEX_SCRIPT_SKIPPED = "card.regex_script_skipped"


def card_source(
    view: AssetView, macros: MacroContext, isolated: IsolatedPrompts | None = None, transform: Callable[[str], str] | None = None
) -> ContextSource | None:
    """``rp.card``. Raises ``pydantic.ValidationError`` when the stored card does not parse."""
    card = CharacterCard.model_validate(view.data)
    parts = [
        ("Name", card.display_name()),
        ("Description", card.description),
        ("Personality", card.personality),
        ("Scenario", card.scenario),
        ("Example messages", card.mes_example),
    ]
    if isolated is not None and isolated.trusted:
        # ``{{original}}`` means "the prompt this one overrides"; the Writer has no such prompt.
        parts += [
            ("Character system prompt", isolated.system_prompt.replace("{{original}}", "")),
            ("Post-history instructions", isolated.post_history_instructions.replace("{{original}}", "")),
        ]
    if transform is not None:
        parts = [(label, transform(value)) for label, value in parts]
    text = expand(blocks(parts), macros)
    if not text:
        return None
    text = f"{CARD_NOTE}\n\n{text}"
    return ContextSource(CARD, TITLES[CARD], text, "factual", parent_delivery="context", shared_reference=True, revision=rev(view))


def depth_prompt_source(
    view: AssetView, card: CharacterCard, macros: MacroContext, transform: Callable[[str], str] | None = None
) -> ContextSource | None:
    """``rp.card.depth-prompt``: the card's Character's Note with SillyTavern's depth and role
    (defaults 4 and system). Not an isolated prompt: ST sends it without asking, as the spec's
    isolation covers only ``system_prompt`` and ``post_history_instructions``."""
    note = st_depth_prompt(card)
    if note is None:
        return None
    text = transform(note.prompt) if transform is not None else note.prompt
    text = expand(text, macros)
    if not text.strip():
        return None
    return ContextSource(
        CARD_DEPTH_PROMPT,
        TITLES[CARD_DEPTH_PROMPT],
        text,
        "instructional",
        shared_reference=True,
        revision=rev(view),
        depth=note.depth,
        role=note.role,
    )


async def isolated_prompts(run: SourceRun, view: AssetView) -> IsolatedPrompts | None:
    """The card's isolated prompts when the reader offers them; a corrupt blob only costs the
    prompts (the card itself is fine), with a diagnostic."""
    lookup: Any = getattr(run.reader, "isolated_prompts", None)
    if lookup is None:
        return None
    try:
        return await lookup(view.id)  # type: ignore[no-any-return]
    except (pydantic.ValidationError, ValueError) as exc:
        run.unavailable("card", view, "corrupt", CARD, f"isolated prompts unreadable: {exc.__class__.__name__}")
        return None


async def collect_card(run: SourceRun) -> None:
    view = await run.view("card", run.resources.card)
    if view is None:
        return
    card = run.parsed("card", view, CARD, lambda: CharacterCard.model_validate(view.data))
    if card is None:
        return
    run.facts["card"] = card  # the lorebook scans the card's fields
    transform = run.inputs.card_text_transform
    isolated = await isolated_prompts(run, view)
    run.add(card_source(view, run.macros, isolated, transform), POSITION_CARD)
    run.add(depth_prompt_source(view, card, run.macros, transform), POSITION_CARD_DEPTH)


async def card_prompt_scripts(history: PromptHistory, reader: AssetReader) -> None:
    """The bound card's regex scripts that target the prompt, over the conversation the Writer
    reads (``assets.cards.regex_scripts``); a script the guard stops is skipped with a diagnostic."""
    card_id = history.profile.resources.card
    view = await reader.read("card", card_id) if card_id else None
    if view is None or not has_regex_scripts(view.data):
        return
    scripts = prompt_scripts(view.data)
    if scripts.scripts:
        history.rewrite(scripts.apply)
    history.diagnostics += [
        Diagnostic(REGEX_SCRIPT_SKIPPED, f"card regex script skipped in the prompt: {why}", CONVERSATION, {"assetId": view.id})
        for why in scripts.skipped
    ]


@hookimpl
def register_context_sources(register: Any) -> None:
    register(SourceProvider(CARD, collect_card, STAGE_CARD))


@hookimpl
def register_history_transformers(register: Any) -> None:
    register(card_prompt_scripts)


__all__ = ["FEATURE", "card_prompt_scripts", "card_source", "collect_card", "depth_prompt_source", "isolated_prompts"]
