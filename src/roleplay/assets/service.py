"""``AssetService``: the user-side asset API on top of :class:`AssetStore`.

It adds what spans several rows or needs a user decision: seeding on open, file import, card
export, trusting a card's isolated prompts, and deleting a card together with the lorebooks that
came from it. The HTTP API and the CLI call this; model tools get the plain store (and therefore
no way to trust prompts: the spec gives the model no trust tool).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from roleplay.errors import NotFoundError, Problem, RpError, ValidationError
from roleplay.harness.store import EventStore

from .cards import CharacterCard, IsolatedPrompts, export_card_png
from .importing import ImportResult, import_file
from .kinds import CARD
from .language import Language
from .seeding import SeedSpec
from .seeds import SeedOutcome, ensure_seeds
from .store import AssetRecord, AssetStore, AssetTx, check_revision, not_found, wrong_kind


@dataclass
class DeleteResult:
    deleted: list[AssetRecord]
    warnings: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "deleted": [r.to_dict(with_data=False) for r in self.deleted],
            "warnings": [w.to_dict() for w in self.warnings],
        }


class AssetService:
    def __init__(self, events: EventStore, *, seeds: Sequence[SeedSpec] | None = None) -> None:
        self.store = AssetStore(events)
        # None: the built-in set in the user's language, decided at each ``ensure_seeds``.
        self._seeds = None if seeds is None else tuple(seeds)

    async def ensure_seeds(self, *, language: Language | None = None) -> list[SeedOutcome]:
        """``language``: the built-in set to seed (default: the user's, see ``seeds.ensure_seeds``)."""
        return await ensure_seeds(self.store, self._seeds, language=language)

    async def import_file(self, data: bytes, filename: str | None = None, *, allow_repair: bool = False) -> ImportResult:
        """``allow_repair``: only when the user asked (``rp import --repair``); see ``import_file``."""
        return await import_file(self.store, data, filename, allow_repair=allow_repair)

    async def linked_lorebooks(self, card_id: str) -> list[AssetRecord]:
        await self.store.get(card_id, kind=CARD)
        return await self.store.read(lambda tx: tx.linked_lorebooks(card_id))

    # -- isolated prompts -----------------------------------------------------------------------
    async def isolated_prompts(self, card_id: str) -> IsolatedPrompts:
        """The card's quarantined prompts; empty and untrusted when the card had none."""
        await self.store.get(card_id, kind=CARD)
        try:
            blob = await self.store.get_blob(card_id, "isolated-prompts")
        except NotFoundError as exc:
            if exc.code == "asset.blob_not_found":
                return IsolatedPrompts()
            raise
        return IsolatedPrompts.model_validate(json.loads(blob.data))

    async def trust_isolated_prompts(self, card_id: str, trusted: bool, *, expected_revision: int | None = None) -> IsolatedPrompts:
        """User-side only: allow (or stop) injecting the card's own system prompt and
        post-history instructions. Bumps the card's revision so sessions see the change."""
        if not isinstance(trusted, bool):
            raise ValidationError("asset.invalid_trust", "trusted must be true or false", pointer="/trusted")
        check_revision(expected_revision, optional=True)
        current = await self.isolated_prompts(card_id)
        if current.is_empty:
            raise ValidationError(
                "asset.no_isolated_prompts", f"card {card_id} has no isolated prompts to trust", details={"assetId": card_id}
            )
        updated = current.model_copy(update={"trusted": trusted})
        payload = json.dumps(updated.model_dump(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")

        async def body(tx: AssetTx) -> None:
            await tx.bump(card_id, expected_revision)
            await tx.put_blob(card_id, "isolated-prompts", "application/json", payload)

        await self.store.write(body)
        return updated

    # -- export ---------------------------------------------------------------------------------
    async def export_card(self, card_id: str) -> bytes:
        """The current card as a V3 PNG (with V2 backfill): its avatar, and its linked lorebooks
        embedded as ``character_book``. Isolated prompts are never exported."""

        async def body(tx: AssetTx) -> tuple[AssetRecord | None, bytes | None, list[AssetRecord]]:
            record = await tx.get(card_id)
            if record is None or record.kind != CARD:
                return None, None, []
            avatar = await tx.blob(card_id, "avatar")
            return record, avatar.data if avatar else None, await tx.linked_lorebooks(card_id)

        # One read transaction: card, avatar and books come from the same moment.
        record, avatar, books = await self.store.read(body)
        if record is None:
            other = await self.store.read(lambda tx: tx.get(card_id))
            raise not_found(card_id) if other is None else wrong_kind(other, CARD)
        raw_books = []
        for book in books:
            raw = book.data["book"]
            if not isinstance(raw.get("entries"), list):
                # World-info shaped books use other field names; embedding them verbatim would
                # write an invalid character_book.
                raise ValidationError(
                    "asset.export.lorebook_shape",
                    f"linked lorebook {book.id} is in world-info form, not character_book form",
                    pointer="/book/entries",
                    details={"assetId": book.id},
                )
            raw_books.append(raw)
        return export_card_png(CharacterCard.model_validate(record.data), avatar, raw_books)

    # -- delete ---------------------------------------------------------------------------------
    async def delete(self, asset_id: str, *, expected_revision: int | None = None, cascade_lorebooks: bool = True) -> DeleteResult:
        """Delete an asset. For a card, then delete (best effort, each on its own) the lorebooks
        imported from it unless ``cascade_lorebooks`` is False. The card deletion stands even when
        a lorebook deletion fails (spec: failures do not roll the card back); sessions are never
        touched — their references simply read as unbound."""
        deleted = await self.store.delete(asset_id, expected_revision=expected_revision)
        result = DeleteResult([deleted])
        if deleted.kind != CARD or not cascade_lorebooks:
            return result
        books = await self.store.read(lambda tx: tx.linked_lorebooks(asset_id))
        for book in books:
            try:
                result.deleted.append(await self.store.delete(book.id))
            except RpError as exc:
                if exc.code == "asset.not_found":
                    continue  # deleted concurrently: the outcome is the one we wanted
                result.warnings.append(
                    Problem(
                        "asset.cascade_failed",
                        f"lorebook {book.id} was not deleted: {exc.message}",
                        details={"assetId": book.id, "cause": exc.code},
                    )
                )
        return result


__all__ = ["AssetService", "DeleteResult"]
