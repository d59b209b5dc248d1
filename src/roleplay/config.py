"""Where data lives: ``--home`` beats ``RP_HOME`` beats the platform data dir; ``RP_DATABASE_URL``
(PostgreSQL) beats the SQLite file under home."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from platformdirs import user_data_dir

SQLITE_FILENAME = "roleplay.db"


@dataclass(frozen=True)
class Paths:
    home: Path
    database_url: str

    @property
    def is_sqlite(self) -> bool:
        return not self.database_url.startswith(("postgresql://", "postgres://"))


def resolve_paths(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Paths:
    env = os.environ if env is None else env
    if home is None:
        home = env.get("RP_HOME") or user_data_dir("roleplay", appauthor=False)
    home_path = Path(home).expanduser()
    url = env.get("RP_DATABASE_URL") or f"sqlite:///{home_path / SQLITE_FILENAME}"
    return Paths(home=home_path, database_url=url)
