"""文风 (WritingStyle): a reusable block of expressive writing requirements.

Per the spec each style has a name, an applicability note (适用说明) and the requirements text
(写作要求). Only ``requirements`` reaches the Writer prompt; the name may label the prompt group and
the applicability note is management/preview metadata. A Session binds an ordered list of styles,
and each live style becomes its own source ``rp.writing-style:<asset-id>`` (the asset id belongs to
the store, so it is not part of this model).

Division of labour (also what the SillyTavern migration relies on): styles carry *how the prose
reads* — point of view, rhythm, focus, dialogue weaving, sensory choice, restraint. Immersion,
continuity, character autonomy, plot progress and closure stay in the preset.
"""

from __future__ import annotations

from typing import Annotated, Any

from roleplay.assets.validation import LONG_TEXT_MAX, NOTE_MAX, AssetModel, NameRule, TextRule, parse_model, rebuild

KIND = "writing_style"

StyleName = Annotated[str, NameRule()]
Applicability = Annotated[str, TextRule(NOTE_MAX)]
Requirements = Annotated[str, TextRule(LONG_TEXT_MAX // 2)]


class WritingStyle(AssetModel):
    name: StyleName
    applicability: Applicability = ""
    requirements: Requirements = ""

    def contributes(self) -> bool:
        """A style with blank requirements adds nothing to the prompt and yields no source."""
        return bool(self.requirements.strip())


def parse_writing_style(data: Any) -> WritingStyle:
    """Validate untrusted JSON. Raises ``writing_style.invalid`` listing every problem."""
    return parse_model(WritingStyle, KIND, data)


def update_writing_style(style: WritingStyle, **changes: Any) -> WritingStyle:
    return rebuild(style, KIND, **changes)


__all__ = ["KIND", "WritingStyle", "parse_writing_style", "update_writing_style"]
