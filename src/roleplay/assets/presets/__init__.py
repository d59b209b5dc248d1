"""创作预设 (prompt presets): model, pure field operations, the built-in seed, and the
SillyTavern chat-completion preset migration. Validation and seed planning shared with the other
asset kinds live in ``roleplay.assets.validation`` and ``roleplay.assets.seeding``."""

from .model import (
    MAX_FIELDS,
    MAX_TOTAL_CONTENT,
    POSITIONS,
    Position,
    Preset,
    PresetField,
    SAMPLING_FIELDS,
    Sampling,
    add_field,
    contributing_fields,
    move_field,
    parse_preset,
    problems_of,
    remove_field,
    reorder_fields,
    update_field,
)
from .seed import EXAMPLE_PRESET_SEED, EXAMPLE_PRESET_SEEDS
from .sillytavern import SillyTavernMigration, looks_like_sillytavern_preset, migrate_sillytavern_preset
from roleplay.assets.seeding import SeedAction, SeedMarker, SeedPlan, SeedSpec, StoredAsset, plan_seed_upgrade

__all__ = [
    "EXAMPLE_PRESET_SEED",
    "EXAMPLE_PRESET_SEEDS",
    "MAX_FIELDS",
    "MAX_TOTAL_CONTENT",
    "POSITIONS",
    "Position",
    "Preset",
    "PresetField",
    "SAMPLING_FIELDS",
    "Sampling",
    "SeedAction",
    "SillyTavernMigration",
    "looks_like_sillytavern_preset",
    "migrate_sillytavern_preset",
    "SeedMarker",
    "SeedPlan",
    "SeedSpec",
    "StoredAsset",
    "add_field",
    "contributing_fields",
    "move_field",
    "parse_preset",
    "plan_seed_upgrade",
    "problems_of",
    "remove_field",
    "reorder_fields",
    "update_field",
]
