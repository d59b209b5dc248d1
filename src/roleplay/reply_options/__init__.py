"""Reply options (spec ``rp-reply-options``): after a committed turn, a few things the player
could send next, made by one structured sub-agent call from the frozen final reply.

- ``generator``: the artifact generator (runs after the commit passed core validation; every
  failure is a diagnostic on the commit, never a lost reply);
- ``normalize``: reading the ``{"options": [...]}`` answer and cleaning the options;
- ``projection``: ``rp/reply-options``, the options of each reply on the surface, from the log;
- ``demo``: the offline demo model's (and fake server's) answer to the call;
- ``play``: the options as numbered choices after a reply in ``rp play``.

Settings: ``replyOptions.count``, ``replyOptions.maxCharacters``, ``replyOptions.keywords``
(``rp settings set …``); the feature is ``rp-reply-options`` in ``features.enabled``.

A self-contained feature above core: ``register`` wires it onto a runtime.
"""

from __future__ import annotations

from typing import Any

from . import demo
from .generator import reply_options_generator
from .play import options_after_turn, session_options
from .projection import EXTENSION_KEY, PROJECTION, reply_options_projection

FEATURE = "rp-reply-options"


def register(rt: Any) -> None:
    """Add the generator, the projection, the demo policy and the play choices to ``rt``."""
    if EXTENSION_KEY not in rt.artifacts.keys():
        rt.artifacts.register(reply_options_generator(rt))
    rt.service.projections.register(reply_options_projection)
    demo.register()
    choices = getattr(rt, "turn_choices", None)
    if choices is not None and options_after_turn not in choices:
        choices.append(options_after_turn)


__all__ = ["EXTENSION_KEY", "FEATURE", "PROJECTION", "options_after_turn", "register", "reply_options_projection", "session_options"]
