"""Roleplay names that more than one module must spell the same way: tool names, command names,
event (result meta) kinds, effect kinds, projection names, context source ids, message-source
markers and feature names.

Each is written here once and imported everywhere else; ``tests/test_names.py`` fails on any of
these values written as a string literal elsewhere under ``src/``. This module sits in the shared
layer so that every layer that uses a name (state, core, the test support) can import it. The
harness's own native event types (``assistant/message``, ``command/done``, …) are the harness
vocabulary in ``harness/events.py``, not roleplay names.
"""

from __future__ import annotations

from typing import Final

# -- model-facing tools ---------------------------------------------------------------------------
WRITE_TURN_TOOL: Final = "rp_write_turn"
COMMIT_TURN_TOOL: Final = "rp_commit_turn"
ASSET_READ_TOOL: Final = "rp_asset_read"
ASSET_WRITE_TOOL: Final = "rp_asset"  # Agent mode only
STATE_READ_TOOL: Final = "rp_state_read"
STATE_CONFIGURE_TOOL: Final = "rp_state"  # Agent mode only
RUN_SUBAGENT_TOOL: Final = "rp_run_subagent"  # Agent mode only: a task sub-agent of the catalog
GUIDE_TOOL: Final = "rp_guide"  # Agent mode only: load an enabled feature's guide
WORKSPACE_SHELL_TOOL: Final = "bash"  # Agent mode, sandbox setting on: the persistent workspace shell
WORKSPACE_EDITOR_TOOL: Final = "str_replace_editor"  # Agent mode, sandbox setting on: workspace files

# -- harness commands ---------------------------------------------------------------------------
SESSION_APPLY_COMMAND: Final = "rp-session-apply"  # profile changes (bindings, runtime, context build)
STATE_CONFIGURE_COMMAND: Final = "rp-state-configure"  # explicit state configuration

# -- event kinds: the ``meta.kind`` of a tool result ----------------------------------------------
TURN_COMMIT_KIND: Final = "rp-agent/turn-commit"  # a successful rp_commit_turn
WRITER_RESULT_KIND: Final = "rp-agent/writer-result"  # a successful rp_write_turn
ASSET_READ_KIND: Final = "rp-asset/read"
ASSET_WRITE_KIND: Final = "rp-asset/write"
STATE_CONFIGURE_KIND: Final = "rp-state/configure"
SUBAGENT_RESULT_KIND: Final = "rp-agent/subagent-result"  # a successful rp_run_subagent
GUIDE_LOAD_KIND: Final = "rp-guide/load"  # a guide loaded by rp_guide

# -- effect kinds (the commit's ``effects[].kind``) -----------------------------------------------
STATE_UPDATE_EFFECT: Final = "state.update"

# -- projections ----------------------------------------------------------------------------------
STATE_PROJECTION: Final = "rp/state"
STATE_ACTIVITY_PROJECTION: Final = "rp/state/activity"
SESSION_PROJECTION: Final = "rp/session"
REPLIES_PROJECTION: Final = "rp/replies"

# -- context source ids, fixed by the spec (a prefix takes a suffix) -----------------------------------
CARD_SOURCE: Final = "rp.card"
# The card's Character's Note (ST ``extensions.depth_prompt``): placed inside the conversation at
# its depth when its slot also holds ``rp.conversation``, else where its slot stands.
CARD_DEPTH_PROMPT_SOURCE: Final = "rp.card.depth-prompt"
PERSONA_SOURCE: Final = "rp.persona"
PLAYER_SOURCE: Final = "rp.player"  # the internal user control boundary (participation), not an asset
LORE_WORLD_SOURCE: Final = "rp.lore.world-description"
LORE_CHARACTERS_SOURCE: Final = "rp.lore.character-descriptions"
LORE_RULES_SOURCE: Final = "rp.lore.important-rules"
STATE_SOURCE: Final = "rp.state"
PRESET_SOURCE_PREFIX: Final = "rp.preset:"  # + field id
STYLE_SOURCE_PREFIX: Final = "rp.writing-style:"  # + asset id
SUMMARY_SOURCE: Final = "rp.conversation-summary"
CONVERSATION_SOURCE: Final = "rp.conversation"
CURRENT_INPUT_SOURCE: Final = "rp.current-input"
CUSTOM_SOURCE_PREFIX: Final = "rp.custom:"  # + custom prompt id (the session's own prompts)

# -- ``source`` markers on messages the runtime writes ----------------------------------------------
RUN_CONTEXT_SOURCE: Final = "rpRunContext"  # a run's <roleplay_request> user message
OPENING_SOURCE: Final = "rpOpening"  # the card's opening message
CONTINUE_SOURCE: Final = "rpContinue"  # a Continue turn's instruction, not user text
MESSAGE_ACTION_SOURCE: Final = "rpMessageAction"  # a message action's own metadata

