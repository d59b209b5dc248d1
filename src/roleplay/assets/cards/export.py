"""Export a card as a V3 PNG with a ``ccv3`` chunk and a genuine V2 ``chara`` backfill.

* ``ccv3`` holds the full V3 object (SPEC_V3: base64 of UTF-8 JSON in a tEXt chunk).
* ``chara`` holds a real V2 object (``spec: chara_card_v2``), not SillyTavern's relabelled copy:
  V2 fields only, plus the V1 root mirror for TavernAI-era readers, and lorebook entries with
  their V3 decorators removed (SPEC_V3: "On backfilling V2, the application SHOULD remove all
  decorators").
* Isolated prompts are never restored: ``system_prompt`` and ``post_history_instructions`` are
  written empty in both objects, whatever the user trusted locally.
* Several lorebooks are merged into the single ``character_book`` a card can carry; see
  :func:`merge_lorebooks` for the rules.
* Export is deterministic: no clock is read. Callers that want ``modification_date`` bumped set it
  on the card before exporting.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Sequence
from typing import Any

from roleplay.errors import RpError

from .avatar import placeholder_avatar, sanitize_avatar
from .model import CharacterCard
from .normalize import V1_FIELDS
from .png_chunks import MAX_CHUNK_BYTES, rewrite_png

MERGED_FROM_KEY = "roleplay/merged_from"


def _book_entries(book: dict[str, Any], index: int) -> list[dict[str, Any]]:
    entries = book.get("entries")
    if isinstance(entries, dict):  # world-info shape keyed by uid; keep the file's order
        entries = list(entries.values())
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RpError(
            "card.export.invalid_lorebook", f"lorebook {index} has no list of entry objects", pointer=f"/lorebooks/{index}/entries"
        )
    return copy.deepcopy(entries)


def _v3_entry(entry: dict[str, Any]) -> dict[str, Any]:
    # V3 requires these on every entry; fill only what is missing, never overwrite.
    entry.setdefault("extensions", {})
    entry.setdefault("use_regex", False)
    entry.setdefault("enabled", True)
    entry.setdefault("insertion_order", 100)
    entry.setdefault("keys", [])
    entry.setdefault("content", "")
    return entry


def merge_lorebooks(books: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Combine zero or more raw ``character_book`` dicts into one (None when there are none).

    One book passes through unchanged apart from the V3-required defaults (``extensions`` on the
    book; ``extensions``, ``use_regex``, ``enabled``, ``insertion_order``, ``keys``, ``content``
    on entries). With several books:

    * entries are concatenated in the given book order, each keeping its ``insertion_order``;
    * entry ``id`` values are kept unless they collide with an earlier one, in which case the
      entry gets the next free integer id;
    * ``name`` and ``description`` come from the first book that has them;
    * ``scan_depth`` and ``token_budget`` take the largest value given, so no book loses reach;
      ``recursive_scanning`` is true if any book asks for it, false if all that set it say false;
    * book ``extensions`` are merged key by key, the first book winning on conflicts, and
      ``extensions["roleplay/merged_from"]`` records the source book names in order.
    """
    if not books:
        return None
    for i, book in enumerate(books):
        if not isinstance(book, dict):
            raise RpError("card.export.invalid_lorebook", f"lorebook {i} is not an object", pointer=f"/lorebooks/{i}")
    merged: dict[str, Any]
    if len(books) == 1:
        merged = copy.deepcopy(books[0])
        merged["entries"] = [_v3_entry(e) for e in _book_entries(books[0], 0)]
        if not isinstance(merged.get("extensions"), dict):
            merged["extensions"] = {}
        return merged

    merged = {}
    extensions: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    for i, book in enumerate(books):
        for key in ("name", "description"):
            if key not in merged and isinstance(book.get(key), str) and book[key]:
                merged[key] = book[key]
        for key in ("scan_depth", "token_budget"):
            value = book.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                merged[key] = max(merged.get(key, value), value)
        if isinstance(book.get("recursive_scanning"), bool):
            merged["recursive_scanning"] = merged.get("recursive_scanning", False) or book["recursive_scanning"]
        book_extensions = book.get("extensions")
        if isinstance(book_extensions, dict):
            for key, value in book_extensions.items():
                extensions.setdefault(key, copy.deepcopy(value))
        entries.extend(_v3_entry(entry) for entry in _book_entries(book, i))
    _dedupe_ids(entries)
    extensions[MERGED_FROM_KEY] = [b.get("name") if isinstance(b.get("name"), str) else "" for b in books]
    merged["extensions"] = extensions
    merged["entries"] = entries
    return merged


