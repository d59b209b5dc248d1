"""The session's context build: slot layout, serialisation and the frozen build of one run.

Spec (``roleplay-plugins.zh.md`` 产品边界, 数据所有权): a session orders its material in
``contextBuild.slots``; every enabled slot whose sources are available this run goes verbatim into
the Writer's flat prompt, in that order.

Window (issue 12, a departure from the spec's "no local trimming")
    A long story outgrows any window, so ``rp.conversation`` is the one source that gives way:
    :func:`freeze` keeps whole messages, newest first, as many as fit the budget, which is the
    Writer route's context window minus every other slot, the Writer's system prompt and framing,
    and a reply reserve (:func:`writer_budget`). A message is never split; the oldest go first; a
    ``context.history_trimmed`` diagnostic says how many were left out. Every other slot stays
    verbatim (they are the story's rules and facts); if they alone overflow, a
    ``context.over_window`` diagnostic says so and the provider's own check has the last word.
    Tokens are estimated by ``harness.models.tokens`` (deterministic, no vocabulary download), so
    a replay or ``rp prompt`` in another process builds the same prompt.

Layout
    Without a saved layout a session uses :func:`default_layout`, with the conversation history as
    the axis (top preset fields above the card, bottom preset fields below the important rules).
    Once it saved its own layout, :func:`effective_layout` keeps that order and grouping and only
    places sources it has never seen (a newly bound writing style, a new preset field).

Character's Note (``rp.card.depth-prompt``)
    SillyTavern injects a card's ``depth_prompt`` into the chat ``depth`` messages back from the
    newest (0: after the last one; deeper than the chat: before the first). Here it does the same
    inside the conversation text, as a labelled block among the messages, whenever its slot also
    holds ``rp.conversation`` (the default: it joins that slot, also in a saved layout that never
    placed it). Moved to a slot of its own in the workbench, it is an ordinary section there;
    idled, it is gone. Trimming the history never drops it: it is re-placed among the messages
    that were kept.

Serialisation
    ``sectionTag`` on wraps a slot in ``<section name="…">`` and, when several sources made it in,
    each in ``<item name="…">``; off concatenates the source texts. Neither form carries slot or
    source ids, revisions, hashes or bindings, so the Writer sees material, not bookkeeping.

Escaping (why it is boundary-safe and not full XML escaping)
    Source text is user and asset material; it must not be able to close our boundaries or fake
    the parent's request envelope. We neutralise exactly the tags we generate, by turning their
    ``<`` into ``&lt;``: the request-level tags (:data:`REQUEST_TAGS`) in every slot, and
    ``section``/``item`` only in ``sectionTag`` slots, because an off slot generates no such
    boundaries (the spec: off slots neither generate nor escape them). Every other tag the
    material uses (``<status>``, HTML in a card) stays byte-for-byte, since cards and presets
    legitimately speak in tags.

Errors carry JSON Pointers into the session profile (``/contextBuild/slots/<index>``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from roleplay.canonical import sha256_hex
from roleplay.errors import ValidationError
from roleplay.harness.history import IMAGE_TOKENS, reply_reserve
from roleplay.harness.models.routes import Route, route_context_window
from roleplay.harness.models.tokens import Stats, add_stats, count_tokens, part_stats
from roleplay.harness.models.tokens import stats_tokens as tokens_of

from .conversation import CONVERSATION_NOTE, Entry, render_entries
from .context_epoch import build_epoch
from .conversation_window import tally as window_tally
from .types import (
    CARD,
    CARD_DEPTH_PROMPT,
    CONVERSATION,
    CURRENT_INPUT,
    CUSTOM_PREFIX,
    LORE_CHARACTERS,
    LORE_RULES,
    LORE_WORLD,
    NEVER_IDLE,
    PERSONA,
    PLAYER,
    PRESET_PREFIX,
    STATE,
    STYLE_PREFIX,
    SUMMARY,
    BuiltSection,
    ContextSource,
    Diagnostic,
    FrozenBuild,
    Slot,
    WindowFit,
)

# Tags that structure the parent's first-step input (prompts.render_roleplay_request) and the
# Writer brief / task input envelopes. Material may never produce them, in any slot mode.
REQUEST_TAGS: tuple[str, ...] = (
    "roleplay_request",
    "request_policy",
    "roleplay_context",
    "roleplay_content",
    "context_guide",
    "commit_context",
    "specialist_catalog",
    "current_asset_bindings",
    "writer_status",
    "writing_brief",
    "task_input",
)
# Boundaries a ``sectionTag`` slot generates itself.
SECTION_TAGS: tuple[str, ...] = ("section", "item")

BINDING_KEYS: tuple[str, ...] = ("characterId", "lorebookIds", "personaId", "presetId", "writingStyleIds")
_LIST_BINDINGS = frozenset({"lorebookIds", "writingStyleIds"})

_FIXED_NAMES: dict[str, str] = {
    LORE_WORLD: "World",
    CARD: "Character",
    CARD_DEPTH_PROMPT: "Character's note",
    PERSONA: "Persona",
    PLAYER: "Player",
    LORE_CHARACTERS: "Character lore",
    STATE: "Story state",
    LORE_RULES: "Important rules",
    SUMMARY: "Conversation summary",
    CONVERSATION: "Conversation",
    CURRENT_INPUT: "Current input",
}


# Stable ids of the fixed sources' default slots.
_FIXED_SLOT_IDS: dict[str, str] = {
    LORE_WORLD: "world",
    CARD: "character",
    CARD_DEPTH_PROMPT: "character-note",
    PERSONA: "persona",
    PLAYER: "player",
    LORE_CHARACTERS: "character-lore",
    STATE: "state",
    LORE_RULES: "important-rules",
    SUMMARY: "conversation-summary",
    CONVERSATION: "conversation",
    CURRENT_INPUT: "current-input",
}
# The profile's limits for a saved slot (core/profile.py: LOCAL_ID_PATTERN, Name()); generated
# slots respect them so a default layout can be saved without edits.
SLOT_ID_MAX = 64
NAME_MAX = 80


def _tag_pattern(names: Iterable[str]) -> re.Pattern[str]:
    # A tag opener is "<", an optional "/", the name, then whitespace, "/", ">" or the end; so
    # "<sections>" or "<itemlist>" (someone else's tags) are not touched.
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"<(/?(?:{alternatives}))(?=[\s/>]|$)", re.IGNORECASE)


_NON_SPACE = re.compile(r"\S")  # as ``harness.models.tokens`` tells where no counted run goes on
_REQUEST_RE = _tag_pattern(REQUEST_TAGS)
_ALL_CONTROL_RE = _tag_pattern(REQUEST_TAGS + SECTION_TAGS)


def escape_request_tags(text: str) -> str:
    """Neutralise request-level control tags (``<roleplay_request`` → ``&lt;roleplay_request``).
    Idempotent, so text that was already escaped can pass through again unchanged."""
    return _REQUEST_RE.sub(r"&lt;\1", text)


def escape_control_tags(text: str) -> str:
    """Neutralise request-level tags and the ``section``/``item`` boundaries. Idempotent."""
    return _ALL_CONTROL_RE.sub(r"&lt;\1", text)


def escape_attribute(value: str) -> str:
    """A value for ``name="…"``: XML attribute escaping, line breaks folded to spaces."""
    value = " ".join(value.split())
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


# -- sources and layout ------------------------------------------------------------------------


def as_source_map(sources: Mapping[str, ContextSource] | Iterable[ContextSource]) -> dict[str, ContextSource]:
    """Sources keyed by id, keeping the caller's order (it is the binding order of writing styles
    and custom prompts). A mapping whose key disagrees with its source's id is a caller bug."""
    out: dict[str, ContextSource] = {}
    items = sources.items() if isinstance(sources, Mapping) else ((s.id, s) for s in sources)
    for key, source in items:
        if key != source.id:
            raise ValidationError("context.invalid_source", f"source keyed {key!r} has id {source.id!r}", details={"sourceId": key})
        if key in out:
            raise ValidationError("context.duplicate_source", f"source {key!r} is given twice", details={"sourceId": key})
        out[key] = source
    return out


