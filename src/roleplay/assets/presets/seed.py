"""The built-in 示例预设 (example preset), created on first initialisation and marked default.

Text lives in ``seed_example_preset.json`` (Chinese) and ``seed_example_preset.en.json`` (English),
package data written for this project from the spec's description; it is not taken from any
community preset. The user's ``language`` setting picks which one is seeded
(``roleplay.assets.seeds``). Neither forces a language on the story: the format field asks for the
language of the card and the conversation (version 1 demanded 简体中文, which an English card
could not want).

Position choice (the spec names the five fields but not their positions):

* 声明 and 任务描述 are ``top``: they frame who writes and what the materials below mean, so they
  belong before the character card, world info and history they talk about.
* 写作指导, 思维链指导 and 格式要求 are ``bottom``: they steer the very next reply and models follow
  late instructions more reliably, so they sit after the history, next to the generation point —
  the same role SillyTavern's post-history instructions play.

Every field keeps ``sectionTag`` at the spec default ``true``.

Field ids (``declaration``, ``task``, …) are part of the seed contract: a later seed version must
keep the id of every field it keeps, because an in-place upgrade preserves field ids and Session
layouts refer to ``rp.preset:<field-id>``.
"""

from __future__ import annotations

from typing import Any, Mapping

from .model import parse_preset
from roleplay.assets.seeding import SeedSpec, load_seed_content, seed_languages

SEED_KEY = "rp.seed.preset.example"
SEED_VERSION = 2
# Content hashes of earlier shipped versions, so an unedited old copy still upgrades.
LEGACY_HASHES = frozenset(
    {
        "sha256:00211dd4a6775799a8e24d928bf936a034779ceb9cc0a56d0f36b872e350cade",  # v1, zh
    }
)


def _normalize(data: Any) -> Mapping[str, Any]:
    return parse_preset(data).to_json_dict()


EXAMPLE_PRESET_SEEDS: dict[str, SeedSpec] = seed_languages(
    "preset",
    SEED_KEY,
    SEED_VERSION,
    {
        "en": load_seed_content(__package__, "seed_example_preset.en.json"),
        "zh": load_seed_content(__package__, "seed_example_preset.json"),
    },
    _normalize,
    legacy_hashes=LEGACY_HASHES,
)
EXAMPLE_PRESET_SEED = EXAMPLE_PRESET_SEEDS["zh"]

__all__ = ["EXAMPLE_PRESET_SEED", "EXAMPLE_PRESET_SEEDS", "SEED_KEY", "SEED_VERSION"]
