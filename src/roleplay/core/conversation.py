"""The conversation as Writer material: ``rp.conversation`` and ``rp.conversation-summary``.

The Writer is a fresh session with no history of its own, so the parent session's surface is
materialised into its flat prompt as plain semantic text (the main session never gets a second
copy). What stays out, and why:

- the current input: it has its own source (``rp.current-input``) and must appear exactly once;
  nodes after it belong to the run in progress and are not history yet;
- the compaction checkpoint node: its summary is the separate ``rp.conversation-summary``;
- tool traces: tool results, and assistant messages that carry tool calls (intermediate steps)
  unless a successful commit made them the writing reply;
- reasoning blocks and images (the Writer only gets the current turn's images);
- run-context user messages (``source.rpRunContext``): the parent's ``<roleplay_request>``
  envelopes, i.e. old snapshots of context the Writer already gets fresh.

Assistant replies are labelled. A *writing reply* is one a successful ``rp_commit_turn`` is linked
to, or the selected opening; every other final assistant reply is a *non-writing reply*
(discussion, clarification). The label changes presentation only, never the surface.

A Continue turn (``core.continue_turn``) extends the writing reply before it: its input (an
instruction, ``source.rpContinue``) is left out and its reply is joined to that reply, so the
player, the Writer and the parent all read one message. Undoing the turn restores the original.

Each text opens with an English context note, so the Writer knows how to weigh it: the summary is
a compressed record of earlier conversation, the conversation is verbatim, newer wins on
conflict, and non-writing replies may carry decisions but are not story, dialogue or style.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from roleplay.harness.converted import CONVERTED, ConvertedMessages
from roleplay.harness.projections import Loaded
from roleplay.harness.sessions import SessionService
from roleplay.harness.surface_folds import SurfaceFolds
from roleplay.names import OPENING_SOURCE, RUN_CONTEXT_SOURCE
from roleplay.harness.names import SUMMARY_NODE_KIND

from .player_prompts import CONTINUE_SOURCE, join_continuation

SUMMARY_KIND = SUMMARY_NODE_KIND

Speaker = Literal["user", "writing", "non-writing"]

_LABELS: dict[str, str] = {
    "user": "[User]",
    "writing": "[Writing reply]",
    "non-writing": "[Non-writing reply]",
}

SUMMARY_NOTE = (
    "Context note: what follows is a compressed record of earlier conversation, written when older "
    "messages were summarised. It is older than the visible conversation; where the two conflict, "
    "the more recent conversation wins. Decisions or constraints it records from non-writing "
    "replies still apply, but they are not story events, dialogue or style samples."
)

CONVERSATION_NOTE = (
    "Context note: what follows is the visible conversation kept verbatim, oldest first. Where it "
    "conflicts with the compressed record of earlier conversation, the more recent conversation "
    "wins. [Writing reply] blocks are the story as written so far. [Non-writing reply] blocks are "
    "discussion outside the story: they may carry explicit decisions or constraints to respect, "
    "but they are not story events, character dialogue or samples of the writing style."
)


@dataclass(frozen=True)
class Entry:
    """One message of the projected conversation."""

    message_id: str
    speaker: Speaker
    text: str


def _text_of(node: dict[str, Any]) -> str:
    # Only text blocks: reasoning and images never reach the Writer through history.
    return "".join(b.get("text", "") for b in node.get("content") or [] if b.get("type") == "text").strip()


def _is_run_context(node: dict[str, Any]) -> bool:
    source = node.get("source")
    return isinstance(source, dict) and bool(source.get(RUN_CONTEXT_SOURCE))


def _is_continue(node: dict[str, Any]) -> bool:
    """The input of a Continue turn (``core.continue_turn``): an instruction, not the user's words."""
    source = node.get("source")
    return isinstance(source, dict) and bool(source.get(CONTINUE_SOURCE))


def summary_text(nodes: Sequence[dict[str, Any]]) -> str | None:
    """The summary of the active checkpoint on this surface, or None (no checkpoint, or an empty
    summary: then ``rp.conversation-summary`` is unavailable and leaves no tag behind)."""
    for node in reversed(nodes):
        if node.get("kind") == SUMMARY_KIND:
            text = _text_of(node)
            return text or None
    return None


def project(
    nodes: Sequence[dict[str, Any]],
    *,
    current_input_ids: Iterable[str] = (),
    writing_ids: Iterable[str] = (),
    opening_id: str | None = None,
) -> list[Entry]:
    """The history entries in surface order.

    ``current_input_ids`` are the message ids of this run's input (a turn may hold several queued
    user messages); the history stops before the first of them. ``writing_ids`` are the assistant
    messages a successful commit is linked to; ``opening_id`` the selected opening message.
    """
    fold = EntriesFold(writing_ids, opening_id, current_input_ids=current_input_ids)
    for node in nodes:
        if fold.feed(node) is False:
            break
    return fold.out


