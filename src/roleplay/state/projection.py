"""Pure folds of the ``rp/state`` and ``rp/state/activity`` projections.

The event-log wiring feeds three kinds of entity in business-root sequence order:

* ``bootstrap`` (session creation or a blank session re-choosing its opening): replaces all
  namespaces; never message-owned, never retracted;
* ``config``: a stored :func:`roleplay.state.config.plan_config` result;
* ``commit``: the state effects of a successful ``rp_commit_turn`` (possibly none).

Retracting a reply (delete, regenerate) is expressed by folding the remaining entities again from
the start, so the folds hold no hidden state and are total: an entity that no longer applies
during such a replay (a commit whose ``expectedRevision`` now disagrees, say) is skipped and
changes nothing, exactly like a failed command at write time.

The activity view holds the per-change records (op, before, after, reason) of the latest
still-effective successful reply. A reply without state updates, any configuration and any
bootstrap clear it.
"""

from __future__ import annotations

from typing import Any, Mapping

from roleplay.errors import Problem, RpError, ValidationError
from roleplay.state.definition import (
    DEFAULT_NAMESPACE,
    definition_warnings,
    namespace_name_problems,
    plain_copy,
    validate_namespace_content,
)
from roleplay.state.limits import MAX_NAMESPACES
from roleplay.state.pointers import closed_object_problems
from roleplay.state.schema import check_plain_json
from roleplay.state.shape import empty_activity, empty_projection, namespace_entry, with_namespaces
from roleplay.state.update import UpdateOutcome, execute_updates

ENTITY_KINDS = ("bootstrap", "config", "commit")


# --- bootstrap ---------------------------------------------------------------------------------


def bootstrap_payload(
    definition: dict, initial_value: Any, *, namespace: str = DEFAULT_NAMESPACE, setup_diagnostics: list | tuple = ()
) -> dict[str, Any]:
    """A one-namespace bootstrap (``story`` unless told otherwise), validated and canonical."""
    entry: dict[str, Any] = {"definition": definition, "initialValue": initial_value}
    if setup_diagnostics:
        entry["setupDiagnostics"] = [p.to_dict() if isinstance(p, Problem) else p for p in setup_diagnostics]
    return prepare_bootstrap({"namespaces": {namespace: entry}})


def validate_bootstrap(payload: Any) -> list[Problem]:
    if not isinstance(payload, dict) or set(payload) != {"namespaces"} or not isinstance(payload["namespaces"], dict):
        return [Problem("state.bootstrap.invalid", 'a bootstrap is {"namespaces": {name: {definition, initialValue}}}', "")]
    namespaces = payload["namespaces"]
    if len(namespaces) > MAX_NAMESPACES:
        return [Problem("state.bootstrap.too_many_namespaces", f"at most {MAX_NAMESPACES} namespaces", "/namespaces")]
    problems: list[Problem] = []
    for name in sorted(namespaces, key=str):
        base = f"/namespaces/{_escape(name)}"
        problems.extend(namespace_name_problems(name, base))
        problems.extend(_bootstrap_entry_problems(namespaces[name], base))
    return problems


def _escape(name: Any) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")


def _bootstrap_entry_problems(entry: Any, base: str) -> list[Problem]:
    if not isinstance(entry, dict):
        return [Problem("state.bootstrap.entry_invalid", "a bootstrap namespace is an object", base)]
    problems = closed_object_problems(
        entry,
        ("definition", "initialValue"),
        ("setupDiagnostics",),
        code="state.bootstrap",
        unknown="bootstrap",
        needs="a bootstrap namespace needs",
        base=base,
    )
    setup = entry.get("setupDiagnostics", [])
    if not (isinstance(setup, list) and all(isinstance(d, dict) and isinstance(d.get("code"), str) for d in setup)):
        problems.append(
            Problem("state.bootstrap.diagnostics_invalid", "setupDiagnostics is a list of {code, message}", f"{base}/setupDiagnostics")
        )
    else:
        problems.extend(check_plain_json(setup, f"{base}/setupDiagnostics"))
    if "definition" in entry and "initialValue" in entry:
        # The current value starts as the initial value, so one check covers both.
        problems.extend(validate_namespace_content(entry["definition"], {"initialValue": entry["initialValue"]}, base))
    return problems


def prepare_bootstrap(payload: Any) -> dict[str, Any]:
    problems = validate_bootstrap(payload)
    if problems:
        raise ValidationError("state.bootstrap.rejected", "the state bootstrap was rejected", problems=problems)
    return plain_copy(payload)


