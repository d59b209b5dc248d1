"""Agent mode's workspace tools: a persistent ``bash`` and ``str_replace_editor``, confined to the
story's own workspace folder (spec: Harness 极简模式同款的持久终端与 ``str_replace_editor``).

**Off by default.** They exist only while the user sets ``agent.workspaceRoot`` to a folder
(``rp settings set agent.workspaceRoot /abs/path``): each story then works in
``<root>/<session id>``, created on first use. Chat mode never has them.

**The editor** resolves every path (relative, or absolute under ``/workspace``, the name the shell
sees) with every symlink followed and refuses anything whose real path is outside the workspace
(``workspace.outside``): ``..``, absolute host paths and symlinks that point out alike. Files are
opened without following a final symlink, so a link swapped in after the check is refused too.
Reads and writes are bounded (``MAX_FILE_BYTES``).

**The shell** is one ``bash`` per run, kept between calls (its working directory and variables
persist), started in fresh Linux namespaces (``unshare``: user, mount, pid, network): its root
is an empty tmpfs holding only read-only system directories (``/usr``, ``/bin``, ``/lib``…), the
workspace at ``/workspace`` and a private ``/tmp``; no ``/home``, no ``/etc``, no network. Where
that sandbox cannot start (no ``unshare``, user namespaces disabled, not Linux) the shell refuses
with ``workspace.sandbox_unavailable`` rather than run unconfined; the editor still works. Each
command has a time limit (``workspace.timeout``: the shell is killed and the next call starts a
new one) and its output is cut at ``MAX_OUTPUT`` characters (the result says so).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from roleplay.errors import RpError, ValidationError
from roleplay.harness.tools import Tool, ToolContext, ToolOutput
from roleplay.names import WORKSPACE_EDITOR_TOOL, WORKSPACE_SHELL_TOOL

SETTING_KEY = "agent.workspaceRoot"
SANDBOX_ROOT = "/workspace"  # where the shell sees the workspace
MAX_FILE_BYTES = 1_000_000
MAX_OUTPUT = 20_000
MAX_DRAIN = 5_000_000  # output read and dropped past MAX_OUTPUT before the command is killed
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 300.0
START_TIMEOUT = 15.0
STAGING = ("/mnt", "/srv", "/media", "/run", "/opt")  # a host folder the sandbox's tmpfs root covers
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr")


def check_root(value: str | None) -> str | None:
    """The settings normaliser: an absolute folder path, or null (the tools are off)."""
    if value is None:
        return None
    if not os.path.isabs(value):
        raise ValidationError("settings.invalid_value", f"{SETTING_KEY} must be an absolute folder path, not {value!r}", pointer="/value")
    return os.path.normpath(value)


class Workspace:
    """One story's workspace folder and the confinement of paths into it."""

    def __init__(self, root: str | os.PathLike[str], session_id: str) -> None:
        self.base = Path(root)
        self.path = self.base / session_id

    def ensure(self) -> Path:
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return Path(os.path.realpath(self.path))

    def resolve(self, raw: str, pointer: str = "/path") -> Path:
        """The real host path of ``raw``; ``workspace.outside`` unless it lies inside."""
        real_root = self.ensure()
        text = raw.strip()
        if not text:
            raise RpError("workspace.bad_path", "give a path inside the workspace", pointer=pointer)
        if text == SANDBOX_ROOT or text.startswith(SANDBOX_ROOT + "/"):
            text = text[len(SANDBOX_ROOT) :].lstrip("/") or "."
        elif os.path.isabs(text):
            raise self._outside(raw, pointer)
        real = Path(os.path.realpath(real_root / text))
        if real != real_root and real_root not in real.parents:
            raise self._outside(raw, pointer)
        return real

    def shown(self, real: Path) -> str:
        rel = os.path.relpath(real, os.path.realpath(self.path))
        return SANDBOX_ROOT if rel == "." else f"{SANDBOX_ROOT}/{rel}"

    @staticmethod
    def _outside(raw: str, pointer: str) -> RpError:
        return RpError(
            "workspace.outside",
            f"{raw!r} is outside the story's workspace; only paths under {SANDBOX_ROOT} (or relative ones) are allowed",
            pointer=pointer,
        )


