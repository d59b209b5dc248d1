"""Context sources for one run: every piece of material the context build can place in a slot.

:func:`collect_sources` reads the session's bound assets once (through an
:class:`~roleplay.core.types.AssetReader`, memoised per call so every source of the run sees the
same revision) and returns a :class:`SourceSet`. Per source (ids from :mod:`.types`):

==============================  =============  ==============  =================================
source                          class          parentDelivery  text
==============================  =============  ==============  =================================
``rp.card``                     factual        context         a note that the card never
                                                               defines the user, then name,
                                                               description, personality,
                                                               scenario, example messages; the
                                                               card's isolated prompts only once
                                                               the user trusted them
``rp.card.depth-prompt``        instructional  none            the card's Character's Note
                                                               (``extensions.depth_prompt``),
                                                               placed in the conversation at
                                                               its depth and role
``rp.persona``                  factual        context         name and description
``rp.player``                   factual        context         the user control boundary of the
                                                               stored ``participation``
``rp.lore.*`` (three)           factual        none            activated entries of that slot
``rp.state``                    factual        commit          Writer view; parent gets the
                                                               ``state_commit_contract``
``rp.preset:<field-id>``        instructional  none            each enabled, non-blank field
``rp.writing-style:<asset-id>`` instructional  none            requirements, in binding order
``rp.custom:<id>``              instructional  none            the session's own prompts
``rp.conversation-summary``     factual        none            caller's text + context note
``rp.conversation``             factual        none            caller's text + context note
``rp.current-input``            factual        none            caller's text
==============================  =============  ==============  =================================

Availability. A shared asset that is missing, corrupt (its kind's parser rejects the stored data)
or in an unsupported format is skipped with an ``asset-unavailable`` diagnostic; the binding stays
in :attr:`SourceSet.bindings` for the parent to repair. Anything else (the store failing, a bad
profile, a code error) raises: the spec limits the degradation to the shared-reference boundary.
A source whose text would be empty (no namespace in State, no activated entry, a blank field, no
history) simply does not exist this run — no tag, no placeholder.

Macros. Asset material and custom prompts are expanded with the run's :class:`MacroContext` here,
lore keys and contents through the activation's ``substitute`` hook (as SillyTavern does). The
conversation, summary and current input are taken as the caller gives them: the input was expanded
when it entered the log and history is what the surface holds. State is data and is never
expanded (the commit contract must match the projection byte for byte).

The player boundary. ``rp.player`` is internal: not an asset, always present (even with nothing
bound), and its text depends on the profile's ``participation`` alone, so nothing a card or a
persona says can move control of a character to or from the user (spec 安全与确定性).

Order. :attr:`SourceSet.sources` is a stable order close to the spec's default layout (top preset
fields, world, card, characters, persona, history, state, rules, bottom preset fields, styles,
custom prompts, current input); the layout itself belongs to the context build, which also gets
``preset_positions`` because ``ContextSource`` has no position field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from roleplay.assets.cards import CharacterCard, IsolatedPrompts, st_depth_prompt
from roleplay.assets.lorebook import (
    ActivationResult,
    ChatMessage,
    GlobalScanData,
    LoreBook,
    LoreEngine,
    ScanSettings,
    Slot,
    TimedState,
    TurnInput,
    import_lorebook,
)
from roleplay.assets.personas import parse_persona
from roleplay.assets.presets import parse_preset
from roleplay.assets.store import AssetStore
from roleplay.assets.styles import parse_writing_style
from roleplay.errors import NotFoundError, RpError
from roleplay.state import (
    evaluate_condition,
    render_commit_contract,
    render_writer_view,
)
from roleplay.state.shape import namespace_values

from .macros import MacroContext, expand, macro_context_from
from .profile import (
    ASSET_UNAVAILABLE,
    SessionProfile,
    default_profile,
    resolve_bindings,
)
from .prompts import CARD_NOTE, player_boundary
from .types import (
    CARD,
    CARD_DEPTH_PROMPT,
    CONVERSATION,
    CURRENT_INPUT,
    CUSTOM_PREFIX,
    LORE_CHARACTERS,
    LORE_RULES,
    LORE_WORLD,
    PERSONA,
    PLAYER,
    PRESET_PREFIX,
    STATE,
    STYLE_PREFIX,
    SUMMARY,
    AssetReader,
    AssetView,
    ContextSource,
    Diagnostic,
)

# Titles label a source in the prompt workbench and as ``<item name>`` when a slot groups several;
# the fixed ones match the default slot names of ``context_build`` so a grouped slot reads the same.
TITLES = {
    CARD: "Character",
    CARD_DEPTH_PROMPT: "Character's note",
    PERSONA: "Persona",
    PLAYER: "Player",
    LORE_WORLD: "World",
    LORE_CHARACTERS: "Character lore",
    LORE_RULES: "Important rules",
    STATE: "Story state",
    SUMMARY: "Conversation summary",
    CONVERSATION: "Conversation",
    CURRENT_INPUT: "Current input",
}
LORE_SLOTS = {Slot.WORLD_DESCRIPTION: LORE_WORLD, Slot.CHARACTER_DESCRIPTIONS: LORE_CHARACTERS, Slot.IMPORTANT_RULES: LORE_RULES}
ISOLATED_ROLE = "isolated-prompts"


# -- reading assets ---------------------------------------------------------------------------------


class AssetViewCache:
    """Decoded asset views of ONE asset store by (id, revision). An asset's data never changes
    under a revision, so a run that finds the same revision reuses the decoded view instead of
    parsing the JSON again (a big lorebook is megabytes). Bounded, least recently used out."""

    def __init__(self, max_entries: int = 256) -> None:
        self._views: dict[tuple[str, int], AssetView] = {}
        self._max = max_entries

    def get(self, asset_id: str, revision: int) -> AssetView | None:
        view = self._views.pop((asset_id, revision), None)
        if view is not None:
            self._views[(asset_id, revision)] = view
        return view

    def put(self, view: AssetView) -> None:
        self._views[(view.id, view.revision)] = view
        while len(self._views) > self._max:
            self._views.pop(next(iter(self._views)))


class StoreAssetReader:
    """:class:`AssetReader` over the shared :class:`AssetStore`. Create one per run: reads are
    memoised, so all sources (and the bindings) of a run come from one revision per asset.

    A card and its ``isolated-prompts`` blob are read in one transaction, so the trust flag always
    belongs to the card revision that was read. ``isolated`` may replace that lookup (e.g.
    ``AssetService.isolated_prompts``)."""

    def __init__(
        self,
        store: AssetStore,
        *,
        isolated: Callable[[str], Awaitable[IsolatedPrompts | None]] | None = None,
        cache: AssetViewCache | None = None,
    ) -> None:
        self.store = store
        self._isolated_fn = isolated
        self._cache = cache
        self._views: dict[tuple[str, str], AssetView | None] = {}
        self._isolated: dict[str, IsolatedPrompts | bytes | None] = {}  # raw blob until first parsed

    async def read(self, kind: str, asset_id: str) -> AssetView | None:
        key = (kind, asset_id)
        if key not in self._views:
            cache = self._cache

            async def body(tx: Any) -> tuple[Any, Any]:
                cached = None
                if cache is not None:
                    row = await tx.conn.fetchone("SELECT kind, revision FROM assets WHERE id=?", (asset_id,))
                    cached = cache.get(asset_id, int(row[1])) if row is not None else None
                    if row is None:
                        return None, None
                record = cached or await tx.get(asset_id)
                blob = await tx.blob(asset_id, ISOLATED_ROLE) if record is not None and record.kind == "card" else None
                return record, blob

            record, blob = await self.store.read(body)
            if record is None or record.kind != kind:
                self._views[key] = None
            else:
                view = (
                    record
                    if isinstance(record, AssetView)
                    else AssetView(record.id, record.kind, record.revision, record.data, record.name)
                )
                if cache is not None:
                    cache.put(view)
                self._views[key] = view
                if kind == "card":
                    # Parsed lazily by isolated_prompts(): a corrupt blob must not hide the card.
                    self._isolated.setdefault(asset_id, blob.data if blob is not None else None)
        return self._views[key]

    async def isolated_prompts(self, card_id: str) -> IsolatedPrompts | None:
        """The card's isolated prompts (empty and untrusted when it has none), None when the card
        is gone. Raises ``pydantic.ValidationError`` / ``ValueError`` for a corrupt blob."""
        if self._isolated_fn is not None:
            try:
                return await self._isolated_fn(card_id)
            except NotFoundError as exc:
                if exc.code == "asset.not_found":
                    return None
                raise
        if await self.read("card", card_id) is None:
            return None
        raw = self._isolated.get(card_id)
        if raw is None or isinstance(raw, IsolatedPrompts):
            return raw if raw is not None else IsolatedPrompts()
        parsed = IsolatedPrompts.model_validate_json(raw)
        self._isolated[card_id] = parsed
        return parsed


class _Memo:
    """Per-call memo over any reader, so one run never sees two revisions of an asset."""

    def __init__(self, reader: AssetReader) -> None:
        self.reader = reader
        self.views: dict[tuple[str, str], AssetView | None] = {}

    async def read(self, kind: str, asset_id: str) -> AssetView | None:
        key = (kind, asset_id)
        if key not in self.views:
            self.views[key] = await self.reader.read(kind, asset_id)
        return self.views[key]


# -- inputs and outputs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceInputs:
    run_id: str  # also seeds the lore probability and inclusion-group rolls
    profile: SessionProfile | None
    macros: MacroContext
    state: Mapping[str, Any] | None = None  # the rp/state view document; None when State is off
    conversation_text: str = ""
    summary_text: str = ""
    current_input: str = ""
    lore_messages: Sequence[ChatMessage | str] = ()  # chronological, oldest first
    lore_chat_length: int | None = None
    lore_timed_state: TimedState = field(default_factory=TimedState)
    lore_settings: ScanSettings | None = None
    lore_cache: "LoreCache | None" = None  # compiled books and engines, reused across runs
    # Renders an entry's template before macros (the MVU adapter's read-only EJS subset); gets
    # the text and a title → content lookup over the bound books (``getwi``).
    lore_template: Callable[[str, Callable[[str], str | None]], str] | None = None
    card_text_transform: Callable[[str], str] | None = None  # e.g. strip community control blocks
    generation_type: str = "normal"


@dataclass(frozen=True)
class SourceSet:
    sources: tuple[ContextSource, ...]
    diagnostics: tuple[Diagnostic, ...]
    bindings: dict[str, Any]  # {characterId, lorebookIds, personaId, presetId, writingStyleIds}
    preset_positions: dict[str, str]  # rp.preset:<field-id> → "top" | "bottom" (default layout)
    live_revisions: dict[str, int]  # asset id → revision, for every asset read successfully
    lore_timed_state: TimedState  # what to persist for the next turn (unchanged when no book ran)
    lore_activation: ActivationResult | None = None
    # The bound preset's generation settings (``Sampling.given()``: temperature, top_p, penalties,
    # max_tokens, context_size); empty without a preset or when it sets none.
    sampling: dict[str, Any] = field(default_factory=dict)

    def by_id(self) -> dict[str, ContextSource]:
        return {s.id: s for s in self.sources}


def _unavailable(kind: str, view: AssetView, reason: str, source_id: str | None, message: str) -> Diagnostic:
    return Diagnostic(
        ASSET_UNAVAILABLE,
        f"{kind} {view.id} is unusable ({reason}): {message}",
        source_id,
        {"assetId": view.id, "kind": kind, "reason": reason, "revision": view.revision},
    )


def _rev(view: AssetView) -> dict[str, Any]:
    return {"assetId": view.id, "revision": view.revision}


def _blocks(parts: Sequence[tuple[str, str]]) -> str:
    """``Label: value`` for one-line values, ``Label:\\nvalue`` otherwise; blank values left out."""
    out = []
    for label, value in parts:
        if value.strip():
            out.append(f"{label}: {value}" if "\n" not in value and len(value) <= 80 else f"{label}:\n{value}")
    return "\n\n".join(out)


# -- the providers (pure: parsed asset data in, a source out) ------------------------------------------


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
    text = expand(_blocks(parts), macros)
    if not text:
        return None
    text = f"{CARD_NOTE}\n\n{text}"
    return ContextSource(CARD, TITLES[CARD], text, "factual", parent_delivery="context", shared_reference=True, revision=_rev(view))


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
        revision=_rev(view),
        depth=note.depth,
        role=note.role,
    )


def persona_source(view: AssetView, macros: MacroContext) -> ContextSource | None:
    persona = parse_persona(view.data)
    text = expand(_blocks([("Name", persona.name), ("Description", persona.description)]), macros)
    return ContextSource(PERSONA, TITLES[PERSONA], text, "factual", parent_delivery="context", shared_reference=True, revision=_rev(view))


def player_source(profile: SessionProfile) -> ContextSource:
    """``rp.player``: the stored participation's control boundary. Delivered to the parent too,
    because the parent classifies each message (acting, directing …) before calling the Writer."""
    return ContextSource(PLAYER, TITLES[PLAYER], player_boundary(profile.participation), "factual", parent_delivery="context")


def preset_sources(view: AssetView, macros: MacroContext) -> tuple[list[ContextSource], dict[str, str]]:
    """One ``rp.preset:<field-id>`` per enabled, non-blank field, in the preset's order (top
    fields first), and each field's ``position`` for the default layout."""
    preset = parse_preset(view.data)
    sources, positions = [], {}
    for f in preset.fields:
        if not f.contributes():
            continue
        sid = PRESET_PREFIX + f.id
        sources.append(
            ContextSource(
                sid,
                f.title,
                expand(f.content, macros),
                "instructional",
                shared_reference=True,
                default_section_tag=f.section_tag,
                revision=_rev(view),
            )
        )
        positions[sid] = f.position
    return sources, positions


