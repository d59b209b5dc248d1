"""Disk and database faults (issue 18 items 9 and 10): each becomes ``error [store.…]:`` and exit
status 1 through the real ``rp`` CLI, never a traceback, and the log stays intact.

Tests run as root here, so ``chmod`` cannot make a file read-only; the CLI cases use read-only
bind mounts and a tiny tmpfs (skipped where ``mount`` is not permitted). The store-level cases
inject the same SQLite errors at the connection (``query_only``, ``max_page_count``) and run
everywhere.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from roleplay.errors import RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.store import SQLiteStore, open_store
from roleplay.harness.store.faults import os_fault, postgres_fault, sqlite_fault

pytestmark = pytest.mark.anyio

RP = [sys.executable, "-c", "from roleplay.cli import main; main()"]


def user(mid: str) -> EventDraft:
    return EventDraft("user/message", {"messageId": mid, "content": [{"type": "text", "text": "hi"}]})


def rp(home: Path, *args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    full_env = {**os.environ, "RP_HOME": str(home), **(env or {})}
    full_env.pop("RP_DATABASE_URL", None)
    full_env.update(env or {})
    return subprocess.run([*RP, *args], capture_output=True, text=True, env=full_env, timeout=120, **kw)


def assert_store_error(proc: subprocess.CompletedProcess[str], *codes: str) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("error [store.")), None)
    assert line is not None, proc.stderr
    code = line.split("[", 1)[1].split("]", 1)[0]
    assert code in codes, line
    return line


def checkpointed(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def db_state(db: Path) -> tuple[str, list[tuple[str, int]], int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        heads = conn.execute("SELECT id, head_seq FROM sessions ORDER BY id").fetchall()
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        return check, heads, events
    finally:
        conn.close()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A home with one demo story (created once: the CLI is slow to start)."""
    home = tmp_path_factory.mktemp("story")
    proc = rp(home, "new", "--sample", "--model", "demo", "--json")
    assert proc.returncode == 0, proc.stderr
    checkpointed(home / "roleplay.db")
    return home, json.loads(proc.stdout)["sessionId"]


@pytest.fixture
def home(story: tuple[Path, str], tmp_path: Path) -> Path:
    """A private copy of the story's home (each fault test damages its own)."""
    copy = tmp_path / "home"
    shutil.copytree(story[0], copy)
    return copy


def _mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mount is not permitted here: {proc.stderr.strip()}")


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    made: list[Path] = []
    yield made
    for target in reversed(made):
        subprocess.run(["umount", str(target)], capture_output=True)


def read_only_bind(target: Path, mounts: list[Path]) -> None:
    _mount("--bind", str(target), str(target))
    mounts.append(target)
    _mount("-o", "remount,ro,bind", str(target))


# -- through the CLI --------------------------------------------------------------------------------


def test_read_only_database_file(home: Path, story: tuple[Path, str], mounts: list[Path]) -> None:
    db = home / "roleplay.db"
    before = db_state(db)
    read_only_bind(db, mounts)
    proc = rp(home, "say", story[1], "hello", "--model", "demo")
    assert_store_error(proc, "store.readonly")
    subprocess.run(["umount", str(db)], check=True)
    mounts.remove(db)
    assert db_state(db) == before


def test_read_only_filesystem(home: Path, story: tuple[Path, str], mounts: list[Path]) -> None:
    before = db_state(home / "roleplay.db")
    read_only_bind(home, mounts)
    proc = rp(home, "say", story[1], "hello", "--model", "demo")
    assert_store_error(proc, "store.readonly")
    subprocess.run(["umount", str(home)], check=True)
    mounts.remove(home)
    assert db_state(home / "roleplay.db") == before


