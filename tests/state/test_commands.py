"""The ``rp-state-configure`` command handler, directly and through ``SessionService.run_command``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.canonical import canonical_json
from roleplay.errors import RpError
from roleplay.harness.commands import CommandContext, CommandRegistry
from roleplay.harness.projections import load
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.state.commands import configure_args, configure_handler, register_state_commands
from roleplay.state.config import plan_config
from roleplay.state.events import state_document, state_projection

OWNER = {"messageId": "a1", "toolCallId": "c1", "turnId": "t1", "stepId": "s1", "tool": "rp_state"}
RESET = {"action": "reset", "expectedRevision": 1}


def ctx(projection: Any) -> CommandContext:
    return CommandContext("ses", "cmd", {"rpState": projection})


def rejected(args: dict[str, Any], projection: Any) -> RpError:
    with pytest.raises(RpError) as exc:
        configure_handler(args, ctx(projection))
    return exc.value


def test_a_planned_configuration_passes_and_reports_the_new_revision(projection: dict[str, Any], make: Any) -> None:
    update = {"action": "update", "expectedRevision": 1, "definition": make.definition("schema-only")}
    args = configure_args(update, plan_config(projection, update), OWNER)
    assert args["v"] == 3 and args["owner"] == OWNER
    assert configure_handler(args, ctx(projection)) == {"action": "update", "namespace": "story", "revision": 2}
    delete = {"action": "delete", "expectedRevision": 1}
    assert configure_handler(configure_args(delete, plan_config(projection, delete), OWNER), ctx(projection))["revision"] is None


def test_malformed_args_list_every_problem(projection: dict[str, Any]) -> None:
    err = rejected({"v": 2, "input": RESET, "result": [], "owner": {**OWNER, "stepId": "", "extra": 1}, "x": 1}, projection)
    assert err.code == "state.config.rejected" and err.pointer == "/x"
    pointers = [p["pointer"] for p in err.details["problems"]]
    assert pointers == ["/x", "/v", "/result", "/owner/stepId", "/owner/extra"]


def test_plan_rejection_points_into_the_input(projection: dict[str, Any]) -> None:
    stale = {"action": "reset", "expectedRevision": 7}
    err = rejected(configure_args(stale, {"action": "reset"}, OWNER), projection)
    assert (err.code, err.pointer) == ("state.config.rejected", "/input/expectedRevision")
    assert err.details["problems"][0]["code"] == "state.config.revision_mismatch"


def test_a_result_that_does_not_follow_from_the_input_is_refused(projection: dict[str, Any]) -> None:
    forged = plan_config(projection, RESET)
    forged["entry"]["value"] = {"day": 99, "characters": {}}
    err = rejected(configure_args(RESET, forged, OWNER), projection)
    assert (err.code, err.pointer) == ("state.config.result_mismatch", "/result")
    assert rejected(configure_args(RESET, forged, OWNER), None).code == "state.config.projection_missing"


@pytest.mark.anyio
async def test_run_command_records_run_and_done_and_a_rejection_changes_nothing(store: EventStore, projection: dict[str, Any]) -> None:
    commands = CommandRegistry()
    register_state_commands(commands)
    register_state_commands(commands)  # idempotent
    service = SessionService(store, commands=commands)
    sid = (await service.create("roleplay")).id
    before = canonical_json((await load(store, sid, state_projection)).state)

    bad = await service.run_command(
        sid, "rp-state-configure", configure_args({"action": "reset", "expectedRevision": 3}, {}, OWNER), state={"rpState": projection}
    )
    assert not bad.ok and bad.error is not None
    assert (bad.error["code"], bad.error["pointer"]) == ("state.config.rejected", "/input/expectedRevision")
    assert [e.type for e in bad.events] == ["command/run", "command/done"] and bad.events[1].payload["kind"] == "error"

    # A success whose owner is not in this log (no assistant message made call c1) is recorded
    # as a command but forms no configuration entity: the fold checks the owner against the log.
    good = await service.run_command(
        sid, "rp-state-configure", configure_args(RESET, plan_config(projection, RESET), OWNER), state={"rpState": projection}
    )
    assert good.ok and good.result == {"action": "reset", "namespace": "story", "revision": 2}
    tracker = (await load(store, sid, state_projection)).state
    assert canonical_json(state_document(tracker)) == canonical_json(state_document(json.loads(before)))
    assert tracker["diagnostics"][-1]["code"] == "state.config.owner_inconsistent"
    assert tracker["diagnostics"][-1]["pointer"] == "/args/owner/toolCallId"
