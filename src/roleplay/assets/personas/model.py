"""用户人设 (Persona): the identity the user controls.

A Session references at most one persona, read live each turn as the ``rp.persona`` source. The
persona always describes the *user-controlled* identity; it never hands the user control of a card
character and does not replace the internal ``rp.player`` control boundary. ``name`` is also what
the ``{{user}}`` identity macro expands to.

``avatar`` is an opaque reference to an image the asset store has already sanitised (re-encoded,
metadata stripped). It is never a URL or inline data: fetching remote images or trusting embedded
``data:`` payloads would bypass that sanitising step, so both are rejected here.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Strict, StringConstraints
from pydantic_core import PydanticCustomError

from roleplay.assets.validation import AssetModel, NameRule, TextRule, parse_model, rebuild

KIND = "persona"

DESCRIPTION_MAX = 20_000
AVATAR_REF_MAX = 256
# e.g. ``blob:sha256-3f…``, ``avatars/01hx….png``: letters, digits and a few separators.
AVATAR_REF_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$"
_URL_RE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|data:|javascript:|file:)", re.IGNORECASE)


def _safe_ref(value: str) -> str:
    if _URL_RE.match(value):
        raise PydanticCustomError("avatar_not_reference", "avatar must be a stored image reference, not a URL")
    if any(part == ".." for part in value.split("/")):
        raise PydanticCustomError("avatar_not_reference", "avatar reference must not climb directories")
    return value


AvatarRef = Annotated[
    str,
    Strict(),
    StringConstraints(min_length=1, max_length=AVATAR_REF_MAX, pattern=AVATAR_REF_PATTERN),
    AfterValidator(_safe_ref),
]
PersonaName = Annotated[str, NameRule()]
Description = Annotated[str, TextRule(DESCRIPTION_MAX)]


class Persona(AssetModel):
    name: PersonaName
    description: Description = ""
    avatar: AvatarRef | None = None


def parse_persona(data: Any) -> Persona:
    """Validate untrusted JSON. Raises ``persona.invalid`` listing every problem."""
    return parse_model(Persona, KIND, data)


def update_persona(persona: Persona, **changes: Any) -> Persona:
    return rebuild(persona, KIND, **changes)


__all__ = ["KIND", "Persona", "parse_persona", "update_persona"]
