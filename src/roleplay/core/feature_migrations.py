"""Feature-owned tables: each feature (built-in or third-party) keeps its own numbered migration
list, registered through the ``register_migrations`` hook and applied before a runtime opens.

A migration has the harness's shape (``number``, ``name``, ``sqlite`` and ``postgres``
statements); numbers count from 1 per feature and never skip, so a feature's history reads the
same in every home. What was applied is recorded per feature in ``feature_migrations``, next to the
harness's ``_migrations``; the harness itself knows nothing of a feature's tables. Each feature's
pending migrations run in one transaction with their records, so a failure leaves none of them
applied, and two processes racing to apply them end with one copy (the loser's unique violation
rolls its transaction back and it reads the winner's records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roleplay.assets.store import AssetStore, AssetTx
from roleplay.errors import ValidationError
from roleplay.harness.store.base import EventStore

TABLE = (
    "CREATE TABLE IF NOT EXISTS feature_migrations ("
    " feature TEXT NOT NULL, number INTEGER NOT NULL, name TEXT NOT NULL, applied_at TEXT NOT NULL,"
    " PRIMARY KEY (feature, number))"
)


def check_sequence(feature: str, migrations: Sequence[Any]) -> None:
    numbers = [m.number for m in migrations]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValidationError(
            "plugins.migration_sequence",
            f"feature {feature!r}: migrations must be numbered 1, 2, 3 … without gaps, not {numbers}",
            pointer="/migrations",
            details={"feature": feature, "numbers": numbers},
        )


async def apply_feature_migrations(store: EventStore, plan: Mapping[str, Sequence[Any]]) -> list[tuple[str, int]]:
    """Apply every pending migration of ``plan`` (feature → its migrations); return the
    (feature, number) pairs applied now, in order."""
    for feature, migrations in plan.items():
        check_sequence(feature, migrations)
    assets = AssetStore(store)
    applied: list[tuple[str, int]] = []
    for feature, migrations in plan.items():
        if not migrations:
            continue

        async def body(tx: AssetTx, feature: str = feature, migrations: Sequence[Any] = migrations) -> list[tuple[str, int]]:
            await tx.conn.execute(TABLE)
            rows = await tx.conn.fetchall("SELECT number FROM feature_migrations WHERE feature=?", (feature,))
            done = {int(r[0]) for r in rows}
            now: list[tuple[str, int]] = []
            for m in migrations:
                if m.number in done:
                    continue
                for statement in m.postgres if tx.dialect == "postgresql" else m.sqlite:
                    await tx.conn.execute(statement)
                await tx.conn.execute(
                    "INSERT INTO feature_migrations(feature, number, name, applied_at) VALUES (?,?,?,?)",
                    (feature, m.number, m.name, tx.now),
                )
                now.append((feature, m.number))
            return now

        applied += await assets.write(body, retry_on_unique=True)
    return applied


__all__ = ["apply_feature_migrations", "check_sequence"]