# -- the editor -------------------------------------------------------------------------------------

EDITOR_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
        "path": {"type": "string", "maxLength": 1000, "description": "relative, or absolute under /workspace"},
        "file_text": {"type": "string", "description": "create: the whole file"},
        "old_str": {"type": "string", "description": "str_replace: text that occurs exactly once"},
        "new_str": {"type": "string", "description": "str_replace / insert: the new text"},
        "insert_line": {"type": "integer", "minimum": 0, "description": "insert: after this line (0: at the top)"},
        "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
    },
    "required": ["command", "path"],
    "additionalProperties": False,
}


def _read(path: Path, pointer: str = "/path") -> str:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise RpError("workspace.not_found", f"no file at {path.name!r}", pointer=pointer) from None
    except OSError as exc:
        raise RpError("workspace.io_error", f"cannot open {path.name!r}: {exc.strerror}", pointer=pointer) from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise RpError("workspace.too_large", f"{path.name!r} is larger than {MAX_FILE_BYTES} bytes", pointer=pointer)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RpError("workspace.not_text", f"{path.name!r} is not UTF-8 text", pointer=pointer) from None


def _write(path: Path, text: str) -> None:
    data = text.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise RpError("workspace.too_large", f"a file may hold at most {MAX_FILE_BYTES} bytes", pointer="/file_text")
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise RpError("workspace.io_error", f"cannot write {path.name!r}: {exc.strerror}", pointer="/path") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.split("\n"), start))


def editor_tool(workspace: Workspace) -> Tool:
    history: dict[Path, list[str | None]] = {}

    def remember(path: Path) -> None:
        history.setdefault(path, []).append(_read(path) if path.exists() else None)

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        command = args["command"]
        path = workspace.resolve(args["path"])
        shown = workspace.shown(path)
        if command == "view":
            if path.is_dir():
                entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
                return ToolOutput(f"{shown}:\n" + "\n".join(entries))
            text = _read(path)
            lines = text.split("\n")
            first, last = args.get("view_range") or (1, len(lines))
            last = len(lines) if last == -1 else last
            if not 1 <= first <= max(last, 1) <= len(lines) + 1:
                raise RpError("workspace.bad_range", f"view_range must lie within 1..{len(lines)}", pointer="/view_range")
            return ToolOutput(_cut(_numbered("\n".join(lines[first - 1 : last]), first)))
        if command == "create":
            if "file_text" not in args:
                raise RpError("workspace.missing_argument", "create needs file_text", pointer="/file_text")
            remember(path)
            _write(path, args["file_text"])
            return ToolOutput(f"created {shown}", meta={"path": shown})
        if command == "str_replace":
            old, new = args.get("old_str"), args.get("new_str", "")
            if not old:
                raise RpError("workspace.missing_argument", "str_replace needs a non-empty old_str", pointer="/old_str")
            text = _read(path)
            count = text.count(old)
            if count != 1:
                raise RpError(
                    "workspace.no_unique_match",
                    f"old_str occurs {count} times in {shown}; it must occur exactly once",
                    pointer="/old_str",
                    details={"occurrences": count},
                )
            remember(path)
            _write(path, text.replace(old, new, 1))
            return ToolOutput(f"edited {shown}", meta={"path": shown})
        if command == "insert":
            line, new = args.get("insert_line"), args.get("new_str")
            if line is None or new is None:
                raise RpError("workspace.missing_argument", "insert needs insert_line and new_str", pointer="/insert_line")
            lines = _read(path).split("\n")
            if line > len(lines):
                raise RpError("workspace.bad_range", f"insert_line must lie within 0..{len(lines)}", pointer="/insert_line")
            remember(path)
            _write(path, "\n".join([*lines[:line], *new.split("\n"), *lines[line:]]))
            return ToolOutput(f"inserted into {shown} after line {line}", meta={"path": shown})
        # undo_edit
        stack = history.get(path)
        if not stack:
            raise RpError("workspace.nothing_to_undo", f"no edit of {shown} to undo in this turn", pointer="/path")
        before = stack.pop()
        if before is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, before)
        return ToolOutput(f"undid the last edit of {shown}", meta={"path": shown})

    return Tool(
        WORKSPACE_EDITOR_TOOL,
        "View, create and edit text files in the story's workspace (/workspace).",
        EDITOR_PARAMETERS,
        handler,
        guidance=(
            f"## {WORKSPACE_EDITOR_TOOL}\n\nFiles in this story's own workspace, {SANDBOX_ROOT}: view a file or folder, create a file, "
            "str_replace one exact unique snippet, insert after a line, undo_edit. Paths outside the workspace are refused. "
            "The workspace is scratch space: it never changes the story, its assets or its state."
        ),
    )