def style_source(view: AssetView, macros: MacroContext) -> ContextSource | None:
    style = parse_writing_style(view.data)
    if not style.contributes():
        return None
    return ContextSource(
        STYLE_PREFIX + view.id, style.name, expand(style.requirements, macros), "instructional", shared_reference=True, revision=_rev(view)
    )


def custom_sources(profile: SessionProfile, macros: MacroContext) -> list[ContextSource]:
    return [
        ContextSource(CUSTOM_PREFIX + p.id, p.title, expand(p.text, macros), "instructional")
        for p in profile.custom_prompts
        if p.text.strip()
    ]


def state_source(view: Mapping[str, Any] | None) -> ContextSource | None:
    """``rp.state``: compact Writer view; the parent gets the commit contract instead."""
    if view is None:
        return None
    text = render_writer_view(view)
    if not text:
        return None
    return ContextSource(STATE, TITLES[STATE], text, "factual", parent_delivery="commit", parent_text=render_commit_contract(view))


def conversation_sources(summary: str, conversation: str, current_input: str) -> list[ContextSource]:
    """The three sources that must always take part (``idle_allowed=False``). Blank texts give no
    source: without a checkpoint there is no summary, without history no history. The history
    texts come from ``core.conversation`` with their English context notes already in place."""
    out = []
    if summary.strip():
        out.append(ContextSource(SUMMARY, TITLES[SUMMARY], summary, "factual", idle_allowed=False))
    if conversation.strip():
        out.append(ContextSource(CONVERSATION, TITLES[CONVERSATION], conversation, "factual", idle_allowed=False))
    if current_input.strip():
        out.append(ContextSource(CURRENT_INPUT, TITLES[CURRENT_INPUT], current_input, "factual", idle_allowed=False))
    return out


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
                revision={"assets": [_rev(views[b]) for b in used]},
            )
        )
    return out, result