class _ReplyFold:
    """What the two folds share: which assistant messages are writing replies. The opening is
    given, or found as the fold goes (the first assistant message marked as the card's opening,
    as ``core.run.opening_message_id`` finds it: nodes before it cannot be it)."""

    def __init__(self, writing_ids: Iterable[str], opening_id: str | None, *, find_opening: bool = False) -> None:
        ids = list(writing_ids)
        self.writing = set(ids)
        self.writing_count = len(ids)
        self.find_opening = find_opening and opening_id is None
        if opening_id is not None:
            self.writing.add(opening_id)
        self.assistant_ids: set[str] = set()  # every assistant message fed (see ``accept_writing``)
        self.continuing = False  # after a Continue input: the next writing reply extends the one before

    def see(self, node: dict[str, Any]) -> None:
        """Note an assistant message before anything else looks at it."""
        if self.find_opening and (node.get("source") or {}).get(OPENING_SOURCE) is not None:
            self.find_opening = False
            self.writing.add(node["id"])
        self.assistant_ids.add(node["id"])

    def accept_writing(self, writing: Sequence[str]) -> bool:
        """Take the writing replies recorded since this fold last ran (``rp/replies`` only grows),
        unless one of them was already fed as a non-writing message: then the fold is stale."""
        if len(writing) < self.writing_count:
            return False
        new = writing[self.writing_count :]
        if any(w in self.assistant_ids for w in new):
            return False
        self.writing.update(new)
        self.writing_count = len(writing)
        return True


class EntriesFold(_ReplyFold):
    """``project`` node by node (``out`` holds the entries so far)."""

    def __init__(
        self, writing_ids: Iterable[str], opening_id: str | None, *, current_input_ids: Iterable[str] = (), find_opening: bool = False
    ) -> None:
        super().__init__(writing_ids, opening_id, find_opening=find_opening)
        self.current = set(current_input_ids)
        self.out: list[Entry] = []
        self.summary: dict[str, Any] | None = None  # the last compaction summary node fed (``summary_text``)

    def feed(self, node: dict[str, Any]) -> bool:
        out = self.out
        if node.get("id") in self.current:
            return False
        role = node.get("role")
        if role == "assistant":
            self.see(node)
        if node.get("kind") == SUMMARY_KIND:
            self.summary = node
            return True
        if role == "tool":
            return True
        text = _text_of(node)
        if not text:
            return True
        if role == "user":
            if _is_run_context(node):
                return True
            if _is_continue(node):
                self.continuing = bool(out) and out[-1].speaker == "writing"
                return True
            out.append(Entry(node["id"], "user", text))
            self.continuing = False
        elif role == "assistant":
            if node["id"] in self.writing:
                if self.continuing:
                    out[-1] = Entry(out[-1].message_id, "writing", join_continuation(out[-1].text, text))
                else:
                    out.append(Entry(node["id"], "writing", text))
                self.continuing = False
            elif not node.get("toolCalls"):
                # An assistant message with tool calls is a step inside a turn, not its reply.
                out.append(Entry(node["id"], "non-writing", text))
                self.continuing = False
        return True


def render_entries(entries: Sequence[Entry]) -> str:
    return "\n\n".join(f"{_LABELS[e.speaker]}\n{e.text}" for e in entries)


def conversation_text(
    nodes: Sequence[dict[str, Any]],
    *,
    current_input_ids: Iterable[str] = (),
    writing_ids: Iterable[str] = (),
    opening_id: str | None = None,
) -> str:
    """The text of ``rp.conversation``: the note, then the labelled entries. Empty when there is
    no history, so the source is unavailable instead of an empty prompt block."""
    return text_of_entries(project(nodes, current_input_ids=current_input_ids, writing_ids=writing_ids, opening_id=opening_id))


def text_of_entries(entries: Sequence[Entry]) -> str:
    """``conversation_text`` for entries already projected (callers that also need the entries)."""
    return f"{CONVERSATION_NOTE}\n\n{render_entries(entries)}" if entries else ""


def summary_source_text(nodes: Sequence[dict[str, Any]]) -> str:
    """The text of ``rp.conversation-summary``: the note, then the summary; empty without one."""
    summary = summary_text(nodes)
    return f"{SUMMARY_NOTE}\n\n{summary}" if summary else ""