def _dedupe_ids(entries: list[dict[str, Any]]) -> None:
    """Give every entry whose ``id`` repeats an earlier one the next unused integer id."""

    def key(value: Any) -> str:  # ids may be numbers or strings (V3); compare them as JSON
        return json.dumps(value, sort_keys=True, default=str)

    used = {key(e["id"]) for e in entries if "id" in e}
    seen: set[str] = set()
    next_id = 0
    for entry in entries:
        if "id" not in entry:
            continue  # ids are optional in both specs; absence is not a collision
        if key(entry["id"]) not in seen:
            seen.add(key(entry["id"]))
            continue
        while key(next_id) in used:
            next_id += 1
        entry["id"] = next_id
        used.add(key(next_id))
        seen.add(key(next_id))


def strip_decorators(content: str) -> str:
    """Remove the leading ``@@decorator`` lines (and ``@@@`` fallbacks) of a V3 entry."""
    lines = content.split("\n")
    i = 0
    while i < len(lines) and lines[i].lstrip().startswith("@@"):
        i += 1
    return "\n".join(lines[i:]) if i else content


def _v2_fields(card: CharacterCard) -> dict[str, Any]:
    """The card fields V2 and V3 share. Isolated prompts are never exported."""
    return {
        "name": card.name,
        "description": card.description,
        "personality": card.personality,
        "scenario": card.scenario,
        "first_mes": card.first_mes,
        "mes_example": card.mes_example,
        "creator_notes": card.creator_notes,
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": list(card.alternate_greetings),
        "tags": list(card.tags),
        "creator": card.creator,
        "character_version": card.character_version,
        "extensions": copy.deepcopy(card.extensions),
    }


def build_v3_object(card: CharacterCard, book: dict[str, Any] | None) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(card.extra_data)
    data.update(_v2_fields(card))
    data.update({"group_only_greetings": list(card.group_only_greetings), "assets": [a.model_dump() for a in card.assets]})
    for key in ("nickname", "creator_notes_multilingual", "source", "creation_date", "modification_date"):
        value = getattr(card, key)
        if value is not None:
            data[key] = copy.deepcopy(value)
    if book is not None:
        data["character_book"] = book
    obj: dict[str, Any] = copy.deepcopy(card.extra_root)
    obj.update({"spec": "chara_card_v3", "spec_version": "3.0", "data": data})
    return obj


def build_v2_object(card: CharacterCard, book: dict[str, Any] | None) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(card.extra_data)
    data.update(_v2_fields(card))
    if book is not None:
        v2_book = copy.deepcopy(book)
        for entry in v2_book["entries"]:
            if isinstance(entry.get("content"), str):
                entry["content"] = strip_decorators(entry["content"])
        data["character_book"] = v2_book
    obj: dict[str, Any] = {key: data[key] for key in V1_FIELDS}  # V1 root mirror
    obj.update({"spec": "chara_card_v2", "spec_version": "2.0", "data": data})
    return obj


def _encode(obj: dict[str, Any]) -> bytes:
    payload = base64.b64encode(json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    if len(payload) > MAX_CHUNK_BYTES:
        raise RpError("card.export.too_large", f"card data is {len(payload)} bytes encoded; limit {MAX_CHUNK_BYTES}")
    return payload


def export_card_png(
    card: CharacterCard,
    avatar_png: bytes | None = None,
    lorebooks: Sequence[dict[str, Any]] = (),
) -> bytes:
    """Write ``card`` (with ``lorebooks`` embedded) into a sanitised copy of ``avatar_png``.

    Without an avatar a deterministic placeholder image is used. Chunk order is
    ``IHDR … IDAT … tEXt(chara) tEXt(ccv3) IEND``, as SillyTavern writes it.
    """
    image = sanitize_avatar(avatar_png) if avatar_png is not None else placeholder_avatar()
    book = merge_lorebooks(list(lorebooks))
    chara = _encode(build_v2_object(card, book))
    ccv3 = _encode(build_v3_object(card, book))
    return rewrite_png(image, [("chara", chara), ("ccv3", ccv3)])
