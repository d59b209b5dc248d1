"""Hostile-input fuzz of card (JSON, PNG) and lorebook import and of MVU card text, large.

    .venv/bin/python bench/fuzz.py [--cases N] [--seed S] [--files N] [--mvu N] [--mvu-size C] [--save DIR]

``--cases`` (default ``$RP_FUZZ_CASES`` or 2000) cases go through the pure entry points
(``import_card_bytes``, ``parse_lorebook``); ``--files`` (default a quarter of that) more go through
the user's path, ``import_file`` on a temporary SQLite asset store. The generator and the case
rules are ``roleplay.testing.fuzz_assets`` (the CI test ``tests/assets/test_fuzz_assets.py`` runs
it small). ``--mvu`` (default a half of ``--cases``) cases of structured hostile MVU text, up to
``--mvu-size`` characters (default ``$RP_FUZZ_MVU_SIZE`` or 400,000), go through the adapter's
parsers (``roleplay.testing.fuzz_mvu``; its CI test is ``tests/compat/test_fuzz.py``), where not
even a coded error may escape. ``--save DIR`` writes a shrunk input for the first failure of each kind, to replay with
``import_card_bytes(open(f, 'rb').read())`` or ``parse_lorebook(..., book_id='x')``.

Targets: 0 failures (only an ``RpError`` with a code may escape, no case interrupted after 30 s),
and at most 2.0 s for the slowest case (inputs are up to ~6 MB; the machine is shared, so read a
near miss with care).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from roleplay.assets.store import AssetStore  # noqa: E402
from roleplay.harness.store import open_store  # noqa: E402
from roleplay.testing import fuzz_assets, fuzz_mvu  # noqa: E402
from roleplay.testing.fuzz_assets import Case, Failure, Report, generate, run, run_files, shrink  # noqa: E402

MAX_CASE_SECONDS = 2.0
TIMEOUT_SECONDS = 30.0
SEED = 20261202


def _same_failure(failure: Failure):  # type: ignore[no-untyped-def]
    signature = failure.error.split(":")[0]

    def check(case: Case) -> bool:
        report = run([case], slow_seconds=float("inf"), timeout_seconds=TIMEOUT_SECONDS)
        return any(f.kind == failure.kind and f.error.split(":")[0] == signature for f in report.failures)

    return check


def _save(failures: list[Failure], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for failure in failures:
        key = f"{failure.case.target}-{failure.kind}-{failure.error.split(':')[0]}"
        if key in seen or failure.kind in ("slow", "timeout"):
            continue  # shrinking a slow case would only make it fast
        seen.add(key)
        small = shrink(failure.case, _same_failure(failure))
        path = out / f"{key.replace(' ', '_')}-{failure.case.index}.bin"
        path.write_bytes(small.data)
        print(f"  saved {path} ({len(small.data)} bytes, from {len(failure.case.data)})")


def _print(title: str, report: Report, seconds: float) -> None:
    slowest = report.slowest
    print(f"{title}: {report.cases} cases in {seconds:.1f} s, {len(report.failures)} failures")
    if slowest is not None:
        print(
            f"  max time per case: {report.max_seconds:.3f} s (#{slowest.index} {slowest.target} [{slowest.mutation}], "
            f"{len(slowest.data)} bytes)"
        )
    kinds = Counter(f"{f.case.target} {f.kind}: {f.error.split(':')[0]}" for f in report.failures)
    for kind, n in kinds.most_common():
        print(f"  {n:5d}  {kind}")
    for failure in report.failures[:10]:
        print("   e.g. " + failure.describe())
    codes = ", ".join(f"{code} {n}" for code, n in report.outcomes.most_common(12))
    print(f"  outcomes: {codes}")


async def _files(cases: list[Case]) -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"sqlite:///{tmp}/fuzz.db") as events:
            await events.migrate()
            return await run_files(cases, AssetStore(events), slow_seconds=TIMEOUT_SECONDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=int(os.environ.get("RP_FUZZ_CASES", "2000")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("RP_FUZZ_SEED", str(SEED))))
    parser.add_argument("--files", type=int, default=None, help="cases through import_file (default cases/4)")
    parser.add_argument("--mvu", type=int, default=None, help="MVU text cases (default cases/2)")
    parser.add_argument("--mvu-size", type=int, default=int(os.environ.get("RP_FUZZ_MVU_SIZE", "400000")))
    parser.add_argument("--save", type=Path, help="write shrunk failing inputs here")
    args = parser.parse_args()
    files = args.cases // 4 if args.files is None else args.files
    print(f"seed {args.seed}; generator {fuzz_assets.__name__}")

    t0 = time.perf_counter()
    pure = run(generate(args.seed, args.cases), slow_seconds=TIMEOUT_SECONDS, timeout_seconds=TIMEOUT_SECONDS)
    _print("pure entry points", pure, time.perf_counter() - t0)
    t0 = time.perf_counter()
    through_files = asyncio.run(_files(list(generate(args.seed + 1, files)))) if files else Report()
    if files:
        _print("import_file on SQLite", through_files, time.perf_counter() - t0)

    mvu_cases = args.cases // 2 if args.mvu is None else args.mvu
    t0 = time.perf_counter()
    mvu = (
        fuzz_mvu.run(
            fuzz_mvu.generate(args.seed + 2, mvu_cases, max_size=args.mvu_size),
            slow_seconds=TIMEOUT_SECONDS,
            timeout_seconds=TIMEOUT_SECONDS,
        )
        if mvu_cases
        else Report()
    )
    if mvu_cases:
        _print(f"MVU card text (up to {args.mvu_size} characters)", mvu, time.perf_counter() - t0)

    failures = [*pure.failures, *through_files.failures]
    mvu_failures = mvu.failures  # MVU inputs are text, not import bytes: reported, not shrunk
    worst = max(pure.max_seconds, through_files.max_seconds, mvu.max_seconds)
    if args.save and failures:
        _save(failures, args.save)
    print(f"target: 0 failures, max time per case <= {MAX_CASE_SECONDS:.1f} s")
    ok = not failures and not mvu_failures and worst <= MAX_CASE_SECONDS
    print(f"result: {len(failures) + len(mvu_failures)} failures, max time per case {worst:.3f} s")
    print("verdict: " + ("PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
