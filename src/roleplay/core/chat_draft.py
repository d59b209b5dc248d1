"""Chat mode keeps the Writer's draft when the parent forgets to commit.

The spec (Chat 与 Agent 执行模式): in Chat the runtime writes the Writer's text into the parent's
native assistant stream, and the parent neither copies nor rewrites it. So once the Writer has
succeeded, the Writer text is the only possible body of the turn. A parent that then answers in
plain text (no tool call) must not replace the draft with its own words or end the turn with
nothing committed. The run turns that response into the commit the parent should have made:
the Writer's draft as the body, no effects, ``references.writer`` linking the draft. The commit
goes through the ordinary ``rp_commit_turn`` path, so its result is validated, logged and owns
the reply like any other. A diagnostic in the commit says so and keeps the parent's own text.
"""

from __future__ import annotations

from roleplay.canonical import canonical_json
from roleplay.harness.models.types import ToolCall

from .prompts import COMMIT_TURN_TOOL
from .types import Diagnostic, WriterArtifact

PARENT_DID_NOT_COMMIT = "run.parent_did_not_commit"


def commit_for_plain_reply(call_id: str, artifact: WriterArtifact, parent_text: str) -> tuple[ToolCall, Diagnostic]:
    """The runtime's commit call for a plain parent reply after a successful Writer, and the
    diagnostic that records it."""
    arguments = {"references": {"writer": artifact.call_id}, "effects": []}
    details: dict[str, str] = {"writerCallId": artifact.call_id}
    if parent_text.strip():
        details["parentText"] = parent_text
    diagnostic = Diagnostic(
        PARENT_DID_NOT_COMMIT,
        "the parent answered in plain text after the Writer instead of calling rp_commit_turn; the runtime "
        "delivered the Writer's draft as the reply and committed it without effects",
        details=details,
    )
    return ToolCall(call_id, COMMIT_TURN_TOOL, canonical_json(arguments)), diagnostic
