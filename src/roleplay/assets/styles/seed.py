"""The built-in 通用叙事 (general narrative) writing style, created on first initialisation and
marked default.

Text lives in ``seed_general_narrative.json`` (package data), written for this project from the
spec: it is tied to no genre or tone and only covers expression — third-person limited point of
view, sentence rhythm, narrative focus, action and space, dialogue weaving, sensory selection and
rhetorical restraint. Immersion, continuity, character autonomy, plot progress and closure are the
example preset's job (its 写作指导 field), so the two never give competing orders.
``seed_general_narrative.en.json`` is the English text; the ``language`` setting picks one.
"""

from __future__ import annotations

from typing import Any, Mapping

from roleplay.assets.seeding import SeedSpec, load_seed_content, seed_languages

from .model import KIND, parse_writing_style

SEED_KEY = "rp.seed.writing-style.general-narrative"
SEED_VERSION = 1


def _normalize(data: Any) -> Mapping[str, Any]:
    return parse_writing_style(data).to_json_dict()


GENERAL_NARRATIVE_SEEDS: dict[str, SeedSpec] = seed_languages(
    KIND,
    SEED_KEY,
    SEED_VERSION,
    {
        "en": load_seed_content(__package__, "seed_general_narrative.en.json"),
        "zh": load_seed_content(__package__, "seed_general_narrative.json"),
    },
    _normalize,
)
GENERAL_NARRATIVE_SEED = GENERAL_NARRATIVE_SEEDS["zh"]

__all__ = ["GENERAL_NARRATIVE_SEED", "GENERAL_NARRATIVE_SEEDS", "SEED_KEY", "SEED_VERSION"]
