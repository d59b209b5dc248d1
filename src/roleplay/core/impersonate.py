"""Impersonate: a draft of the player's next message, in their persona (SillyTavern's Impersonate).

One plain-text sub-agent call (``core.subagent_run``): a one-shot child session of the story,
titled "Impersonate", whose system prompt asks for the user's next message as ``{{user}}`` and
whose one user message is the Writer's own material for the next turn, built by ``prepare_run``
with ``IMPERSONATE_INSTRUCTION`` as the current input (card, persona, lore, state and the
conversation, exactly as the Writer would see them). It runs on the Writer's route, with the
preset's samplers.

The draft goes to the player's input and is never sent by itself: nothing is appended to the
story's log (the child session is listed under the story with ``rp sessions list --all``). The
run lease is held meanwhile, so a draft is never built from a log a running turn is changing.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from roleplay.errors import RpError
from roleplay.harness.leases import run_lease
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import SAMPLING_PARAMS
from roleplay.harness.subagents import SubagentRequest

from .context_build import writer_max_tokens
from .macros import expand
from .player_prompts import IMPERSONATE_INSTRUCTION, IMPERSONATE_SYSTEM
from .run import identity_section, prepare_run
from .runtime import RoleplayRuntime
from .settings import read_settings
from .subagent_run import run_structured
from .turn_eligibility import require_playable

IMPERSONATE_PRESET = "rp-impersonate"
IMPERSONATE_TIMEOUT = 300.0


@dataclass(frozen=True)
class Impersonation:
    draft: str
    child_session_id: str
    route: str

    def to_dict(self) -> dict[str, str]:
        return {"draft": self.draft, "childSessionId": self.child_session_id, "route": self.route}


async def impersonate(
    rt: RoleplayRuntime,
    session_id: str,
    *,
    parent_route: Route,
    abort: asyncio.Event | None = None,
) -> Impersonation:
    """Draft the player's next message; nothing is played or written to the story."""
    async with run_lease(rt.store, session_id):
        await require_playable(rt, session_id)
        prepared = await prepare_run(rt, session_id, IMPERSONATE_INSTRUCTION, parent_route=parent_route)
        identity = identity_section((await read_settings(rt.store)).identity())
        sampling = prepared.sources.sampling
        request = SubagentRequest(
            preset=IMPERSONATE_PRESET,
            system_prompt=f"{identity.text}\n\n{expand(IMPERSONATE_SYSTEM, prepared.macros)}",
            user_text=prepared.build.writer_prompt,
            tools=[],
            timeout=IMPERSONATE_TIMEOUT,
            step_limit=1,
            title="Impersonate",
            max_tokens=writer_max_tokens(prepared.writer_route, sampling.get("max_tokens")),
            sampling={k: v for k, v in sampling.items() if k in SAMPLING_PARAMS},
        )
        result = await run_structured(rt.service, session_id, request, model=rt.model_for(prepared.writer_route), abort=abort)
    draft = clean_draft(expand(result.text, prepared.macros), prepared.macros.user_name)
    if not draft:
        raise RpError(
            "impersonate.empty",
            "the model drafted nothing; try again, or write your message yourself",
            details={"childSessionId": result.session_id},
        )
    return Impersonation(draft, result.session_id, prepared.writer_route.spec)


def clean_draft(text: str, user_name: str | None) -> str:
    """The draft as the player would type it: without the ``Name:`` a chat-log habit puts first."""
    text = text.strip()
    if user_name:
        text = re.sub(rf"^\s*(?:\*\*)?{re.escape(user_name)}(?:\*\*)?\s*[:：]\s*", "", text, count=1)
    return text.strip()
