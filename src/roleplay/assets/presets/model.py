"""创作预设 (PromptPreset): an ordered list of fields with stable ids.

What the spec fixes and this module enforces:

* Every field has a stable ``id``. The context layer expands each *non-empty* field into its own
  source ``rp.preset:<field-id>``, and a Session's saved prompt layout refers to those sources, so an
  id must never change when the field is edited, moved or when the preset is upgraded.
* ``position`` is ``"top"`` (above the conversation history, before the character card) or
  ``"bottom"`` (below the history, after the important-rules slot). It only decides where a field
  lands the first time a Session builds its default layout; inside one position the list order is
  the assembly order. No field name is special.
* ``sectionTag`` is the *default* of ``contextBuild.slots[].sectionTag`` for the slot created from
  this field (spec default ``true``: wrap in ``<section name>``). Once a Session has saved its own
  layout, later preset edits do not override it; that rule belongs to the Session, not here.
* ``title`` and ``description`` are management metadata (lists, previews); only ``content`` reaches
  the Writer prompt.

We store fields top-first: the model stably partitions the list so that list order equals the
default assembly order. Relative order inside a position is never changed.

``sampling`` (optional) holds the generation settings a preset carries besides its text:
temperature, top_p, frequency and presence penalty, max (output) tokens and context size. They
apply to the Writer request where its route supports them (``core.writer``); the context size caps
the Writer's window. Absent means "the route's default"; the key is left out of the stored JSON
when no setting is given, so presets without samplers keep their exact stored form.

All operations are pure: they return a new validated ``Preset`` and never mutate their input.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Iterable, Literal, Mapping

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator
from pydantic_core import PydanticCustomError

from roleplay.clock import IdGenerator
from roleplay.errors import NotFoundError, Problem, ValidationError
from roleplay.names import PRESET_SOURCE_PREFIX

from roleplay.assets.validation import LONG_TEXT_MAX, NOTE_MAX, AssetModel, NameRule, TextRule, parse_model, rebuild

KIND = "preset"

Position = Literal["top", "bottom"]
POSITIONS: tuple[Position, ...] = ("top", "bottom")

FIELD_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_FIELD_ID_RE = re.compile(FIELD_ID_PATTERN)
MAX_FIELDS = 64
# The sum of all field contents. Per-field bounds alone would allow 64 x 100k characters, far beyond
# anything a prompt can carry; this keeps one preset inside a sane request size.
MAX_TOTAL_CONTENT = 400_000

FieldTitle = Annotated[str, NameRule()]
ShortNote = Annotated[str, TextRule(NOTE_MAX)]
LongText = Annotated[str, TextRule(LONG_TEXT_MAX)]


class PresetField(AssetModel):
    id: str = Field(pattern=FIELD_ID_PATTERN)
    title: FieldTitle
    description: ShortNote = ""
    content: LongText = ""
    position: Position = "top"
    enabled: StrictBool = True
    section_tag: StrictBool = True

    def contributes(self) -> bool:
        """Whether this field becomes a ``rp.preset:<id>`` source: enabled and not blank."""
        return self.enabled and bool(self.content.strip())

    @property
    def source_id(self) -> str:
        return PRESET_SOURCE_PREFIX + self.id


class Sampling(AssetModel):
    """Generation settings. Bounds are the OpenAI chat API's (the widest a route here accepts);
    ints are accepted where a float is expected (``1`` is a temperature), never strings."""

    temperature: StrictFloat | StrictInt | None = Field(default=None, ge=0, le=2)
    top_p: StrictFloat | StrictInt | None = Field(default=None, ge=0, le=1)
    frequency_penalty: StrictFloat | StrictInt | None = Field(default=None, ge=-2, le=2)
    presence_penalty: StrictFloat | StrictInt | None = Field(default=None, ge=-2, le=2)
    max_tokens: StrictInt | None = Field(default=None, ge=1, le=1_000_000)
    context_size: StrictInt | None = Field(default=None, ge=256, le=10_000_000)

    def given(self) -> dict[str, float | int]:
        """The settings that are set, snake_case keys."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


SAMPLING_FIELDS: tuple[str, ...] = tuple(Sampling.model_fields)