def story_nodes(
    nodes: Sequence[dict[str, Any]],
    *,
    writing_ids: Iterable[str] = (),
    opening_id: str | None = None,
) -> list[dict[str, Any]]:
    """Earlier turns as the parent model's history: the story itself (issue 12).

    Each turn keeps the user's input and its final reply as plain messages: a writing reply (the
    commit's message, whose text is the Writer's draft) loses its tool calls and reasoning, a
    non-writing reply its reasoning. Run-context messages, tool results, intermediate steps and
    failed commit attempts are left out (the log keeps them). The compaction summary stays.
    Rewritten replies get ids of their own (``#reply``): the loop caches messages by (id, seq)."""
    fold = StoryFold(writing_ids, opening_id)
    for node in nodes:
        fold.feed(node)
    return fold.out


class StoryFold(_ReplyFold):
    """``story_nodes`` node by node (``out`` holds the story so far)."""

    def __init__(self, writing_ids: Iterable[str], opening_id: str | None, *, find_opening: bool = False) -> None:
        super().__init__(writing_ids, opening_id, find_opening=find_opening)
        self.out: list[dict[str, Any]] = []
        self._frozen: tuple[dict[str, Any], ...] | None = None

    def frozen(self) -> tuple[dict[str, Any], ...]:
        """``out`` as a tuple, the same object until the next node is fed: the steps of a turn
        share it, and the loop converts it once (``ConvertedMessages``)."""
        if self._frozen is None:
            self._frozen = tuple(self.out)
        return self._frozen

    def feed(self, node: dict[str, Any]) -> None:
        self._frozen = None
        out = self.out
        role = node.get("role")
        if role == "assistant":
            self.see(node)
        if node.get("kind") == SUMMARY_KIND:
            # With the note the Writer's summary slot has: the parent must not read it as the
            # user's words. Its own id, as its text is new.
            text = f"{SUMMARY_NOTE}\n\n{_text_of(node)}"
            out.append({**node, "id": f"{node['id']}#summary", "content": [{"type": "text", "text": text}]})
        elif role == "user":
            if _is_continue(node):
                self.continuing = bool(out) and out[-1]["role"] == "assistant" and out[-1].get("kind") != SUMMARY_KIND
            elif not _is_run_context(node):
                out.append(node)
                self.continuing = False
        elif role == "assistant" and (node["id"] in self.writing or not node.get("toolCalls")):
            text = _text_of(node)
            if text:
                if self.continuing and node["id"] in self.writing:
                    # One reply, as the player reads it; its own id, as its text is new.
                    before = out.pop()
                    text = join_continuation(_text_of(before), text)
                    reply = {
                        "id": f"{before['id']}+{node['id']}",
                        "role": "assistant",
                        "seq": node["seq"],
                        "content": [{"type": "text", "text": text}],
                    }
                else:
                    reply = {
                        "id": f"{node['id']}#reply",
                        "role": "assistant",
                        "seq": node["seq"],
                        "content": [{"type": "text", "text": text}],
                    }
                out.append(reply)
                self.continuing = False


# -- kept across turns ---------------------------------------------------------------------------

ENTRIES_FOLD = "rp.conversation.entries"
STORY_FOLD = "rp.conversation.story"


def history_entries(folds: SurfaceFolds, session_id: str, surface: Loaded, writing: Sequence[str]) -> tuple[list[Entry], str]:
    """``project`` of the whole surface, the opening found on it (as ``prepare_run`` asks), and
    ``summary_source_text`` of it, from the fold kept for the session: a turn feeds it only the
    nodes added since the last."""
    fold = folds.fold(
        ENTRIES_FOLD,
        session_id,
        surface,
        lambda: EntriesFold(writing, None, find_opening=True),
        reuse=lambda kept: kept.accept_writing(writing),
    )
    summary = _text_of(fold.summary) if fold.summary is not None else ""
    return list(fold.out), f"{SUMMARY_NOTE}\n\n{summary}" if summary else ""


def history_story(folds: SurfaceFolds, session_id: str, surface: Loaded, writing: Sequence[str], count: int) -> tuple[dict[str, Any], ...]:
    """``story_nodes`` of the surface's first ``count`` nodes (the turns before the running one),
    the opening found among them, from the fold kept for the session."""
    fold = folds.fold(
        STORY_FOLD,
        session_id,
        surface,
        lambda: StoryFold(writing, None, find_opening=True),
        count=count,
        reuse=lambda kept: kept.accept_writing(writing),
    )
    return fold.frozen()


def story_tokens(service: SessionService, session_id: str, surface: Loaded, writing: Sequence[str], count: int) -> int:
    """The parent's token estimate (``harness.history.message_tokens``) of ``history_story``:
    the story of the first ``count`` nodes as the parent would be sent it without a bound. From
    the kept fold and the loop's converted messages, so a turn counts only what is new."""
    story = history_story(service.folds, session_id, surface, writing, count)
    converted: ConvertedMessages = service.derived.setdefault(CONVERTED, ConvertedMessages())
    return converted.converted(session_id, story).running[-1]
