"""`rp state check` through click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from roleplay.state.cli import state_group

AFF = "/characters/李钰/好感度"


@pytest.fixture
def files(tmp_path, make):
    def write(name, data):
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data, ensure_ascii=False), encoding="utf-8")
        return str(path)

    return write


def run(*args):
    result = CliRunner().invoke(state_group, ["check", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def errors(out):
    """The problems of an ``{"error": …}`` document, each with the file it points into."""
    return [{**p, "source": p["details"]["source"]} for p in out["error"]["problems"]]


def test_valid_definition_value_and_updates(files, make):
    definition = files("def.json", make.definition())
    value = files("value.json", make.value())
    first = files("u1.json", make.effect([make.change("increment", AFF, by=2, rule="liyu-affection")], revision=1))
    second = files("u2.json", [make.effect([make.change("set", "/weather", value="雨", rule="weather")], revision=2)])
    code, out = run(definition, "--value", value, "--update", first, "--update", second)
    assert code == 0 and out["ok"] is True
    story = out["projection"]["namespaces"]["story"]
    assert story["revision"] == 3 and story["value"]["characters"]["李钰"]["好感度"] == 12 and story["value"]["weather"] == "雨"
    assert [d["code"] for d in story["diagnostics"]["lastCommit"]] == ["state.rule.every_turn_missing"]
    assert out["activity"]["namespaces"]["story"][0]["after"] == "雨"


def test_definition_only(files, make):
    code, out = run(files("def.json", make.definition()))
    assert code == 0 and out == {"ok": True, "definition": make.definition()}


def test_definition_errors_are_all_listed_with_pointers(files, make):
    definition = make.definition()
    definition["schema"]["properties"]["day"]["$ref"] = "#/x"
    definition["schema"]["properties"]["weather"]["pattern"] = "^."
    definition["owner"] = "李钰"
    path = files("def.json", definition)
    code, out = run(path)
    assert code == 1 and "ok" not in out
    assert [(e["source"], e["code"], e["pointer"]) for e in errors(out)] == [
        (path, "state.definition.field_unknown", "/owner"),
        (path, "state.schema.ref_forbidden", "/schema/properties/day/$ref"),
        (path, "state.schema.pattern_forbidden", "/schema/properties/weather/pattern"),
    ]


def test_update_errors_point_into_the_update_file(files, make):
    definition = files("def.json", make.definition())
    value = files("value.json", make.value())
    bad = files(
        "bad.json",
        make.effect([{"op": "merge", "path": "", "value": {}}, make.change("increment", AFF, by=float("nan"), rule="liyu-affection")]),
    )
    code, out = run(definition, "--value", value, "--update", bad)
    assert code == 1
    assert [(e["code"], e["pointer"]) for e in errors(out)] == [
        ("state.update.op_unsupported", "/payload/changes/0/op"),
        ("state.update.reason_missing", "/payload/changes/0/reason"),
        ("state.update.rule_required", "/payload/changes/0/ruleId"),
        ("state.update.by_invalid", "/payload/changes/1/by"),
        ("state.update.path_conflict", "/payload/changes/1/path"),
    ]
    assert all(e["source"] == bad for e in errors(out))


def test_value_errors_and_bad_json(files, make):
    definition = files("def.json", make.definition())
    code, out = run(definition, "--value", files("v.json", {"day": 0, "characters": {}}))
    assert code == 1 and [(e["code"], e["pointer"]) for e in errors(out)] == [("state.value.schema_violation", "/day")]
    code, out = run(files("broken.json", "{nope"))
    assert code == 1 and errors(out)[0]["code"] == "state.cli.json_invalid"
    code, out = run(definition, "--update", files("u.json", []))
    assert code == 1 and errors(out)[0]["code"] == "state.cli.value_required"


def test_stale_revision_in_a_later_update(files, make):
    definition = files("def.json", make.definition())
    value = files("value.json", make.value())
    update = files("u.json", make.effect([make.change("increment", AFF, by=1, rule="liyu-affection")], revision=1))
    code, out = run(definition, "--value", value, "--update", update, "--update", update)
    assert code == 1 and [(e["code"], e["pointer"]) for e in errors(out)] == [("state.update.revision_mismatch", "/expectedRevision")]


def test_namespace_option(files, make):
    definition = files("def.json", make.definition("schema-only"))
    value = files("value.json", make.value())
    code, out = run(definition, "--value", value, "--namespace", "world")
    assert code == 0 and list(out["projection"]["namespaces"]) == ["world"]
    code, out = run(definition, "--value", value, "--namespace", "bad name")
    assert code == 1 and errors(out)[0]["code"] == "state.namespace.name_invalid"


def test_check_prints_a_summary_without_json_and_errors_in_the_common_format(files, make):
    definition = files("def.json", make.definition())
    value = files("value.json", make.value())
    update = files("u.json", make.effect([make.change("increment", AFF, by=2, rule="liyu-affection")], revision=1))
    result = CliRunner().invoke(state_group, ["check", definition, "--value", value, "--update", update])
    assert result.exit_code == 0 and result.stdout.startswith(f"ok: {definition} with {value}, 1 update(s) applied\n")
    assert json.loads(result.stdout.split("\n", 1)[1])["story"]["characters"]["李钰"]["好感度"] == 12

    bad = make.definition()
    bad["owner"] = "李钰"
    bad["schema"]["properties"]["day"]["$ref"] = "#/x"
    path = files("bad.json", bad)
    result = CliRunner().invoke(state_group, ["check", path])
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"error [state.definition.field_unknown]: {path}: " + lines[0].split(f"{path}: ", 1)[1]
    assert lines[0].endswith("(at /owner)") and lines[1].startswith("  also [state.schema.ref_forbidden]")
    code, out = run(path)
    assert code == 1 and out["error"]["code"] == "state.definition.field_unknown" and out["error"]["details"]["source"] == path


def test_state_show_reads_a_story(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from roleplay.cli import cli
    from roleplay.cli_context import CliState

    env = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(cli, ["--home", str(tmp_path), *args], env=env, obj=CliState())

    sid = json.loads(invoke("new", "--sample", "--json").stdout)["sessionId"]
    shown = json.loads(invoke("state", "show", sid, "--json").stdout)
    story = shown["namespaces"]["story"]
    assert shown["sessionId"] == sid and story["revision"] == 1 and story["value"]["林汐"]["信任"] == 20 and story["lastChanges"] == []
    plain = invoke("state", "show", sid)
    assert plain.exit_code == 0 and plain.stdout.startswith("story (revision 1)")
    missing = invoke("state", "show", "ses_nope")
    assert missing.exit_code == 1 and "session.not_found" in missing.stderr
