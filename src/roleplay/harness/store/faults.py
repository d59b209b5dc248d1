"""Disk and database faults as ``store.*`` errors (issue 18).

A read-only file or filesystem, a full disk, a file size limit (``ulimit -f``), a damaged file or
a lost PostgreSQL connection are not bugs: the user gets ``error [store.…]: message`` and exit
status 1, never a traceback. Only faults are translated here. Constraint violations and other
errors that callers handle (``sqlite3.IntegrityError``, a unique violation) pass through untouched.

Nothing here repairs anything: SQLite rolls the failed transaction back, so the log stays as it
was before the failed write, and a damaged file is reported, never rewritten.
"""

from __future__ import annotations

import errno
import os
import resource
import sqlite3
from pathlib import Path
from typing import Any

from roleplay.errors import RpError

NOT_SAVED = "the last change was not saved; everything written before it is intact"
LOW_SPACE = 1 << 20  # an I/O error with less free space than this is a full disk


def file_size_limit() -> int | None:
    """This process's ``ulimit -f`` in bytes, or None when unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def free_bytes(directory: Path) -> int | None:
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def sqlite_fault(exc: BaseException, path: str | os.PathLike[str]) -> RpError | None:
    """The ``store.*`` error for an SQLite or OS fault on the database at ``path``, else None."""
    if isinstance(exc, RpError):
        return None
    if isinstance(exc, OSError):
        return os_fault(exc, path)
    if not isinstance(exc, (sqlite3.OperationalError, sqlite3.DatabaseError)) or isinstance(exc, sqlite3.IntegrityError):
        return None
    name = getattr(exc, "sqlite_errorname", "") or ""
    where = str(path)
    details = {"path": where, "sqlite": name or str(exc)}
    if name.startswith("SQLITE_READONLY") or name == "SQLITE_PERM" or "readonly database" in str(exc):
        return RpError(
            "store.readonly",
            f"the database {where} is read-only (its file, directory or filesystem cannot be written); {NOT_SAVED}",
            details=details,
        )
    if name == "SQLITE_FULL" or "disk is full" in str(exc):
        return RpError("store.disk_full", f"the disk holding {where} is full; {NOT_SAVED}", details=details)
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in str(exc):
        # SQLite reports EFBIG and (for the WAL index) ENOSPC as plain I/O errors without the
        # errno, so the likely cause is read off the process limit and the free space.
        limit = file_size_limit()
        if limit is not None:
            return RpError(
                "store.file_too_large",
                f"writing {where} failed: this process may not write files larger than {limit} bytes (ulimit -f); {NOT_SAVED}",
                details={**details, "fileSizeLimit": limit},
            )
        free = free_bytes(Path(where).parent)
        if free is not None and free < LOW_SPACE:
            return RpError("store.disk_full", f"the disk holding {where} is full ({free} bytes free); {NOT_SAVED}", details=details)
        return RpError("store.io_error", f"the disk failed while writing {where} ({name or exc}); {NOT_SAVED}", details=details)
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in str(exc) or "not a database" in str(exc):
        return RpError(
            "store.corrupt",
            f"{where} is damaged or is not a roleplay database; it was left untouched (restore it from a backup)",
            details=details,
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return RpError("store.busy", f"the database {where} stayed locked by another process; try again", details=details)
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in str(exc):
        return RpError("store.unavailable", f"cannot open the database {where}", details=details)
    return None


def os_fault(exc: OSError, path: str | os.PathLike[str] | None = None) -> RpError | None:
    """The ``store.*`` error for a disk fault (read-only, full, too large, I/O), else None."""
    where = exc.filename or (str(path) if path is not None else "a file")
    details: dict[str, Any] = {"path": str(where), "errno": errno.errorcode.get(exc.errno or 0, str(exc.errno))}
    if exc.errno == errno.EROFS:
        return RpError("store.readonly", f"cannot write {where}: the filesystem is read-only; {NOT_SAVED}", details=details)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return RpError("store.permission_denied", f"permission denied on {where}", details=details)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return RpError("store.disk_full", f"cannot write {where}: the disk (or quota) is full; {NOT_SAVED}", details=details)
    if exc.errno == errno.EFBIG:
        limit = file_size_limit()
        extra = f" than {limit} bytes (ulimit -f)" if limit is not None else ""
        return RpError(
            "store.file_too_large", f"cannot write {where}: this process may not write files larger{extra}; {NOT_SAVED}", details=details
        )
    if exc.errno == errno.EIO:
        return RpError("store.io_error", f"the disk failed while accessing {where}; {NOT_SAVED}", details=details)
    return None


def postgres_fault(exc: BaseException) -> RpError | None:
    """The ``store.*`` error for a PostgreSQL fault (disk full, read-only, lost connection)."""
    try:
        import psycopg
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover - the optional extra is absent
        return None
    if isinstance(exc, PoolTimeout):
        return RpError("store.unavailable", f"no PostgreSQL connection became available: {exc}")
    if not isinstance(exc, psycopg.Error):
        return None
    state = getattr(exc, "sqlstate", None) or ""
    details = {"sqlstate": state} if state else {}
    if state in ("53100", "53200", "53400") or isinstance(exc, psycopg.errors.DiskFull):
        return RpError("store.disk_full", f"PostgreSQL is out of disk or memory ({state}); {NOT_SAVED}", details=details)
    if state == "25006":
        return RpError(
            "store.readonly", f"the PostgreSQL server is read-only (a standby or read-only transaction); {NOT_SAVED}", details=details
        )
    if state.startswith("58") or state == "XX001":
        return RpError("store.io_error", f"PostgreSQL reported a storage failure ({state}): {exc}", details=details)
    if isinstance(exc, psycopg.OperationalError) or state.startswith(("08", "57P")):
        return RpError("store.unavailable", f"lost the connection to PostgreSQL: {exc}", details=details)
    return None


def store_fault(exc: BaseException, path: str | Path | None = None) -> RpError | None:
    """Any backend's fault as a ``store.*`` error (the CLI's last line of defence), else None."""
    if isinstance(exc, OSError):
        return os_fault(exc, path)
    if isinstance(exc, sqlite3.Error):
        return sqlite_fault(exc, path or "the database")
    return postgres_fault(exc)


__all__ = ["file_size_limit", "os_fault", "postgres_fault", "sqlite_fault", "store_fault"]
