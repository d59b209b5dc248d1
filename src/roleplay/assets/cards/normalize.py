"""Detect V1 / V2 / V3 / Pygmalion card JSON and normalise it into :class:`CharacterCard`.

Tolerance follows what real files and importer bug reports show (research cards.md §3): classify
by ``spec`` (a ``chara`` chunk may hold V3), treat ``null`` as absent, coerce numbers to strings
where a string is required, wrap a bare string ``alternate_greetings``, split comma-separated
``tags``, fall back to the V1 root mirror when ``data`` lacks a field, fall back to a root
``character_book``, accept odd ``spec_version`` values with a warning, and derive a name when it
is empty. Every coercion leaves a :class:`Problem` warning with a JSON Pointer into the source.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from roleplay.errors import Problem, RpError, pointer_from_parts

from ..validation import clean_label, invalid, surrogate_problems, text_problem
from .jsonio import check_json_value
from .model import CardAsset, CharacterCard, IsolatedPrompts, SourceSpec, default_assets

V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
STRING_FIELDS = (*V1_FIELDS, "creator_notes", "creator", "character_version")
ISOLATED_FIELDS = ("system_prompt", "post_history_instructions")
LIST_FIELDS = ("alternate_greetings", "group_only_greetings", "tags")
KNOWN_DATA_KEYS = frozenset(
    {
        *STRING_FIELDS,
        *ISOLATED_FIELDS,
        *LIST_FIELDS,
        "extensions",
        "character_book",
        "nickname",
        "creator_notes_multilingual",
        "source",
        "assets",
        "creation_date",
        "modification_date",
    }
)
# Root keys SillyTavern/TavernAI write beside ``data``: the V1 mirror plus bookkeeping. They are
# not unknown data, and bookkeeping such as ``chat`` (a local chat file name with a timestamp)
# must not leak into our exports.
ROOT_MIRROR_KEYS = frozenset(
    {
        *V1_FIELDS,
        "creatorcomment",
        "avatar",
        "chat",
        "talkativeness",
        "fav",
        "tags",
        "create_date",
        "creator",
        "character_book",
    }
)
V1_BOOKKEEPING = frozenset({"avatar", "chat", "create_date", "fav", "talkativeness"})
# Every root key a spec-less (V1) card may carry: its fields, V2 fields some tools write at the
# root, and app bookkeeping. Anything else is a key no card format has.
V1_ROOT_KEYS = KNOWN_DATA_KEYS | ROOT_MIRROR_KEYS | V1_BOOKKEEPING | {"creatorcomment", "spec", "spec_version", "data"}
PYGMALION_MAP = {
    "char_name": "name",
    "char_persona": "description",
    "world_scenario": "scenario",
    "char_greeting": "first_mes",
    "example_dialogue": "mes_example",
}


@dataclass
class ParsedCard:
    card: CharacterCard
    isolated_prompts: IsolatedPrompts
    lorebook: dict[str, Any] | None
    source_spec: SourceSpec
    source_spec_version: str | None
    raw: dict[str, Any]
    warnings: list[Problem] = field(default_factory=list)


class _Ctx:
    """Collects warnings; ``base`` is the pointer prefix of the object fields are read from."""

    def __init__(self, base: tuple[str, ...]) -> None:
        self.base = base
        self.warnings: list[Problem] = []

    def warn(self, code: str, message: str, *parts: Any) -> None:
        self.warnings.append(Problem(code, message, pointer=pointer_from_parts([*self.base, *parts])))


def _scalar_to_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        # RisuAI notes old cards carrying a numeric character_version; 1.0 must stay "1.0".
        return json.dumps(value)
    return None


def _string(ctx: _Ctx, key: str, value: Any) -> str:
    if value is None:
        return ""
    text = _scalar_to_str(value)
    if text is None:
        ctx.warn("card.field.coerced", f"{key} should be a string; its JSON text was used", key)
        return json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        ctx.warn("card.field.coerced", f"{key} should be a string; {text!r} was used", key)
    return text


def _string_list(ctx: _Ctx, key: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        if key == "tags":
            # SillyTavern accepts tags as one comma-separated string.
            ctx.warn("card.field.coerced", "tags is a string; it was split on commas", key)
            return [t.strip() for t in value.split(",") if t.strip()]
        if not value:
            return []
        ctx.warn("card.field.coerced", f"{key} is a single string; it was wrapped into a list", key)
        return [value]
    if not isinstance(value, list):
        ctx.warn("card.field.invalid", f"{key} should be a list of strings; it was ignored", key)
        return []
    out: list[str] = []
    for i, item in enumerate(value):
        text = _scalar_to_str(item)
        if text is None:
            ctx.warn("card.field.invalid", f"{key}[{i}] is not a string; it was dropped", key, i)
            continue
        if not isinstance(item, str):
            ctx.warn("card.field.coerced", f"{key}[{i}] was converted to a string", key, i)
        out.append(text)
    return out


def _date(ctx: _Ctx, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        return value
    elif isinstance(value, float):
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(float(value.strip()))
        except ValueError:
            number = None
    else:
        number = None
    if number is None:
        ctx.warn("card.field.invalid", f"{key} should be unix seconds; it was ignored", key)
        return None
    ctx.warn("card.field.coerced", f"{key} was converted to the integer {number}", key)
    return number


def _assets(ctx: _Ctx, value: Any) -> list[CardAsset]:
    if value is None:
        return default_assets()
    if not isinstance(value, list):
        ctx.warn("card.field.invalid", "assets should be a list; the default icon is used", "assets")
        return default_assets()
    out: list[CardAsset] = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str) or not item["uri"]:
            ctx.warn("card.asset.invalid", f"assets[{i}] has no uri; it was dropped", "assets", i)
            continue
        fields = copy.deepcopy(item)
        # Missing descriptors get the spec's neutral values instead of sinking the whole card.
        for key, default in (("type", "icon"), ("name", "main" if i == 0 else str(i)), ("ext", "unknown")):
            text = _scalar_to_str(fields.get(key))
            if not text:
                ctx.warn("card.asset.defaulted", f"assets[{i}].{key} missing; {default!r} used", "assets", i, key)
                text = default
            fields[key] = text
        out.append(CardAsset(**fields))
    return out


def _classify(obj: dict[str, Any]) -> tuple[SourceSpec, dict[str, Any], tuple[str, ...], list[Problem]]:
    """Return (source spec, object holding the fields, pointer base, warnings)."""
    notes: list[Problem] = []
    spec = obj.get("spec")
    data = obj.get("data")
    if spec in ("chara_card_v2", "chara_card_v3"):
        kind: SourceSpec = "v3" if spec == "chara_card_v3" else "v2"
        if isinstance(data, dict):
            return kind, data, ("data",), notes
        message = f"{spec} card has no data object; root fields were read"
        notes.append(Problem("card.spec.data_missing", message, "/data"))
        return kind, obj, (), notes
    if isinstance(spec, str) and spec.startswith("lorebook"):
        raise RpError("card.json.is_lorebook", f"this is a lorebook ({spec}), not a character card", pointer="/spec")
    if spec is not None:
        if isinstance(data, dict) and "name" in data:
            notes.append(Problem("card.spec.unknown", f"unknown spec {spec!r}; read as a V2 card", "/spec"))
            return "v2", data, ("data",), notes
        raise RpError("card.json.unsupported_spec", f"unsupported card spec {spec!r}", pointer="/spec")
    if isinstance(data, dict) and any(k in data for k in V1_FIELDS):
        notes.append(Problem("card.spec.missing", "card has a data object but no spec; read as V2", "/spec"))
        return "v2", data, ("data",), notes
    if any(k in obj for k in PYGMALION_MAP):
        return "pygmalion", obj, (), notes
    if any(k in obj for k in V1_FIELDS):
        is_card, unknown = v1_card_verdict(obj)
        if not is_card:
            raise unknown_format_error(unknown)
        return "v1", obj, (), notes
    raise RpError("card.json.not_a_card", _not_a_card_message(obj))


def v1_card_verdict(obj: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether a spec-less object without a ``data`` object reads as a V1 card, and its root keys
    that no card has.

    ``name`` and ``description`` alone are weak evidence: other tools' presets and exports have them
    too (with ``generation_settings`` and the like). So a V1 card needs the card-only ``first_mes``
    or three card fields before it may carry unknown keys, and even then no more unknown keys than
    known ones; with weaker evidence, any unknown key means it is something else."""
    fields = [key for key in V1_FIELDS if key in obj]
    unknown = sorted(str(key) for key in obj if key not in V1_ROOT_KEYS)
    if not fields:
        return False, unknown
    strong = "first_mes" in obj or len(fields) >= 3
    return not unknown or (strong and len(unknown) <= len(obj) - len(unknown)), unknown


