"""``ensure_seeds``: create, upgrade or leave alone the built-in assets, idempotently.

The decisions are :func:`roleplay.assets.seeding.plan_seed_upgrade`'s; this module applies them in
one write transaction for all seeds, so two processes opening a fresh database at the same moment
cannot both create 示例预设 (SQLite serialises the transactions; PostgreSQL takes an advisory
transaction lock, and the unique ``seed_key`` index and marker primary key are a second guard).

Which stored asset a seed is compared against: the one its marker names; with no marker, an asset
tagged with the seed key (a marker lost by an older version). A marker whose asset is gone means the
user deleted it, and the plan is then to skip it forever. A freshly created seed becomes the default
of its kind only when the kind has no default yet, so a user's own default is never replaced.

Which language's text is seeded: the ``language`` setting. While it is unset, the first seeding
stores one there (``roleplay.assets.language.settle_language``): the language the built-in
defaults already speak, else the system locale's; the outcomes then carry a ``language`` entry
whose reason is the one line to tell the user (:func:`language_notice`). Every language's text of
a seed shares its key, so a change of language rewrites the unedited seeds in place and leaves the
edited ones alone (seeding's rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence, cast

from roleplay.errors import ValidationError

from .kinds import SEED_KIND_TO_ASSET_KIND, validate_asset_data
from .language import LANGUAGES, SETTING_KEY, Language, settle_language
from .personas import DEFAULT_PERSONA_SEEDS
from .presets import EXAMPLE_PRESET_SEEDS
from .seeding import SeedAction, SeedSpec, StoredAsset, plan_seed_upgrade
from .store import AssetStore, AssetTx
from .styles import GENERAL_NARRATIVE_SEEDS


def builtin_seeds(language: Language) -> tuple[SeedSpec, ...]:
    """The built-in defaults in ``language``: the example preset, general narrative style and
    default persona."""
    if language not in LANGUAGES:
        raise ValidationError(
            "seed.unknown_language", f"no built-in defaults in {language!r}; known: {', '.join(LANGUAGES)}", pointer="/language"
        )
    return (EXAMPLE_PRESET_SEEDS[language], GENERAL_NARRATIVE_SEEDS[language], DEFAULT_PERSONA_SEEDS[language])


# The Chinese set, as every version before the language setting seeded.
BUILTIN_SEEDS: tuple[SeedSpec, ...] = builtin_seeds("zh")


@dataclass(frozen=True)
class SeedOutcome:
    key: str
    kind: str
    action: str
    asset_id: str | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "kind": self.kind, "action": self.action, "assetId": self.asset_id, "reason": self.reason}


async def ensure_seeds(
    store: AssetStore, seeds: Sequence[SeedSpec] | None = None, *, language: Language | None = None
) -> list[SeedOutcome]:
    """Bring every seed to its planned state; safe to call on every open, from any process.

    Without ``seeds``, the built-in set in ``language``, else in the user's language: the
    ``language`` setting, stored now if it holds none (see the module docstring)."""
    choices: Mapping[Language | None, Sequence[SeedSpec]]
    if seeds is not None:
        choices = {language: seeds}
    elif language is not None:
        choices = {language: builtin_seeds(language)}
    else:
        choices = _BUILTIN_BY_LANGUAGE  # the transaction settles which one
    some = next(iter(choices.values()))
    kinds = {seed.key: SEED_KIND_TO_ASSET_KIND[seed.kind] for seed in some}
    # Validate and mint ids outside the transaction: bodies must not fail half-way for reasons
    # that are not about the database, and id generators may not be re-entrant. Every language's
    # set shares the keys, so one id per key serves whichever the transaction picks.
    contents = {lang: {seed.key: validate_asset_data(kinds[seed.key], seed.content) for seed in chosen} for lang, chosen in choices.items()}
    new_ids = {seed.key: store.new_id() for seed in some}

    async def body(tx: AssetTx) -> list[SeedOutcome]:
        await tx.lock_seeds()
        pick: Language | None = next(iter(choices))
        settled: list[SeedOutcome] = []
        if len(choices) > 1:
            pick, how = await settle_language(tx, await _seeded_language(tx))
            if how is not None:
                settled.append(SeedOutcome(SETTING_KEY, "setting", "settled", None, _notice(pick, how)))
        chosen = choices[pick]
        outcomes = []
        for seed in chosen:
            outcomes.append(await _apply(tx, seed, kinds[seed.key], contents[pick][seed.key], new_ids[seed.key]))
        return outcomes + settled

    return await store.write(body, retry_on_unique=True)


_LANGUAGES = cast("tuple[Language, ...]", LANGUAGES)
_BUILTIN_BY_LANGUAGE: dict[Language | None, Sequence[SeedSpec]] = {lang: builtin_seeds(lang) for lang in _LANGUAGES}


async def _seeded_language(tx: AssetTx) -> Language | None:
    """The language the built-in defaults were last written in (their markers' content hashes),
    or None when none was written by this version (a new home, or older content)."""
    for i, key in enumerate(seed.key for seed in BUILTIN_SEEDS):
        marker = await tx.marker(key)
        for lang in _LANGUAGES:
            if marker is not None and marker.content_hash == _BUILTIN_BY_LANGUAGE[lang][i].content_hash:
                return lang
    return None


def _notice(language: Language, how: str) -> str:
    other = next(lang for lang in LANGUAGES if lang != language)
    why = "from your system locale" if how == "locale" else "the language of your built-in defaults"
    return f"{SETTING_KEY}: {language} ({why}; change with rp settings set {SETTING_KEY} {other})"


def language_notice(outcomes: Sequence[SeedOutcome]) -> str | None:
    """The line to show the user when this seeding stored their language, else None."""
    return next((o.reason for o in outcomes if o.kind == "setting" and o.key == SETTING_KEY), None)


async def _apply(tx: AssetTx, seed: SeedSpec, kind: str, valid, new_id: str) -> SeedOutcome:  # type: ignore[no-untyped-def]
    marker = await tx.marker(seed.key)
    if marker is None:
        record = await tx.by_seed_key(seed.key)
    else:
        record = await tx.get(marker.asset_id) if marker.asset_id else None
    if record is not None and record.kind != kind:
        record = None  # never treat another kind's asset as this seed
    stored = StoredAsset(record.id, record.data) if record else None
    plan = plan_seed_upgrade(seed, stored, marker)

    asset_id = record.id if record else None
    if plan.action is SeedAction.CREATE:
        created = await tx.insert(new_id, kind, valid.data, valid.name, seed_key=seed.key)
        asset_id = created.id
        if plan.make_default and await tx.default_id(kind) is None:
            await tx.set_default(kind, created.id)
        assert plan.marker is not None
        await tx.put_marker(plan.marker.bound_to(created.id))
    elif plan.action is SeedAction.UPGRADE:
        assert record is not None
        # In place: same asset id (and, for presets, the same field ids), next revision.
        await tx.bump(record.id, None, data=valid.data, name=valid.name)
        assert plan.marker is not None
        await tx.put_marker(plan.marker)
    elif plan.marker is not None:  # UP_TO_DATE / KEEP_EDITED with a marker to (re)write
        await tx.put_marker(plan.marker)
    return SeedOutcome(seed.key, kind, plan.action.value, asset_id, plan.reason)


__all__ = ["BUILTIN_SEEDS", "SeedOutcome", "builtin_seeds", "ensure_seeds", "language_notice"]
