"""The terminal boundary shared by every ``rp`` command (``roleplay.cli_context``): undecodable
arguments are refused with a code, and text from assets is printed inert."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from roleplay.cli import cli as rp
from roleplay.cli_context import CliState, check_text_args, json_text, terminal_safe
from roleplay.errors import RpError


@pytest.mark.parametrize("args", [
    ["say", "ses_x", "\udcff"],  # what `rp say ses_x $'\xff'` delivers under a UTF-8 locale
    ["say", "\udce9t\udce9", "hello"],
    ["new", "--card", "ast_x", "--title", "caf\udce9", "--model", "demo"],
])
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
