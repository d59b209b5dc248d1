"""``import_file``: community files in, shared assets out — all or nothing.

What a file becomes is decided from its bytes (``sniff_asset_kind``), never from its name:

* a character card (PNG, JSON or CHARX) → one ``card`` asset holding the normalised card, plus
  blobs: the sanitised ``avatar`` PNG, the ``isolated-prompts`` (system prompt and post-history
  instructions, stored untrusted: they are only injected after the user trusts them through
  ``AssetService.trust_isolated_prompts``), and the ``source`` card object exactly as found (for
  compatibility adapters such as MVU, which read original control blocks). The embedded
  ``character_book`` becomes a ``lorebook`` asset linked by ``source_character_id``.
* a SillyTavern world-info lorebook → one ``lorebook`` asset.
* a SillyTavern chat-completion preset → one ``preset`` asset, one ``writing-style`` asset per
  expressive prompt, and the migration report (returned, and kept as the preset's
  ``migration-report`` blob).

Everything is parsed, validated and sanitised before the database is touched; the writes of one
import then go through a single transaction, so a failing import leaves nothing behind.

Duplicate imports: the same bytes imported twice (even by two processes at once) give one asset.
The sha256 of the file is stored as ``import_hash`` under ``UNIQUE(kind, import_hash)``; a repeat
returns the existing asset with ``duplicate: true`` and creates nothing — even if the user edited
the asset since, because a second silent copy of a card is never what a re-import means. Deleting
the asset forgets the hash, so the file can then be imported afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from roleplay.errors import Problem, RpError, ValidationError

from .cards import classify_json_object, import_card_bytes, import_card_object, sniff_asset_kind
from .cards.detect import first_meaningful_byte
from .cards.jsonio import decode_json_text, load_json_bytes
from .cards.normalize import V1_FIELDS, unknown_format_error, v1_card_verdict
from .kinds import CARD, LOREBOOK, PRESET, WRITING_STYLE, Validated, validate_asset_data
from .lorebook.repair import repair_losses
from .presets import migrate_sillytavern_preset
from .store import AssetRecord, AssetStore, AssetTx
from .validation import clean_label

MAX_NAME = 80
V1_FIELDS_SET = frozenset(V1_FIELDS)


@dataclass(frozen=True)
class CreatedAsset:
    id: str
    kind: str
    name: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "kind": self.kind, "name": self.name}

    @classmethod
    def of(cls, record: AssetRecord) -> "CreatedAsset":
        return cls(record.id, record.kind, record.name)


@dataclass
class ImportResult:
    filename: str | None
    kind: str  # the primary asset's kind: card | lorebook | preset
    asset_id: str
    duplicate: bool
    assets: list[CreatedAsset]  # every asset of this import, the primary one first
    warnings: list[Problem] = field(default_factory=list)
    report: dict[str, Any] | None = None  # preset migration report
    # A card's prompts kept aside until the user trusts them (``rp assets trust``): field names.
    isolated_prompts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "filename": self.filename,
            "kind": self.kind,
            "assetId": self.asset_id,
            "duplicate": self.duplicate,
            "assets": [a.to_dict() for a in self.assets],
            "warnings": [w.to_dict() for w in self.warnings],
        }
        if self.report is not None:
            out["report"] = self.report
        if self.isolated_prompts:
            out["isolatedPrompts"] = list(self.isolated_prompts)
        return out


def import_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _stem(filename: str | None) -> str:
    return clean_label(PurePath(filename).stem)[:MAX_NAME] if filename else ""


def _label(text: str) -> str:
    """An asset name we derive from a file's own field (the raw field stays in the stored data)."""
    return clean_label(text)[:MAX_NAME].strip()


