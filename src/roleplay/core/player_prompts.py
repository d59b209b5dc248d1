"""The texts of the player's two generation helpers: Continue and Impersonate (SillyTavern's).

They are instructions to models, in English like every engine prompt (the Writer is told to write
in the story's language; these say the same). The demo model and the fake server recognise them
by their opening words (``CONTINUE_MARK``, ``IMPERSONATE_MARK``), so they live in this module of
plain constants that both sides import.

**Continue** is a story turn whose input is ``CONTINUE_INPUT``, logged with ``source.rpContinue``
on that input message. The conversation reads the turn's reply as the rest of the reply before it
(``core.conversation``): one message to the player, the Writer and the parent, joined by
``join_continuation``.

**Impersonate** asks a one-shot sub-agent for the player's next message, in their persona's
voice, from the Writer's own material (``IMPERSONATE_INSTRUCTION`` as the current input); the
draft goes to the input, never to the story.
"""

from __future__ import annotations

from roleplay.names import CONTINUE_SOURCE as CONTINUE_SOURCE  # the marker this module's turns carry

CONTINUE_MARK = "[Continue the last writing reply"
CONTINUE_INPUT = (
    "[Continue the last writing reply from exactly where it stops, as its next words: do not repeat, "
    "restate or summarise what it already says, and do not start a new reply. Keep its language, "
    "voice and tense. The user has not acted since.]"
)

IMPERSONATE_MARK = "You draft the user's next message in a roleplay story."
IMPERSONATE_SYSTEM = """\
You draft the user's next message in a roleplay story.

The material below is the story as its Writer sees it: the character card, the user's persona, the
lore, the state and the conversation so far. Write what the user, as {{user}}, says or does next,
as the user would type it in the chat: first person or the user's usual form, in the language and
style of the user's earlier messages, short (one to three sentences unless their messages are
longer). Stay in the persona. Do not write for {{char}} or any other character, do not narrate
their reactions, and do not write as the narrator or the system. Output only the message text.\
"""
IMPERSONATE_INSTRUCTION = (
    "[Draft the user's next message as {{user}}, following on from the last reply. "
    "Do not write for {{char}} or describe what other characters do.]"
)

# Characters after which a continuation starts a new paragraph: the reply ended on a full stop.
_CLOSERS = frozenset(".!?…。！？」』”’\"')）】》~～*")

# Characters a continuation may start with that attach to the word before them.
_GLUED = frozenset(",.;:!?)…—-")


def join_continuation(before: str, after: str) -> str:
    """The reply and its continuation as one text.

    A continuation of a reply that was cut off mid-sentence goes straight on (with a space between
    words of alphabetic scripts, none in CJK text); after a finished sentence it opens a new
    paragraph, as the Writer's replies are paragraphs. Whitespace either side is kept as given."""
    if not before or not after:
        return before + after
    if before[-1].isspace() or after[0].isspace():
        return before + after
    if before[-1] in _CLOSERS:
        return f"{before}\n\n{after}"
    if _is_cjk(before[-1]) or _is_cjk(after[0]) or after[0] in _GLUED:
        return before + after
    return f"{before} {after}"


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF or 0xFF00 <= code <= 0xFFEF