class Preset(AssetModel):
    name: FieldTitle
    description: ShortNote = ""
    fields: tuple[PresetField, ...] = Field(default=(), max_length=MAX_FIELDS)
    sampling: Sampling | None = None

    def to_json_dict(self) -> dict[str, Any]:
        out = super().to_json_dict()
        if self.sampling is None or not self.sampling.given():
            out.pop("sampling", None)  # presets without samplers keep their stored form
        else:
            out["sampling"] = {k: v for k, v in out["sampling"].items() if v is not None}
        return out

    @field_validator("fields", mode="after")
    @classmethod
    def _check(cls, fields: tuple[PresetField, ...]) -> tuple[PresetField, ...]:
        seen: dict[str, int] = {}
        for index, f in enumerate(fields):
            if f.id in seen:
                raise PydanticCustomError(
                    "duplicate_field_id",
                    "field id '{id}' is used twice (first at index {first})",
                    {"id": f.id, "first": seen[f.id], "pointer": f"/fields/{index}/id"},
                )
            seen[f.id] = index
        total = sum(len(f.content) for f in fields)
        if total > MAX_TOTAL_CONTENT:
            raise PydanticCustomError(
                "too_large",
                "field contents total {total} characters, more than {limit}",
                {"total": total, "limit": MAX_TOTAL_CONTENT, "pointer": "/fields"},
            )
        return _top_first(fields)

    def field(self, field_id: str) -> PresetField:
        for f in self.fields:
            if f.id == field_id:
                return f
        raise NotFoundError(f"{KIND}.field_not_found", f"no field with id {field_id!r}", details={"fieldId": field_id})

    def fields_at(self, position: Position) -> tuple[PresetField, ...]:
        return tuple(f for f in self.fields if f.position == position)

    def field_ids(self) -> tuple[str, ...]:
        return tuple(f.id for f in self.fields)


def _top_first(fields: Iterable[PresetField]) -> tuple[PresetField, ...]:
    fields = tuple(fields)
    return tuple(f for f in fields if f.position == "top") + tuple(f for f in fields if f.position == "bottom")


def parse_preset(data: Any) -> Preset:
    """Validate untrusted JSON (camelCase keys). Raises ``preset.invalid`` listing every problem."""
    return parse_model(Preset, KIND, data)


def parse_field(data: Any, base: tuple[Any, ...] = ()) -> PresetField:
    return parse_model(PresetField, KIND, data, base)


# --- pure operations --------------------------------------------------------------------------

_EDITABLE = {"title", "description", "content", "position", "enabled", "section_tag", "sectionTag"}


def _check_field_id(field_id: str) -> None:
    if not isinstance(field_id, str) or not _FIELD_ID_RE.match(field_id):
        raise ValidationError(
            f"{KIND}.invalid",
            f"field id {field_id!r} does not match {FIELD_ID_PATTERN}",
            problems=[Problem(f"{KIND}.bad_format", "bad field id", "/id")],
        )


def new_field_id(preset: Preset, ids: IdGenerator) -> str:
    """A fresh id from the injected generator; retried on the (test-only) chance of a clash."""
    taken = set(preset.field_ids())
    for _ in range(16):
        candidate = ids("fld_")
        if candidate not in taken:
            _check_field_id(candidate)
            return candidate
    raise ValidationError(f"{KIND}.field_id_exhausted", "id generator keeps returning existing field ids")


def add_field(
    preset: Preset,
    draft: Mapping[str, Any],
    *,
    ids: IdGenerator | None = None,
    index: int | None = None,
) -> Preset:
    """Insert a field; ``index`` counts inside the field's position group (None = append).

    The id comes from ``draft["id"]`` when given (imports, seeds) or else from ``ids``.
    """
    data = dict(draft)
    if "id" not in data:
        if ids is None:
            raise ValidationError(f"{KIND}.field_id_required", "give the field an id or an id generator")
        data["id"] = new_field_id(preset, ids)
    new = parse_field(data, ("fields", "-"))
    if new.id in preset.field_ids():
        raise ValidationError(
            f"{KIND}.duplicate_field_id",
            f"field id {new.id!r} already exists",
            pointer="/fields/-/id",
            details={"fieldId": new.id},
        )
    group = list(preset.fields_at(new.position))
    at = len(group) if index is None else _check_index(index, len(group) + 1)
    group.insert(at, new)
    return _with_group(preset, new.position, group)


