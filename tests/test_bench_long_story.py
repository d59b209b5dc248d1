"""``bench/long_story.py`` (issue 12 item 7): a short run prints its checkpoints and every target
with a verdict; its meters (round trips, the flat-budget verdict) measure what they claim.

The bench's figures are not asserted (speed targets are never timed tests); only that it runs,
reports each measure, and judges honestly.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "long_story.py"
TARGETS = (
    "parent request tokens at turn 12 (target: 1,000)",
    "parent request tokens flat after the budget fills",
    "engine p50 at turn 12 (target: 1,000) ÷ at turn 10 (SQLite)",
    "DB size after 12 turns (SQLite)",
    "PostgreSQL round trips per turn",
    "PostgreSQL engine p50 ÷ SQLite, same run",
)


def load_bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("long_story_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600, cwd=ROOT)


def verdict_of(stdout: str, measure: str) -> str:
    line = next(line for line in stdout.splitlines() if line.startswith(measure))
    return line.split()[-1]


def test_a_short_sqlite_run_prints_checkpoints_and_every_target() -> None:
    # A 2,000-token window fills at once, so the parent-token targets are judged (and fail: the
    # parent's request is not budgeted yet), whatever else the engine does meanwhile.
    proc = run_bench("--turns", "12", "--window", "2000")
    assert proc.returncode == 1, proc.stderr  # at least one target fails
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip()[:2] in ("10", "12")]
    assert [r[0] for r in rows] == ["10", "12"]
    assert all(len(r) == 11 for r in rows)  # turn, p50, p95, CPU p50, tokens ×2, events ×2, DB, RSS, peak
    assert "SQLite: 12 turns in" in proc.stdout and "0 not committed" in proc.stdout
    for measure in TARGETS:
        assert verdict_of(proc.stdout, measure) in ("PASS", "FAIL", "n/a"), measure
    assert verdict_of(proc.stdout, TARGETS[0]) == "FAIL"
    assert verdict_of(proc.stdout, TARGETS[4]) == "n/a"  # no --postgres


def test_the_flat_budget_verdict_needs_samples_after_the_fill() -> None:
    flat = load_bench().flat_after_fill
    assert flat({25: 10, 50: 20, 75: 30}, 1000).ok is None  # never filled
    assert flat({25: 100, 50: 950}, 1000).ok is None  # filled at the last sample
    assert flat({25: 950, 50: 960, 75: 990}, 1000).ok is True
    assert flat({25: 950, 50: 960, 75: 1200}, 1000).ok is False
    # The budget is full at 95% of what a request may spend (the window less the reply reserve,
    # a quarter of a small window), not of the whole window, which no request ever reaches.
    assert flat({25: 720, 50: 730, 75: 740}, 1000).ok is True


@pytest.mark.postgres
def test_round_trips_count_every_statement_and_transaction_command(postgres_url: str) -> None:
    import psycopg

    trips = load_bench().RoundTrips()
    trips.install()
    try:
        assert trips.available
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            before = trips.count
            conn.execute("SELECT 1")
            assert trips.count - before == 1
        with psycopg.connect(postgres_url) as conn:
            before = trips.count
            for i in range(6):  # the 5th execution prepares the statement first: one more trip
                conn.execute("SELECT %s::int", (i,))
            conn.commit()
            assert trips.count - before == 1 + 6 + 1 + 1  # BEGIN, 6 queries, PREPARE, COMMIT
    finally:
        trips.uninstall()
    before = trips.count
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SELECT 1")
    assert trips.count == before  # uninstalled


@pytest.mark.postgres
def test_a_short_run_on_both_backends_judges_the_postgres_targets(postgres_url: str) -> None:
    proc = run_bench("--turns", "12", "--postgres", postgres_url)
    assert "PostgreSQL: 12 turns in" in proc.stdout, proc.stderr
    assert verdict_of(proc.stdout, TARGETS[4]) in ("PASS", "FAIL")
    assert verdict_of(proc.stdout, TARGETS[5]) in ("PASS", "FAIL")