# -- the whole set ------------------------------------------------------------------------------------


async def macro_context_for(profile: SessionProfile | None, reader: AssetReader) -> MacroContext:
    """Freeze the run's names from the live card and persona (unbound or unreadable → None)."""
    res = (profile or default_profile()).resources
    card = await reader.read("card", res.card) if res.card else None
    persona = await reader.read("persona", res.persona) if res.persona else None
    return macro_context_from(card.data if card else None, persona.data if persona else None)


async def collect_sources(inputs: SourceInputs, reader: AssetReader) -> SourceSet:
    memo = _Memo(reader)
    profile = inputs.profile or default_profile()
    res = profile.resources
    macros = inputs.macros
    bindings, missing = await resolve_bindings(profile, memo)  # diagnoses missing assets once
    diagnostics: list[Diagnostic] = list(missing)
    live: dict[str, int] = {}

    async def view_of(kind: str, asset_id: str | None) -> AssetView | None:
        view = await memo.read(kind, asset_id) if asset_id else None
        if view is not None:
            live[view.id] = view.revision
        return view

    def parsed(kind: str, view: AssetView, source_id: str | None, parse: Callable[[], Any]) -> Any:
        try:
            return parse()
        except pydantic.ValidationError as exc:
            diagnostics.append(_unavailable(kind, view, "corrupt", source_id, str(exc.errors(include_url=False)[0]["msg"])))
        except RpError as exc:
            if exc.code.endswith(".unsupported") or exc.code == "lore.format.unsupported":
                diagnostics.append(_unavailable(kind, view, "unsupported", source_id, exc.message))
            elif exc.code.endswith(".invalid") or exc.code.startswith(("lore.", "card.")):
                diagnostics.append(_unavailable(kind, view, "corrupt", source_id, exc.message))
            else:
                raise
        return None

    top: list[ContextSource] = []
    bottom: list[ContextSource] = []
    positions: dict[str, str] = {}
    sampling: dict[str, Any] = {}
    preset_view = await view_of("preset", res.preset)
    if preset_view is not None:
        got = parsed("preset", preset_view, None, lambda: preset_sources(preset_view, macros))
        if got is not None:
            sources, positions = got
            top = [s for s in sources if positions[s.id] == "top"]
            bottom = [s for s in sources if positions[s.id] == "bottom"]
            preset_sampling = parse_preset(preset_view.data).sampling
            sampling = preset_sampling.given() if preset_sampling is not None else {}

    card_view = await view_of("card", res.card)
    card: CharacterCard | None = None
    card_src: ContextSource | None = None
    depth_src: ContextSource | None = None
    if card_view is not None:
        card = parsed("card", card_view, CARD, lambda: CharacterCard.model_validate(card_view.data))
        if card is not None:
            isolated = await _isolated(memo.reader, card_view, diagnostics)
            card_src = card_source(card_view, macros, isolated, inputs.card_text_transform)
            depth_src = depth_prompt_source(card_view, card, macros, inputs.card_text_transform)

    persona_view = await view_of("persona", res.persona)
    persona_src = None
    persona_description = ""
    if persona_view is not None:
        persona_src = parsed("persona", persona_view, PERSONA, lambda: persona_source(persona_view, macros))
        if persona_src is not None:
            persona_description = parse_persona(persona_view.data).description

    books: list[tuple[AssetView, LoreBook]] = []
    for book_id in res.lorebooks:
        view = await view_of("lorebook", book_id)
        if view is not None:
            book = parsed("lorebook", view, None, lambda v=view: inputs.lore_cache.book(v) if inputs.lore_cache else _lorebook(v))
            if book is not None:
                books.append((view, book))
    lore: dict[str, ContextSource] = {}
    activation = None
    timed = inputs.lore_timed_state
    if books:
        found, activation = lore_sources(books, inputs, card, persona_description)
        lore = {s.id: s for s in found}
        timed = activation.timed_state
        diagnostics.extend(
            Diagnostic(p.code, p.message, None, {"pointer": p.pointer, **p.details} if p.pointer else dict(p.details))
            for p in activation.diagnostics
        )

    styles: list[ContextSource] = []
    for style_id in res.writing_styles:
        view = await view_of("writing-style", style_id)
        if view is not None:
            src = parsed("writing-style", view, STYLE_PREFIX + style_id, lambda v=view: style_source(v, macros))
            if src is not None:
                styles.append(src)

    summary, conversation, current = _split(conversation_sources(inputs.summary_text, inputs.conversation_text, inputs.current_input))
    ordered = [
        *top,
        lore.get(LORE_WORLD),
        card_src,
        lore.get(LORE_CHARACTERS),
        persona_src,
        player_source(profile),
        summary,
        conversation,
        depth_src,
        state_source(inputs.state),
        lore.get(LORE_RULES),
        *bottom,
        *styles,
        *custom_sources(profile, macros),
        current,
    ]
    return SourceSet(
        sources=tuple(s for s in ordered if s is not None),
        diagnostics=tuple(diagnostics),
        bindings=bindings,
        preset_positions=positions,
        live_revisions=live,
        lore_timed_state=timed,
        lore_activation=activation,
        sampling=sampling,
    )


