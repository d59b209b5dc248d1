"""What the conversation summariser is asked, and the offline demo's answer to it.

The summariser (spec ``rp-conversation-summary``) is a structured, tool-less sub-agent. It gets
the earlier part of the story as the same labelled material the Writer reads (``[User]``,
``[Writing reply]``, ``[Non-writing reply]``, ``core.conversation``), preceded by the previous
summary when an old checkpoint is merged, and answers ``{"summary": "..."}``. The instructions
are English (like every roleplay prompt); the summary is written in the story's own language,
which the instructions ask for and the demo follows, so a Chinese story keeps a Chinese summary.

The demo model answers offline (``summary_demo_policy``): a deterministic digest of the material,
clearly labelled, always much shorter than what it summarises.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from roleplay.harness.models.demo import register_demo_policy
from roleplay.harness.models.types import ModelRequest

from .conversation import Entry, render_entries

SUMMARISER_MARKER = "You are the summariser of a long roleplay story."
PREVIOUS_OPEN, PREVIOUS_CLOSE = "<previous_summary>", "</previous_summary>"
MATERIAL_OPEN, MATERIAL_CLOSE = "<conversation>", "</conversation>"

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string", "minLength": 1, "description": "the narrative summary, in the story's language"}},
    "required": ["summary"],
    "additionalProperties": False,
}

SYSTEM_PROMPT = f"""{SUMMARISER_MARKER}
The conversation below is the earlier part of the story; it is about to leave the model's context, and your summary will take its place. Write one narrative summary that lets the story go on without it:
- what happened, in order: events, decisions, promises, secrets revealed, changes in relationships, where everyone is now;
- names, places, objects and facts that later turns may need;
- [Writing reply] blocks are the story as written. [Non-writing reply] blocks are discussion outside the story: keep the explicit decisions or constraints they record, but never present them as story events, dialogue or style.
- When a previous summary is given, merge it with the conversation that follows it into one summary; where they conflict, the conversation is newer and wins.
Write in the same language as the conversation. Be much shorter than the conversation; do not invent anything.
Answer with JSON only: {{"summary": "..."}}"""


def summariser_input(previous: str | None, entries: Sequence[Entry]) -> str:
    """The one user message of the summariser: the previous summary (when merging) and the
    labelled conversation it is to replace."""
    parts = []
    if previous:
        parts.append(f"{PREVIOUS_OPEN}\n{_escape(previous)}\n{PREVIOUS_CLOSE}")
    parts.append(f"{MATERIAL_OPEN}\n{_escape(render_entries(entries))}\n{MATERIAL_CLOSE}")
    return "\n\n".join(parts)


def _escape(text: str) -> str:
    # The material is story text: it must not close our own envelope early.
    for tag in (PREVIOUS_OPEN, PREVIOUS_CLOSE, MATERIAL_OPEN, MATERIAL_CLOSE):
        text = text.replace(tag, tag.replace("<", "&lt;"))
    return text


# -- the offline demo's answer -------------------------------------------------------------------

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_LABELLED = re.compile(
    r"^\[(User|Writing reply|Non-writing reply)\]\n(.*?)(?=\n\n\[(?:User|Writing reply|Non-writing reply)\]\n|\Z)", re.S | re.M
)
_EARLIER = re.compile(r"^(?:更早：|Before that: )+")
_DEMO_TAG = re.compile(r"^\[(?:demo|fake)[^\]]*\]\s*|^【演示[^】]*】\s*")


def demo_summary(user_text: str, label: str | None = None) -> str:
    """A labelled, deterministic digest: the player's inputs, each cut short, after the previous
    summary's own digest; in the material's language. ``label`` replaces the demo's own label
    (the fake OpenAI-compatible server labels its answers as its own)."""
    previous = ""
    if PREVIOUS_OPEN in user_text:
        previous = user_text.split(PREVIOUS_OPEN, 1)[1].split(PREVIOUS_CLOSE, 1)[0].strip()
    material = user_text.split(MATERIAL_OPEN, 1)[-1].split(MATERIAL_CLOSE, 1)[0]
    labelled = _LABELLED.findall(material)
    inputs = [" ".join(body.split()).rstrip("。.!！?？") for label, body in labelled if label == "User"]
    scene = next((" ".join(body.split()) for label, body in labelled if label == "Writing reply"), "")
    chinese = bool(_CJK.search(material) or _CJK.search(previous))
    limit = 24 if chinese else 60
    points = [p if len(p) <= limit else p[: limit - 1] + "…" for p in inputs[-6:]]
    earlier = _DEMO_TAG.sub("", previous.splitlines()[-1]) if previous else ""
    earlier = _EARLIER.sub("", earlier)
    if chinese:
        head = label or "【演示·离线摘要】"
        body = f"此前{len(inputs)}次输入的要点：" + "；".join(points) + "。" if points else f"开场：{scene[:40]}"
        return head + (f"更早：{earlier[:60]} " if earlier else "") + body
    head = label or "[demo · offline summary] "
    body = f"Earlier, over {len(inputs)} inputs: " + "; ".join(points) + "." if points else f"The opening: {scene[:100]}"
    return head + (f"Before that: {earlier[:160]} " if earlier else "") + body


def summary_demo_policy(request: ModelRequest) -> dict[str, Any] | None:
    system = request.messages[0].text() if request.messages and request.messages[0].role == "system" else ""
    if SUMMARISER_MARKER not in system or request.tools:
        return None
    user = next((m.text() for m in reversed(request.messages) if m.role == "user"), "")
    return {"text": json.dumps({"summary": demo_summary(user)}, ensure_ascii=False)}


def register() -> None:
    """Let the offline demo model answer the summariser (idempotent: registered by name)."""
    register_demo_policy("roleplay-summary", summary_demo_policy)
