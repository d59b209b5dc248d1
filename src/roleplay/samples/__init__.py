"""Sample content shipped with the engine, written by us, so a new user can play at once."""

from __future__ import annotations

from importlib import resources

SAMPLE_CARD = "fog_harbor.card.json"


def sample_card_bytes() -> bytes:
    """The sample character card (V3 JSON with an embedded lorebook and a state namespace)."""
    return resources.files(__package__).joinpath(SAMPLE_CARD).read_bytes()
