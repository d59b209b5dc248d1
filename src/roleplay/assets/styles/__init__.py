"""文风 (writing styles): model and the built-in 通用叙事 seed."""

from .model import WritingStyle, parse_writing_style, update_writing_style
from .seed import GENERAL_NARRATIVE_SEED, GENERAL_NARRATIVE_SEEDS

__all__ = ["GENERAL_NARRATIVE_SEED", "GENERAL_NARRATIVE_SEEDS", "WritingStyle", "parse_writing_style", "update_writing_style"]
