"""Sniff what an imported file is from its bytes (the file name is only a weak hint).

``rp import`` uses this to route a file to the card, lorebook or preset importer. Decisions are
made on content: a ``.json`` may hold a card, a SillyTavern world-info book or a chat-completion
preset, and a ``.jpg`` may be a RisuAI "charxJpeg" (a JPEG with a CHARX zip appended).
"""

from __future__ import annotations

import io
import zipfile
from typing import Any, Literal

from roleplay.errors import RpError

from .jsonio import load_json_bytes
from .normalize import v1_card_verdict
from .png_chunks import is_png

AssetKind = Literal["card-png", "card-json", "charx", "lorebook", "preset", "unknown"]

_CARD_FIELDS = frozenset({"name", "description", "personality", "scenario", "first_mes", "mes_example"})
_PYGMALION_FIELDS = frozenset({"char_name", "char_persona", "char_greeting"})
# Keys only a chat-completion / text-completion preset carries at its root.
_PRESET_KEYS = frozenset(
    {
        "prompts",
        "prompt_order",
        "temperature",
        "top_p",
        "top_k",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "rep_pen",
        "openai_max_context",
        "openai_max_tokens",
        "chat_completion_source",
        "max_length",
        "min_p",
    }
)


def _looks_like_entries(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(v, dict) for v in value.values())
    if isinstance(value, list):
        return all(isinstance(v, dict) for v in value)
    return False


def classify_json_object(obj: Any) -> AssetKind:
    """Classify parsed JSON as a card, a lorebook or a preset (``unknown`` otherwise)."""
    if not isinstance(obj, dict):
        return "unknown"
    spec = obj.get("spec")
    if spec in ("chara_card_v2", "chara_card_v3"):
        return "card-json"
    if isinstance(spec, str) and spec.startswith("lorebook"):
        return "lorebook"
    data = obj.get("data")
    if isinstance(data, dict) and _CARD_FIELDS & data.keys():
        return "card-json"
    if _PYGMALION_FIELDS & obj.keys():
        return "card-json"
    # A card's own fields win over an "entries" key; a bare ``entries`` map/list is a book
    # (SillyTavern world info uses an object keyed by uid, character_book uses a list).
    if _CARD_FIELDS & obj.keys() and v1_card_verdict(obj)[0]:
        return "card-json"
    if "entries" in obj and _looks_like_entries(obj["entries"]):
        return "lorebook"
    if "lorebookVersion" in obj or obj.get("kind") == "memory" or obj.get("type") == "risu":
        return "lorebook"  # NovelAI, Agnai and RisuAI book exports
    prompts = obj.get("prompts")
    if isinstance(prompts, list) or isinstance(obj.get("prompt_order"), list):
        return "preset"
    if len(_PRESET_KEYS & obj.keys()) >= 2:
        return "preset"
    return "unknown"


def find_zip_start(data: bytes) -> int | None:
    """Offset of a zip archive inside ``data``: at 0, or after a prefix (charxJpeg, SFX)."""
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return 0
    # The end-of-central-directory record sits within the last 64 KiB + 22 bytes.
    if data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557)) < 0:
        return None
    start = data.find(b"PK\x03\x04")
    return start if start >= 0 else None


def zip_has_card_json(data: bytes) -> bool:
    start = find_zip_start(data)
    if start is None:
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data[start:])) as archive:
            return any(n.lower() == "card.json" for n in archive.namelist())
    except Exception:  # sniffing must never raise: any unreadable archive is simply "not charx"
        return False


def first_meaningful_byte(data: bytes) -> bytes:
    """First non-blank byte after any BOM (UTF-16 text is narrowed to its ASCII byte)."""
    for bom in (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"):
        if data.startswith(bom):
            head = data[len(bom) : len(bom) + 64]
            if bom != b"\xef\xbb\xbf":
                head = head.replace(b"\x00", b"")
            return head.lstrip()[:1]
    return data[:4096].lstrip()[:1]


def sniff_asset_kind(data: bytes, filename: str | None = None, *, parse_json: bool = True) -> AssetKind:
    """Return the kind of asset ``data`` holds; never raises.

    A PNG is reported as ``card-png`` from its signature alone so that a PNG without a card chunk
    gets the card importer's precise error rather than a vague "unknown". ``filename`` is accepted
    so callers can pass what they have, but content always decides: extensions lie (``.json``
    books named like cards, ``.jpg`` files that are CHARX archives). ``parse_json=False`` stops at
    the binary formats (JSON is reported ``unknown``), for callers that parse JSON themselves.
    """
    del filename
    if is_png(data):
        return "card-png"
    if find_zip_start(data) is not None:
        return "charx" if zip_has_card_json(data) else "unknown"
    if first_meaningful_byte(data) not in (b"{", b"[") or not parse_json:
        return "unknown"
    try:
        obj, _warnings = load_json_bytes(data, code_prefix="asset.json")
    except RpError:
        return "unknown"
    return classify_json_object(obj)
