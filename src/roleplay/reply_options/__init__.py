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

A self-contained feature above core, loaded as the ``rp-reply-options`` plugin: it contributes
only through the hooks of ``roleplay.hookspecs`` (an artifact generator, a projection, a demo
policy, and its play choices when the runtime is ready).
"""

from __future__ import annotations

from typing import Any

from roleplay.hookspecs import hookimpl

from . import demo
from .generator import reply_options_generator
from .play import options_after_turn, options_of_reply, session_options
from .projection import EXTENSION_KEY, PROJECTION, reply_options_projection
from roleplay.names import REPLY_OPTIONS_FEATURE

FEATURE = REPLY_OPTIONS_FEATURE


@hookimpl
def register_artifact_generators(register: Any, runtime: Any) -> None:
    register(reply_options_generator(runtime))


@hookimpl
def register_projections(register: Any) -> None:
    register(reply_options_projection)


@hookimpl
def register_demo_policies(register: Any) -> None:
    register(demo.POLICY_NAME, demo.reply_options_demo_policy, first=True)


@hookimpl
def runtime_ready(runtime: Any) -> None:
    """``rp play`` numbers these after a reply (and again when that reply becomes the last one);
    ``rp say`` lists them."""
    if options_after_turn not in runtime.turn_choices:
        runtime.turn_choices.append(options_after_turn)
    if options_of_reply not in runtime.reply_choices:
        runtime.reply_choices.append(options_of_reply)


__all__ = [
    "EXTENSION_KEY",
    "FEATURE",
    "PROJECTION",
    "options_after_turn",
    "options_of_reply",
    "register_artifact_generators",
    "register_demo_policies",
    "register_projections",
    "reply_options_projection",
    "runtime_ready",
    "session_options",
]
