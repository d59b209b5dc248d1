"""``rp.state`` v2: session-private, namespaced story state with restricted schemas and rules.

This package is the pure domain (no event store, no I/O): validation, execution of
``state.update``, configuration operations, projection folds and model-facing renderers.
The event-log wiring (``state.events``, ``state.commands``, ``state.tools``; see docs/state.md)
depends on the harness and is deliberately not re-exported here, so importing the domain stays pure.
"""

from roleplay.state.conditions import Condition, evaluate_condition, parse_condition
from roleplay.state.config import plan_config
from roleplay.state.definition import DEFAULT_NAMESPACE, UPDATE_MODES, validate_definition, validate_namespace_content
from roleplay.state.operations import EFFECT_KIND, state_update_tool_schema
from roleplay.state.projection import (
    apply_bootstrap,
    apply_commit,
    apply_config,
    bootstrap_payload,
    empty_view,
    fold,
    prepare_bootstrap,
    prepare_commit,
)
from roleplay.state.render import render_commit_contract, render_writer_view, state_commit_contract
from roleplay.state.schema import check_restricted_schema, validate_value
from roleplay.state.shape import (
    ACTIVITY_PROJECTION,
    PROTOCOL_VERSION,
    STATE_PROJECTION,
    STATE_VERSION,
    empty_activity,
    empty_projection,
)
from roleplay.state.update import UpdateOutcome, execute_updates, static_problems

__all__ = [
    "ACTIVITY_PROJECTION",
    "Condition",
    "DEFAULT_NAMESPACE",
    "EFFECT_KIND",
    "PROTOCOL_VERSION",
    "STATE_PROJECTION",
    "STATE_VERSION",
    "UPDATE_MODES",
    "UpdateOutcome",
    "apply_bootstrap",
    "apply_commit",
    "apply_config",
    "bootstrap_payload",
    "check_restricted_schema",
    "empty_activity",
    "empty_projection",
    "empty_view",
    "evaluate_condition",
    "execute_updates",
    "fold",
    "parse_condition",
    "plan_config",
    "prepare_bootstrap",
    "prepare_commit",
    "render_commit_contract",
    "render_writer_view",
    "state_commit_contract",
    "state_update_tool_schema",
    "static_problems",
    "validate_definition",
    "validate_namespace_content",
    "validate_value",
]
