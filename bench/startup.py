"""Start-up time of ``rp --help``, ``rp sessions list --help`` and a whole ``rp say`` turn with the
offline demo (issue 13 item 8: the demo never imports the ``openai`` SDK).

    .venv/bin/python bench/startup.py [--src DIR] [--runs N]

``--src`` points at another checkout's ``src`` (a ``git worktree`` of an older commit) to measure
before and after. Each run is a fresh interpreter, so this is wall time as a user sees it
(interpreter start-up included). Target: the median of ``rp --help`` at most 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.300
CASES = [["--help"], ["sessions", "list", "--help"]]


def measure(args: list[str], runs: int, src: Path, home: str | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), **({"RP_HOME": home} if home else {})}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from roleplay.cli import main; main()", *args], env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    parser.add_argument("--runs", type=int, default=9)
    opts = parser.parse_args()
    python_only = statistics.median([_time([sys.executable, "-c", "pass"]) for _ in range(opts.runs)])
    print(f"python -c pass: {python_only * 1000:.0f} ms (interpreter floor)")
    verdict = True
    for args in CASES:
        median = measure(args, opts.runs, opts.src)
        line = f"rp {' '.join(args)}: median {median * 1000:.0f} ms over {opts.runs} runs"
        if args == ["--help"]:
            ok = median <= TARGET_S
            verdict = verdict and ok
            line += f" (target <= {TARGET_S * 1000:.0f} ms: {'PASS' if ok else 'FAIL'})"
        print(line)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PYTHONPATH": str(opts.src), "RP_HOME": home}
        made = subprocess.run(
            [sys.executable, "-c", "from roleplay.cli import main; main()", "new", "--sample", "--model", "demo", "--json"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        sid = json.loads(made.stdout)["sessionId"]
        median = measure(["say", sid, "I knock."], opts.runs, opts.src, home)
        print(f"rp say SESSION (demo, one whole turn): median {median * 1000:.0f} ms over {opts.runs} runs")
    print("verdict:", "PASS" if verdict else "FAIL")


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
