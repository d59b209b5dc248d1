"""``rp-persona`` as a plugin: the ``rp.persona`` source (name and description of the bound
persona). Off: no persona source; the binding stays and ``{{user}}`` still reads the name."""

from __future__ import annotations

from typing import Any

from roleplay.assets.personas import parse_persona
from roleplay.core.macros import MacroContext, expand
from roleplay.core.sources import POSITION_PERSONA, STAGE_PERSONA, TITLES, SourceProvider, SourceRun, blocks, rev
from roleplay.core.types import PERSONA, AssetView, ContextSource
from roleplay.hookspecs import hookimpl
from roleplay.names import PERSONA_FEATURE

FEATURE = PERSONA_FEATURE


def persona_source(view: AssetView, macros: MacroContext) -> ContextSource | None:
    persona = parse_persona(view.data)
    text = expand(blocks([("Name", persona.name), ("Description", persona.description)]), macros)
    return ContextSource(PERSONA, TITLES[PERSONA], text, "factual", parent_delivery="context", shared_reference=True, revision=rev(view))


async def collect_persona(run: SourceRun) -> None:
    view = await run.view("persona", run.resources.persona)
    if view is None:
        return
    source = run.parsed("persona", view, PERSONA, lambda: persona_source(view, run.macros))
    if source is not None:
        run.facts["persona.description"] = parse_persona(view.data).description  # the lorebook scans it
        run.add(source, POSITION_PERSONA)


@hookimpl
def register_context_sources(register: Any) -> None:
    register(SourceProvider(PERSONA, collect_persona, STAGE_PERSONA))


__all__ = ["FEATURE", "collect_persona", "persona_source"]
