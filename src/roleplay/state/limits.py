"""Size bounds for everything a user, an asset or a model can hand to the state domain.

They are deliberately generous for real stories and small enough that a hostile or runaway input
cannot make validation slow or recursion deep. Tests pin each one.
"""

from __future__ import annotations

MAX_NAMESPACE_NAME = 64
MAX_NAMESPACES = 32

MAX_SCHEMA_NODES = 2_000  # sub-schemas in one namespace schema
MAX_SCHEMA_DEPTH = 32

MAX_VALUE_NODES = 100_000  # JSON nodes in one namespace value
MAX_VALUE_DEPTH = 64

MAX_TITLE = 200
MAX_DESCRIPTION = 4_000
MAX_RULES = 512
MAX_RULE_ID = 128
MAX_RULE_TEXT = 4_000  # `when` and `guidance`

MAX_CHANGES = 64  # per state.update effect, same bound as commit retry patches
MAX_REASON = 2_000

MAX_CONDITION_CHARS = 2_000
MAX_CONDITION_TOKENS = 400
MAX_CONDITION_DEPTH = 32
