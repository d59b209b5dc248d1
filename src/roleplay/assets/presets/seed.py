"""The built-in 示例预设 (example preset), created on first initialisation and marked default.

Text lives in ``seed_example_preset.json`` (package data) and was written for this project from
the spec's description; it is not taken from any community preset.

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
from roleplay.assets.seeding import SeedSpec, load_seed_content

SEED_KEY = "rp.seed.preset.example"
SEED_VERSION = 1


def _normalize(data: Any) -> Mapping[str, Any]:
    return parse_preset(data).to_json_dict()


EXAMPLE_PRESET_SEED = SeedSpec(
    kind="preset",
    key=SEED_KEY,
    version=SEED_VERSION,
    content=load_seed_content(__package__, "seed_example_preset.json"),
    normalize=_normalize,
    make_default=True,
    # Hashes of earlier shipped versions go here when the text changes (none yet: this is v1).
    legacy_hashes=frozenset(),
)

__all__ = ["EXAMPLE_PRESET_SEED", "SEED_KEY", "SEED_VERSION"]
