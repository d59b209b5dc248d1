"""Import SillyTavern world info and V2/V3 ``character_book`` objects into :mod:`.model`.

Accepted shapes (detected, never guessed from file names):

* ST world info ``{"entries": {uid: entry, …}, …}`` of every age: the 2023 ten-field form, the
  2024 31-field form and newer (``match*``, ``outletName``, ``triggers``, ``ignoreBudget``).
  Missing fields are filled with ST's ``newWorldInfoEntryDefinition`` defaults (``selective`` is
  ``true``, ``order`` 100, ``probability`` 100, ``depth`` 4, ``groupWeight`` 100, …); legacy types
  are accepted (boolean ``delayUntilRecursion`` → level 1, ``role: null`` → system, ``null``
  timed effects → off, missing ``selectiveLogic`` → AND_ANY).
* ``character_book`` (V2 and V3, as embedded in cards, or a whole card, or the standalone
  ``{"spec": "lorebook_v3", "data": …}`` export), mapped like ST's ``convertCharacterBook``:
  ``keys``→key, ``insertion_order``→order, ``enabled``→!disable, ST settings read from
  ``extensions`` (``extensions.position`` wins over the coarse ``before_char``/``after_char``).
  Deliberate differences, all for files ST would mangle: a missing ``enabled`` means enabled (with
  a warning) instead of disabled, and entry-level ``case_sensitive`` (a spec field) is used when
  ``extensions.case_sensitive`` is absent. V3 ``use_regex`` is ignored like ST does: a key is a
  regex exactly when it has the ``/pattern/flags`` form.
* Other formats (NovelAI, Agnai, RisuAI lorebooks, top-level arrays) are rejected with
  ``lore.format.unsupported`` and a message naming what was recognised.

Slot classification (the three semantic slots of the spec), from ST ``position``:

====================  =============================================  ==========================
ST position           meaning in ST                                  slot
====================  =============================================  ==========================
0 before (↑Char)      ``worldInfoBefore``, ahead of the card         world-description
1 after (↓Char)       ``worldInfoAfter``, right after the card       character-descriptions
5 / 6 EMTop/EMBottom  example-dialogue blocks around card examples   character-descriptions
2 / 3 ANTop/ANBottom  around the Author's Note (late, steering)      important-rules
4 atDepth (any role)  injected inside recent chat at ``depth``       important-rules
7 outlet              never auto-injected; pulled by ``{{outlet}}``  world-description (kept out
                                                                     of slot output, see
                                                                     activation)
anything else         unknown to ST (ignored there)                  world-description + warning
====================  =============================================  ==========================

Why: ↑Char material is setting; ↓Char and example dialogue describe characters; Author's-Note and
in-chat depth injections sit after everything static in ST and exist to steer the next reply,
which is what the "important rules after state" slot is for. ``role`` and ``depth`` only refine
placement inside the chat in ST, so they do not change the slot but are kept on the entry. An
entry may carry an explicit ``slot`` key (one of the three slot names) written by our own editor;
it wins over the classification.

Size bounds (:class:`ImportLimits`) are checked for every entry and reported together as one
:class:`ValidationError` with a JSON Pointer per problem. Type oddities that ST tolerates are
coerced and reported in ``LoreBook.warnings`` instead of failing the import.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, overload

from roleplay.canonical import canonical_json
from roleplay.canonical import json_type
from roleplay.assets.validation import surrogate_problems
from roleplay.errors import Problem, RpError, ValidationError, pointer_from_parts

from .model import (
    DEFAULT_DEPTH,
    DEFAULT_LIMITS,
    DEFAULT_ORDER,
    DEFAULT_WEIGHT,
    CharacterFilter,
    ImportLimits,
    LoreBook,
    LoreEntry,
    Position,
    Slot,
)

_MAX_PROBLEMS = 50

_POSITION_SLOT = {
    Position.BEFORE: Slot.WORLD_DESCRIPTION,
    Position.AFTER: Slot.CHARACTER_DESCRIPTIONS,
    Position.EM_TOP: Slot.CHARACTER_DESCRIPTIONS,
    Position.EM_BOTTOM: Slot.CHARACTER_DESCRIPTIONS,
    Position.AN_TOP: Slot.IMPORTANT_RULES,
    Position.AN_BOTTOM: Slot.IMPORTANT_RULES,
    Position.AT_DEPTH: Slot.IMPORTANT_RULES,
    Position.OUTLET: Slot.WORLD_DESCRIPTION,
}

# (ST world-info field, character_book extensions field, GlobalScanData name)
_MATCH_FIELDS = (
    ("matchPersonaDescription", "match_persona_description", "persona_description"),
    ("matchCharacterDescription", "match_character_description", "character_description"),
    ("matchCharacterPersonality", "match_character_personality", "character_personality"),
    ("matchCharacterDepthPrompt", "match_character_depth_prompt", "character_depth_prompt"),
    ("matchScenario", "match_scenario", "scenario"),
    ("matchCreatorNotes", "match_creator_notes", "creator_notes"),
)


def classify_slot(position: int) -> Slot:
    """Slot for an ST ``position`` code (see the module docstring for the table and reasons)."""
    try:
        return _POSITION_SLOT[Position(position)]
    except ValueError:
        return Slot.WORLD_DESCRIPTION


# --------------------------------------------------------------------------- entry points


def parse_lorebook(
    source: str | bytes | Mapping[str, Any] | list[Any],
    *,
    book_id: str,
    name: str | None = None,
    limits: ImportLimits = DEFAULT_LIMITS,
) -> LoreBook:
    """Parse JSON text/bytes (or an already decoded value) and import it as a lorebook."""
    value = _load_json(source, limits) if isinstance(source, (str, bytes)) else source
    _check_json_value(value, limits)
    return import_lorebook(value, book_id=book_id, name=name, limits=limits)


def import_lorebook(
    value: Any,
    *,
    book_id: str,
    name: str | None = None,
    limits: ImportLimits = DEFAULT_LIMITS,
) -> LoreBook:
    """Detect the format of a decoded JSON value and import it."""
    if isinstance(value, list):
        raise _unsupported(
            "a top-level JSON array is not a SillyTavern world-info file or a character_book (expected an object with 'entries')"
        )
    if not isinstance(value, Mapping):
        raise ValidationError("lore.format.invalid", f"lorebook must be a JSON object, got {json_type(value)}", pointer="")
    # Half a surrogate pair is no character: it cannot be hashed (entry ids), stored or printed.
    # File imports replace them while decoding; a value handed in directly is refused here.
    lone = surrogate_problems("lore", value)
    if lone:
        raise ValidationError(
            "lore.lone_surrogate",
            f"{len(lone)} text(s) hold a lone UTF-16 surrogate (half of an emoji or other character)",
            pointer=lone[0].pointer,
            problems=lone[:_MAX_PROBLEMS],
        )
    if value.get("lorebookVersion") is not None:
        raise _unsupported("NovelAI lorebooks ('lorebookVersion') are not supported")
    if value.get("kind") == "memory":
        raise _unsupported("Agnai memory books (kind: 'memory') are not supported")
    if value.get("type") == "risu":
        raise _unsupported("RisuAI lorebooks (type: 'risu') are not supported")
    spec = value.get("spec")
    if spec == "lorebook_v3":
        data = value.get("data")
        if not isinstance(data, Mapping):
            raise ValidationError("lore.format.invalid", "lorebook_v3 export needs an object 'data'", pointer="/data")
        return import_character_book(data, book_id=book_id, name=name, version=3, limits=limits, base=("data",))
    if spec in ("chara_card_v2", "chara_card_v3"):
        data = value.get("data")
        base: tuple[str, ...]
        book, base = None, ()
        if isinstance(data, Mapping) and data.get("character_book") is not None:
            book, base = data["character_book"], ("data", "character_book")
        elif value.get("character_book") is not None:  # Kobold-Lite style misplacement
            book, base = value["character_book"], ("character_book",)
        if book is None:
            raise ValidationError("lore.card.no_book", "character card has no character_book", pointer="/data/character_book")
        if not isinstance(book, Mapping):
            raise ValidationError("lore.format.invalid", "character_book must be an object", pointer=pointer_from_parts(base))
        return import_character_book(
            book, book_id=book_id, name=name, version=3 if spec == "chara_card_v3" else 2, limits=limits, base=base
        )
    if "entries" not in value:
        raise _unsupported("no 'entries' key: not a SillyTavern world-info file or character_book")
    entries = value["entries"]
    if isinstance(entries, Mapping):
        return import_world_info(value, book_id=book_id, name=name, limits=limits)
    if isinstance(entries, list):
        return import_character_book(value, book_id=book_id, name=name, version=None, limits=limits)
    raise ValidationError(
        "lore.entries.invalid",
        f"'entries' must be an object (world info) or an array (character_book), got {json_type(entries)}",
        pointer="/entries",
    )


def import_world_info(
    value: Mapping[str, Any],
    *,
    book_id: str,
    name: str | None = None,
    limits: ImportLimits = DEFAULT_LIMITS,
) -> LoreBook:
    entries = value.get("entries")
    if not isinstance(entries, Mapping):
        raise ValidationError("lore.entries.invalid", "'entries' must be an object keyed by uid", pointer="/entries")
    ctx = _Ctx(limits)
    _check_count(len(entries), limits, "/entries")
    items = [(str(k), v, ("entries", str(k))) for k, v in entries.items()]
    raws = []
    for key, raw, parts in items:
        if not isinstance(raw, Mapping):
            ctx.error("lore.entry.invalid", f"entry must be an object, got {json_type(raw)}", parts)
            continue
        uid = _uid(raw.get("uid"))
        if uid is None:
            uid = _uid(key)
        raws.append((raw, parts, uid))
    ctx.raise_errors()
    built = [_entry_from_world_info(raw, parts, uid, ctx) for raw, parts, uid in raws]
    ctx.raise_errors()
    top = {k: v for k, v in value.items() if k != "entries"}
    orig = top.get("originalData")
    book_name = name or _first_str(top.get("name"), orig.get("name") if isinstance(orig, Mapping) else None) or book_id
    return LoreBook(
        id=book_id,
        name=book_name,
        source_format="st-world-info",
        entries=_assign_ids(built),
        description=_opt_str(top.get("description")),
        raw_top=_plain(top),
        warnings=tuple(ctx.warnings),
    )


def import_character_book(
    value: Mapping[str, Any],
    *,
    book_id: str,
    name: str | None = None,
    version: int | None = None,
    limits: ImportLimits = DEFAULT_LIMITS,
    base: tuple[str, ...] = (),
) -> LoreBook:
    """Import a V2/V3 ``character_book``. ``version`` None = infer (V3 iff any entry has
    ``use_regex``, the one field V3 made required)."""
    entries = value.get("entries")
    if not isinstance(entries, list):
        raise ValidationError(
            "lore.entries.invalid", "character_book 'entries' must be an array", pointer=pointer_from_parts((*base, "entries"))
        )
    ctx = _Ctx(limits)
    _check_count(len(entries), limits, pointer_from_parts((*base, "entries")))
    raws = []
    for index, raw in enumerate(entries):
        parts = (*base, "entries", index)
        if not isinstance(raw, Mapping):
            ctx.error("lore.entry.invalid", f"entry must be an object, got {json_type(raw)}", parts)
            continue
        # ST: a card entry without ``id`` gets its array index.
        uid: int | str | None = _uid(raw["id"]) if "id" in raw else index
        if "id" in raw and uid is None:
            uid = _str_uid(raw["id"])
        raws.append((raw, parts, uid, index))
    ctx.raise_errors()
    built = [_entry_from_card(raw, parts, uid, index, ctx) for raw, parts, uid, index in raws]
    ctx.raise_errors()
    if version is None:
        version = 3 if any(isinstance(r, Mapping) and "use_regex" in r for r in entries) else 2
    top = {k: v for k, v in value.items() if k != "entries"}
    hints = {k: top[k] for k in ("scan_depth", "token_budget", "recursive_scanning") if k in top}
    return LoreBook(
        id=book_id,
        name=name or _first_str(top.get("name")) or book_id,
        source_format=f"character-book-v{version}",
        entries=_assign_ids(built),
        description=_opt_str(top.get("description")),
        hints=_plain(hints),
        raw_top=_plain(top),
        warnings=tuple(ctx.warnings),
    )


# --------------------------------------------------------------------------- entry mapping


class _Ctx:
    """Collects errors (fatal, raised together) and warnings (kept on the book)."""

    def __init__(self, limits: ImportLimits) -> None:
        self.limits = limits
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []

    def error(self, code: str, message: str, parts: tuple[Any, ...], **details: Any) -> None:
        if len(self.errors) < _MAX_PROBLEMS:
            self.errors.append(Problem(code, message, pointer_from_parts(parts), dict(details)))

    def warn(self, code: str, message: str, parts: tuple[Any, ...]) -> None:
        if len(self.warnings) < 10 * _MAX_PROBLEMS:
            self.warnings.append(Problem(code, message, pointer_from_parts(parts)))

    def raise_errors(self) -> None:
        if not self.errors:
            return
        first = self.errors[0]
        if len(self.errors) == 1:
            raise ValidationError(first.code, first.message, pointer=first.pointer, details=first.details, problems=list(self.errors))
        raise ValidationError(
            "lore.invalid",
            f"{len(self.errors)} problems in lorebook; first: {first.message}",
            pointer=first.pointer,
            problems=list(self.errors),
        )


class _Reader:
    """Typed, lenient field access for one entry: every coercion leaves a warning."""

    def __init__(self, ctx: _Ctx, parts: tuple[Any, ...]) -> None:
        self.ctx, self.parts = ctx, parts

    def _w(self, path: tuple[Any, ...], message: str) -> None:
        self.ctx.warn("lore.entry.coerced", message, (*self.parts, *path))

    def boolean(self, value: Any, default: bool, *path: Any) -> bool:
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)):
            return value != 0  # JS truthiness, no warning: 0/1 flags are common
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            self._w(path, f"boolean given as string {value!r}")
            return value.strip().lower() == "true"
        self._w(path, f"expected a boolean, got {json_type(value)}; using JavaScript truthiness")
        return bool(value)

    def opt_boolean(self, value: Any, *path: Any) -> bool | None:
        return None if value is None else self.boolean(value, False, *path)

    @overload
    def number(self, value: Any, default: int | float, *path: Any, integer: bool = False) -> int | float: ...
    @overload
    def number(self, value: Any, default: None, *path: Any, integer: bool = False) -> int | float | None: ...
    def number(self, value: Any, default: int | float | None, *path: Any, integer: bool = False) -> int | float | None:
        if value is None:
            return default
        if isinstance(value, bool):
            self._w(path, "expected a number, got a boolean")
            return default
        if isinstance(value, str):
            text = value.strip()
            if text == "":
                return default
            try:
                value = float(text)
            except ValueError:
                self._w(path, f"expected a number, got {value!r}")
                return default
            if not math.isfinite(value):
                self._w(path, f"expected a finite number, got {text!r}")
                return default
            self._w(path, f"number given as string {text!r}")
        if not isinstance(value, (int, float)):
            self._w(path, f"expected a number, got {json_type(value)}")
            return default
        if isinstance(value, float) and (integer or value.is_integer()):
            if integer and not value.is_integer():
                self._w(path, f"expected an integer, got {value!r}; truncated")
            return int(value)
        return value

    def integer(self, value: Any, default: int, *path: Any) -> int:
        out = self.number(value, default, *path, integer=True)
        return default if out is None else int(out)

    def text(self, value: Any, default: str, *path: Any) -> str:
        if value is None:
            return default
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self._w(path, "expected a string, got a number")
            return _js_number_str(value)
        self._w(path, f"expected a string, got {json_type(value)}")
        return default

    def strings(self, value: Any, *path: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            # Some exporters (RisuAI, hand-written files) give one comma-separated string.
            self._w(path, "list given as one string; split on commas")
            return tuple(k.strip() for k in value.split(",") if k.strip())
        if not isinstance(value, list):
            self._w(path, f"expected a list of strings, got {json_type(value)}; ignored")
            return ()
        out = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                out.append(_js_number_str(item))
            else:
                self._w((*path, i), f"expected a string, got {json_type(item)}; dropped")
        return tuple(out)

    def keys(self, value: Any, *path: Any) -> tuple[str, ...]:
        out = self.strings(value, *path)
        limits = self.ctx.limits
        if len(out) > limits.max_keys_per_entry:
            self.ctx.error("lore.limit.keys", f"{len(out)} keys exceed the limit of {limits.max_keys_per_entry}", (*self.parts, *path))
        for i, key in enumerate(out):
            if len(key) > limits.max_key_chars:
                self.ctx.error(
                    "lore.limit.key_length",
                    f"key of {len(key)} characters exceeds the limit of {limits.max_key_chars}",
                    (*self.parts, *path, i),
                )
            elif key and not key.strip():
                self.ctx.warn(
                    "lore.entry.blank_key", "whitespace-only key: SillyTavern treats it as matching any text", (*self.parts, *path, i)
                )
        return out


def _common(
    r: _Reader, raw: Mapping[str, Any], src: Mapping[str, Any], names: dict[str, str], uid: int | str | None, position: int, content: str
) -> dict[str, Any]:
    """Fields read the same way from both formats; ``src`` is the entry (world info) or its
    ``extensions`` (card); ``names`` maps our field to the source spelling."""

    def g(field: str) -> Any:
        return src.get(names[field])

    def p(field: str) -> tuple[str, ...]:
        return (names[field],) if src is raw else ("extensions", names[field])

    if len(content) > r.ctx.limits.max_content_chars:
        r.ctx.error(
            "lore.limit.content_length",
            f"content of {len(content)} characters exceeds the limit of {r.ctx.limits.max_content_chars}",
            (*r.parts, "content"),
        )
    dur = g("delay_until_recursion")
    delay_level = 1 if dur is True else 0 if dur in (False, None) else r.integer(dur, 0, *p("delay_until_recursion"))
    role = r.integer(g("role"), 0, *p("role"))
    if role not in (0, 1, 2):
        r._w(p("role"), f"unknown role {role}; using system (0)")
        role = 0
    slot = classify_slot(position)
    explicit = raw.get("slot")
    if explicit is not None:
        try:
            slot = Slot(explicit)
        except ValueError:
            r._w(("slot",), f"unknown slot {explicit!r}; classified from position")
    elif position not in Position._value2member_map_:
        r.ctx.warn(
            "lore.entry.position_unknown", f"unknown position {position}; placed in the world-description slot", (*r.parts, "position")
        )
    filt = raw.get("characterFilter")
    character_filter = None
    if isinstance(filt, Mapping):
        character_filter = CharacterFilter(
            names=r.strings(filt.get("names"), "characterFilter", "names"),
            tags=r.strings(filt.get("tags"), "characterFilter", "tags"),
            is_exclude=r.boolean(filt.get("isExclude"), False, "characterFilter", "isExclude"),
        )
    ext_raw = raw.get("extensions")
    ext: Mapping[str, Any] = ext_raw if isinstance(ext_raw, Mapping) else {}
    return dict(
        uid=uid,
        content=content,
        position=position,
        slot=slot,
        exclude_recursion=r.boolean(g("exclude_recursion"), False, *p("exclude_recursion")),
        prevent_recursion=r.boolean(g("prevent_recursion"), False, *p("prevent_recursion")),
        delay_until_recursion=delay_level,
        probability=r.number(g("probability"), 100, *p("probability")),
        use_probability=r.boolean(g("use_probability"), True, *p("use_probability")),
        depth=r.integer(g("depth"), DEFAULT_DEPTH, *p("depth")),
        role=role,
        selective_logic=r.integer(g("selective_logic"), 0, *p("selective_logic")),
        group=r.text(g("group"), "", *p("group")),
        group_override=r.boolean(g("group_override"), False, *p("group_override")),
        group_weight=r.number(g("group_weight"), DEFAULT_WEIGHT, *p("group_weight")),
        scan_depth=r.number(g("scan_depth"), None, *p("scan_depth"), integer=True),
        match_whole_words=r.opt_boolean(g("match_whole_words"), *p("match_whole_words")),
        use_group_scoring=r.opt_boolean(g("use_group_scoring"), *p("use_group_scoring")),
        sticky=r.integer(g("sticky"), 0, *p("sticky")),
        cooldown=r.integer(g("cooldown"), 0, *p("cooldown")),
        delay=r.integer(g("delay"), 0, *p("delay")),
        outlet_name=r.text(g("outlet_name"), "", *p("outlet_name")),
        ignore_budget=r.boolean(g("ignore_budget"), False, *p("ignore_budget")),
        triggers=r.strings(g("triggers"), *p("triggers")),
        automation_id=r.text(g("automation_id"), "", *p("automation_id")),
        vectorized=r.boolean(g("vectorized"), False, *p("vectorized")),
        display_index=r.number(g("display_index"), None, *p("display_index")),
        character_filter=character_filter,
        state_condition=_state_condition(r, raw, ext),
        extensions=_plain(ext),
        raw=_plain(raw),
        fingerprint=hashlib.sha256(canonical_json(raw).encode("utf-8")).hexdigest()[:16],
    )


_WI_NAMES = {
    "exclude_recursion": "excludeRecursion",
    "prevent_recursion": "preventRecursion",
    "delay_until_recursion": "delayUntilRecursion",
    "probability": "probability",
    "use_probability": "useProbability",
    "depth": "depth",
    "role": "role",
    "selective_logic": "selectiveLogic",
    "group": "group",
    "group_override": "groupOverride",
    "group_weight": "groupWeight",
    "scan_depth": "scanDepth",
    "match_whole_words": "matchWholeWords",
    "use_group_scoring": "useGroupScoring",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
    "outlet_name": "outletName",
    "ignore_budget": "ignoreBudget",
    "triggers": "triggers",
    "automation_id": "automationId",
    "vectorized": "vectorized",
    "display_index": "displayIndex",
}

_CARD_NAMES = {
    "exclude_recursion": "exclude_recursion",
    "prevent_recursion": "prevent_recursion",
    "delay_until_recursion": "delay_until_recursion",
    "probability": "probability",
    "use_probability": "useProbability",
    "depth": "depth",
    "role": "role",
    "selective_logic": "selectiveLogic",
    "group": "group",
    "group_override": "group_override",
    "group_weight": "group_weight",
    "scan_depth": "scan_depth",
    "match_whole_words": "match_whole_words",
    "use_group_scoring": "use_group_scoring",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
    "outlet_name": "outlet_name",
    "ignore_budget": "ignore_budget",
    "triggers": "triggers",
    "automation_id": "automation_id",
    "vectorized": "vectorized",
    "display_index": "display_index",
}


def _entry_from_world_info(raw: Mapping[str, Any], parts: tuple[Any, ...], uid: int | str | None, ctx: _Ctx) -> LoreEntry:
    r = _Reader(ctx, parts)
    # Card-style spellings inside a world-info file (seen in chub exports) are accepted as aliases.
    keys = r.keys(raw.get("key", raw.get("keys")), "key" if "key" in raw else "keys")
    sec_name = "keysecondary" if "keysecondary" in raw else "secondary_keys"
    position = _position(r, raw.get("position"), ("position",))
    common = _common(r, raw, raw, _WI_NAMES, uid, position, r.text(raw.get("content"), "", "content"))
    return LoreEntry(
        id="",
        keys=keys,
        secondary_keys=r.keys(raw.get(sec_name), sec_name),
        comment=r.text(raw.get("comment"), "", "comment"),
        constant=r.boolean(raw.get("constant"), False, "constant"),
        selective=r.boolean(raw.get("selective"), True, "selective"),
        order=r.number(raw.get("order"), DEFAULT_ORDER, "order"),
        disabled=r.boolean(raw.get("disable"), False, "disable"),
        case_sensitive=r.opt_boolean(raw.get("caseSensitive"), "caseSensitive"),
        match_sources=frozenset(name for wi, _card, name in _MATCH_FIELDS if r.boolean(raw.get(wi), False, wi)),
        **common,
    )


def _entry_from_card(raw: Mapping[str, Any], parts: tuple[Any, ...], uid: int | str | None, index: int, ctx: _Ctx) -> LoreEntry:
    r = _Reader(ctx, parts)
    ext_raw = raw.get("extensions")
    if ext_raw is not None and not isinstance(ext_raw, Mapping):
        r._w(("extensions",), f"extensions must be an object, got {json_type(ext_raw)}; ignored")
    ext: Mapping[str, Any] = ext_raw if isinstance(ext_raw, Mapping) else {}
    keys = r.keys(raw.get("keys", raw.get("key")), "keys" if "keys" in raw else "key")
    sec_name = "secondary_keys" if "secondary_keys" in raw else "keysecondary"
    if "enabled" not in raw:
        ctx.warn("lore.entry.enabled_missing", "'enabled' is missing (required by the spec); treated as enabled", (*parts, "enabled"))
    if raw.get("insertion_order") is None:
        ctx.warn("lore.entry.order_missing", "'insertion_order' is missing; using 100", (*parts, "insertion_order"))
    position = _position(r, ext.get("position"), ("extensions", "position"), raw.get("position"), card=True)
    common = _common(r, raw, ext, _CARD_NAMES, uid, position, r.text(raw.get("content"), "", "content"))
    if common["display_index"] is None:
        common["display_index"] = index
    case = ext.get("case_sensitive")
    return LoreEntry(
        id="",
        keys=keys,
        secondary_keys=r.keys(raw.get(sec_name), sec_name),
        comment=r.text(raw.get("comment"), "", "comment"),
        constant=r.boolean(raw.get("constant"), False, "constant"),
        selective=r.boolean(raw.get("selective"), False, "selective"),  # ST: `selective || false`
        order=r.number(raw.get("insertion_order"), DEFAULT_ORDER, "insertion_order"),
        disabled=not r.boolean(raw.get("enabled"), True, "enabled"),
        case_sensitive=(
            r.opt_boolean(case, "extensions", "case_sensitive")
            if case is not None
            else r.opt_boolean(raw.get("case_sensitive"), "case_sensitive")
        ),
        match_sources=frozenset(name for _wi, card, name in _MATCH_FIELDS if r.boolean(ext.get(card), False, "extensions", card)),
        **common,
    )


def _position(r: _Reader, numeric: Any, path: tuple[str, ...], coarse: Any = None, *, card: bool = False) -> int:
    """ST position code. The numeric code (world-info ``position`` or card ``extensions.position``)
    wins; a card without it falls back to the coarse V2/V3 string exactly like ST's
    ``convertCharacterBook``: ``before_char`` → 0, anything else (even absent) → 1."""
    if numeric is not None:
        if numeric in ("before_char", "after_char"):
            r._w(path, f"position given as {numeric!r}")
            return int(Position.BEFORE if numeric == "before_char" else Position.AFTER)
        return r.integer(numeric, 0, *path)
    if card:
        return int(Position.BEFORE if coarse == "before_char" else Position.AFTER)
    return int(Position.BEFORE)


def _state_condition(r: _Reader, raw: Mapping[str, Any], ext: Mapping[str, Any]) -> str | None:
    """Native ``stateCondition`` (entry level, or in ``extensions`` for card books). A value that
    is present but not a string must not silently drop the gate (that would fail open), so it is
    kept as its JSON text, which the state evaluator rejects as malformed: the entry fails closed."""
    for src, prefix in ((raw, ()), (ext, ("extensions",))):
        for name in ("stateCondition", "state_condition"):
            if name in src and src[name] is not None:
                value = src[name]
                if isinstance(value, str):
                    return value if value.strip() else None
                r.ctx.warn(
                    "lore.entry.state_condition_type",
                    "stateCondition must be a string; the entry will never fire",
                    (*r.parts, *prefix, name),
                )
                return canonical_json(value)
    return None


def _assign_ids(entries: list[LoreEntry]) -> tuple[LoreEntry, ...]:
    counts = Counter(e.uid for e in entries if e.uid is not None)
    taken = {str(e.uid) for e in entries if e.uid is not None and counts[e.uid] == 1}
    out = []
    for e in entries:
        if e.uid is not None and counts[e.uid] == 1:
            new_id = str(e.uid)
        else:
            stem = "h" + hashlib.sha256(canonical_json(e.raw).encode("utf-8")).hexdigest()[:12]
            new_id, n = stem, 1
            while new_id in taken:
                n += 1
                new_id = f"{stem}-{n}"
        taken.add(new_id)
        out.append(replace(e, id=new_id))
    return tuple(out)


# --------------------------------------------------------------------------- JSON helpers


def _load_json(source: str | bytes, limits: ImportLimits) -> Any:
    size = len(source.encode("utf-8", "surrogatepass")) if isinstance(source, str) else len(source)
    if size > limits.max_source_bytes:
        raise ValidationError("lore.limit.size", f"lorebook of {size} bytes exceeds the limit of {limits.max_source_bytes}", pointer="")
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                "lore.json.encoding", f"lorebook is not UTF-8: {exc.reason} at byte {exc.start}", pointer="", details={"offset": exc.start}
            ) from None
    try:
        return json.loads(source, parse_constant=_reject_constant)
    except RpError:
        raise
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "lore.json.invalid",
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            pointer="",
            details={"line": exc.lineno, "column": exc.colno},
        ) from None
    except RecursionError:
        raise ValidationError("lore.json.too_deep", "JSON nesting is too deep", pointer="") from None
    except ValueError as exc:  # Python's cap on integer digits (4,300): valid JSON we will not read
        raise ValidationError("lore.json.invalid", f"invalid JSON: a number is too long to read ({exc})", pointer="") from None


def _reject_constant(name: str) -> Any:
    raise ValidationError("lore.json.invalid", f"invalid JSON: {name} is not allowed", pointer="")


def _check_json_value(value: Any, limits: ImportLimits) -> None:
    """Iterative walk: only JSON types, string keys, finite numbers, bounded depth. Infinite
    floats (e.g. ``1e400`` parses to inf) would break canonical hashing later."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, parts = stack.pop()
        if len(parts) > limits.max_json_depth:
            raise ValidationError(
                "lore.json.too_deep", f"JSON nesting exceeds {limits.max_json_depth} levels", pointer=pointer_from_parts(parts)
            )
        if isinstance(node, Mapping):
            for k, v in node.items():
                if not isinstance(k, str):
                    raise ValidationError("lore.json.invalid", "object keys must be strings", pointer=pointer_from_parts(parts))
                stack.append((v, (*parts, k)))
        elif isinstance(node, list):
            stack.extend((v, (*parts, i)) for i, v in enumerate(node))
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise ValidationError("lore.json.invalid", "numbers must be finite", pointer=pointer_from_parts(parts))
        elif node is not None and not isinstance(node, (str, int, bool)):
            raise ValidationError("lore.json.invalid", f"not a JSON value: {type(node).__name__}", pointer=pointer_from_parts(parts))


def _check_count(n: int, limits: ImportLimits, pointer: str) -> None:
    if n > limits.max_entries:
        raise ValidationError("lore.limit.entries", f"{n} entries exceed the limit of {limits.max_entries}", pointer=pointer)


def _plain(value: Any) -> Any:
    """Deep copy into plain dict/list so the model never aliases caller-owned containers."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _uid(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,18}", value.strip()):
        return int(value.strip())
    return None


def _str_uid(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _js_number_str(value: int | float) -> str:
    """``String(n)`` in JavaScript: integral floats print without ``.0``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _first_str(*values: Any) -> str:
    for v in values:
        if isinstance(v, str) and v.strip():
            return v
    return ""


def _opt_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _unsupported(message: str) -> ValidationError:
    return ValidationError("lore.format.unsupported", message, pointer="")