# -- keys of the ``state`` a harness command handler reads (``CommandContext.state``) ---------------
SESSION_APPLY_STATE: Final = "rpSession"  # the rp/session projection state, for rp-session-apply
STATE_CONFIGURE_STATE: Final = "rpState"  # the rp/state document, for rp-state-configure

# -- feature names (spec: the plugin table) -------------------------------------------------------
# Always on, never listed in ``features.enabled``:
CORE_FEATURE: Final = "rp-core"
FEATURE_MANAGER_FEATURE: Final = "rp-feature-manager"
REMOTE_FEATURE: Final = "rp-remote"
STANDARD_FEATURE: Final = "rp-standard"
# Switched by the feature manager (catalogue order is ``core.settings.FEATURES``):
STATE_FEATURE: Final = "rp-state"
CHARACTER_CARD_FEATURE: Final = "rp-character-card"
LOREBOOK_FEATURE: Final = "rp-lore-book"
PERSONA_FEATURE: Final = "rp-persona"
PRESET_FEATURE: Final = "rp-preset"
WRITING_STYLE_FEATURE: Final = "rp-writing-style"
MACRO_FEATURE: Final = "rp-macro"
ASSET_TOOLS_FEATURE: Final = "rp-asset-tools"
LIBRARY_FEATURE: Final = "rp-library"
SUBAGENT_MANAGER_FEATURE: Final = "rp-subagent-manager"
CONVERSATION_SUMMARY_FEATURE: Final = "rp-conversation-summary"
MESSAGE_ACTIONS_FEATURE: Final = "rp-message-actions"
MESSAGE_AVATAR_FEATURE: Final = "rp-message-avatar"
REPLY_OPTIONS_FEATURE: Final = "rp-reply-options"
QUICK_REPLIES_FEATURE: Final = "rp-quick-replies"
DIALOGUE_HIGHLIGHT_FEATURE: Final = "rp-dialogue-highlight"
COMPACT_ACCESS_MODE_FEATURE: Final = "rp-compact-access-mode"
COMPAT_MVU_FEATURE: Final = "rp-compat-mvu"

__all__ = [
    "CORE_FEATURE",
    "FEATURE_MANAGER_FEATURE",
    "REMOTE_FEATURE",
    "STANDARD_FEATURE",
    "STATE_FEATURE",
    "CHARACTER_CARD_FEATURE",
    "LOREBOOK_FEATURE",
    "PERSONA_FEATURE",
    "PRESET_FEATURE",
    "WRITING_STYLE_FEATURE",
    "MACRO_FEATURE",
    "ASSET_TOOLS_FEATURE",
    "LIBRARY_FEATURE",
    "SUBAGENT_MANAGER_FEATURE",
    "CONVERSATION_SUMMARY_FEATURE",
    "MESSAGE_ACTIONS_FEATURE",
    "MESSAGE_AVATAR_FEATURE",
    "REPLY_OPTIONS_FEATURE",
    "QUICK_REPLIES_FEATURE",
    "DIALOGUE_HIGHLIGHT_FEATURE",
    "COMPACT_ACCESS_MODE_FEATURE",
    "COMPAT_MVU_FEATURE",
    "ASSET_READ_KIND",
    "ASSET_READ_TOOL",
    "ASSET_WRITE_KIND",
    "ASSET_WRITE_TOOL",
    "CARD_DEPTH_PROMPT_SOURCE",
    "CONTINUE_SOURCE",
    "CARD_SOURCE",
    "CONVERSATION_SOURCE",
    "CURRENT_INPUT_SOURCE",
    "GUIDE_LOAD_KIND",
    "GUIDE_TOOL",
    "CUSTOM_SOURCE_PREFIX",
    "LORE_CHARACTERS_SOURCE",
    "LORE_RULES_SOURCE",
    "LORE_WORLD_SOURCE",
    "MESSAGE_ACTION_SOURCE",
    "PERSONA_SOURCE",
    "PLAYER_SOURCE",
    "PRESET_SOURCE_PREFIX",
    "STATE_SOURCE",
    "STYLE_SOURCE_PREFIX",
    "SUMMARY_SOURCE",
    "COMMIT_TURN_TOOL",
    "OPENING_SOURCE",
    "REPLIES_PROJECTION",
    "RUN_CONTEXT_SOURCE",
    "RUN_SUBAGENT_TOOL",
    "SESSION_APPLY_COMMAND",
    "SESSION_APPLY_STATE",
    "SESSION_PROJECTION",
    "STATE_ACTIVITY_PROJECTION",
    "STATE_CONFIGURE_COMMAND",
    "STATE_CONFIGURE_KIND",
    "STATE_CONFIGURE_STATE",
    "STATE_CONFIGURE_TOOL",
    "STATE_PROJECTION",
    "STATE_READ_TOOL",
    "STATE_UPDATE_EFFECT",
    "SUBAGENT_RESULT_KIND",
    "TURN_COMMIT_KIND",
    "WRITER_RESULT_KIND",
    "WORKSPACE_EDITOR_TOOL",
    "WORKSPACE_SHELL_TOOL",
    "WRITE_TURN_TOOL",
]
