"""``import_card_bytes``: PNG / JSON / CHARX bytes in, normalised card out.

Contract: any input, however hostile (random bytes, truncated PNGs, zip bombs, absurdly nested
JSON), either imports or raises :class:`RpError` with a stable code. Recoverable oddities become
warnings (``Problem``) on the result, so the UI can show them next to the imported card.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from roleplay.errors import Problem, RpError

from .avatar import sanitize_avatar
from .charx import read_charx
from .detect import classify_json_object, find_zip_start, first_meaningful_byte
from .jsonio import load_json_bytes
from .model import CharacterCard, IsolatedPrompts, SourceSpec
from .normalize import ParsedCard, parse_card_json
from .png_chunks import is_png, read_text_chunks

MAX_IMPORT_BYTES = 256 * 1024 * 1024  # CHARX may be large; PNG and JSON have tighter own caps
ASSET_CHUNK_PREFIX = "chara-ext-asset_"
MAX_EMBEDDED_ASSET_BYTES = 64 * 1024 * 1024  # all legacy chara-ext-asset_ chunks together
_BASE64 = re.compile(rb"[A-Za-z0-9+/_-]+=*")

SourceFormat = Literal["png", "json", "charx"]


@dataclass
class CardImport:
    card: CharacterCard
    isolated_prompts: IsolatedPrompts
    lorebook: dict[str, Any] | None  # the embedded character_book, verbatim
    avatar_png: bytes | None  # sanitised PNG, or None when the source had no usable image
    warnings: list[Problem]
    source_format: SourceFormat
    source_spec: SourceSpec
    source_spec_version: str | None
    raw: dict[str, Any]  # the card object exactly as found (after JSON parsing)
    # Legacy PNG ``chara-ext-asset_:N`` payloads keyed by their ``__asset:N`` reference.
    embedded_assets: dict[str, bytes] = field(default_factory=dict)


def _wanted_keyword(keyword: str) -> bool:
    lowered = keyword.lower()
    return lowered in ("ccv3", "chara") or lowered.startswith(ASSET_CHUNK_PREFIX)


def _b64decode(text: bytes) -> bytes | None:
    compact = b"".join(text.split())
    if not compact or not _BASE64.fullmatch(compact):
        return None
    compact = compact.rstrip(b"=")
    compact += b"=" * (-len(compact) % 4)
    try:
        if b"-" in compact or b"_" in compact:
            return base64.urlsafe_b64decode(compact)
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None


def decode_card_payload(text: bytes, *, allow_repair: bool = False) -> tuple[Any, list[Problem]]:
    """Decode a ``chara``/``ccv3`` value: base64 of UTF-8 JSON, or (some tools) plain JSON."""
    stripped = text.strip()
    if stripped.startswith(b"rcc||"):
        raise RpError(
            "card.png.encrypted",
            "this is an encrypted RisuAI card (rcc); decrypt it in RisuAI and export it again",
        )
    if stripped[:1] in (b"{", b"\xef"):
        return load_json_bytes(stripped, allow_repair=allow_repair)
    decoded = _b64decode(stripped)
    if decoded is None:
        raise RpError("card.png.bad_payload", "card chunk is neither base64 nor JSON")
    if decoded.lstrip()[:1] not in (b"{", b"\xef") and (twice := _b64decode(decoded)) is not None:
        # Guard against double encoding; cheap, and harmless when it does not apply.
        decoded = twice
    return load_json_bytes(decoded, allow_repair=allow_repair)


def _import_png(data: bytes, filename: str | None, allow_repair: bool) -> CardImport:
    scan = read_text_chunks(data, wanted=_wanted_keyword)
    warnings = list(scan.problems)
    cards = {
        "ccv3": [t for t in scan.texts if t.keyword.lower() == "ccv3"],
        "chara": [t for t in scan.texts if t.keyword.lower() == "chara"],
    }
    parsed: ParsedCard | None = None
    failure: RpError | None = None
    # SPEC_V3: prefer ccv3 over chara. Within a keyword the first chunk that decodes wins.
    for keyword in ("ccv3", "chara"):
        if len(cards[keyword]) > 1:
            warnings.append(
                Problem(
                    "card.png.duplicate_chunk",
                    f"{len(cards[keyword])} {keyword} chunks; the first readable one is used",
                )
            )
        for chunk in cards[keyword]:
            try:
                obj, json_warnings = decode_card_payload(chunk.text, allow_repair=allow_repair)
                parsed = parse_card_json(obj, filename=filename)
            except RpError as exc:
                if exc.code == "card.png.encrypted":
                    raise
                failure = failure or exc
                warnings.append(
                    Problem(
                        "card.png.unreadable_chunk",
                        f"{chunk.chunk_type} {keyword} chunk skipped: {exc.message}",
                        pointer=f"byte:{chunk.offset}",
                        details={"cause": exc.code},
                    )
                )
                continue
            if keyword == "chara" and cards["ccv3"]:
                warnings.append(Problem("card.png.ccv3_unreadable", "the ccv3 chunk was unreadable; chara was used"))
            warnings.extend(json_warnings)
            break
        if parsed is not None:
            break
    if parsed is None:
        if failure is not None:
            raise RpError(
                failure.code, f"no readable character card in this PNG: {failure.message}", pointer=failure.pointer, problems=warnings
            )
        raise RpError("card.png.no_card_chunk", "this PNG has no character card (no chara or ccv3 text chunk)", problems=warnings)

    assets = _legacy_assets(scan.texts, warnings)
    avatar: bytes | None
    try:
        avatar = sanitize_avatar(data)
    except RpError as exc:
        avatar = None
        warnings.append(Problem(exc.code, f"card imported without its image: {exc.message}"))
    return _result(parsed, avatar, warnings, "png", assets)


def _legacy_assets(texts: list[Any], warnings: list[Problem]) -> dict[str, bytes]:
    """RisuAI's pre-CHARX ``chara-ext-asset_:N`` chunks (with or without the colon)."""
    assets: dict[str, bytes] = {}
    total = 0
    for chunk in texts:
        if not chunk.keyword.lower().startswith(ASSET_CHUNK_PREFIX):
            continue
        key = chunk.keyword[len(ASSET_CHUNK_PREFIX) :].lstrip(":")
        blob = _b64decode(chunk.text)
        if not key or blob is None:
            message = f"asset chunk {chunk.keyword!r} is unreadable"
            warnings.append(Problem("card.png.bad_asset_chunk", message, f"byte:{chunk.offset}"))
            continue
        total += len(blob)
        if total > MAX_EMBEDDED_ASSET_BYTES:
            message = "embedded assets exceed the size limit; the rest were skipped"
            warnings.append(Problem("card.png.assets_too_large", message))
            break
        assets.setdefault(f"__asset:{key}", blob)
    return assets


