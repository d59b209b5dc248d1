"""``rp-writing-style`` as a plugin: one ``rp.writing-style:<asset-id>`` source per bound style,
in binding order. Off: no style sources; the bindings stay."""

from __future__ import annotations

from typing import Any

from roleplay.assets.styles import parse_writing_style
from roleplay.core.macros import MacroContext, expand
from roleplay.core.sources import POSITION_STYLES, STAGE_STYLES, SourceProvider, SourceRun, rev
from roleplay.core.types import STYLE_PREFIX, AssetView, ContextSource
from roleplay.hookspecs import hookimpl
from roleplay.names import WRITING_STYLE_FEATURE

FEATURE = WRITING_STYLE_FEATURE


def style_source(view: AssetView, macros: MacroContext) -> ContextSource | None:
    style = parse_writing_style(view.data)
    if not style.contributes():
        return None
    return ContextSource(
        STYLE_PREFIX + view.id, style.name, expand(style.requirements, macros), "instructional", shared_reference=True, revision=rev(view)
    )


async def collect_styles(run: SourceRun) -> None:
    for style_id in run.resources.writing_styles:
        view = await run.view("writing-style", style_id)
        if view is not None:
            run.add(run.parsed("writing-style", view, STYLE_PREFIX + style_id, lambda: style_source(view, run.macros)), POSITION_STYLES)


@hookimpl
def register_context_sources(register: Any) -> None:
    register(SourceProvider("rp.writing-style", collect_styles, STAGE_STYLES))


__all__ = ["FEATURE", "collect_styles", "style_source"]
