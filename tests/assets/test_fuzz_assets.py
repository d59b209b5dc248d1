"""Hostile card and lorebook files never crash import: a fixed-seed mutation fuzz, small here.

Only an ``RpError`` with a code may escape; anything else, and a case that hangs, fails the test
with a description of each failing case. ``RP_FUZZ_CASES`` / ``RP_FUZZ_SEED`` change the size and
the seed; ``bench/fuzz.py`` runs the same generator large and checks the per-case time target (the
bounds here only catch hangs).
"""

from __future__ import annotations

import os

import pytest

from roleplay.assets.store import AssetStore
from roleplay.errors import RpError
from roleplay.harness.store import EventStore
from roleplay.testing import fuzz_assets
from roleplay.testing.fuzz_assets import Case, Report, generate, run, run_files, shrink

CASES = int(os.environ.get("RP_FUZZ_CASES", "60"))
SEED = int(os.environ.get("RP_FUZZ_SEED", "20261202"))
HANG_SECONDS = 20.0  # per case: a hang guard for a shared CI machine, not a speed target
TIMEOUT_SECONDS = 60.0


def explain(report: Report) -> str:
    lines = [f.describe() for f in report.failures[:20]]
    return f"{len(report.failures)} of {report.cases} cases failed:\n" + "\n".join(lines)


@pytest.mark.parametrize("target", ["card-json", "card-png", "lorebook"])
def test_import_only_raises_coded_errors(target: str) -> None:
    count = max(CASES // 3, 6)
    report = run(generate(SEED, count, (target,)), slow_seconds=HANG_SECONDS, timeout_seconds=TIMEOUT_SECONDS)
    assert report.cases == count
    assert not report.failures, explain(report)
    refused = sum(n for code, n in report.outcomes.items() if code != "ok")
    assert refused >= count // 4  # the mutations really are hostile: many files are refused


@pytest.mark.anyio
async def test_import_file_only_raises_coded_errors(store: EventStore) -> None:
    cases = list(generate(SEED + 1, max(CASES // 4, 6)))
    report = await run_files(cases, AssetStore(store), slow_seconds=HANG_SECONDS)
    assert not report.failures, explain(report)


def test_the_generator_is_deterministic_and_covers_every_target() -> None:
    first = [(c.target, c.mutation, c.data) for c in generate(7, 12)]
    assert first == [(c.target, c.mutation, c.data) for c in generate(7, 12)]
    assert {t for t, _, _ in first} == {"card-json", "card-png", "lorebook"}
    assert first != [(c.target, c.mutation, c.data) for c in generate(8, 12)]


def test_the_runner_reports_crashes_codeless_errors_and_slow_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = iter([KeyError("boom"), RpError("", "no code"), RpError("card.json.invalid", "fine"), None, None])
    ticks = iter([0.0, 0.1, 1.0, 1.1, 2.0, 2.1, 3.0, 3.1, 4.0, 9.0])

    def target(case: Case) -> None:
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(fuzz_assets, "run_target", target)
    cases = [Case(i, "card-json", "m", b"{}") for i in range(5)]
    report = run(cases, slow_seconds=1.0, timeout_seconds=5.0, clock=lambda: next(ticks))
    assert [(f.case.index, f.kind) for f in report.failures] == [(0, "crash"), (1, "no-code"), (4, "slow")]
    assert report.outcomes == {"(none)": 1, "card.json.invalid": 1, "ok": 2}
    assert report.max_seconds == pytest.approx(5.0) and report.slowest == cases[4]


def test_a_hanging_case_is_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(case: Case) -> None:
        while True:
            pass

    monkeypatch.setattr(fuzz_assets, "run_target", hang)
    report = run([Case(0, "lorebook", "m", b"{}")], slow_seconds=10.0, timeout_seconds=0.2)
    assert [f.kind for f in report.failures] == ["timeout"]


def test_shrink_keeps_the_failure_and_drops_the_rest() -> None:
    case = Case(0, "card-json", "m", b"x" * 500 + b"BAD" + b"y" * 500)
    small = shrink(case, lambda c: b"BAD" in c.data)
    assert small.data == b"BAD"
