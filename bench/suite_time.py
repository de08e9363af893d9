"""The test suite's own time, as a newcomer meets it: ``python -m pytest -q -n 2`` on this
checkout with an empty JAX compile cache and an empty HOME (a fresh machine), then the
same again with the cache it left (warm). Reports the wall time of each run, the distinct
compiled programs the run left in the persistent cache, and the slowest tests.

Run: python bench/suite_time.py [--runs 2] [--warm 1] [--out docs/results/suite_time.md]

The standard is 600 s fresh (median of the runs) and 300 s warm on 2 cores. This is a
measurement, not a test: nothing here fails on time.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the suite's conftest keeps every process's compiled programs here (tests/conftest.py)
CACHE = Path(tempfile.gettempdir()) / "bayeval-tests-jax-cache"
XDG = Path(tempfile.gettempdir()) / "bayeval-tests-cache"


def run_suite(home: Path, durations: int, profile: Path) -> tuple[float, str]:
    """(wall seconds, pytest's output) of one run of the README's test command, each
    test's in-process tracing and compiling seconds appended to ``profile``."""
    env = {**os.environ, "HOME": str(home), "BAYEVAL_COMPILE_PROFILE": str(profile)}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2",
                           f"--durations={durations}", "-p", "no:cacheprovider"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    return wall, done.stdout + done.stderr


def summary_line(output: str) -> str:
    """pytest's last line, with the node id of every test that failed or erred."""
    lines = [x for x in output.splitlines() if re.search(r"\d+ (passed|failed)", x)]
    summary = lines[-1].strip("= ") if lines else "no summary (see the output)"
    failed = [x.split()[1] for x in output.splitlines()
              if x.startswith(("FAILED ", "ERROR ")) and len(x.split()) > 1]
    return summary + (f" ({', '.join(failed)})" if failed else "")


def failures(output: str, limit: int = 40) -> list[str]:
    """What a failing test said: pytest's ``E`` lines and the ``file:line`` of each failure
    (``-q`` prints them), at most ``limit`` lines, so that an intermittent failure can be
    read from the report after the run."""
    keep = [x for x in output.splitlines()
            if x.startswith("E ") or re.match(r"^(tests|bayeval)/\S+:\d+: \w+", x)
            or x.startswith("___")]
    return keep[:limit]


def slowest(output: str, count: int) -> list[str]:
    rows = [x for x in output.splitlines() if re.match(r"\s*\d+\.\d+s (call|setup)", x)]
    return rows[:count]


def compile_by_file(profile: Path) -> list[tuple[float, str]]:
    """(seconds, test file) of in-process tracing and compiling, most first."""
    totals: dict[str, float] = {}
    for line in profile.read_text().splitlines() if profile.exists() else []:
        seconds, node = line.split("\t", 1)
        name = node.split("::")[0]
        totals[name] = totals.get(name, 0.0) + float(seconds)
    return sorted(((v, k) for k, v in totals.items()), reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="fresh runs (median reported)")
    parser.add_argument("--warm", type=int, default=1, help="warm runs after the last")
    parser.add_argument("--slowest", type=int, default=15)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/suite_time.md")
    args = parser.parse_args()

    rows, last, compiled, failed = [], "", [], []
    for k in range(args.runs + args.warm):
        fresh = k < args.runs
        if fresh:
            shutil.rmtree(CACHE, ignore_errors=True)
            shutil.rmtree(XDG, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix="bayeval-home-") as home:
            profile = Path(home).parent / f"bayeval-compile-{os.getpid()}-{k}.tsv"
            profile.unlink(missing_ok=True)
            wall, output = run_suite(Path(home), args.slowest, profile)
        if fresh:
            compiled = compile_by_file(profile)
        profile.unlink(missing_ok=True)
        programs = sum(1 for p in CACHE.rglob("*") if p.is_file()) if CACHE.exists() else 0
        kind = "fresh" if fresh else "warm"
        rows.append((kind, wall, programs, summary_line(output)))
        said = failures(output)
        if said:
            failed += [f"run {k + 1} ({kind}):", *said]
        last = output
        print(f"[{time.strftime('%H:%M:%S')}] {kind} run {k + 1}: {wall:.0f} s, "
              f"{programs} compiled programs cached, {rows[-1][3]}", flush=True)

    fresh_walls = [w for kind, w, _, _ in rows if kind == "fresh"]
    warm_walls = [w for kind, w, _, _ in rows if kind == "warm"]
    lines = ["# The test suite's own time", "",
             "`python -m pytest -q -n 2` on 2 cores; fresh: an empty JAX compile cache and an "
             "empty HOME; warm: the cache the previous run left. Standard: 600 s fresh "
             "(median), 300 s warm.", "",
             f"Command: `python bench/suite_time.py --runs {args.runs} --warm {args.warm}`",
             "", "| run | wall s | compiled programs in the cache after it | result |",
             "|---|---|---|---|"]
    lines += [f"| {kind} | {wall:.0f} | {programs} | {result} |"
              for kind, wall, programs, result in rows]
    if fresh_walls:
        lines += ["", f"Fresh median: **{statistics.median(fresh_walls):.0f} s**"
                  + (f"; warm: **{statistics.median(warm_walls):.0f} s**" if warm_walls
                     else "") + "."]
    if compiled:
        total = sum(v for v, _ in compiled)
        lines += ["", f"Tracing and compiling in the test processes themselves (not the "
                  f"processes they start) in the last fresh run: {total:.0f} s of the two "
                  f"workers' {2 * fresh_walls[-1]:.0f} s. By file:", "",
                  "| file | s |", "|---|---|"]
        lines += [f"| {name} | {v:.0f} |" for v, name in compiled[:10]]
    if failed:
        lines += ["", "What the failing tests said:", "", "```", *failed, "```"]
    lines += ["", f"The {args.slowest} slowest tests of the last run:", "", "```",
              *slowest(last, args.slowest), "```", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