def apply_bootstrap(projection: Mapping[str, Any], payload: Any) -> dict[str, Any]:
    """Replace every namespace. A namespace that does not validate fails closed: it is kept as a
    read-only (``disabled``) partition with an unconstrained schema and setup diagnostics saying
    why, so neither its data nor the reason is lost and story commits cannot write it."""
    if not isinstance(payload, dict) or not isinstance(payload.get("namespaces"), dict):
        return dict(projection)
    namespaces: dict[str, Any] = {}
    for name in sorted(payload["namespaces"], key=str)[:MAX_NAMESPACES]:
        if namespace_name_problems(name):
            continue
        entry = payload["namespaces"][name]
        base = f"/namespaces/{name}"
        problems = _bootstrap_entry_problems(entry, base)
        if not problems:
            definition = plain_copy(entry["definition"])
            initial = plain_copy(entry["initialValue"])
            setup = [*entry.get("setupDiagnostics", []), *definition_warnings(definition)]
            namespaces[name] = namespace_entry(revision=1, definition=definition, initial_value=initial, value=initial, setup=setup)
            continue
        raw = entry.get("initialValue") if isinstance(entry, dict) else None
        initial = plain_copy(raw) if not check_plain_json(raw) else None
        reasons = [Problem(p.code, p.message, (p.pointer or "")[len(base) :], p.details) for p in problems]
        namespaces[name] = namespace_entry(
            revision=1,
            definition={"title": name, "updateMode": "disabled", "schema": {}, "rules": []},
            initial_value=initial,
            value=initial,
            setup=[
                Problem("state.bootstrap.namespace_disabled", "the bootstrap for this namespace did not validate; it is read-only", ""),
                *reasons,
            ],
        )
    return with_namespaces(dict(projection), namespaces)


# --- configuration -----------------------------------------------------------------------------


def apply_config(projection: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """Install a stored configuration result (see :mod:`roleplay.state.config`)."""
    if not isinstance(result, dict) or result.get("action") not in ("create", "update", "reset", "delete"):
        return dict(projection)
    name = result.get("namespace")
    if namespace_name_problems(name):
        return dict(projection)
    namespaces = dict(projection["namespaces"])
    if result["action"] == "delete":
        if name not in namespaces:
            return dict(projection)
        del namespaces[name]
        return with_namespaces(dict(projection), namespaces)
    entry = result.get("entry")
    if not _stored_entry_ok(entry) or (name not in namespaces and len(namespaces) >= MAX_NAMESPACES):
        return dict(projection)
    previous = namespaces.get(name)
    installed = plain_copy(entry)
    installed["revision"] = (previous["revision"] if previous is not None else 0) + 1
    installed["diagnostics"]["lastCommit"] = []
    namespaces[name] = installed
    return with_namespaces(dict(projection), namespaces)


def _stored_entry_ok(entry: Any) -> bool:
    # Stored results were validated at write time; re-checking keeps the fold total even for a
    # hand-edited or corrupted log (the invariant "definition and values validate" must hold).
    if not isinstance(entry, dict) or not isinstance(entry.get("diagnostics"), dict):
        return False
    if not all(k in entry for k in ("definition", "initialValue", "value")):
        return False
    values = {"initialValue": entry["initialValue"], "value": entry["value"]}
    return not validate_namespace_content(entry["definition"], values)


# --- story commits -----------------------------------------------------------------------------


def prepare_commit(projection: Mapping[str, Any], effects: Any, pointer_prefix: str = "/effects") -> dict[str, Any]:
    """Validate the state effects of a turn commit; the returned payload is what gets stored.

    Raises :class:`ValidationError` ``state.update.rejected`` (pointers under ``pointer_prefix``).
    """
    execute_updates(projection, effects, pointer_prefix)
    return {"effects": plain_copy(effects)}


def _run_commit(projection: Mapping[str, Any], payload: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    if not isinstance(payload, dict) or "effects" not in payload:
        return None
    try:
        outcome = execute_updates(projection, payload["effects"], "/effects")
    except RpError:
        return None
    return _committed(projection, outcome), _activity(outcome)


def _committed(projection: Mapping[str, Any], outcome: UpdateOutcome) -> dict[str, Any]:
    namespaces: dict[str, Any] = {}
    for name, entry in projection["namespaces"].items():
        updated = dict(entry)
        updated["diagnostics"] = {
            "setup": entry["diagnostics"]["setup"],
            "lastCommit": [p.to_dict() for p in outcome.diagnostics.get(name, [])],
        }
        if name in outcome.values:
            updated["value"] = outcome.values[name]
            updated["revision"] = entry["revision"] + 1
        namespaces[name] = updated
    return with_namespaces(dict(projection), namespaces)


def _activity(outcome: UpdateOutcome) -> dict[str, Any]:
    grouped: dict[str, list[dict]] = {}
    for record in outcome.records:
        item = {k: v for k, v in record.items() if k != "namespace"}
        grouped.setdefault(record["namespace"], []).append(item)
    return {"namespaces": dict(sorted(grouped.items()))}


def apply_commit(projection: Mapping[str, Any], payload: Any) -> dict[str, Any]:
    """Fold a successful turn commit (``{"effects": [...]}``, the list may be empty)."""
    result = _run_commit(projection, payload)
    return dict(projection) if result is None else result[0]


# --- both projections at once ------------------------------------------------------------------


def empty_view() -> dict[str, Any]:
    return {"state": empty_projection(), "activity": empty_activity()}


def fold(view: Mapping[str, Any], kind: str, payload: Any) -> dict[str, Any]:
    """Fold one entity into ``{"state": rp/state, "activity": rp/state/activity}``.

    An entity that does not apply leaves both projections as they were: it never happened.
    """
    state = view["state"]
    if kind == "commit":
        result = _run_commit(state, payload)
        if result is None:
            return dict(view)
        return {"state": result[0], "activity": result[1]}
    if kind == "bootstrap":
        new_state = apply_bootstrap(state, payload)
    elif kind == "config":
        new_state = apply_config(state, payload)
    else:
        return dict(view)
    if new_state["revision"] == state["revision"]:
        return dict(view)
    return {"state": new_state, "activity": empty_activity()}
