"""``rp-preset`` as a plugin: one ``rp.preset:<field-id>`` source per enabled, non-blank field of
the bound preset, each field's top/bottom position for the default layout, and the preset's
sampling settings for the Writer request, and the preset guide skills Agent mode's ``rp_guide``
offers (with the SillyTavern migration helper). Off: none of these; the binding stays."""

from __future__ import annotations

from typing import Any

from roleplay.assets.presets import parse_preset
from roleplay.core.macros import MacroContext, expand
from roleplay.core.sources import POSITION_PRESET_BOTTOM, POSITION_PRESET_TOP, STAGE_PRESET, SourceProvider, SourceRun, rev
from roleplay.core.types import PRESET_PREFIX, AssetView, ContextSource
from roleplay.hookspecs import hookimpl
from roleplay.names import PRESET_FEATURE

FEATURE = PRESET_FEATURE


def preset_sources(view: AssetView, macros: MacroContext) -> tuple[list[ContextSource], dict[str, str]]:
    """One ``rp.preset:<field-id>`` per enabled, non-blank field, in the preset's order (top
    fields first), and each field's ``position`` for the default layout."""
    preset = parse_preset(view.data)
    sources: list[ContextSource] = []
    positions: dict[str, str] = {}
    for f in preset.fields:
        if not f.contributes():
            continue
        sid = PRESET_PREFIX + f.id
        sources.append(
            ContextSource(
                sid,
                f.title,
                expand(f.content, macros),
                "instructional",
                shared_reference=True,
                default_section_tag=f.section_tag,
                revision=rev(view),
            )
        )
        positions[sid] = f.position
    return sources, positions


async def collect_preset(run: SourceRun) -> None:
    view = await run.view("preset", run.resources.preset)
    if view is None:
        return
    got = run.parsed("preset", view, None, lambda: preset_sources(view, run.macros))
    if got is None:
        return
    sources, positions = got
    run.preset_positions.update(positions)
    for source in sources:
        run.add(source, POSITION_PRESET_TOP if positions[source.id] == "top" else POSITION_PRESET_BOTTOM)
    sampling = parse_preset(view.data).sampling
    run.sampling.update(sampling.given() if sampling is not None else {})


@hookimpl
def register_context_sources(register: Any) -> None:
    register(SourceProvider("rp.preset", collect_preset, STAGE_PRESET))


@hookimpl
def register_guides(register: Any) -> None:
    register("rp-guide-preset")
    register("rp-guide-preset-sillytavern")


__all__ = ["FEATURE", "collect_preset", "preset_sources"]
