"""The built-in default persona.

The spec says the persona, preset and writing-style plugins each guarantee one default asset and
that new-session setup preselects the default persona, so a persona seed exists too. Its text
(``seed_default_persona.json``) is deliberately empty of invented traits: a persona is the
user-controlled identity, and the Writer must not fill it in on the user's behalf. It has no avatar;
the message-avatar plugin falls back to its own placeholder.

Its name is neutral ("User", "用户"; version 1 called the user 主角, "protagonist", which then
replaced ``{{user}}`` in every card): ``rp play`` asks for the user's own name the first time
(``roleplay.assets.persona_name``). One file per language; the ``language`` setting picks one.
"""

from __future__ import annotations

from typing import Any, Mapping

from roleplay.assets.seeding import SeedSpec, load_seed_content, seed_languages

from .model import KIND, parse_persona

SEED_KEY = "rp.seed.persona.default"
SEED_VERSION = 2
LEGACY_HASHES = frozenset(
    {
        "sha256:44f6b133a28191dc7139c640616df34d6b284d65d8239e64282e66ff64e0f25b",  # v1, zh (主角)
    }
)


def _normalize(data: Any) -> Mapping[str, Any]:
    return parse_persona(data).to_json_dict()


DEFAULT_PERSONA_SEEDS: dict[str, SeedSpec] = seed_languages(
    KIND,
    SEED_KEY,
    SEED_VERSION,
    {
        "en": load_seed_content(__package__, "seed_default_persona.en.json"),
        "zh": load_seed_content(__package__, "seed_default_persona.json"),
    },
    _normalize,
    legacy_hashes=LEGACY_HASHES,
)
DEFAULT_PERSONA_SEED = DEFAULT_PERSONA_SEEDS["zh"]

__all__ = ["DEFAULT_PERSONA_SEED", "DEFAULT_PERSONA_SEEDS", "SEED_KEY", "SEED_VERSION"]
