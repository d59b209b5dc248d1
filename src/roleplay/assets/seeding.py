"""Built-in seed assets: when to create, upgrade or leave them alone.

The preset, writing-style and persona plugins each guarantee one default asset (示例预设, 通用叙事
and a default persona). The spec adds three promises, and this pure decision function keeps them:

1. A seed is created once. If the user deletes it, it is never recreated: the store keeps a
   persistent ``SeedMarker`` per seed key that outlives the asset.
2. A seed the user has not edited is upgraded *in place* when we ship better text: same asset id,
   same preset field ids (seed contents keep their field ids across versions by construction).
3. A seed the user has edited is never overwritten.

"Not edited" is decided by content hash, never by timestamps or revision counters (a store may bump
revisions for reasons that are not edits): the stored content, normalised by the kind's own parser,
must hash to the hash the marker recorded when we last wrote it, or to the hash of any earlier
version of the seed (``legacy_hashes``; covers installs from before markers existed). Content that no
longer parses counts as edited, so a bug elsewhere can only ever cause a missed upgrade, never lost
user text.

The store owns ids, persistence, transactions and the default flag; it calls ``plan_seed_upgrade``
with what it found (the asset named by the marker, or, with no marker, an asset it tagged with the
seed key) and applies the returned plan.

Kind-agnostic on purpose; lives beside presets only because presets are its first user.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from roleplay.canonical import sha256_hex
from roleplay.errors import RpError, ValidationError

Normalizer = Callable[[Any], Mapping[str, Any]]


def content_hash(normalized: Mapping[str, Any]) -> str:
    return "sha256:" + sha256_hex(dict(normalized))


@dataclass(frozen=True)
class SeedSpec:
    """One built-in asset as we ship it.

    ``key`` is stable forever (e.g. ``rp.seed.preset.example``); ``version`` grows by one whenever
    ``content`` changes; ``legacy_hashes`` lists the content hashes of every earlier version so an
    unedited old copy is still recognised. ``normalize`` is the kind's parser followed by JSON
    dumping; it makes the hash independent of key order and of trimming the parser does.
    """

    kind: str
    key: str
    version: int
    content: Mapping[str, Any]
    normalize: Normalizer
    make_default: bool = True
    legacy_hashes: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.version < 1:
            raise ValueError("seed versions start at 1")
        # Shipping invalid seed content is a programming error: fail at import, not at first run.
        object.__setattr__(self, "content", dict(self.normalize(self.content)))

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "version": self.version, "contentHash": self.content_hash}


@dataclass(frozen=True)
class SeedMarker:
    """Persistent record that a seed was handled. Outlives the asset (promise 1).

    ``content_hash`` is the hash of the content we last *wrote*; ``None`` when we adopted an asset
    we did not write and that was already edited (we cannot know what it looked like unedited).
    ``asset_id`` is ``None`` only in a CREATE plan, before the store has minted the id.
    """

    key: str
    kind: str
    version: int
    content_hash: str | None
    asset_id: str | None

    def bound_to(self, asset_id: str) -> "SeedMarker":
        return replace(self, asset_id=asset_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "version": self.version,
            "contentHash": self.content_hash,
            "assetId": self.asset_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SeedMarker":
        try:
            marker = cls(
                key=data["key"],
                kind=data["kind"],
                version=data["version"],
                content_hash=data.get("contentHash"),
                asset_id=data.get("assetId"),
            )
        except (KeyError, TypeError) as exc:
            raise ValidationError("seed.marker_invalid", f"seed marker is missing {exc}") from None
        if not isinstance(marker.key, str) or not isinstance(marker.version, int) or isinstance(marker.version, bool):
            raise ValidationError("seed.marker_invalid", "seed marker key must be text and version an integer")
        return marker


@dataclass(frozen=True)
class StoredAsset:
    asset_id: str
    content: Mapping[str, Any]


class SeedAction(str, enum.Enum):
    CREATE = "create"  # no marker, no asset: create it, make it the default, write the marker
    UPGRADE = "upgrade"  # unedited older copy: overwrite content in place, keep ids, update marker
    UP_TO_DATE = "up-to-date"  # already the current content; maybe write a missing/stale marker
    KEEP_EDITED = "keep-edited"  # the user changed it: never touch the content
    SKIP_DELETED = "skip-deleted"  # marker exists but the asset is gone: the user deleted it


@dataclass(frozen=True)
class SeedPlan:
    action: SeedAction
    reason: str
    content: Mapping[str, Any] | None = None  # what to write (CREATE / UPGRADE)
    marker: SeedMarker | None = None  # marker to persist; None = leave the stored marker as is
    make_default: bool = False  # only ever true for CREATE

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action.value,
            "reason": self.reason,
            "content": dict(self.content) if self.content is not None else None,
            "marker": self.marker.to_dict() if self.marker else None,
            "makeDefault": self.make_default,
        }


def _stored_hash(seed: SeedSpec, stored: StoredAsset) -> str | None:
    try:
        return content_hash(seed.normalize(stored.content))
    except RpError:
        return None


def _marker(seed: SeedSpec, asset_id: str | None, *, written: bool, old: SeedMarker | None = None) -> SeedMarker:
    if written:
        return SeedMarker(seed.key, seed.kind, seed.version, seed.content_hash, asset_id)
    # Adopting an edited asset: remember we saw it, but not a hash we never wrote.
    return SeedMarker(seed.key, seed.kind, old.version if old else 0, old.content_hash if old else None, asset_id)


def plan_seed_upgrade(seed: SeedSpec, stored: StoredAsset | None, marker: SeedMarker | None) -> SeedPlan:
    """Decide what the store must do with one seed. Pure and total; see the module docstring."""
    if marker is not None:
        if marker.key != seed.key or marker.kind != seed.kind:
            raise ValidationError(
                "seed.marker_mismatch",
                f"marker {marker.kind}/{marker.key} does not belong to seed {seed.kind}/{seed.key}",
            )
        if stored is None:
            return SeedPlan(SeedAction.SKIP_DELETED, "the seeded asset was deleted; a marker forbids recreating it")
        if marker.asset_id is not None and stored.asset_id != marker.asset_id:
            raise ValidationError(
                "seed.marker_mismatch",
                f"marker names asset {marker.asset_id!r} but the store passed {stored.asset_id!r}",
            )

    if stored is None:
        return SeedPlan(
            SeedAction.CREATE,
            "first initialisation",
            content=dict(seed.content),
            marker=_marker(seed, None, written=True),
            make_default=seed.make_default,
        )

    current = _stored_hash(seed, stored)
    if current == seed.content_hash:
        fresh = _marker(seed, stored.asset_id, written=True)
        return SeedPlan(SeedAction.UP_TO_DATE, "content equals the current seed", marker=None if fresh == marker else fresh)

    pristine = set(seed.legacy_hashes)
    if marker is not None and marker.content_hash is not None:
        pristine.add(marker.content_hash)
    if current is not None and current in pristine:
        return SeedPlan(
            SeedAction.UPGRADE,
            "content is an unedited earlier version of the seed",
            content=dict(seed.content),
            marker=_marker(seed, stored.asset_id, written=True),
        )

    reason = "content no longer parses; treated as edited" if current is None else "the user edited this asset"
    adopted = _marker(seed, stored.asset_id, written=False, old=marker)
    return SeedPlan(SeedAction.KEEP_EDITED, reason, marker=None if adopted == marker else adopted)


__all__ = [
    "SeedAction",
    "SeedMarker",
    "SeedPlan",
    "SeedSpec",
    "StoredAsset",
    "content_hash",
    "plan_seed_upgrade",
    "seed_languages",
]


def seed_languages(
    kind: str,
    key: str,
    version: int,
    contents: Mapping[str, Mapping[str, Any]],
    normalize: Normalizer,
    *,
    make_default: bool = True,
    legacy_hashes: frozenset[str] = frozenset(),
) -> dict[str, SeedSpec]:
    """One seed in several languages (language → spec), all under one key and version.

    Each language's spec counts every other language's current content as pristine, so when the
    user's language changes an unedited seed is rewritten in the new language in place (same
    asset, same field ids), and an edited one is kept, by the same rule as any upgrade.
    """
    hashes = {lang: content_hash(normalize(content)) for lang, content in contents.items()}
    return {
        lang: SeedSpec(
            kind=kind,
            key=key,
            version=version,
            content=content,
            normalize=normalize,
            make_default=make_default,
            legacy_hashes=frozenset(legacy_hashes | {h for other, h in hashes.items() if other != lang}),
        )
        for lang, content in contents.items()
    }


def load_seed_content(package: str, filename: str) -> dict[str, Any]:
    """A seed's content shipped as JSON package data beside its module."""
    from importlib import resources

    return json.loads(resources.files(package).joinpath(filename).read_text(encoding="utf-8"))