def _split(sources: list[ContextSource]) -> tuple[ContextSource | None, ContextSource | None, ContextSource | None]:
    by_id = {s.id: s for s in sources}
    return by_id.get(SUMMARY), by_id.get(CONVERSATION), by_id.get(CURRENT_INPUT)


class LoreCache:
    """Parsed books and compiled engines of ONE asset store, keyed by (asset id, revision).

    Compiling thousands of entries costs far more than activating them, and an asset's content
    never changes under a given revision, so a run reuses what an earlier run compiled (the
    lorebook package's "compile once per book revision"). It must not be shared between stores:
    another database can hold different content under the same id and revision.
    """

    def __init__(self, max_engines: int = 16) -> None:
        self._books: dict[tuple[str, int], LoreBook] = {}
        self._engines: dict[tuple[Any, ...], LoreEngine] = {}
        self._max = max_engines

    def book(self, view: AssetView) -> LoreBook:
        key = (view.id, view.revision)
        if key not in self._books:
            if len(self._books) >= self._max * 4:
                self._books.clear()
            self._books[key] = _lorebook(view)
        return self._books[key]

    def engine(self, books: Sequence[tuple[AssetView, LoreBook]], settings: ScanSettings | None) -> LoreEngine:
        key = (tuple((v.id, v.revision) for v, _ in books), settings)
        engine = self._engines.pop(key, None)
        if engine is None:
            engine = LoreEngine([b for _, b in books], settings)
        self._engines[key] = engine  # most recently used last
        while len(self._engines) > self._max:
            self._engines.pop(next(iter(self._engines)))
        return engine