def unknown_format_error(unknown: list[str]) -> RpError:
    shown = ", ".join(repr(k) for k in unknown[:8]) + (" …" if len(unknown) > 8 else "")
    return RpError(
        "card.format.unknown",
        f"this JSON has some character card fields but also keys no card "
        f"format has ({shown}); it looks like another tool's file, so it was not imported",
        details={"unknownKeys": unknown[:50]},
    )


def _not_a_card_message(obj: dict[str, Any]) -> str:
    from .detect import classify_json_object  # local: detect imports this module's callers

    kind = classify_json_object(obj)
    if kind == "lorebook":
        return "this JSON is a lorebook (world info), not a character card"
    if kind == "preset":
        return "this JSON is a chat-completion preset, not a character card"
    return "JSON has neither a card spec nor any character card field (name, description, first_mes…)"


def _version_problem(kind: str, message: str) -> Problem:
    return Problem(f"card.spec_version.{kind}", message, "/spec_version")


def _check_spec_version(kind: SourceSpec, version: Any) -> list[Problem]:
    if kind == "v2" and version != "2.0":
        return [_version_problem("unexpected", f"V2 spec_version is {version!r}, expected '2.0'")]
    if kind != "v3":
        return []
    try:
        number = float(version)
    except (TypeError, ValueError):
        return [_version_problem("unexpected", f"V3 spec_version {version!r} is not a number")]
    if number >= 4.0 or number < 3.0:
        return [_version_problem("unexpected", f"V3 spec_version {version!r} is outside 3.x")]
    if number > 3.0:
        return [_version_problem("newer", f"card uses newer spec_version {version!r}; read as 3.0")]
    return []


