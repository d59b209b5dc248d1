"""``rp state``: check a namespace definition and simulate story updates against it, offline.

The main CLI attaches :data:`state_group` with ``add_command``. With ``--json`` the result is the
resulting projection (and the activity view of the last update) on stdout; without, a summary and
the namespaces' values. Errors use the format of every ``rp`` command (``error [code]: message``
on stderr, or ``{"error": {…, "problems": […]}}`` with ``--json``): every problem is listed, each
with its ``source`` file (``details.source``) and a JSON Pointer into that file. Exit code 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from roleplay.cli_context import fail, home_option, json_option, json_text, run, state_of, terminal_safe
from roleplay.errors import Problem, RpError
from roleplay.state.definition import DEFAULT_NAMESPACE, validate_definition
from roleplay.state.projection import bootstrap_payload, empty_view, fold
from roleplay.state.schema import validate_value
from roleplay.state.update import execute_updates


class _Failed(Exception):
    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("check failed")
        self.errors = errors


def _error(source: str, problem: Problem) -> dict[str, Any]:
    return {"source": source, **problem.to_dict()}


def _load(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise _Failed(
            [_error(path, Problem("state.cli.json_invalid", f"not JSON: {exc.msg}", None, {"line": exc.lineno, "column": exc.colno}))]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _Failed([_error(path, Problem("state.cli.unreadable", str(exc)))]) from None


def _emit(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2))


def run_check(definition_path: str, value_path: str | None, update_paths: tuple[str, ...], namespace: str) -> dict[str, Any]:
    """The check as a function: returns the success document or raises :class:`_Failed`."""
    definition = _load(definition_path)
    errors = [_error(definition_path, p) for p in validate_definition(definition)]
    if errors:
        raise _Failed(errors)
    if value_path is None:
        if update_paths:
            raise _Failed([_error(definition_path, Problem("state.cli.value_required", "--update needs --value (the initial value)"))])
        return {"ok": True, "definition": definition}
    value = _load(value_path)
    errors = [_error(value_path, p) for p in validate_value(definition["schema"], value)]
    if errors:
        raise _Failed(errors)
    try:
        view = fold(empty_view(), "bootstrap", bootstrap_payload(definition, value, namespace=namespace))
    except RpError as exc:  # only the namespace id can still be wrong here
        raise _Failed([_error("--namespace", p) for p in exc.problems] or [_error("--namespace", Problem(exc.code, exc.message))]) from None
    for path in update_paths:
        document = _load(path)
        single = isinstance(document, dict)
        effects = [document] if single else document
        try:
            execute_updates(view["state"], effects)
        except RpError as exc:
            raise _Failed([_error(path, _relative(p, single)) for p in exc.problems]) from None
        view = fold(view, "commit", {"effects": effects})
    return {"ok": True, "projection": view["state"], "activity": view["activity"]}


def _relative(problem: Problem, single: bool) -> Problem:
    # A file holding one effect object is addressed from its root, not as element 0 of a list.
    if single and problem.pointer is not None and (problem.pointer == "/0" or problem.pointer.startswith("/0/")):
        problem.pointer = problem.pointer[2:]
    return problem


@click.group("state")
def state_group() -> None:
    """Check rp.state v2 namespace definitions and simulate state.update effects."""


@state_group.command("check")
@click.argument("definition", type=click.Path(exists=True, dir_okay=False))
@click.option("--value", "value_path", type=click.Path(exists=True, dir_okay=False), help="Initial value JSON.")
@click.option(
    "--update",
    "update_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="A state.update effect (object) or a commit's effect list (array); repeatable, applied in order. "
    "The namespace starts at revision 1 and each applied update adds 1.",
)
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True, help="Namespace id to simulate.")
@json_option
def check(definition: str, value_path: str | None, update_paths: tuple[str, ...], namespace: str, as_json: bool) -> None:
    """Validate DEFINITION (and --value), then apply each --update."""
    try:
        document = run_check(definition, value_path, update_paths, namespace)
    except _Failed as failed:
        fail(check_error(failed.errors), as_json)
        return
    if as_json:
        _emit(document)
    elif "definition" in document:
        click.echo(terminal_safe(f"ok: {definition} is a valid definition", one_line=True))
    else:
        applied = len(update_paths)
        click.echo(terminal_safe(f"ok: {definition} with {value_path}, {applied} update(s) applied", one_line=True))
        values = {name: ns["value"] for name, ns in document["projection"].get("namespaces", {}).items()}
        click.echo(json_text(values))


def check_error(errors: list[dict[str, Any]]) -> RpError:
    """The check's problems as one error: the first problem's code and message, every problem
    listed, each naming its file in ``details.source`` (pointers are into that file)."""
    problems = [
        Problem(e["code"], f"{e['source']}: {e['message']}", e.get("pointer"), {**e.get("details", {}), "source": e["source"]})
        for e in errors
    ]
    first = problems[0]
    return RpError(first.code, first.message, pointer=first.pointer, details=first.details, problems=problems)


@state_group.command("show")
@home_option
@click.argument("session_id")
@json_option
@click.pass_context
@run
async def show(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """The current story state of SESSION_ID: each namespace's value, revision and last changes."""
    from roleplay.harness.projections import load
    from roleplay.state.events import activity_document, state_document, state_projection

    async with state_of(ctx).open_store() as store:
        tracker = (await load(store, session_id, state_projection, snapshot_every=None)).state
    document, activity = state_document(tracker), activity_document(tracker)
    namespaces = {
        name: {"revision": ns.get("revision"), "value": ns.get("value"), "lastChanges": activity.get("namespaces", {}).get(name, [])}
        for name, ns in document.get("namespaces", {}).items()
    }
    if as_json:
        _emit({"sessionId": session_id, "revision": document.get("revision", 0), "namespaces": namespaces})
        return
    if not namespaces:
        click.echo("(this story has no state)", err=True)
    for name, ns in namespaces.items():
        click.echo(terminal_safe(f"{name} (revision {ns['revision']})", one_line=True))
        click.echo(json_text(ns["value"]))