def update_field(preset: Preset, field_id: str, changes: Mapping[str, Any]) -> Preset:
    """Change editable attributes; the id is immutable. A position change appends the field to the
    end of its new group, because "move to bottom" in the editor means "after the others there"."""
    if "id" in changes and changes["id"] != field_id:
        raise ValidationError(f"{KIND}.field_id_immutable", "a field id never changes", pointer="/id", details={"fieldId": field_id})
    unknown = sorted(set(changes) - _EDITABLE - {"id"})
    if unknown:
        raise ValidationError(
            f"{KIND}.invalid",
            f"not editable: {', '.join(unknown)}",
            problems=[Problem(f"{KIND}.unknown_key", f"{k} is not an editable field attribute", f"/{k}") for k in unknown],
        )
    old = preset.field(field_id)
    merged = {**old.to_json_dict(), **{("sectionTag" if k == "section_tag" else k): v for k, v in changes.items()}}
    updated = parse_field(merged)
    if updated.position == old.position:
        fields = tuple(updated if f.id == field_id else f for f in preset.fields)
        return rebuild(preset, KIND, fields=fields)
    rest = tuple(f for f in preset.fields if f.id != field_id)
    return rebuild(preset, KIND, fields=rest + (updated,))


def remove_field(preset: Preset, field_id: str) -> Preset:
    preset.field(field_id)  # raises preset.field_not_found
    return rebuild(preset, KIND, fields=tuple(f for f in preset.fields if f.id != field_id))


def reorder_fields(preset: Preset, position: Position, ordered_ids: Iterable[str]) -> Preset:
    """Set the order inside one position; ``ordered_ids`` must be exactly that group's ids."""
    if position not in POSITIONS:
        raise ValidationError(
            f"{KIND}.invalid",
            f"position must be top or bottom, got {position!r}",
            problems=[Problem(f"{KIND}.bad_value", "bad position", "/position")],
        )
    ordered = list(ordered_ids)
    group = {f.id: f for f in preset.fields_at(position)}
    if sorted(ordered) != sorted(group) or len(set(ordered)) != len(ordered):
        raise ValidationError(
            f"{KIND}.reorder_mismatch",
            f"the new order must list each {position} field exactly once",
            details={"expected": sorted(group), "got": ordered},
        )
    return _with_group(preset, position, [group[i] for i in ordered])


def move_field(preset: Preset, field_id: str, *, index: int, position: Position | None = None) -> Preset:
    """Move one field to ``index`` inside ``position`` (default: its current one). This is the
    editor's drag / keyboard up-down action; moving across positions is also allowed."""
    f = preset.field(field_id)
    target = f.position if position is None else position
    if target not in POSITIONS:
        raise ValidationError(
            f"{KIND}.invalid",
            f"position must be top or bottom, got {target!r}",
            problems=[Problem(f"{KIND}.bad_value", "bad position", "/position")],
        )
    moved = f if target == f.position else rebuild(f, KIND, position=target)
    group = [g for g in preset.fields_at(target) if g.id != field_id]
    group.insert(_check_index(index, len(group) + 1), moved)
    others = tuple(g for g in preset.fields if g.id != field_id and g.position != target)
    return _with_group(preset, target, group, extra=others)


def _check_index(index: int, size: int) -> int:
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < size:
        raise ValidationError(f"{KIND}.index_out_of_range", f"index {index!r} is outside 0..{size - 1}", details={"size": size})
    return index


def _with_group(preset: Preset, position: Position, group: list[PresetField], extra: tuple[PresetField, ...] | None = None) -> Preset:
    """Replace one position group; the other group keeps its order (``extra`` replaces it)."""
    other: Position = "bottom" if position == "top" else "top"
    others = preset.fields_at(other) if extra is None else extra
    fields = tuple(group) + tuple(others) if position == "top" else tuple(others) + tuple(group)
    return rebuild(preset, KIND, fields=fields)


def contributing_fields(preset: Preset) -> tuple[PresetField, ...]:
    """Fields that become ``rp.preset:<field-id>`` sources, in default assembly order."""
    return tuple(f for f in preset.fields if f.contributes())


def problems_of(data: Any) -> list[Problem]:
    """All problems of an untrusted preset, empty when valid (for editors that show every error)."""
    try:
        parse_preset(data)
    except ValidationError as exc:
        return exc.problems or [Problem(exc.code, exc.message, exc.pointer)]
    return []


__all__ = [
    "KIND",
    "MAX_FIELDS",
    "MAX_TOTAL_CONTENT",
    "POSITIONS",
    "Position",
    "Preset",
    "PresetField",
    "SAMPLING_FIELDS",
    "Sampling",
    "add_field",
    "contributing_fields",
    "move_field",
    "new_field_id",
    "parse_field",
    "parse_preset",
    "problems_of",
    "remove_field",
    "reorder_fields",
    "update_field",
]