def _json_blob(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def import_file(store: AssetStore, data: bytes, filename: str | None = None, *, allow_repair: bool = False) -> ImportResult:
    """Import one file; raises ``RpError`` (nothing written) when it cannot be imported.

    A failure names its real cause: an empty file, a file over the size limit, JSON that is
    truncated or broken at a position, or JSON that is none of the formats we read. JSON is parsed
    once, here, and the parsed value goes to the importer of its kind. ``allow_repair`` lets
    ``json_repair`` guess at broken JSON; pass it only when the user asked."""
    if not isinstance(data, (bytes, bytearray)):
        raise ValidationError("asset.import.not_bytes", "import_file needs the file's bytes")
    data = bytes(data)
    details = {"filename": filename} if filename else None
    if not data.strip():
        raise ValidationError("asset.import.empty", "the file is empty" if not data else "the file holds only blank space", details=details)
    kind = sniff_asset_kind(data, filename, parse_json=False)
    if kind in ("card-png", "charx"):
        return await import_card(store, data, filename, allow_repair=allow_repair)
    if first_meaningful_byte(data) not in (b"{", b"["):
        raise ValidationError(
            "asset.import.unsupported",
            "not a character card (PNG/JSON/CHARX), a SillyTavern world-info lorebook or a "
            "SillyTavern chat-completion preset: the file is neither an image, a zip archive nor JSON",
            details=details,
        )
    obj, warnings = load_json_bytes(data, code_prefix="asset.json", allow_repair=allow_repair)
    kind = classify_json_object(obj)
    if kind == "card-json":
        return await import_card(store, data, filename, parsed=(obj, warnings))
    if kind == "lorebook":
        return await import_lorebook_file(store, data, filename, parsed=(obj, warnings))
    if kind == "preset":
        return await import_preset_file(store, data, filename, parsed=(obj, warnings))
    if isinstance(obj, dict) and V1_FIELDS_SET & obj.keys():
        raise unknown_format_error(v1_card_verdict(obj)[1])
    what = (
        f"a JSON object with keys {', '.join(repr(k) for k in list(obj)[:8])}"
        if isinstance(obj, dict) and obj
        else f"a JSON {type(obj).__name__ if not isinstance(obj, dict) else 'empty object'}"
    )
    what = what.replace("JSON list", "JSON array")
    raise ValidationError(
        "asset.import.unsupported",
        f"{what} is not a character card, a SillyTavern world-info lorebook or a SillyTavern chat-completion preset",
        details=details,
    )


async def _duplicate(tx: AssetTx, existing: AssetRecord, filename: str | None) -> ImportResult:
    assets = [CreatedAsset.of(existing)]
    if existing.kind == CARD:
        assets += [CreatedAsset.of(b) for b in await tx.linked_lorebooks(existing.id)]
    message = f"this file was already imported as {existing.kind} {existing.id}; nothing new was created"
    return ImportResult(
        filename, existing.kind, existing.id, True, assets, [Problem("asset.import.duplicate", message, details={"assetId": existing.id})]
    )


# -- cards ----------------------------------------------------------------------------------------


async def import_card(
    store: AssetStore,
    data: bytes,
    filename: str | None = None,
    *,
    allow_repair: bool = False,
    parsed: tuple[Any, list[Problem]] | None = None,
) -> ImportResult:
    """``parsed``: the file's JSON and parse warnings when the caller has parsed it already."""
    digest = import_hash(data)

    async def imported_before(tx: AssetTx) -> ImportResult | None:
        existing = await tx.by_import_hash(CARD, digest)
        return None if existing is None else await _duplicate(tx, existing, filename)

    # The same file again (the bundled sample for each new story, a card uploaded twice) is known
    # by its hash: one read, not a parse and validation of the whole card to find that out. The
    # write below checks again, in its transaction.
    again = await store.read(imported_before)
    if again is not None:
        return again
    card_import = (
        import_card_object(*parsed, filename) if parsed is not None else import_card_bytes(data, filename, allow_repair=allow_repair)
    )
    warnings = list(card_import.warnings)
    card = validate_asset_data(CARD, card_import.card.model_dump(mode="json"))
    book: Validated | None = None
    if card_import.lorebook is not None:
        book_name = card_import.lorebook.get("name") if isinstance(card_import.lorebook.get("name"), str) else ""
        try:
            book = validate_asset_data(LOREBOOK, {"name": _label(book_name or "") or card.name, "book": card_import.lorebook})
            warnings += book.warnings
        except RpError as exc:
            # A broken embedded book should not cost the user the card; the untouched book stays
            # in the card's ``source`` blob, so nothing is lost.
            warnings.append(
                Problem(
                    "asset.import.lorebook_skipped",
                    f"the embedded character_book was not imported: {exc.message}",
                    pointer=exc.pointer,
                    details={"cause": exc.code},
                )
            )
    if card_import.embedded_assets:
        warnings.append(
            Problem(
                "asset.import.embedded_assets_skipped",
                f"{len(card_import.embedded_assets)} legacy embedded asset(s) were not stored: only the sanitised main image is kept",
            )
        )
    isolated = card_import.isolated_prompts.model_copy(update={"trusted": False})
    card_id, book_id = store.new_id(), store.new_id()

    async def body(tx: AssetTx) -> ImportResult:
        existing = await tx.by_import_hash(CARD, digest)
        if existing is not None:
            return await _duplicate(tx, existing, filename)
        record = await tx.insert(card_id, CARD, card.data, card.name, import_hash=digest)
        if card_import.avatar_png is not None:
            await tx.put_blob(card_id, "avatar", "image/png", card_import.avatar_png)
        if not isolated.is_empty:
            await tx.put_blob(card_id, "isolated-prompts", "application/json", _json_blob(isolated.model_dump()))
        await tx.put_blob(card_id, "source", "application/json", _json_blob(card_import.raw))
        assets = [CreatedAsset.of(record)]
        if book is not None:
            linked = await tx.insert(book_id, LOREBOOK, book.data, book.name, source_character_id=card_id)
            assets.append(CreatedAsset.of(linked))
        held = [name for name in ("system_prompt", "post_history_instructions") if getattr(isolated, name)]
        return ImportResult(filename, CARD, card_id, False, assets, warnings, isolated_prompts=held)

    return await store.write(body, retry_on_unique=True)


# -- lorebooks ------------------------------------------------------------------------------------


async def import_lorebook_file(
    store: AssetStore,
    data: bytes,
    filename: str | None = None,
    *,
    allow_repair: bool = False,
    parsed: tuple[Any, list[Problem]] | None = None,
) -> ImportResult:
    obj, warnings = parsed or load_json_bytes(data, code_prefix="lorebook.json", allow_repair=allow_repair)
    if any(w.code.endswith(".repaired") for w in warnings):
        # The user asked for the repair; the report must say what it lost, in lorebook terms.
        obj, losses = repair_losses(decode_json_text(data), obj)
        warnings = [*warnings, *losses]
    if not isinstance(obj, dict):
        raise ValidationError("lorebook.invalid", "a lorebook file holds a JSON object", pointer="")
    own = obj.get("name") if isinstance(obj.get("name"), str) else ""
    name = _label(own or "") or _stem(filename) or "世界书"
    book = validate_asset_data(LOREBOOK, {"name": name, "book": obj})
    digest = import_hash(data)
    book_id = store.new_id()

    async def body(tx: AssetTx) -> ImportResult:
        existing = await tx.by_import_hash(LOREBOOK, digest)
        if existing is not None:
            return await _duplicate(tx, existing, filename)
        record = await tx.insert(book_id, LOREBOOK, book.data, book.name, import_hash=digest)
        return ImportResult(filename, LOREBOOK, book_id, False, [CreatedAsset.of(record)], [*warnings, *book.warnings])

    return await store.write(body, retry_on_unique=True)


# -- presets --------------------------------------------------------------------------------------


async def import_preset_file(
    store: AssetStore,
    data: bytes,
    filename: str | None = None,
    *,
    allow_repair: bool = False,
    parsed: tuple[Any, list[Problem]] | None = None,
) -> ImportResult:
    obj, warnings = parsed or load_json_bytes(data, code_prefix="preset.json", allow_repair=allow_repair)
    migration = migrate_sillytavern_preset(obj, name=_stem(filename) or "SillyTavern 预设")
    preset = validate_asset_data(PRESET, migration.preset.to_json_dict())
    styles = [validate_asset_data(WRITING_STYLE, s.to_json_dict()) for s in migration.writing_styles]
    report = migration.report.to_dict()
    digest = import_hash(data)
    preset_id = store.new_id()
    style_ids = [store.new_id() for _ in styles]

    async def body(tx: AssetTx) -> ImportResult:
        existing = await tx.by_import_hash(PRESET, digest)
        if existing is not None:
            return await _duplicate(tx, existing, filename)
        record = await tx.insert(preset_id, PRESET, preset.data, preset.name, import_hash=digest)
        await tx.put_blob(preset_id, "migration-report", "application/json", _json_blob(report))
        assets = [CreatedAsset.of(record)]
        for style_id, style in zip(style_ids, styles):
            assets.append(CreatedAsset.of(await tx.insert(style_id, WRITING_STYLE, style.data, style.name)))
        return ImportResult(filename, PRESET, preset_id, False, assets, list(warnings), report)

    return await store.write(body, retry_on_unique=True)


__all__ = ["CreatedAsset", "ImportResult", "import_card", "import_file", "import_hash", "import_lorebook_file", "import_preset_file"]