def _cut(text: str, limit: int = MAX_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output cut: {len(text) - limit} more characters]"


# -- the shell --------------------------------------------------------------------------------------


def _sandbox_script(staging: str) -> str:
    """Runs as root of fresh user+mount+pid+net namespaces; ``$1`` is the workspace."""
    mounts = "\n".join(
        f'if [ -L /{d} ]; then ln -s "$(readlink /{d})" "$R/{d}"; '
        f'elif [ -d /{d} ]; then mkdir "$R/{d}"; mount --rbind /{d} "$R/{d}"; mount -o remount,bind,ro "$R/{d}" 2>/dev/null || true; fi'
        for d in SYSTEM_DIRS
    )
    return f"""set -e
mount -t tmpfs tmpfs {staging}
R={staging}/root
mkdir "$R"
{mounts}
mkdir "$R/workspace" "$R/tmp" "$R/dev" "$R/proc"
mount --bind "$1" "$R/workspace"
for n in null zero random urandom; do touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; done
mount -t proc proc "$R/proc" 2>/dev/null || true
exec chroot "$R" /usr/bin/env -i HOME=/workspace PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TERM=dumb /bin/bash --noprofile --norc
"""


def sandbox_command(workspace: Path) -> list[str] | None:
    """The argv that starts the confined shell, or None where the sandbox cannot exist."""
    unshare = shutil.which("unshare")
    if not sys.platform.startswith("linux") or unshare is None or shutil.which("chroot") is None:
        return None
    real = str(workspace)
    staging = next((s for s in STAGING if os.path.isdir(s) and not (real + "/").startswith(s + "/")), None)
    if staging is None:
        return None
    flags = ["--user", "--map-root-user", "--mount", "--pid", "--net", "--fork", "--kill-child"]
    return [unshare, *flags, "sh", "-c", _sandbox_script(staging), "sh", real]