def _preset_order(preset_positions: Mapping[str, str] | Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(source id, position) in preset order; keys may be field ids or ``rp.preset:`` ids."""
    pairs = preset_positions.items() if isinstance(preset_positions, Mapping) else preset_positions
    out: list[tuple[str, str]] = []
    for key, position in pairs:
        if position not in ("top", "bottom"):
            raise ValidationError(
                "context.invalid_preset_position",
                f"preset field {key!r} has position {position!r}; expected top or bottom",
                details={"field": key},
            )
        out.append((key if key.startswith(PRESET_PREFIX) else PRESET_PREFIX + key, position))
    return out


def _display_name(source_id: str, source: ContextSource | None) -> str:
    """A human name for a source. Falls back to a generic kind name rather than the id, because
    ids must never reach the serialised prompt."""
    if source_id in _FIXED_NAMES:
        return _FIXED_NAMES[source_id]
    title = source.title.strip() if source is not None else ""
    if source_id.startswith(STYLE_PREFIX):
        return "Writing style: " + title if title else "Writing style"
    if title:
        return title
    if source_id.startswith(PRESET_PREFIX):
        return "Preset field"
    return "Custom prompt"


def _slot_for(source_id: str, sources: Mapping[str, ContextSource]) -> Slot:
    source = sources.get(source_id)
    name = _display_name(source_id, source)
    tag = source.default_section_tag if source is not None else True
    return Slot(id=_slot_id(source_id), name=name[:NAME_MAX].rstrip(), sources=(source_id,), section_tag=tag)


def _slot_id(source_id: str) -> str:
    """A stable slot id derived from the source id, so the default layout is reproducible without
    a counter. It must also be a valid profile slot id (``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``) so the
    workbench can save the layout as is: asset ids may hold ``.`` or ``:``, so an id that had to be
    rewritten or cut gets a short hash of the source id to stay unique."""
    if source_id in _FIXED_SLOT_IDS:
        return _FIXED_SLOT_IDS[source_id]
    for prefix, short in ((PRESET_PREFIX, "preset-"), (STYLE_PREFIX, "style-"), (CUSTOM_PREFIX, "custom-")):
        if source_id.startswith(prefix):
            rest = source_id[len(prefix) :]
            break
    else:
        short, rest = "source-", source_id
    clean = re.sub(r"[^A-Za-z0-9_-]", "-", rest)
    candidate = short + clean
    if clean == rest and len(candidate) <= SLOT_ID_MAX:
        return candidate
    digest = sha256_hex(source_id)[:8]
    return f"{candidate[: SLOT_ID_MAX - len(digest) - 1]}-{digest}"


def _default_order(sources: Mapping[str, ContextSource], preset_positions: Mapping[str, str] | Sequence[tuple[str, str]]) -> list[str]:
    presets = _preset_order(preset_positions)
    known_presets = {sid for sid, _ in presets}
    top = [sid for sid, pos in presets if pos == "top" and sid in sources]
    bottom = [sid for sid, pos in presets if pos == "bottom" and sid in sources]
    # A preset source whose position the caller did not give lands at the top, after the known
    # ones: "top" is the preset model's own default position.
    top += [sid for sid in sources if sid.startswith(PRESET_PREFIX) and sid not in known_presets]
    styles = [sid for sid in sources if sid.startswith(STYLE_PREFIX)]
    # Custom prompts, and any source id this module does not know (an adapter's material), sit
    # after the important rules and before the history: the last instructions before the story.
    custom = [sid for sid in sources if sid not in _FIXED_NAMES and not sid.startswith((PRESET_PREFIX, STYLE_PREFIX))]
    return [
        *top,
        LORE_WORLD,
        CARD,
        PERSONA,
        PLAYER,
        LORE_CHARACTERS,
        STATE,
        *styles,
        LORE_RULES,
        *custom,
        SUMMARY,
        CONVERSATION,
        CURRENT_INPUT,
        *bottom,
    ]


def default_layout(
    sources: Mapping[str, ContextSource] | Iterable[ContextSource],
    preset_positions: Mapping[str, str] | Sequence[tuple[str, str]] = (),
) -> list[Slot]:
    """The layout of a session that has not saved its own, one slot per source:

    top preset fields (preset order) → World → Character → Persona → Player → Character lore → Story
    state → writing styles (binding order) → Important rules → custom prompts → Conversation
    summary → Conversation → Current input → bottom preset fields (preset order).

    The fixed sources always get their slot, even when unavailable this run, so that a layout the
    workbench saves from it already places the summary or the card that only appears later.
    Dynamic sources (preset fields, styles, custom prompts) get a slot only when present.
    """
    by_id = as_source_map(sources)
    slots = [_slot_for(sid, by_id) for sid in _default_order(by_id, preset_positions)]
    return _with_depth_prompt(slots, by_id)


def _with_depth_prompt(slots: list[Slot], by_id: Mapping[str, ContextSource]) -> list[Slot]:
    """Put an unplaced Character's Note into the slot holding the conversation (its in-chat home),
    or into a slot of its own at the end when no slot holds the conversation."""
    if CARD_DEPTH_PROMPT not in by_id or any(CARD_DEPTH_PROMPT in slot.sources for slot in slots):
        return slots
    for index, slot in enumerate(slots):
        if CONVERSATION in slot.sources:
            slots[index] = replace(slot, sources=(*slot.sources, CARD_DEPTH_PROMPT))
            return slots
    return [*slots, _slot_for(CARD_DEPTH_PROMPT, by_id)]


def check_idle(slots: Sequence[Slot], sources: Mapping[str, ContextSource] | None = None) -> None:
    """An idle slot may not hold a source that must always be assembled. Checked by source
    identity (``NEVER_IDLE``) as well as the source's own ``idle_allowed``, so moving the
    conversation into another group cannot sneak it out of the prompt."""
    for index, slot in enumerate(slots):
        if not slot.idle:
            continue
        for sid in slot.sources:
            source = sources.get(sid) if sources else None
            if sid in NEVER_IDLE or (source is not None and not source.idle_allowed):
                raise ValidationError(
                    "context.idle_not_allowed",
                    f"slot {slot.name!r} cannot be idle: it holds {sid!r}, which must always take part",
                    pointer=f"/contextBuild/slots/{index}",
                    details={"slotId": slot.id, "sourceId": sid},
                )


def effective_layout(
    saved_slots: Sequence[Slot] | None,
    sources: Mapping[str, ContextSource] | Iterable[ContextSource],
    preset_positions: Mapping[str, str] | Sequence[tuple[str, str]] = (),
) -> list[Slot]:
    """The layout this run assembles.

    No saved layout: :func:`default_layout`. A saved layout keeps its slots, order, names, groups,
    tags and idle flags. Every available source that no saved slot mentions gets its own new slot,
    placed by this rule: take the source's position in the default layout; walk back through the
    default order to the nearest source the saved layout does mention and insert right after the
    saved slot holding it; if none precedes it, insert before the saved slot holding the nearest
    following one; if the saved layout mentions none of them, append. New sources that land on
    the same spot keep their default order.

    Sources listed in a saved slot but unavailable this run stay listed (the slot still belongs
    to the session and the reference may come back); :func:`serialize` skips them.
    """
    by_id = as_source_map(sources)
    if saved_slots is None:
        return default_layout(by_id, preset_positions)
    check_idle(saved_slots, by_id)
    slots = list(saved_slots)
    home: dict[str, int] = {}  # source id → index of the first saved slot listing it
    for index, slot in enumerate(slots):
        for sid in slot.sources:
            home.setdefault(sid, index)
    order = _default_order(by_id, preset_positions)
    missing = [sid for sid in order if sid in by_id and sid not in home]
    if not missing:
        return _with_depth_prompt(slots, by_id)
    # Insertion points are indexes into the saved list; several new slots at one point go in
    # default order, so collect them per point first and splice from the back.
    buckets: dict[int, list[Slot]] = {}
    taken_ids = {s.id for s in slots}
    for sid in missing:
        at = order.index(sid)
        point = len(slots)
        before = next((home[o] for o in reversed(order[:at]) if o in home), None)
        if before is not None:
            point = before + 1
        else:
            after = next((home[o] for o in order[at + 1 :] if o in home), None)
            if after is not None:
                point = after
        new = _slot_for(sid, by_id)
        if new.id in taken_ids:  # a saved slot happens to use our derived id: keep ids unique
            suffix = 2
            while f"{new.id}#{suffix}" in taken_ids:
                suffix += 1
            new = Slot(f"{new.id}#{suffix}", new.name, new.sources, new.section_tag, new.idle)
        taken_ids.add(new.id)
        buckets.setdefault(point, []).append(new)
    for point in sorted(buckets, reverse=True):
        slots[point:point] = buckets[point]
    return _with_depth_prompt(slots, by_id)


# -- serialisation ------------------------------------------------------------------------------


def _clean(text: str) -> str:
    """Leading blank lines and trailing whitespace go (they would only pad the boundaries);
    indentation of the first real line stays."""
    return re.sub(r"\A(?:[ \t]*\r?\n)+", "", text).rstrip()


Escape = Callable[[str], str]
# ``HistoryTally.escaped``: a conversation text's escape from its messages' kept escaped renders
# (None: not a text the tally gave), so a long story's kept conversation is not run through the
# escape's regex again at every turn (issue 12).
KnownEscape = Callable[[str, Escape], "str | None"]


def _escape(escape: Escape, text: str, known: KnownEscape | None) -> str:
    found = known(text, escape) if known is not None else None
    return escape(text) if found is None else found


def _render_slot(slot: Slot, parts: list[tuple[ContextSource, str]], known: KnownEscape | None = None) -> str:
    if not slot.section_tag:
        return "\n\n".join(_escape(escape_request_tags, text, known) for _, text in parts)
    name = escape_attribute(slot.name)
    if len(parts) == 1:
        body = _escape(escape_control_tags, parts[0][1], known)
    else:
        items = []
        for source, text in parts:
            item_name = escape_attribute(source.title.strip() or _display_name(source.id, None))
            items.append(f'<item name="{item_name}">\n{_escape(escape_control_tags, text, known)}\n</item>')
        body = "\n".join(items)
    return f'<section name="{name}">\n{body}\n</section>'


def text_with_note(entries: Sequence[Entry], note: ContextSource) -> str:
    """The conversation text with the Character's Note ``note.depth`` messages back from the
    newest, labelled with the role SillyTavern would send it as."""
    blocks = [render_entries((e,)) for e in entries]
    at = max(len(blocks) - (note.depth or 0), 0)
    label = "[Character's note]" if note.role == "system" else f"[Character's note, as the {note.role}]"
    blocks.insert(at, f"{label}\n{_clean(note.text)}")
    return f"{CONVERSATION_NOTE}\n\n" + "\n\n".join(blocks)


def _in_chat(slot: Slot, sources: Mapping[str, ContextSource], entries: Sequence[Entry] | None) -> ContextSource | None:
    """The Character's Note to place inside this slot's conversation, if it goes there."""
    note = sources.get(CARD_DEPTH_PROMPT)
    if entries is None or note is None or note.depth is None or not _clean(note.text):
        return None
    if CONVERSATION not in slot.sources or CARD_DEPTH_PROMPT not in slot.sources or CONVERSATION not in sources:
        return None
    return note


def _build(
    slots: Sequence[Slot],
    sources: Mapping[str, ContextSource],
    *,
    pick: Callable[[ContextSource], bool],
    use_parent_text: bool,
    entries: Sequence[Entry] | None = None,
    known: KnownEscape | None = None,
) -> tuple[BuiltSection, ...]:
    """``entries``: the messages ``rp.conversation`` currently renders, needed to place the
    Character's Note among them; without them the note stays a separate item of its slot.
    ``known``: escapes kept for the conversation's text (``HistoryTally.escaped``)."""
    out = (_build_slot(slot, sources, pick, use_parent_text, entries, known) for slot in slots)
    return tuple(section for section in out if section is not None)


def _build_slot(
    slot: Slot,
    sources: Mapping[str, ContextSource],
    pick: Callable[[ContextSource], bool],
    use_parent_text: bool,
    entries: Sequence[Entry] | None,
    known: KnownEscape | None = None,
) -> BuiltSection | None:
    """One slot's section of ``_build`` (None: the slot adds none). It reads only the sources the
    slot lists, and ``entries`` only when it lists ``rp.conversation``."""
    if slot.idle:
        return None
    note = _in_chat(slot, sources, entries)
    parts: list[tuple[ContextSource, str]] = []
    for sid in slot.sources:
        source = sources.get(sid)
        if source is None or not pick(source):
            continue
        if note is not None and sid == CARD_DEPTH_PROMPT:
            continue  # already placed inside the conversation
        if note is not None and sid == CONVERSATION and entries is not None:
            source = replace(source, text=text_with_note(entries, note))
        raw = source.parent_text if use_parent_text and source.parent_text is not None else source.text
        text = _clean(raw)
        if text:
            parts.append((source, text))
    if not parts:
        return None
    return BuiltSection(slot.id, slot.name, tuple(s.id for s, _ in parts), _render_slot(slot, parts, known))


def _every(source: ContextSource) -> bool:
    return True


def serialize(slots: Sequence[Slot], sources: Mapping[str, ContextSource] | Iterable[ContextSource]) -> tuple[BuiltSection, ...]:
    """The Writer-side sections, in slot order. Idle slots, unavailable sources, sources with
    blank text, and slots left with nothing are omitted: the prompt never holds an empty tag."""
    return _build(slots, as_source_map(sources), pick=lambda s: True, use_parent_text=False)


def join_sections(sections: Iterable[BuiltSection]) -> str:
    return "\n\n".join(s.text for s in sections)


# -- bindings ------------------------------------------------------------------------------------


def normalize_bindings(bindings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The binding list the parent sees: exactly the five keys, null for an unbound single item,
    [] for an unbound ordered list. Other profile keys (status, scope …) are not part of it."""
    source = bindings or {}
    out: dict[str, Any] = {}
    for key in BINDING_KEYS:
        value = source.get(key)
        if key in _LIST_BINDINGS:
            value = [] if value is None else value
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
                raise ValidationError("context.invalid_bindings", f"{key} must be a list of asset ids", pointer=f"/bindings/{key}")
            out[key] = list(value)
        else:
            if value is not None and not (isinstance(value, str) and value):
                raise ValidationError("context.invalid_bindings", f"{key} must be an asset id or null", pointer=f"/bindings/{key}")
            out[key] = value
    return out


# -- the window ---------------------------------------------------------------------------------

# The reply reserve (a long reply plus a thinking model's reasoning, never more than a quarter of
# the window) and the flat image allowance are the harness's, shared with the parent's history
# budget (``harness.history``), so both requests are priced alike.
# Role markers and chat-template tokens of the Writer's two messages (system, user).
MESSAGE_FRAMING = 16


@dataclass(frozen=True)
class WindowBudget:
    """What one Writer request may spend: its window, the reply reserve and the tokens of
    everything in the request besides the flat prompt."""

    window: int
    reply_reserve: int
    fixed_tokens: int

    @property
    def prompt_budget(self) -> int:
        return self.window - self.reply_reserve - self.fixed_tokens


def writer_budget(
    route: Route,
    system_prompt: str,
    images: int = 0,
    *,
    window: int | None = None,
    context_size: int | None = None,
    max_tokens: int | None = None,
) -> WindowBudget | None:
    """The budget of the Writer request on ``route``. ``window`` (a settings override) beats the
    route's own override, which beats the model's listed window; None when no window is known
    (any model of an OpenAI-compatible server), and then no history is left out. A preset's
    ``context_size`` can only narrow the window (it never promises more than the model holds), and
    its ``max_tokens`` is the reply reserve (the smaller, when the route sets a limit too)."""
    size = window or route_context_window(route)
    if context_size is not None:
        size = min(size, context_size) if size is not None else context_size
    if size is None:
        return None
    limit = writer_max_tokens(route, max_tokens)
    reserve = reply_reserve(size, limit)
    fixed = count_tokens(system_prompt) + images * IMAGE_TOKENS + MESSAGE_FRAMING
    return WindowBudget(size, reserve, fixed)


def writer_max_tokens(route: Route, preset_max_tokens: int | None) -> int | None:
    """The Writer's output limit: the route's and the preset's, the smaller when both are set."""
    limits = [n for n in (route.max_output_tokens, preset_max_tokens) if n is not None]
    return min(limits) if limits else None


def _count_window(text: str, kept: Sequence[Entry], escape: Callable[[str], str]) -> int:
    """``count_tokens(text)`` of a Writer prompt holding ``kept``, counted by the parts it is made
    of: what comes before the first kept message, the run of messages, and the rest. Once the
    window is full its oldest end moves every turn, so the prompt starts unlike the previous one
    and would be counted line by line; its messages are the same, and their figures are kept
    (``conversation_window``). Exact whatever the split: a message not found where expected
    (escaped differently as part of the whole, or followed by the Character's Note) ends the run
    and the rest is counted as one part."""
    if not kept:
        return count_tokens(text)
    return window_tally(kept).count(text, 0, escape)


def _fit_history(
    slots: Sequence[Slot],
    by_id: dict[str, ContextSource],
    history: Sequence[Entry],
    budget: WindowBudget,
) -> tuple[dict[str, ContextSource], WindowFit, list[Diagnostic], Sequence[Entry], tuple[BuiltSection, ...], str]:
    """Keep the newest whole messages of ``rp.conversation`` that fit ``budget``; also returns
    the messages kept (the Character's Note is placed among them), the Writer sections built
    from what was kept and their text (the build measured last, so :func:`freeze` does not build
    or join it again, and the text it counted is the very string the Writer's request holds)."""
    conversation = by_id.get(CONVERSATION)
    tagged = next((slot.section_tag for slot in slots if CONVERSATION in slot.sources and not slot.idle), True)
    escape = escape_control_tags if tagged else escape_request_tags
    counts = window_tally(history)  # per-message figures kept across turns
    limit = budget.prompt_budget
    # Only the slots that hold the conversation change with what is kept; every other section is
    # built once here for every build measured below.
    fixed = [None if CONVERSATION in slot.sources else _build_slot(slot, by_id, _every, False, None) for slot in slots]

    def build(sources: Mapping[str, ContextSource], entries: Sequence[Entry] | None) -> tuple[BuiltSection, ...]:
        """``_build(slots, sources, entries=entries)`` for sources that differ from ``by_id`` in
        ``rp.conversation`` at most."""
        out = []
        for slot, section in zip(slots, fixed):
            if CONVERSATION in slot.sources:
                section = _build_slot(slot, sources, _every, False, entries, counts.escaped)
            if section is not None:
                out.append(section)
        return tuple(out)

    def fit(omitted: int, prompt_tokens: int) -> WindowFit:
        return WindowFit(budget.window, budget.reply_reserve, budget.fixed_tokens, prompt_tokens, len(history), omitted)

    without = {sid: src for sid, src in by_id.items() if sid != CONVERSATION}
    rest_text = join_sections(build(without, None))  # every section but the conversation's
    # Once the story outgrows the window, building and counting the whole history's prompt at
    # every turn only to learn that it is over would cost a pass over the whole story: when the
    # messages it surely holds as they are escaped here (all but the newest, which the section's
    # end may trim), with the rest of the prompt where it adds up, already count more than the
    # budget, the whole prompt is over too.
    if conversation is None or _whole_at_least(slots, fixed, without, rest_text, counts.stats_at_least(escape)) <= limit:
        full = build(by_id, history)
        text = join_sections(full)
        tokens = counts.count(text, 0, escape) if history else count_tokens(text)
        if conversation is None or tokens <= limit:
            return by_id, fit(0, tokens), _over_window(fit(0, tokens)), history, full, text
    # Sum per-message costs (the estimate is close to additive) to pick the cut in one pass, then
    # check the real prompt and drop one more message while it is still over.
    rest = count_tokens(rest_text)
    wrapper = count_tokens(f'<section name="{_FIXED_NAMES[CONVERSATION]}">\n\n</section>\n\n')
    room = limit - rest - wrapper - count_tokens(CONVERSATION_NOTE) - 1
    keep = counts.keep_within(room, escape)
    while True:
        kept = history[len(history) - keep :] if keep else ()
        trimmed = dict(by_id)
        if kept:
            trimmed[CONVERSATION] = replace(conversation, text=counts.text(len(history) - keep))
        else:
            del trimmed[CONVERSATION]  # nothing fits: the source is unavailable, no empty tag
        built = build(trimmed, kept)
        text = join_sections(built)
        tokens = counts.count(text, len(history) - keep, escape) if kept else count_tokens(text)
        if tokens <= limit or keep == 0:
            break
        keep -= 1
    result = fit(len(history) - keep, tokens)
    note = Diagnostic(
        "context.history_trimmed",
        f"{result.omitted} of {result.messages} earlier messages were left out, oldest first, to fit the Writer's "
        f"context window of {result.window} tokens ({result.budget} for the prompt after {result.reply_reserve} "
        f"for the reply and {result.fixed_tokens} for the system prompt and framing)",
        source_id=CONVERSATION,
        details=result.to_dict(),
    )
    return trimmed, result, [note, *_over_window(result)], kept, built, text


def _whole_at_least(
    slots: Sequence[Slot], fixed: Sequence[BuiltSection | None], without: Mapping[str, ContextSource], rest_text: str, messages: Stats
) -> int:
    """A floor of the count of the prompt that holds the whole conversation, from ``messages``
    (figures of message blocks it holds, ``HistoryTally.stats_at_least``) and the text of the
    other sections (``rest_text``: ``fixed``, the other slots' sections, joined). When the
    conversation has a slot of its own (nothing else of that slot is built ``without`` it), that
    prompt is the other sections before it, a blank line, the conversation's section, a blank
    line and the sections after it; its blocks and the other sections' text add up where each
    piece starts on a line end followed by a non-space character, where no counted run goes on:
    the conversation's section (which opens with ``<section`` or the context note) and the
    sections after it when they start with a non-space character. Otherwise the messages'
    figures alone."""
    holding = [i for i, slot in enumerate(slots) if CONVERSATION in slot.sources]
    floor = tokens_of(messages)
    if len(holding) != 1 or _build_slot(slots[holding[0]], without, _every, False, None) is not None:
        return floor
    at = holding[0]
    after = next((section.text for section in fixed[at + 1 :] if section is not None), "")
    if after and not _NON_SPACE.match(after):
        return floor
    return max(floor, tokens_of(add_stats(part_stats(rest_text), messages)))


def _over_window(result: WindowFit) -> list[Diagnostic]:
    if result.prompt_tokens <= result.budget:
        return []
    return [
        Diagnostic(
            "context.over_window",
            f"the Writer prompt takes about {result.prompt_tokens} tokens without any conversation history it "
            f"could still drop; the budget is {result.budget} of the {result.window}-token window, so the "
            "provider may refuse it",
            details=result.to_dict(),
        )
    ]


# -- the frozen build ---------------------------------------------------------------------------


def freeze(
    slots: Sequence[Slot],
    sources: Mapping[str, ContextSource] | Iterable[ContextSource],
    bindings: Mapping[str, Any] | None = None,
    diagnostics: Iterable[Diagnostic] = (),
    *,
    history: Sequence[Entry] = (),
    budget: WindowBudget | None = None,
) -> FrozenBuild:
    """Freeze one run's build from its effective layout.

    - ``writer_prompt``: every assembled section, in order (the Writer's flat user prompt).
    - ``parent_context``: only ``parent_delivery == "context"`` sources (card, persona), with
      their ``parent_text`` where set, cut along the same slots and boundaries.
    - ``commit_context``: the ``parent_delivery == "commit"`` sources (the state contract), the
      same way, serialised once here so every step of the run reuses the identical bytes.
    - ``epoch``: sha256 over the layout, every source field, the outputs, bindings and
      diagnostics; any change to any input gives a new epoch (retry tokens are bound to it).

    ``rp.current-input`` must be assembled exactly once (with non-blank text: a run whose input
    is only images must still give it a text, or the Writer has nothing to answer).

    With a ``budget``, ``rp.conversation`` keeps only the newest whole messages of ``history``
    (the entries its text was rendered from) that fit; ``window`` records the cut.
    """
    by_id = as_source_map(sources)
    check_idle(slots, by_id)
    window: WindowFit | None = None
    diags = list(diagnostics)
    conversation = by_id.get(CONVERSATION)
    # The Character's Note is placed among the messages only when their text is the one given.
    counts = window_tally(history) if history and conversation is not None else None
    rendered = conversation is not None and conversation.text == (counts.text() if counts is not None else "")
    entries: Sequence[Entry] | None = history if rendered else None
    sections: tuple[BuiltSection, ...] | None = None
    writer_prompt: str | None = None
    if budget is not None:
        if conversation is not None and not rendered:
            raise ValidationError(
                "context.history_mismatch",
                "rp.conversation was not rendered from the history given to fit it into the window",
                details={"sourceId": CONVERSATION, "messages": len(history)},
            )
        by_id, window, notes, entries, sections, writer_prompt = _fit_history(slots, by_id, history, budget)
        diags += notes
    if sections is None:
        known = counts.escaped if counts is not None and rendered else None
        sections = _build(slots, by_id, pick=lambda s: True, use_parent_text=False, entries=entries, known=known)
    count = sum(1 for section in sections for sid in section.source_ids if sid == CURRENT_INPUT)
    if count == 0:
        raise ValidationError(
            "context.current_input_missing",
            "the current input is not assembled: no enabled slot holds rp.current-input with text",
            pointer="/contextBuild/slots",
        )
    if count > 1:
        raise ValidationError(
            "context.current_input_duplicate",
            f"the current input is assembled {count} times; it must appear exactly once",
            pointer="/contextBuild/slots",
            details={"count": count},
        )
    parent = _build(slots, by_id, pick=lambda s: s.parent_delivery == "context", use_parent_text=True)
    commit = _build(slots, by_id, pick=lambda s: s.parent_delivery == "commit", use_parent_text=True)
    if writer_prompt is None:
        writer_prompt = join_sections(sections)
    parent_context = join_sections(parent)
    commit_context = join_sections(commit)
    bound = normalize_bindings(bindings)
    epoch = build_epoch(slots, by_id, sections, writer_prompt, parent_context, commit_context, bound, diags, window)
    return FrozenBuild(
        sections=sections,
        writer_prompt=writer_prompt,
        parent_context=parent_context,
        commit_context=commit_context,
        bindings=bound,
        diagnostics=tuple(diags),
        epoch=epoch,
        sources=by_id,
        window=window,
    )
