"""``rp persona|preset|style``: $EDITOR (a fake one), --file and stdin, validation that never
loses the edit, revision CAS, --json and the one error format."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState

FAKE_EDITOR = """\
import json, os, shutil, subprocess, sys
# Each run replaces the edited file with the next prepared document, and may first run a command
# (a concurrent change made while the user is in the editor).
root = os.environ["FAKE_EDITOR_DIR"]
n = len([f for f in os.listdir(root) if f.startswith("seen")]) + 1
open(os.path.join(root, f"seen{n}"), "w").write(open(sys.argv[1], encoding="utf-8").read())
hook = os.path.join(root, f"hook{n}.json")
if os.path.exists(hook):
    subprocess.run(json.load(open(hook)), check=True)
doc = os.path.join(root, f"doc{n}.yaml")
if os.path.exists(doc):
    shutil.copy(doc, sys.argv[1])
"""


class Rp:
    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.editor_dir = tmp_path / "editor"
        self.editor_dir.mkdir()
        script = tmp_path / "fake_editor.py"
        script.write_text(FAKE_EDITOR, encoding="utf-8")
        self.env = {
            "EDITOR": f"{sys.executable} {script}",
            "VISUAL": None,
            "FAKE_EDITOR_DIR": str(self.editor_dir),
            "RP_DATABASE_URL": "",
        }
        self.docs = 0

    def will_write(self, *docs: str) -> None:
        for doc in docs:
            self.docs += 1
            (self.editor_dir / f"doc{self.docs}.yaml").write_text(doc, encoding="utf-8")

    def seen(self, n: int) -> str:
        return (self.editor_dir / f"seen{n}").read_text(encoding="utf-8")

    def __call__(self, *args: str, input: str | None = None, ok: bool = True):  # type: ignore[no-untyped-def]
        result = CliRunner().invoke(cli, ["--home", str(self.home), *args], env=self.env, input=input, obj=CliState())
        if ok:
            assert result.exit_code == 0, (result.stdout, result.stderr)
        return result

    def json(self, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
        return json.loads(self(*args, "--json", input=input).stdout)


@pytest.fixture
def rp(tmp_path: Path) -> Rp:
    return Rp(tmp_path)


def test_show_prints_the_default_as_the_document_edit_opens(rp: Rp) -> None:
    shown = rp("persona", "show").stdout
    assert shown.startswith("# persona ast_") and "(default)" in shown.splitlines()[0]
    assert "\nname: User\n" in shown
    preset = rp("preset", "show").stdout
    assert "content: |-\n" in preset  # multi-line prose is a literal block, not one escaped line
    record = rp.json("style", "show")
    assert record["default"] and record["data"]["name"] == "General narrative"


def test_setting_your_name_in_the_editor(rp: Rp) -> None:
    before = rp.json("persona", "show")
    rp.will_write("name: Alex\ndescription: |\n  A courier with a limp.\n  Talks too fast.\n")
    out = rp("persona", "edit")
    assert out.stdout.startswith(f"saved persona {before['id']} (revision 2) Alex [default]")
    after = rp.json("persona", "show")
    assert after["data"] == {"name": "Alex", "description": "A courier with a limp.\nTalks too fast.\n", "avatar": None}
    assert "\nname: User\n" in rp.seen(1)  # the editor opened on the stored persona


def test_the_document_round_trips_through_show_and_edit_file(rp: Rp, tmp_path: Path) -> None:
    doc = tmp_path / "preset.yaml"
    doc.write_text(rp("preset", "show").stdout, encoding="utf-8")
    unchanged = rp.json("preset", "edit", "--file", str(doc))
    assert unchanged["revision"] == 2  # stored again, same data
    assert unchanged["data"] == rp.json("preset", "show")["data"]


def test_new_from_stdin_and_from_the_editor(rp: Rp) -> None:
    made = rp.json("style", "new", "--file", "-", input='{"name": "Terse", "requirements": "Short sentences."}')
    assert made["result"] == "created" and made["data"]["requirements"] == "Short sentences." and not made["default"]
    rp.will_write("name: Noir\nfields:\n  - title: Voice\n    position: bottom\n    content: |\n      Hard-boiled.\n")
    preset = rp.json("preset", "new", "--default")
    [field] = preset["data"]["fields"]
    assert field["id"].startswith("fld_") and field["content"] == "Hard-boiled.\n" and preset["default"]
    assert "# new preset" in rp.seen(1) and "name: ''" in rp.seen(1)  # the blank editor
    assert [r["name"] for r in rp.json("preset", "list")] == ["Example preset", "Noir"]


def test_a_refused_edit_is_kept_and_the_editor_reopens_on_it(rp: Rp) -> None:
    rp.will_write("name: ''\ndescription: my careful words\n", "name: Alex\ndescription: my careful words\n")
    out = rp("persona", "edit", input="y\n")
    assert "error [persona.invalid]" in out.stderr and "(at /name)" in out.stderr
    kept = out.stderr.split("your edit is kept in ")[1].split("\n")[0]
    assert Path(kept).read_text(encoding="utf-8") == "name: ''\ndescription: my careful words\n"
    second = rp.seen(2)
    assert second.startswith("# ! persona.") and "(at /name)" in second.splitlines()[0]
    assert "my careful words" in second  # reopened on the user's own text, not the stored one
    assert rp.json("persona", "show")["data"]["name"] == "Alex"


def test_a_refused_edit_without_a_second_try_fails_in_the_one_error_format(rp: Rp) -> None:
    rp.will_write("name: [unclosed\n")
    out = rp("persona", "edit", input="n\n", ok=False)
    assert out.exit_code == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error [asset.edit.invalid_yaml]: the document is not valid YAML at line ") and "your edit is kept in" in last
    rp.will_write("name: Bo\nname: Bo\n")
    refused = rp("persona", "edit", "--json", ok=False)
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "asset.edit.invalid_yaml" and Path(error["details"]["editKeptAt"]).is_file()
    assert rp.json("persona", "show")["revision"] == 1  # nothing stored


def test_a_file_that_breaks_the_kinds_rules_names_every_problem(rp: Rp) -> None:
    out = rp("preset", "new", "--file", "-", "--json", input='{"name": "", "fields": [{"title": "x", "position": "middle"}]}', ok=False)
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "preset.invalid"
    assert {p["pointer"] for p in error["problems"]} >= {"/name", "/fields/0/position"}
    assert "editKeptAt" not in error.get("details", {})  # a --file is the user's own copy already
    assert [r["name"] for r in rp.json("preset", "list")] == ["Example preset"]


def test_a_change_made_while_the_editor_is_open_is_a_revision_conflict(rp: Rp, tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("name: Someone else\n", encoding="utf-8")
    rp_bin = str(Path(sys.executable).with_name("rp"))
    # While the user is in the editor, another process stores its own edit (revision 2).
    hook = [rp_bin, "--home", str(rp.home), "persona", "edit", "--file", str(other)]
    (rp.editor_dir / "hook1.json").write_text(json.dumps(hook), encoding="utf-8")
    rp.will_write("name: Me\n")
    out = rp("persona", "edit", ok=False)
    assert out.exit_code == 1
    assert (
        out.stderr.startswith("error [asset.revision_conflict]: asset ") and "at revision 2, not at the expected revision 1" in out.stderr
    )
    kept = out.stderr.split("your edit is kept in ")[1].strip()
    assert Path(kept).read_text(encoding="utf-8") == "name: Me\n"
    assert rp.json("persona", "show")["data"]["name"] == "Someone else"  # the other change stands
    # scripts name the revision they read
    stale = json.loads(rp("persona", "edit", "--file", str(other), "--revision", "1", "--json", ok=False).stdout)["error"]
    assert stale["code"] == "asset.revision_conflict" and stale["details"]["currentRevision"] == 2


def test_closing_the_editor_without_a_change_stores_nothing(rp: Rp) -> None:
    out = rp("persona", "edit")
    assert "no changes; nothing was stored" in out.stderr
    assert rp.json("persona", "edit") == {"result": "unchanged"}
    assert rp.json("persona", "show")["revision"] == 1


def test_an_editor_that_cannot_start_is_a_clear_error(rp: Rp, tmp_path: Path) -> None:
    rp.env["EDITOR"] = str(tmp_path / "no-such-editor")
    out = rp("style", "new", ok=False)
    assert out.exit_code == 1 and out.stderr.startswith("error [asset.edit.editor_failed]: ") and "--file PATH" in out.stderr


def test_an_unknown_or_wrong_kind_id_is_not_found(rp: Rp) -> None:
    style = rp.json("style", "show")["id"]
    out = rp("persona", "show", style, ok=False)
    assert out.exit_code == 1 and out.stderr.startswith("error [asset.not_found]") and "is a writing-style" in out.stderr


def test_an_edited_default_persona_survives_reseeding_and_a_language_change(rp: Rp) -> None:
    rp.will_write("name: Alex\n")
    rp("persona", "edit")
    rp("settings", "set", "language", "zh")
    assert rp.json("persona", "show")["data"]["name"] == "Alex"
    assert rp.json("preset", "show")["data"]["name"] == "示例预设"  # the unedited seed switched


@pytest.mark.slow
def test_first_play_at_a_terminal_asks_for_your_name_once(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    import os

    env = {**os.environ, "RP_HOME": str(tmp_path), "RP_DATABASE_URL": "", "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    ready = "\x1b[?2004h"  # prompt_toolkit waits for a line

    def play():  # type: ignore[no-untyped-def]
        cmd = ["-c", "from roleplay.cli import main; main()", "play", "--sample", "--model", "demo"]
        child = pexpect.spawn(sys.executable, cmd, env=env, encoding="utf-8", timeout=60, dimensions=(50, 200))
        child.expect_exact(ready)
        return child

    child = play()
    assert "Stories call you 'User' until you name yourself" in child.before
    child.send("\x15Alex\r")  # Ctrl-U clears the offered name
    child.expect_exact("(stories call you Alex from now on)")
    child.expect_exact(ready)
    child.send("/quit\r")
    child.expect(pexpect.EOF)
    child.close()
    shown = CliRunner().invoke(cli, ["--home", str(tmp_path), "persona", "show", "--json"], obj=CliState())
    assert json.loads(shown.stdout)["data"]["name"] == "Alex"

    again = play()  # named: the next story starts without the question
    assert "Stories call you" not in again.before and "session " in again.before
    again.sendcontrol("d")
    again.expect(pexpect.EOF)
    again.close()