def _import_json(data: bytes, filename: str | None, allow_repair: bool) -> CardImport:
    obj, warnings = load_json_bytes(data, allow_repair=allow_repair)
    return import_card_object(obj, warnings, filename)


def import_card_object(obj: Any, warnings: list[Problem], filename: str | None = None) -> CardImport:
    """Import a card from JSON that is already parsed (``warnings`` are the parser's)."""
    kind = classify_json_object(obj)
    if kind == "lorebook":
        raise RpError("card.json.is_lorebook", "this file is a lorebook (world info), not a character card")
    if kind == "preset":
        raise RpError("card.json.is_preset", "this file is a chat-completion preset, not a character card")
    parsed = parse_card_json(obj, filename=filename)
    return _result(parsed, None, list(warnings), "json", {})


def _import_charx(data: bytes, filename: str | None, allow_repair: bool) -> CardImport:
    content = read_charx(data, allow_repair=allow_repair)
    warnings = list(content.warnings)
    parsed = parse_card_json(content.card_json, filename=filename)
    avatar: bytes | None = None
    if content.main_icon is not None:
        try:
            avatar = sanitize_avatar(content.icons[content.main_icon])
        except RpError as exc:
            message = f"icon {content.main_icon!r} not usable: {exc.message}"
            warnings.append(Problem(exc.code, message, f"zip:{content.main_icon}"))
    return _result(parsed, avatar, warnings, "charx", {})


def _result(parsed: ParsedCard, avatar: bytes | None, warnings: list[Problem], fmt: SourceFormat, assets: dict[str, bytes]) -> CardImport:
    return CardImport(
        card=parsed.card,
        isolated_prompts=parsed.isolated_prompts,
        lorebook=parsed.lorebook,
        avatar_png=avatar,
        warnings=[*warnings, *parsed.warnings],
        source_format=fmt,
        source_spec=parsed.source_spec,
        source_spec_version=parsed.source_spec_version,
        raw=parsed.raw,
        embedded_assets=assets,
    )


def import_card_bytes(data: bytes, filename: str | None = None, *, allow_repair: bool = False) -> CardImport:
    """Import a character card from PNG, JSON or CHARX bytes (detected from content, not name).

    ``allow_repair`` lets ``json_repair`` guess at broken card JSON; only pass it when the user
    asked, because a guess may lose or invent content."""
    if len(data) > MAX_IMPORT_BYTES:
        raise RpError("card.too_large", f"file is {len(data)} bytes; the limit is {MAX_IMPORT_BYTES}")
    if not data.strip():
        raise RpError("card.empty", "the file is empty" if not data else "the file holds only blank space")
    if is_png(data):
        return _import_png(data, filename, allow_repair)
    if find_zip_start(data) is not None:
        return _import_charx(data, filename, allow_repair)
    if first_meaningful_byte(data) in (b"{", b"["):
        return _import_json(data, filename, allow_repair)
    raise RpError("card.format.unknown", "not a character card: expected a PNG, a JSON card or a CHARX archive")