def _lorebook(ctx: _Ctx, src: dict[str, Any], root: dict[str, Any]) -> dict[str, Any] | None:
    book = src.get("character_book")
    if book is None and src is not root and isinstance(root.get("character_book"), dict):
        # Kobold Lite once wrote the book at the root instead of under data.
        book = root["character_book"]
        message = "character_book found at the root, not under data"
        ctx.warnings.append(Problem("card.lorebook.at_root", message, "/character_book"))
    if book is None:
        return None
    if not isinstance(book, dict):
        ctx.warn("card.lorebook.invalid", "character_book is not an object; it was ignored", "character_book")
        return None
    return copy.deepcopy(book)


def _derive_name(ctx: _Ctx, nickname: str | None, filename: str | None) -> str:
    stem = clean_label(PurePath(filename).stem) if filename else ""
    name = nickname or stem or "Unnamed character"
    ctx.warn("card.name.missing", f"card has no name; {name!r} was used", "name")
    return name


def parse_card_json(obj: Any, *, filename: str | None = None) -> ParsedCard:
    """Normalise one card object (already parsed JSON). Raises :class:`RpError` if it is no card."""
    if not isinstance(obj, dict):
        raise RpError("card.json.not_object", "a character card must be a JSON object")
    check_json_value(obj)
    kind, src, base, notes = _classify(obj)
    ctx = _Ctx(base)
    ctx.warnings.extend(notes)
    version = obj.get("spec_version")
    ctx.warnings.extend(_check_spec_version(kind, version))

    if kind == "pygmalion":
        src = {target: obj.get(source) for source, target in PYGMALION_MAP.items()}

    def pick(key: str) -> Any:
        value = src.get(key)
        if value is None and src is not obj and key in V1_FIELDS and obj.get(key) is not None:
            # V2 readers fall back to the V1 root mirror when data lacks a field.
            ctx.warnings.append(Problem("card.field.from_root", f"data.{key} missing; the root copy was used", f"/{key}"))
            return obj.get(key)
        if value is None and kind == "v1" and key == "creator_notes":
            return obj.get("creatorcomment")
        return value

    # Field name → value, for the models' keyword arguments (each field's own type).
    values: dict[str, Any] = {key: _string(ctx, key, pick(key)) for key in STRING_FIELDS}
    isolated_values: dict[str, Any] = {key: _string(ctx, key, src.get(key)) for key in ISOLATED_FIELDS}
    isolated = IsolatedPrompts(**isolated_values)
    lists: dict[str, Any] = {key: _string_list(ctx, key, src.get(key)) for key in LIST_FIELDS}

    extensions = src.get("extensions")
    if extensions is None:
        extensions = {}
    elif not isinstance(extensions, dict):
        ctx.warn("card.field.invalid", "extensions should be an object; it was ignored", "extensions")
        extensions = {}

    nickname = src.get("nickname")
    nickname = None if nickname is None else _string(ctx, "nickname", nickname)
    multilingual = src.get("creator_notes_multilingual")
    if multilingual is not None and not isinstance(multilingual, dict):
        ctx.warn("card.field.invalid", "creator_notes_multilingual should be an object; it was ignored", "creator_notes_multilingual")
        multilingual = None
    if multilingual is not None:
        multilingual = {str(k): _string(ctx, "creator_notes_multilingual", v) for k, v in multilingual.items()}
    source = src.get("source")
    source = None if source is None else _string_list(ctx, "source", source)

    if not values["name"].strip():
        values["name"] = _derive_name(ctx, nickname, filename)

    if kind == "pygmalion":
        extra_data: dict[str, Any] = {}
        extra_root = {k: v for k, v in obj.items() if k not in PYGMALION_MAP}
    elif src is obj:  # V1, or V2/V3 without a data object
        extra_data = {}
        skip = KNOWN_DATA_KEYS | {"spec", "spec_version", "data"} | V1_BOOKKEEPING | {"creatorcomment"}
        extra_root = {k: v for k, v in obj.items() if k not in skip}
    else:
        extra_data = {k: v for k, v in src.items() if k not in KNOWN_DATA_KEYS}
        skip = ROOT_MIRROR_KEYS | {"spec", "spec_version", "data"}
        extra_root = {k: v for k, v in obj.items() if k not in skip}

    text_problems = card_text_problems(
        {**values, **lists, "nickname": nickname, "source": source, "creator_notes_multilingual": multilingual}, base
    )
    if text_problems:
        raise invalid("card", text_problems)

    card = CharacterCard(
        **values,
        **lists,
        extensions=copy.deepcopy(extensions),
        nickname=nickname,
        creator_notes_multilingual=multilingual,
        source=source,
        assets=_assets(ctx, src.get("assets")),
        creation_date=_date(ctx, "creation_date", src.get("creation_date")),
        modification_date=_date(ctx, "modification_date", src.get("modification_date")),
        extra_data=copy.deepcopy(extra_data),
        extra_root=copy.deepcopy(extra_root),
    )
    return ParsedCard(
        card=card,
        isolated_prompts=isolated,
        lorebook=_lorebook(ctx, src, obj),
        source_spec=kind,
        source_spec_version=version if isinstance(version, str) else None,
        raw=obj,
        warnings=ctx.warnings,
    )