def _lorebook(view: AssetView) -> LoreBook:
    data = view.data
    book = data.get("book") if isinstance(data, Mapping) else None
    name = data.get("name") if isinstance(data, Mapping) else None
    # The asset id is the book id: timed effects and activation reports name books by it.
    return import_lorebook(book, book_id=view.id, name=name if isinstance(name, str) else None)


async def _isolated(reader: AssetReader, view: AssetView, diagnostics: list[Diagnostic]) -> IsolatedPrompts | None:
    """The card's isolated prompts when the reader offers them; a corrupt blob only costs the
    prompts (the card itself is fine), with a diagnostic."""
    lookup = getattr(reader, "isolated_prompts", None)
    if lookup is None:
        return None
    try:
        return await lookup(view.id)  # type: ignore[no-any-return]
    except (pydantic.ValidationError, ValueError) as exc:
        diagnostics.append(_unavailable("card", view, "corrupt", CARD, f"isolated prompts unreadable: {exc.__class__.__name__}"))
        return None


__all__ = [
    "TITLES",
    "SourceInputs",
    "SourceSet",
    "AssetViewCache",
    "LoreCache",
    "StoreAssetReader",
    "card_source",
    "collect_sources",
    "conversation_sources",
    "custom_sources",
    "lore_sources",
    "macro_context_for",
    "persona_source",
    "player_source",
    "preset_sources",
    "state_gate",
    "state_source",
    "style_source",
]
