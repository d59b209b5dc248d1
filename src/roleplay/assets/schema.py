"""Tables outside the event log, each owned by the subsystem or feature that uses it.

The harness migrates the event log alone (``harness/store/migrations.py``). Every other table has
one *owner* (``rp-assets``: the asset store, ``rp-settings``: the settings, or a feature through
the ``register_migrations`` hook) with its own numbered list of harness-shaped migrations
(``number``, ``name``, ``sqlite``, ``postgres``, optional ``expects``), numbered from 1 without
gaps so an owner's history reads the same in every home. What was applied is recorded per owner
in ``feature_migrations``, next to the harness's ``_migrations``.

Lives here, below core, because the asset store's transaction runner (``AssetStore.write``: one
commit path for every row outside the event log) applies them, and the asset store ensures its
own tables on first use. Each owner's pending migrations run in one transaction with their
records, so a failure leaves none of them applied. On PostgreSQL an advisory lock serialises
concurrent appliers (two processes opening a new home at once), so ``CREATE TABLE IF NOT EXISTS``
never races; on SQLite ``BEGIN IMMEDIATE`` already does.

A migration that adopts tables an older release created (``CREATE … IF NOT EXISTS``) lists them in
``expects`` with the columns they must have; a table that exists without them is refused
(``schema.table_mismatch``) and nothing is recorded, so a foreign table is never taken for ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from weakref import WeakKeyDictionary

from roleplay.errors import RpError, ValidationError

TABLE = (
    "CREATE TABLE IF NOT EXISTS feature_migrations ("
    " feature TEXT NOT NULL, number INTEGER NOT NULL, name TEXT NOT NULL, applied_at TEXT NOT NULL,"
    " PRIMARY KEY (feature, number))"
)
_LOCK = 0x52505F4F574E4544  # PostgreSQL advisory lock serialising owner migrations across processes

# store → owner → how many of its migrations this process has seen applied on it. Only ever grows
# (a migration is never undone), so a hit skips the read without a correctness risk.
_ready: WeakKeyDictionary[Any, dict[str, int]] = WeakKeyDictionary()


def check_sequence(owner: str, migrations: Sequence[Any]) -> None:
    numbers = [m.number for m in migrations]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValidationError(
            "plugins.migration_sequence",
            f"feature {owner!r}: migrations must be numbered 1, 2, 3 … without gaps, not {numbers}",
            pointer="/migrations",
            details={"feature": owner, "numbers": numbers},
        )


def is_ready(store: Any, owner: str, migrations: Sequence[Any]) -> bool:
    return _ready.get(store, {}).get(owner, 0) >= len(migrations)


def mark_ready(store: Any, owner: str, migrations: Sequence[Any]) -> None:
    known = _ready.setdefault(store, {})
    known[owner] = max(known.get(owner, 0), len(migrations))


async def table_columns(tx: Any, table: str) -> set[str]:
    """The columns of ``table`` (empty when it does not exist), from the dialect's catalogue."""
    if tx.dialect == "postgresql":
        rows = await tx.conn.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?", (table,)
        )
        return {r[0] for r in rows}
    return {r[1] for r in await tx.conn.fetchall("SELECT * FROM pragma_table_info(?)", (table,))}


async def apply_pending(tx: Any, owner: str, migrations: Sequence[Any]) -> list[int]:
    """Inside one transaction: apply the migrations of ``owner`` not yet recorded, record them,
    return their numbers."""
    await tx.conn.lock(_LOCK)
    await tx.conn.execute(TABLE)
    done = {int(r[0]) for r in await tx.conn.fetchall("SELECT number FROM feature_migrations WHERE feature=?", (owner,))}
    applied: list[int] = []
    for m in migrations:
        if m.number in done:
            continue
        for statement in m.postgres if tx.dialect == "postgresql" else m.sqlite:
            await tx.conn.execute(statement)
        for table, columns in getattr(m, "expects", ()):
            missing = [c for c in columns if c not in await table_columns(tx, table)]
            if missing:
                raise RpError(
                    "schema.table_mismatch",
                    f"{owner} migration {m.number} ({m.name}): the existing table {table!r} lacks the columns {missing};"
                    " it was not created by roleplay, so nothing was changed",
                    details={"feature": owner, "number": m.number, "table": table, "missing": missing},
                )
        await tx.conn.execute(
            "INSERT INTO feature_migrations(feature, number, name, applied_at) VALUES (?,?,?,?)",
            (owner, m.number, m.name, tx.now),
        )
        applied.append(m.number)
    return applied


__all__ = ["TABLE", "apply_pending", "check_sequence", "is_ready", "mark_ready", "table_columns"]
