"""Projection shape, the three folds, replay after retraction and the activity view."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.canonical import canonical_json
from roleplay.errors import ValidationError
from roleplay.state.config import plan_config
from roleplay.state.projection import (
    apply_bootstrap,
    apply_commit,
    apply_config,
    bootstrap_payload,
    empty_view,
    fold,
    prepare_bootstrap,
    prepare_commit,
    validate_bootstrap,
)
from roleplay.state.shape import (
    ACTIVITY_PROJECTION,
    PROTOCOL_VERSION,
    STATE_PROJECTION,
    STATE_VERSION,
    empty_activity,
    empty_projection,
    namespace_values,
)

AFF = "/characters/李钰/好感度"


def test_versions_and_names():
    assert (PROTOCOL_VERSION, STATE_VERSION) == (2, 8)
    assert (STATE_PROJECTION, ACTIVITY_PROJECTION) == ("rp/state", "rp/state/activity")
    assert empty_projection() == {"protocolVersion": 2, "revision": 0, "namespaces": {}}
    assert empty_activity() == {"namespaces": {}}


def test_bootstrap_builds_the_reference_shape(make):
    projection = apply_bootstrap(empty_projection(), bootstrap_payload(make.definition(), make.value()))
    assert projection["protocolVersion"] == 2 and projection["revision"] == 1
    entry = projection["namespaces"]["story"]
    assert set(entry) == {"revision", "initialValue", "value", "definition", "diagnostics"}
    assert entry["revision"] == 1
    assert entry["initialValue"] == entry["value"] == make.value()
    assert entry["definition"] == make.definition()
    assert entry["diagnostics"] == {"setup": [], "lastCommit": []}
    assert namespace_values(projection) == {"story": make.value()}


def test_bootstrap_replaces_all_namespaces_and_keeps_setup_diagnostics(make):
    first = apply_bootstrap(empty_projection(), bootstrap_payload(make.definition(), make.value(), namespace="old"))
    note = {"code": "mvu.rule_dropped", "message": "lodash rule skipped"}
    second = apply_bootstrap(first, bootstrap_payload(make.definition(), make.value(), setup_diagnostics=[note]))
    assert list(second["namespaces"]) == ["story"] and second["revision"] == 2
    assert second["namespaces"]["story"]["diagnostics"]["setup"] == [note]


def test_invalid_bootstraps_are_rejected_at_write_time_with_pointers(make):
    bad = make.value()
    bad["day"] = 0
    with pytest.raises(ValidationError) as caught:
        prepare_bootstrap({"namespaces": {"story": {"definition": make.definition(), "initialValue": bad}}})
    assert [(p.code, p.pointer) for p in caught.value.problems] == [("state.value.schema_violation", "/namespaces/story/initialValue/day")]
    assert validate_bootstrap({"ns": {}})[0].code == "state.bootstrap.invalid"
    assert [
        p.code for p in validate_bootstrap({"namespaces": {"a b": {"definition": make.definition(), "initialValue": make.value()}}})
    ] == ["state.namespace.name_invalid"]
    assert [p.code for p in validate_bootstrap({"namespaces": {"s": {"definition": make.definition()}}})] == [
        "state.bootstrap.field_missing"
    ]


def test_a_namespace_that_fails_bootstrap_is_kept_read_only_with_diagnostics(make):
    definition = make.definition()
    definition["schema"]["anyOf"] = []
    projection = apply_bootstrap(empty_projection(), {"namespaces": {"story": {"definition": definition, "initialValue": make.value()}}})
    entry = projection["namespaces"]["story"]
    assert entry["definition"]["updateMode"] == "disabled"
    assert entry["value"] == make.value()
    assert [(d["code"], d.get("pointer")) for d in entry["diagnostics"]["setup"]] == [
        ("state.bootstrap.namespace_disabled", ""),
        ("state.schema.composition_forbidden", "/definition/schema/anyOf"),
    ]


def test_garbage_bootstraps_fold_to_no_change():
    projection = empty_projection()
    assert apply_bootstrap(projection, "x") == projection
    assert fold(empty_view(), "bootstrap", None) == empty_view()


def commit(projection, changes):
    revision = projection["namespaces"]["story"]["revision"]
    effect = {"kind": "state.update", "namespace": "story", "expectedRevision": revision, "payload": {"changes": changes}}
    return prepare_commit(projection, [effect])


def inc(by, rule="liyu-affection"):
    return {"op": "increment", "path": AFF, "by": by, "ruleId": rule, "reason": "r"}


def test_commit_advances_namespace_and_projection_revisions(make):
    projection = make.bootstrapped()
    after = apply_commit(projection, commit(projection, [inc(3)]))
    assert after["revision"] == 2 and after["namespaces"]["story"]["revision"] == 2
    assert after["namespaces"]["story"]["value"]["characters"]["李钰"]["好感度"] == 13
    assert after["namespaces"]["story"]["initialValue"] == projection["namespaces"]["story"]["initialValue"]


def test_last_commit_diagnostics_come_only_from_the_latest_successful_commit(make):
    projection = make.bootstrapped()
    weather = [{"op": "set", "path": "/weather", "value": "雨", "ruleId": "weather", "reason": "r"}]
    missed = apply_commit(projection, commit(projection, weather))
    assert [d["code"] for d in missed["namespaces"]["story"]["diagnostics"]["lastCommit"]] == ["state.rule.every_turn_missing"]
    done = apply_commit(missed, commit(missed, [inc(1)]))
    assert done["namespaces"]["story"]["diagnostics"]["lastCommit"] == []
    # A failing commit is not successful and does not touch the diagnostics.
    stale = {"effects": [{"kind": "state.update", "namespace": "story", "expectedRevision": 1, "payload": {"changes": [inc(1)]}}]}
    assert apply_commit(missed, stale) == missed
    with pytest.raises(ValidationError):
        prepare_commit(missed, stale["effects"])


def test_a_reply_without_updates_still_reports_every_turn_expectations(make):
    projection = make.bootstrapped()
    after = apply_commit(projection, prepare_commit(projection, []))
    assert after["namespaces"]["story"]["revision"] == 1 and after["revision"] == 2
    assert [d["code"] for d in after["namespaces"]["story"]["diagnostics"]["lastCommit"]] == ["state.rule.every_turn_missing"]


def test_config_takes_effect_immediately_and_clears_last_commit(make):
    projection = make.bootstrapped()
    projection = apply_commit(
        projection, commit(projection, [{"op": "set", "path": "/weather", "value": "雨", "ruleId": "weather", "reason": "r"}])
    )
    result = plan_config(projection, {"action": "reset", "expectedRevision": 2})
    after = apply_config(projection, result)
    assert after["namespaces"]["story"]["value"] == make.value()
    assert after["namespaces"]["story"]["diagnostics"]["lastCommit"] == []


def test_corrupt_config_results_fold_to_no_change(make):
    projection = make.bootstrapped()
    result = plan_config(projection, {"action": "reset", "expectedRevision": 1})
    result["entry"]["value"] = {"day": "x"}
    assert apply_config(projection, result) == projection
    assert apply_config(projection, {"action": "explode"}) == projection
    assert apply_config(projection, {"action": "delete", "namespace": "ghost"}) == projection


# --- replay ---------------------------------------------------------------------------------------


def entities(make):
    """bootstrap, config(update → schema-only), commit A, commit B, built against live projections."""
    log = []
    view = empty_view()

    def add(kind, payload):
        nonlocal view
        log.append((kind, payload))
        view = fold(view, kind, payload)

    add("bootstrap", bootstrap_payload(make.definition(), make.value()))
    add("commit", commit(view["state"], [inc(2)]))
    add("config", plan_config(view["state"], {"action": "update", "expectedRevision": 2, "definition": make.definition("schema-only")}))
    add("commit", commit(view["state"], [{"op": "set", "path": "/weather", "value": "雪", "reason": "r"}]))
    return log, view


def replay(log):
    view = empty_view()
    for kind, payload in log:
        view = fold(view, kind, payload)
    return view


def test_rebuilding_from_entities_equals_the_incremental_result(make):
    log, live = entities(make)
    assert canonical_json(replay(log)) == canonical_json(live)


def test_retracting_a_reply_rebuilds_from_the_remaining_entities(make):
    log, _ = entities(make)
    without_last = replay(log[:-1])
    assert without_last["state"]["namespaces"]["story"]["value"].get("weather") is None
    assert without_last["state"]["namespaces"]["story"]["definition"]["updateMode"] == "schema-only"
    # Retracting the reply that owned the configuration retracts it and everything after it.
    before_config = replay(log[:2])
    assert before_config["state"]["namespaces"]["story"]["definition"]["updateMode"] == "rules-required"
    assert before_config["activity"]["namespaces"]["story"][0]["after"] == 12


def test_bootstrap_is_never_retracted_by_reply_deletion(make):
    log, _ = entities(make)
    only_bootstrap = replay([e for e in log if e[0] == "bootstrap"])
    assert only_bootstrap["state"]["namespaces"]["story"]["value"] == make.value()


def test_a_commit_that_no_longer_applies_on_replay_is_skipped(make):
    log, _ = entities(make)
    # Drop the first commit but keep the later configuration and commit (e.g. a non-owned entity).
    view = replay([log[0], log[2], log[3]])
    story = view["state"]["namespaces"]["story"]
    # The configuration result is self-contained (it stored the complete value it kept), so it
    # installs as recorded at revision 1 -> 2; the later commit expected revision 3 and is skipped.
    assert story["revision"] == 2
    assert story["definition"]["updateMode"] == "schema-only"
    assert story["value"]["characters"]["李钰"]["好感度"] == 12
    assert "weather" not in story["value"]
    assert view["activity"] == empty_activity()


# --- activity -------------------------------------------------------------------------------------


def test_activity_shows_the_latest_successful_reply(make):
    log, live = entities(make)
    assert live["activity"] == {
        "namespaces": {"story": [{"changeIndex": 0, "op": "set", "path": "/weather", "reason": "r", "after": "雪"}]}
    }
    after_first_commit = replay(log[:2])["activity"]["namespaces"]["story"]
    assert after_first_commit == [
        {"changeIndex": 0, "op": "increment", "path": AFF, "reason": "r", "ruleId": "liyu-affection", "before": 10, "after": 12}
    ]


def test_a_reply_with_no_updates_clears_the_activity(make):
    log, live = entities(make)
    view = fold(live, "commit", {"effects": []})
    assert view["activity"] == empty_activity()


def test_configuration_and_reinitialisation_clear_the_activity(make):
    log, live = entities(make)
    assert replay(log[:3])["activity"] == empty_activity()  # config after a commit
    reset = plan_config(live["state"], {"action": "reset", "expectedRevision": live["state"]["namespaces"]["story"]["revision"]})
    assert fold(live, "config", reset)["activity"] == empty_activity()
    assert fold(live, "bootstrap", bootstrap_payload(make.definition(), make.value()))["activity"] == empty_activity()


def test_a_failed_entity_leaves_both_projections_alone(make):
    _, live = entities(make)
    stale = {"effects": [{"kind": "state.update", "namespace": "story", "expectedRevision": 1, "payload": {"changes": [inc(1)]}}]}
    assert fold(live, "commit", stale) == live
    assert fold(live, "unknown-kind", {}) == live


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=40)
@given(cut=st.integers(0, 4))
def test_property_replaying_any_prefix_equals_folding_it_live(make, cut):
    log, _ = entities(make)
    incremental = empty_view()
    for kind, payload in log[:cut]:
        incremental = fold(incremental, kind, payload)
    assert canonical_json(replay(log[:cut])) == canonical_json(incremental)
