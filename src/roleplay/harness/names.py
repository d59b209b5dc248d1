"""The harness's native event types, and the other names of its log and notifications, each spelled
once. ``harness/events.py`` gives each event type its payload model; every other module imports
the name from here. ``tests/test_names.py`` fails on any of these values written as a string
literal elsewhere under ``src/`` (roleplay names live in ``roleplay/names.py``).
"""

from __future__ import annotations

from typing import Final

# -- stored event types ---------------------------------------------------------------------------
COMMAND_RUN: Final = "command/run"
COMMAND_DONE: Final = "command/done"
TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
MODEL_REQUEST: Final = "model/request"
USER_MESSAGE: Final = "user/message"
ASSISTANT_MESSAGE: Final = "assistant/message"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
COMPACTION_CHECKPOINT: Final = "compaction/checkpoint"

# -- not stored -------------------------------------------------------------------------------------
ASSISTANT_CHUNK: Final = "assistant/chunk"  # a transient reply delta, delivered live and never stored
SUMMARY_NODE_KIND: Final = "compaction/summary"  # the surface node a compaction checkpoint leaves

__all__ = [
    "ASSISTANT_CHUNK",
    "ASSISTANT_MESSAGE",
    "COMMAND_DONE",
    "COMMAND_RUN",
    "COMPACTION_CHECKPOINT",
    "MODEL_REQUEST",
    "STEP_END",
    "STEP_START",
    "SUMMARY_NODE_KIND",
    "TOOL_CALL",
    "TOOL_RESULT",
    "TURN_END",
    "TURN_START",
    "USER_MESSAGE",
]
