"""The player's input lines: plain lines from a pipe, prompt_toolkit only at a terminal."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from roleplay.core.line_editor import LineReader, history_path
from roleplay.errors import RpError

pytestmark = pytest.mark.anyio


class Piped(io.BytesIO):
    def isatty(self) -> bool:
        return False


async def test_a_pipe_reads_strict_utf8_lines_and_prefills_nothing(tmp_path: Path) -> None:
    lines = "一行\r\nsecond\n".encode() + b"\xff\n"
    reader = LineReader(tmp_path, stdin=io.TextIOWrapper(Piped(lines), encoding="utf-8"))
    assert not reader.terminal and not reader.prefills
    assert await reader.read(1, default="ignored here") == "一行"
    assert await reader.read(2) == "second"
    with pytest.raises(RpError) as bad:
        await reader.read(3)
    assert bad.value.code == "cli.input.invalid_utf8" and bad.value.details["line"] == 3
    assert await reader.read(4) is None  # the end of input
    assert not (tmp_path / "history").exists()  # no history outside a terminal


async def test_prompt_toolkit_is_not_imported_for_a_pipe(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import asyncio, io, sys\n"
        "from roleplay.core.line_editor import LineReader\n"
        "r = LineReader(None)\n"
        "print(asyncio.run(r.read(1)), 'prompt_toolkit' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=b"hello\n", capture_output=True, timeout=60)
    assert out.stdout.decode().split() == ["hello", "False"], out.stderr.decode()


def test_the_history_lives_in_the_home() -> None:
    assert history_path(Path("/h")) == Path("/h/history/play")
    assert history_path(None) is None
