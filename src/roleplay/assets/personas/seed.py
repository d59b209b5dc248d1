"""The built-in default persona.

The spec says the persona, preset and writing-style plugins each guarantee one default asset and
that new-session setup preselects the default persona, so a persona seed exists too. Its text
(``seed_default_persona.json``) is deliberately empty of invented traits: a persona is the
user-controlled identity, and the Writer must not fill it in on the user's behalf. It has no avatar;
the message-avatar plugin falls back to its own placeholder.
"""

from __future__ import annotations

from typing import Any, Mapping

from roleplay.assets.seeding import SeedSpec, load_seed_content

from .model import KIND, parse_persona

SEED_KEY = "rp.seed.persona.default"
SEED_VERSION = 1


def _normalize(data: Any) -> Mapping[str, Any]:
    return parse_persona(data).to_json_dict()


DEFAULT_PERSONA_SEED = SeedSpec(
    kind=KIND,
    key=SEED_KEY,
    version=SEED_VERSION,
    content=load_seed_content(__package__, "seed_default_persona.json"),
    normalize=_normalize,
    make_default=True,
    legacy_hashes=frozenset(),
)

__all__ = ["DEFAULT_PERSONA_SEED", "SEED_KEY", "SEED_VERSION"]