class PersistentShell:
    """One confined bash for a run; commands run one at a time."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.process: asyncio.subprocess.Process | None = None
        self.lock = asyncio.Lock()

    async def _start(self) -> asyncio.subprocess.Process:
        argv = sandbox_command(self.workspace.ensure())
        if argv is None:
            raise RpError(
                "workspace.sandbox_unavailable",
                "the shell needs Linux namespaces (unshare) to stay inside the workspace, and they are not available here",
            )
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self.process = process
        try:
            status, output = await self._exchange(f"cd {SANDBOX_ROOT}", START_TIMEOUT)
        except RpError:
            await self.close()
            raise RpError("workspace.sandbox_unavailable", "the sandboxed shell did not start (user namespaces may be disabled)") from None
        if status != 0:
            await self.close()
            raise RpError("workspace.sandbox_unavailable", f"the sandboxed shell did not start: {output.strip()[:300]}")
        return process

    async def run(self, command: str, timeout: float) -> tuple[int, str, bool]:
        async with self.lock:
            if self.process is None or self.process.returncode is not None:
                await self._start()
            status, output = await self._exchange(command, timeout)
            return status, _cut(output), len(output) > MAX_OUTPUT

    async def _exchange(self, command: str, timeout: float) -> tuple[int, str]:
        process = self.process
        assert process is not None and process.stdin is not None and process.stdout is not None
        mark = "__rp_done_" + secrets.token_hex(8)
        # The command reads nothing from the shell's own input, which carries the next commands.
        script = f"{{\n{command}\n}} </dev/null\nprintf '\\n{mark} %s\\n' \"$?\"\n"
        try:
            process.stdin.write(script.encode("utf-8"))
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            await self.close()
            raise RpError("workspace.shell_exited", "the shell exited; the next call starts a new one") from None
        kept = bytearray()
        seen = 0
        marker = ("\n" + mark + " ").encode()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    chunk = await process.stdout.read(65536)
                    if not chunk:
                        await self.close()
                        raise RpError("workspace.shell_exited", "the shell exited; the next call starts a new one")
                    seen += len(chunk)
                    kept += chunk
                    found = kept.find(marker)
                    if found >= 0 and kept.endswith(b"\n"):
                        status = int(kept[found + len(marker) :].split(b"\n", 1)[0] or b"1")
                        return status, kept[:found].decode("utf-8", "replace")
                    if seen > MAX_DRAIN:
                        await self.close()
                        raise RpError("workspace.output_limit", f"the command printed more than {MAX_DRAIN} bytes; the shell was stopped")
                    if len(kept) > 2 * MAX_OUTPUT + len(marker) + 64:
                        # Keep the head (what is shown) and the tail (where the marker arrives).
                        kept = kept[: MAX_OUTPUT + 1] + kept[-(len(marker) + 64) :]
        except TimeoutError:
            await self.close()
            raise RpError(
                "workspace.timeout",
                f"the command did not finish within {timeout:g}s and was stopped; the shell restarts on the next call (its state is lost)",
            ) from None

    async def close(self) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await process.wait()


SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1, "maxLength": 20_000},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMEOUT,
            "description": f"seconds (default {DEFAULT_TIMEOUT:g})",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


def shell_tool(shell: PersistentShell) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        status, output, cut = await shell.run(args["command"], float(args.get("timeout") or DEFAULT_TIMEOUT))
        return ToolOutput(f"{output}\n[exit status {status}]", meta={"exitStatus": status, "outputCut": cut})

    return Tool(
        WORKSPACE_SHELL_TOOL,
        "Run a command in the story's persistent, sandboxed shell (working folder /workspace, no network).",
        SHELL_PARAMETERS,
        handler,
        guidance=(
            f"## {WORKSPACE_SHELL_TOOL}\n\nA persistent shell in the story's workspace {SANDBOX_ROOT}: its folder and variables carry over "
            f"between calls in this turn. No network; system folders are read-only; nothing outside the workspace exists. "
            f"Each command stops after its timeout (default {DEFAULT_TIMEOUT:g}s) and output past {MAX_OUTPUT} characters is cut."
        ),
        timeout=MAX_TIMEOUT + 30,
    )


def workspace_tools(root: str | None, session_id: str) -> tuple[list[Tool], PersistentShell | None]:
    """The tools when the setting names a root, else none (the default)."""
    if root is None:
        return [], None
    workspace = Workspace(root, session_id)
    shell = PersistentShell(workspace)
    return [shell_tool(shell), editor_tool(workspace)], shell


__all__ = [
    "SETTING_KEY",
    "PersistentShell",
    "Workspace",
    "check_root",
    "editor_tool",
    "sandbox_command",
    "shell_tool",
    "workspace_tools",
]
