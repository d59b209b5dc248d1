"""The terminal boundary shared by every ``rp`` command (``roleplay.cli_context``): undecodable
arguments are refused with a code, and text from assets is printed inert."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from roleplay.cli import cli as rp
from roleplay.cli_context import CliState, check_text_args, json_text, terminal_safe
from roleplay.errors import RpError


@pytest.mark.parametrize(
    "args",
    [
        ["say", "ses_x", "\udcff"],  # what `rp say ses_x $'\xff'` delivers under a UTF-8 locale
        ["say", "\udce9t\udce9", "hello"],
        ["new", "--card", "ast_x", "--title", "caf\udce9", "--model", "demo"],
    ],
)
def test_arguments_that_are_not_utf8_are_refused_with_a_code_not_a_traceback(tmp_path, args):
    result = CliRunner().invoke(rp, args, env={"RP_HOME": str(tmp_path), "RP_DATABASE_URL": ""}, obj=CliState())
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "error [cli.arg.invalid_utf8]" in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # refused before the command opened anything


def test_check_text_args_names_the_argument_and_the_byte():
    with pytest.raises(RpError) as info:
        check_text_args({"session_id": "ok", "text": "ab\udcff", "tags": ("x",)})
    assert (info.value.code, info.value.pointer) == ("cli.arg.invalid_utf8", "/text")
    assert "byte 0xff at offset 2" in info.value.message
    check_text_args({"text": "naïve 👩\u200d💻", "count": 3, "path": None})


def test_terminal_safe_shows_escapes_instead_of_sending_them():
    hostile = "Mal\x1b]0;owned\x07lory\x1b[2J\r\nnext\x9b\u202eevil\udcff\tok"
    shown = terminal_safe(hostile)
    assert shown == "Mal\\x1b]0;owned\\x07lory\\x1b[2J\nnext\\x9b\\u202eevil\\udcff\tok"
    shown.encode("utf-8")  # printable now
    assert terminal_safe("a\nb\tc\u2028", one_line=True) == "a\\x0ab\\x09c\\u2028"


def test_terminal_safe_keeps_real_text():
    text = "Line\nשלום\u200f 👩\u200d💻 می\u200cخواهم </section> ❤\ufe0f"
    assert terminal_safe(text) == text


def test_json_output_escapes_what_json_dumps_leaves_raw():
    value = {"name": "a\x9b\u202e\udcff\x1b\x7f", "ok": "中文 👩\u200d💻"}
    text = json_text(value)
    assert json.loads(text) == value
    text.encode("utf-8")
    assert "中文 👩\u200d💻" in text and not any(c in text for c in "\x9b\u202e\x1b\x7f")


def test_errors_quoting_hostile_text_print_inert(capsys):
    from roleplay.cli_context import fail

    with pytest.raises(SystemExit):
        fail(RpError("card.invalid", "name 'Evil\x1b[31m\nline' is bad", pointer="/data/na\u202eme"))
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [
        ["models", "test", "--model", "demo", "--prompt", "caf\udce9"],
        ["state", "check", "{definition}", "--namespace", "n\udcff"],
        ["mvu", "inspect", "{definition}", "--user", "\udcff"],
    ],
)
def test_commands_without_run_refuse_undecodable_arguments_too(tmp_path, args):
    definition = tmp_path / "def.json"
    definition.write_text("{}")
    args = [a.replace("{definition}", str(definition)) for a in args]
    result = CliRunner().invoke(rp, args, env={"RP_HOME": str(tmp_path), "RP_DATABASE_URL": ""}, obj=CliState())
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "error [cli.arg.invalid_utf8]" in result.stderr and "Traceback" not in result.stderr


def test_a_file_name_that_is_not_utf8_is_left_to_the_file_system(tmp_path):
    # File names are bytes on POSIX: `rp state check $'caf\xe9.json'` must find the file, not be
    # refused as text.
    name = tmp_path / "caf\udce9.json"
    name.write_text('{"type": "object"}')
    result = CliRunner().invoke(rp, ["state", "check", str(name)], env={"RP_HOME": str(tmp_path)}, obj=CliState())
    assert "cli.arg.invalid_utf8" not in result.output, result.output


def test_terminal_safe_stream_neutralises_what_is_split_across_chunks():
    import io

    from roleplay.cli_context import TerminalSafeStream

    sink = io.StringIO()
    stream = TerminalSafeStream(sink)
    for chunk in ["Hi \x1b", "[2J there\r", "\nnext \u202e", "evil\x9b", "31m 中文 👩\u200d", "💻 ok\r"]:
        stream.write(chunk)
        stream.flush()
    stream.close()
    assert sink.getvalue() == "Hi \\x1b[2J there\nnext \\u202eevil\\x9b31m 中文 👩\u200d💻 ok\\x0d"
    # Chunk boundaries never change the result: it is what the whole text would print as.
    whole = "Hi \x1b[2J there\r\nnext \u202eevil\x9b31m 中文 👩\u200d💻 ok\r"
    assert sink.getvalue() == terminal_safe(whole)


@pytest.mark.parametrize("raw", [b"\xff\n", b"caf\xe9\n", b"\xed\xa0\x80\n"])  # the last is an encoded lone surrogate
def test_read_text_line_refuses_input_that_is_not_utf8_and_reads_on(raw):
    import io

    from roleplay.cli_context import read_text_line

    stdin = io.TextIOWrapper(io.BytesIO(raw + "héllo 中文\r\nlast".encode()), encoding="utf-8", errors="surrogateescape")
    with pytest.raises(RpError) as info:
        read_text_line(stdin)
    assert info.value.code == "cli.input.invalid_utf8" and "offset" in info.value.details
    assert read_text_line(stdin) == "héllo 中文"
    assert read_text_line(stdin) == "last"
    assert read_text_line(stdin) is None


def test_read_text_line_from_a_text_only_stream_refuses_lone_surrogates():
    import io

    from roleplay.cli_context import read_text_line

    stdin = io.StringIO("a\ud800b\nok\n")
    with pytest.raises(RpError) as info:
        read_text_line(stdin)
    assert info.value.code == "cli.input.invalid_utf8" and info.value.details["offset"] == 1
    assert read_text_line(stdin) == "ok"


def test_a_json_line_is_one_line_with_the_same_escapes_as_json_text() -> None:
    from roleplay.cli_context import json_line

    value = {"text": "第一行\n第二行 \x7f\u202e", "n": [1, 2]}
    line = json_line(value)
    assert "\n" not in line and "\x7f" not in line and "\u202e" not in line
    assert json.loads(line) == value
