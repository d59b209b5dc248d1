"""用户人设 (personas): model and the built-in default persona seed."""

from .model import Persona, parse_persona, update_persona
from .seed import DEFAULT_PERSONA_SEED, DEFAULT_PERSONA_SEEDS

__all__ = ["DEFAULT_PERSONA_SEED", "DEFAULT_PERSONA_SEEDS", "Persona", "parse_persona", "update_persona"]
