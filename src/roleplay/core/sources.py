"""Context sources for one run: every piece of material the context build can place in a slot.

The seam. Each source is contributed by a :class:`SourceProvider` that its feature registers
through the ``register_context_sources`` hook (``roleplay.hookspecs``), next to its domain:
``rp.card`` and the Character's Note in ``assets/cards/feature.py``, ``rp.persona``,
``rp.preset:*``, ``rp.writing-style:*`` and the lore slots in their asset packages,
``rp.state`` in ``state/feature.py``. Core provides only its own (player, custom prompts, summary,
history, input). :func:`collect_sources` runs the providers by stage, gives each a
:class:`SourceRun` (the bound assets read once through an :class:`~roleplay.core.types.AssetReader`,
memoised per call so every source of the run sees the same revision) and returns a
:class:`SourceSet` in the default order. With a feature off, its sources are simply absent. The
sources of the default feature set (ids from :mod:`.types`):

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
custom prompts, current input): each provider places its sources at a ``POSITION_*``, equal
positions keep the order they were added in. The layout itself belongs to the context build,
which also gets ``preset_positions`` because ``ContextSource`` has no position field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import pydantic

from roleplay.assets.cards import IsolatedPrompts
from roleplay.assets.lorebook import (
    ActivationResult,
    ChatMessage,
    LoreBook,
    LoreEngine,
    ScanSettings,
    Slot,
    TimedState,
    import_lorebook,
)
from roleplay.assets.store import AssetStore
from roleplay.errors import NotFoundError, RpError

from .conversation import Entry
from .macros import MacroContext, expand, macro_context_from
from .profile import (
    ASSET_UNAVAILABLE,
    SessionProfile,
    default_profile,
    resolve_bindings,
)
from .prompts import player_boundary
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
    STATE,
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
            self._keep(kind, asset_id, record, blob)
        return self._views[key]

    def _keep(self, kind: str, asset_id: str, record: Any, blob: Any) -> None:
        key = (kind, asset_id)
        if record is None or record.kind != kind:
            self._views[key] = None
            return
        view = record if isinstance(record, AssetView) else AssetView(record.id, record.kind, record.revision, record.data, record.name)
        if self._cache is not None:
            self._cache.put(view)
        self._views[key] = view
        if kind == "card":
            # Parsed lazily by isolated_prompts(): a corrupt blob must not hide the card.
            self._isolated.setdefault(asset_id, blob.data if blob is not None else None)

    async def prefetch(self, wanted: Iterable[tuple[str, str]]) -> None:
        """Read these ``(kind, id)`` now, in one read: one statement for all their revisions, the
        decoded views from the cache, the rest (and a card's isolated prompts) in the same read.
        What :meth:`read` then returns is exactly what it would have read one by one, as of this
        moment (a run sees one revision per asset either way). Without a view cache it does
        nothing: each read fetches its record anyway."""
        cache = self._cache
        todo = [key for key in dict.fromkeys(wanted) if key not in self._views]
        if cache is None or not todo:
            return
        ids = sorted({asset_id for _, asset_id in todo})

        async def body(tx: Any) -> dict[str, tuple[Any, Any]]:
            # The cards' isolated prompts come with the revisions, in the same statement.
            revisions, blobs = await tx.revisions_and_blobs(ids, "card", ISOLATED_ROLE)
            found: dict[str, tuple[Any, Any]] = {}
            for asset_id in ids:
                if asset_id not in revisions:
                    found[asset_id] = (None, None)
                    continue
                record = cache.get(asset_id, revisions[asset_id]) or await tx.get(asset_id)
                blob = blobs.get(asset_id) if record is not None and record.kind == "card" else None
                found[asset_id] = (record, blob)
            return found

        found = await self.store.read(body)
        for kind, asset_id in todo:
            self._keep(kind, asset_id, *found[asset_id])

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


class LoreMessages(Sequence[str]):
    """The texts the lorebook scans, oldest first: the history entries' and then the current
    input. A view, not a copy: the scan reads a few of the newest by index (at most its depth),
    so a long story's history is not copied text by text at every turn."""

    __slots__ = ("_entries", "_last")

    def __init__(self, entries: Sequence[Entry], last: str) -> None:
        self._entries, self._last = entries, last

    def __len__(self) -> int:
        return len(self._entries) + 1

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        count = len(self._entries)
        at = range(count + 1)[index]  # IndexError out of range; negative indexes from the end
        return self._last if at == count else self._entries[at].text


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


# -- the provider seam -------------------------------------------------------------------------------

# Where a source sits in :attr:`SourceSet.sources` (close to the spec's default layout). Sources
# with equal positions keep the order their providers added them in.
POSITION_PRESET_TOP = 10
POSITION_LORE_WORLD = 20
POSITION_CARD = 30
POSITION_LORE_CHARACTERS = 40
POSITION_PERSONA = 50
POSITION_PLAYER = 60
POSITION_SUMMARY = 70
POSITION_CONVERSATION = 80
POSITION_CARD_DEPTH = 90
POSITION_STATE = 100
POSITION_LORE_RULES = 110
POSITION_PRESET_BOTTOM = 120
POSITION_STYLES = 130
POSITION_PLUGIN = 135  # a third-party source that names no position of its own
POSITION_CUSTOM = 140
POSITION_CURRENT_INPUT = 150

# When a provider runs. A provider that reads another's facts (``SourceRun.facts``) runs after it:
# the lorebook scans the card and the persona, so it runs after both.
STAGE_PRESET = 10
STAGE_CARD = 20
STAGE_PERSONA = 30
STAGE_LORE = 40
STAGE_STYLES = 50
STAGE_DEFAULT = 60


@dataclass(frozen=True)
class SourceProvider:
    """One context source (or one family: ``rp.preset:*``), registered by its feature through the
    ``register_context_sources`` hook. ``collect`` reads what it needs through the
    :class:`SourceRun` and adds its sources there; an empty text adds nothing."""

    name: str
    collect: Callable[["SourceRun"], Awaitable[None]]
    stage: int = STAGE_DEFAULT


class SourceRun:
    """What one :func:`collect_sources` call gives its providers, and gathers from them."""

    def __init__(self, inputs: SourceInputs, reader: AssetReader, profile: SessionProfile) -> None:
        self.inputs = inputs
        self.profile = profile
        self.macros = inputs.macros
        self.reader = reader  # the caller's reader (isolated prompts go through it)
        self.memo = _Memo(reader)
        self.diagnostics: list[Diagnostic] = []
        self.live: dict[str, int] = {}
        self.preset_positions: dict[str, str] = {}
        self.sampling: dict[str, Any] = {}
        self.lore_timed_state = inputs.lore_timed_state
        self.lore_activation: ActivationResult | None = None
        # Facts one provider leaves for a later one: "card" (the parsed CharacterCard),
        # "persona.description".
        self.facts: dict[str, Any] = {}
        self._added: list[tuple[int, int, ContextSource]] = []

    @property
    def resources(self) -> Any:
        return self.profile.resources

    async def view(self, kind: str, asset_id: str | None) -> AssetView | None:
        """The bound asset's live revision (memoised for the run), None when unbound or gone."""
        view = await self.memo.read(kind, asset_id) if asset_id else None
        if view is not None:
            self.live[view.id] = view.revision
        return view

    def parsed(self, kind: str, view: AssetView, source_id: str | None, parse: Callable[[], Any]) -> Any:
        """``parse()``, or None with an ``asset-unavailable`` diagnostic when the stored data is
        corrupt or unsupported; any other error propagates (the spec limits degradation to the
        shared-reference boundary)."""
        try:
            return parse()
        except pydantic.ValidationError as exc:
            self.diagnostics.append(_unavailable(kind, view, "corrupt", source_id, str(exc.errors(include_url=False)[0]["msg"])))
        except RpError as exc:
            if exc.code.endswith(".unsupported") or exc.code == "lore.format.unsupported":
                self.diagnostics.append(_unavailable(kind, view, "unsupported", source_id, exc.message))
            elif exc.code.endswith(".invalid") or exc.code.startswith(("lore.", "card.")):
                self.diagnostics.append(_unavailable(kind, view, "corrupt", source_id, exc.message))
            else:
                raise
        return None

    def unavailable(self, kind: str, view: AssetView, reason: str, source_id: str | None, message: str) -> None:
        self.diagnostics.append(_unavailable(kind, view, reason, source_id, message))

    def add(self, source: ContextSource | None, position: int = POSITION_PLUGIN) -> None:
        if source is not None:
            self._added.append((position, len(self._added), source))

    def ordered(self) -> tuple[ContextSource, ...]:
        return tuple(s for _, _, s in sorted(self._added, key=lambda item: (item[0], item[1])))


def rev(view: AssetView) -> dict[str, Any]:
    """A source's ``revision`` for one shared asset."""
    return {"assetId": view.id, "revision": view.revision}


def blocks(parts: Sequence[tuple[str, str]]) -> str:
    """``Label: value`` for one-line values, ``Label:\\nvalue`` otherwise; blank values left out."""
    out = []
    for label, value in parts:
        if value.strip():
            out.append(f"{label}: {value}" if "\n" not in value and len(value) <= 80 else f"{label}:\n{value}")
    return "\n\n".join(out)


def _unavailable(kind: str, view: AssetView, reason: str, source_id: str | None, message: str) -> Diagnostic:
    return Diagnostic(
        ASSET_UNAVAILABLE,
        f"{kind} {view.id} is unusable ({reason}): {message}",
        source_id,
        {"assetId": view.id, "kind": kind, "reason": reason, "revision": view.revision},
    )


# -- core's own sources (rp-core: always on) ----------------------------------------------------------


def player_source(profile: SessionProfile) -> ContextSource:
    """``rp.player``: the stored participation's control boundary. Delivered to the parent too,
    because the parent classifies each message (acting, directing …) before calling the Writer."""
    return ContextSource(PLAYER, TITLES[PLAYER], player_boundary(profile.participation), "factual", parent_delivery="context")


def custom_sources(profile: SessionProfile, macros: MacroContext) -> list[ContextSource]:
    return [
        ContextSource(CUSTOM_PREFIX + p.id, p.title, expand(p.text, macros), "instructional")
        for p in profile.custom_prompts
        if p.text.strip()
    ]


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


_CONVERSATION_POSITIONS = {SUMMARY: POSITION_SUMMARY, CONVERSATION: POSITION_CONVERSATION, CURRENT_INPUT: POSITION_CURRENT_INPUT}


async def _core_sources(run: SourceRun) -> None:
    run.add(player_source(run.profile), POSITION_PLAYER)
    for source in conversation_sources(run.inputs.summary_text, run.inputs.conversation_text, run.inputs.current_input):
        run.add(source, _CONVERSATION_POSITIONS[source.id])
    for source in custom_sources(run.profile, run.macros):
        run.add(source, POSITION_CUSTOM)


CORE_PROVIDERS: tuple[SourceProvider, ...] = (SourceProvider("rp.core", _core_sources),)


# -- the whole set ------------------------------------------------------------------------------------


def bound_assets(profile: SessionProfile | None) -> list[tuple[str, str]]:
    """``(kind, id)`` of every asset the profile binds: what ``resolve_bindings`` reads."""
    res = (profile or default_profile()).resources
    return [
        *((("card", res.card),) if res.card else ()),
        *(("lorebook", book) for book in res.lorebooks),
        *((("persona", res.persona),) if res.persona else ()),
        *((("preset", res.preset),) if res.preset else ()),
        *(("writing-style", style) for style in res.writing_styles),
    ]


async def macro_context_for(profile: SessionProfile | None, reader: AssetReader) -> MacroContext:
    """Freeze the run's names from the live card and persona (unbound or unreadable → None)."""
    res = (profile or default_profile()).resources
    card = await reader.read("card", res.card) if res.card else None
    persona = await reader.read("persona", res.persona) if res.persona else None
    return macro_context_from(card.data if card else None, persona.data if persona else None)


async def collect_sources(inputs: SourceInputs, reader: AssetReader, providers: Sequence[SourceProvider] = ()) -> SourceSet:
    """Run core's own providers and ``providers`` (the enabled features', from the
    ``register_context_sources`` hook) by stage, in registration order within a stage."""
    profile = inputs.profile or default_profile()
    run = SourceRun(inputs, reader, profile)
    bindings, missing = await resolve_bindings(profile, run.memo)  # diagnoses missing assets once
    run.diagnostics.extend(missing)
    everyone = [*CORE_PROVIDERS, *providers]
    for _, _, provider in sorted(((p.stage, i, p) for i, p in enumerate(everyone)), key=lambda item: (item[0], item[1])):
        await provider.collect(run)
    return SourceSet(
        sources=run.ordered(),
        diagnostics=tuple(run.diagnostics),
        bindings=bindings,
        preset_positions=run.preset_positions,
        live_revisions=run.live,
        lore_timed_state=run.lore_timed_state,
        lore_activation=run.lore_activation,
        sampling=run.sampling,
    )


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
            self._books[key] = lorebook_of(view)
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


def lorebook_of(view: AssetView) -> LoreBook:
    data = view.data
    book = data.get("book") if isinstance(data, Mapping) else None
    name = data.get("name") if isinstance(data, Mapping) else None
    # The asset id is the book id: timed effects and activation reports name books by it.
    return import_lorebook(book, book_id=view.id, name=name if isinstance(name, str) else None)


__all__ = [
    "TITLES",
    "AssetViewCache",
    "LoreCache",
    "SourceInputs",
    "SourceProvider",
    "SourceRun",
    "SourceSet",
    "StoreAssetReader",
    "blocks",
    "bound_assets",
    "collect_sources",
    "conversation_sources",
    "custom_sources",
    "lorebook_of",
    "macro_context_for",
    "player_source",
    "rev",
]