@pytest.mark.slow
def test_full_disk(home: Path, story: tuple[Path, str], tmp_path: Path, mounts: list[Path]) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    size_kb = (home / "roleplay.db").stat().st_size // 1024 + 24
    _mount("-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(disk))
    mounts.append(disk)
    shutil.copytree(home, disk, dirs_exist_ok=True)
    for i in range(20):  # a few turns may fit in the slack; the disk fills within these
        proc = rp(disk, "say", story[1], f"turn {i} " + "x" * 2000, "--model", "demo")
        if proc.returncode != 0:
            break
    assert_store_error(proc, "store.disk_full")
    # Checked on a copy: even reading a WAL database needs room for its index.
    after = tmp_path / "after"
    shutil.copytree(disk, after, ignore=shutil.ignore_patterns("locks"))
    check, heads, _ = db_state(after / "roleplay.db")
    assert check == "ok"
    assert heads[0][1] >= db_state(home / "roleplay.db")[1][0][1]


def test_file_size_limit(home: Path, story: tuple[Path, str]) -> None:
    db = home / "roleplay.db"
    before = db_state(db)
    limit = 16384  # bytes per file: the WAL cannot hold a turn, the database cannot grow

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = rp(home, "say", story[1], "hello " + "x" * 8000, "--model", "demo", preexec_fn=limited)
    assert_store_error(proc, "store.file_too_large")
    check, heads, events = db_state(db)
    assert check == "ok"
    assert heads == before[1] and events == before[2]  # the failed transaction left nothing behind


def test_postgres_read_only_server(pg_url: str, tmp_path: Path) -> None:
    proc = rp(tmp_path, "sessions", "list", env={"RP_DATABASE_URL": pg_url})
    assert proc.returncode == 0, proc.stderr
    read_only = pg_url + "%20-cdefault_transaction_read_only%3Don"
    proc = rp(tmp_path, "new", "--sample", "--model", "demo", env={"RP_DATABASE_URL": read_only})
    assert_store_error(proc, "store.readonly")


@pytest.mark.slow
def test_database_deleted_while_playing(home: Path, story: tuple[Path, str]) -> None:
    db = home / "roleplay.db"
    env = {**os.environ, "RP_HOME": str(home)}
    env.pop("RP_DATABASE_URL", None)
    proc = subprocess.Popen(
        [*RP, "play", "--session", story[1], "--model", "demo"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("first line\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while "first line" not in proc.stdout.readline():  # the demo reply echoes the input
            assert time.monotonic() < deadline and proc.poll() is None
        for name in ("roleplay.db", "roleplay.db-wal", "roleplay.db-shm"):
            (home / name).unlink(missing_ok=True)
        out, err = proc.communicate("second line\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    line = assert_store_error(result, "store.deleted")
    assert str(db) in line
    assert not db.exists()  # no fresh empty database was created in its place


def test_data_directory_that_cannot_exist(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    proc = rp(tmp_path / "file" / "home", "sessions", "list")
    line = assert_store_error(proc, "store.unavailable")
    assert str(tmp_path / "file") in line


def test_damaged_database_is_reported_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "roleplay.db"
    db.write_bytes(b"not an sqlite file " * 100)
    proc = rp(tmp_path, "sessions", "list")
    assert_store_error(proc, "store.corrupt")
    assert db.read_bytes() == b"not an sqlite file " * 100


# -- in the store (no mounts needed) ----------------------------------------------------------------


class _InjectedStore(SQLiteStore):
    """Injects a fault into every new connection once ``pragma`` is set."""

    pragma: str | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        if self.pragma:
            conn.execute(self.pragma)
        return conn


async def test_store_maps_a_read_only_connection(tmp_path: Path) -> None:
    store = _InjectedStore(tmp_path / "rp.db")
    await store.migrate()
    rec = await store.create_session(preset="p", events=[user("m0")])
    await store.close()
    _InjectedStore.pragma = "PRAGMA query_only=ON"
    try:
        store = _InjectedStore(tmp_path / "rp.db")
        with pytest.raises(RpError) as exc:
            await store.append(rec.id, 1, [user("m1")])
        assert exc.value.code == "store.readonly"
        assert str(tmp_path / "rp.db") in exc.value.message
        assert [e.seq for e in await store.read(rec.id)] == [1]  # reads still work
        await store.close()
    finally:
        _InjectedStore.pragma = None


async def test_store_maps_a_full_database_and_keeps_the_log(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "rp.db")
    await store.migrate()
    rec = await store.create_session(preset="p", events=[user("m0")])
    pages = await store.execute_read(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
    await store.execute_write(lambda c: c.execute(f"PRAGMA max_page_count={pages}"))
    with pytest.raises(RpError) as exc:
        await store.append(
            rec.id,
            1,
            [EventDraft("user/message", {"messageId": f"m{i}", "content": [{"type": "text", "text": "y" * 4000}]}) for i in range(1, 40)],
        )
    assert exc.value.code == "store.disk_full"
    assert (await store.get_session(rec.id)).head_seq == 1
    [ev] = await store.append(rec.id, 1, [user("m1")])  # the writer survives the fault
    assert ev.seq == 2
    await store.close()


async def test_store_deleted_under_an_open_store_stops_writes(tmp_path: Path) -> None:
    path = tmp_path / "rp.db"
    store = open_store(f"sqlite:///{path}")
    await store.migrate()
    rec = await store.create_session(preset="p", events=[user("m0")])
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(RpError) as exc:
        await store.append(rec.id, 1, [user("m1")])
    assert exc.value.code == "store.deleted"
    with pytest.raises(RpError) as exc:
        await store.read(rec.id)
    assert exc.value.code == "store.deleted"
    assert not path.exists()
    with pytest.raises(RpError):
        await store.close()


async def test_store_deleted_after_the_last_write_is_reported_on_close(tmp_path: Path) -> None:
    """Nothing more to write, but what was written is gone: say so rather than exit quietly."""
    path = tmp_path / "rp.db"
    store = open_store(f"sqlite:///{path}")
    await store.migrate()
    await store.create_session(preset="p", events=[user("m0")])
    path.unlink()
    with pytest.raises(RpError) as exc:
        await store.close()
    assert exc.value.code == "store.deleted"
    await store.close()  # once is enough


async def test_store_replaced_under_an_open_store_stops_writes(tmp_path: Path) -> None:
    path = tmp_path / "rp.db"
    store = open_store(f"sqlite:///{path}")
    await store.migrate()
    rec = await store.create_session(preset="p", events=[user("m0")])
    other = open_store(f"sqlite:///{tmp_path / 'other.db'}")
    await other.migrate()
    await other.close()
    os.replace(tmp_path / "other.db", path)
    with pytest.raises(RpError) as exc:
        await store.append(rec.id, 1, [user("m1")])
    assert exc.value.code == "store.replaced"
    with pytest.raises(RpError):
        await store.close()


def test_only_faults_are_translated() -> None:
    assert sqlite_fault(sqlite3.IntegrityError("UNIQUE constraint failed"), "x.db") is None
    assert os_fault(FileNotFoundError(2, "No such file", "x")) is None
    assert postgres_fault(ValueError("not a database error")) is None
    err = os_fault(OSError(28, "No space left on device", "/data/rp.db"))
    assert err is not None and err.code == "store.disk_full" and "/data/rp.db" in err.message


async def test_postgres_store_raises_store_errors_not_driver_errors(pg_url: str) -> None:
    """Callers that handle RpError (the turn loop records it in ``turn/end``) see PostgreSQL
    faults as ``store.*`` errors too, not only the CLI."""
    store = open_store(pg_url)
    await store.migrate()
    rec = await store.create_session(preset="p", events=[user("m0")])
    await store.close()
    store = open_store(pg_url + "%20-cdefault_transaction_read_only%3Don")
    try:
        with pytest.raises(RpError) as exc:
            await store.append(rec.id, 1, [user("m1")])
        assert exc.value.code == "store.readonly"
        with pytest.raises(RpError) as exc:
            await store.append_at_head(rec.id, [user("m1")])
        assert exc.value.code == "store.readonly"
        assert [e.seq for e in await store.read(rec.id)] == [1]
    finally:
        await store.close()
