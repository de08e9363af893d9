"""``bayeval diagnose --model gp-bernoulli --coreset 50`` timed at several commits, with
the number of XLA "constant folding" alarms it writes to stderr.

    python bench/diagnose_timing.py --commits 036d780,HEAD

Each commit is unpacked with ``git archive`` and run with its folder first on
``PYTHONPATH`` (see bench/bad_input_table.py), the commits alternating ``--repeats`` times
on this machine with a fresh ``HOME`` each run (no compilation cache carried over), so the
times are comparable with each other, not with another machine's. Run it on an idle
machine: another process on the cores changes the times.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_input_table import unpack_commit

RUN = '''
import sys
from bayeval.cli import main
sys.argv = ["bayeval", "diagnose", *{argv!r}]
main()
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", default="036d780,HEAD")
    parser.add_argument("--args", default="--model gp-bernoulli --coreset 50",
                        help="diagnose's arguments")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs of each commit, alternating between the commits")
    opts = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        trees = []
        for commit in opts.commits.split(","):
            tree = Path(root) / commit.replace("/", "_")
            tree.mkdir()
            trees.append((unpack_commit(commit, tree), tree))
        for _, (sha, tree) in [(r, t) for r in range(opts.repeats) for t in trees]:
            # HOME in the unpacked tree: no JAX compilation cache shared between runs
            home = Path(tempfile.mkdtemp(dir=root))
            env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "HOME": str(home),
                   "JAX_PLATFORMS": "cpu"}
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", RUN.format(argv=opts.args.split())],
                                  cwd=tree, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            alarms = sum("constant folding" in line.lower()
                         for line in done.stderr.splitlines())
            rows.append((sha, done.returncode, seconds, alarms, len(done.stderr)))
            print(f"{sha}: exit {done.returncode}, {seconds:.1f} s, {alarms} alarms",
                  file=sys.stderr, flush=True)
    print("| commit | exit | seconds | XLA constant-folding alarms | stderr bytes |")
    print("|---|---|---|---|---|")
    for sha, code, seconds, alarms, size in rows:
        print(f"| {sha} | {code} | {seconds:.1f} | {alarms} | {size} |")


if __name__ == "__main__":
    main()