# One-line labels (a list shows them, ``{{char}}`` expands to them) and the card's prose. Both get
# the shared text rules of ``assets/validation.py``; labels also the one-line name rule.
LABEL_FIELDS = ("name", "nickname")
PROSE_FIELDS = (
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "creator",
    "character_version",
    "alternate_greetings",
    "group_only_greetings",
    "tags",
    "source",
    "creator_notes_multilingual",
)


def card_text_problems(card: dict[str, Any], base: tuple[Any, ...] = ()) -> list[Problem]:
    """Problems (``card.control_char``, ``card.bad_name_char``, ``card.lone_surrogate``) in a
    V3-shaped card's text fields; pointers are ``base`` plus the field path.

    Rejected, not cleaned: stripping characters out of a stranger's text would silently change it.
    Surrounding whitespace of a name is allowed (the name column is stored stripped)."""
    problems: list[Problem] = []
    for key in LABEL_FIELDS:
        value = card.get(key)
        if isinstance(value, str):
            found = text_problem("card", value.strip(), pointer_from_parts([*base, key]), name=True)
            problems += [found] if found else []
    for key in PROSE_FIELDS:
        value = card.get(key)
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else [(None, value)]
        for sub, text in items:
            if isinstance(text, str):
                parts = [*base, key] if sub is None else [*base, key, sub]
                found = text_problem("card", text, pointer_from_parts(parts))
                problems += [found] if found else []
    checked = {*LABEL_FIELDS, *PROSE_FIELDS}
    # Everything else (extensions, unknown keys) is kept verbatim, but must still be storable text.
    problems += surrogate_problems("card", {k: v for k, v in card.items() if k not in checked}, base)
    return problems


# --- SillyTavern extension readers -------------------------------------------------------------
# The values stay verbatim in ``extensions`` (lossless); these helpers give typed views with the
# defaults SillyTavern applies, tolerating the string/number/"" variants seen in real cards.


@dataclass(frozen=True)
class DepthPrompt:
    prompt: str
    depth: int
    role: str


def st_talkativeness(card: CharacterCard) -> float:
    value: Any = card.extensions.get("talkativeness")  # any JSON; float() refuses what it can't read
    try:
        number = float(value)  # "0.5", "1" and 0.5 all occur in real cards
    except (TypeError, ValueError):
        return 0.5
    return min(max(number, 0.0), 1.0) if number == number else 0.5


def st_depth_prompt(card: CharacterCard) -> DepthPrompt | None:
    raw = card.extensions.get("depth_prompt")
    if not isinstance(raw, dict):
        return None
    depth_value: Any = raw.get("depth")
    try:
        depth = int(depth_value)  # "" occurs (AICharED); ST's default is 4
    except (TypeError, ValueError):
        depth = 4
    role = raw.get("role")
    if role not in ("system", "user", "assistant"):
        role = "system"
    prompt = raw.get("prompt")
    return DepthPrompt(prompt if isinstance(prompt, str) else "", max(depth, 0), role)
