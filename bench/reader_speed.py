"""Reading a 1000 × 5000 score matrix (CSV and parquet, wide and long) with bayeval's
readers at several commits, each time beside pandas' own reader of the same file in the
same process (the ratio is what compares across machines).

    python bench/reader_speed.py --commits 396fd1e,HEAD

Each commit is unpacked with ``git archive`` and timed in a fresh interpreter with its
folder first on ``PYTHONPATH`` (bench/bad_input_table.py's helper); the files are written
once, by this checkout, with 10% of the cells missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_input_table import unpack_commit

TIME = '''
import json, sys, time
import pandas as pd
from bayeval.data.io import read_csv, read_parquet
path, layout, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
read = read_csv if path.endswith(".csv") else read_parquet
own = pd.read_csv if path.endswith(".csv") else pd.read_parquet
def best(fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter(); fn(); times.append(time.perf_counter() - start)
    return min(times)
m = read(path)  # warm: imports and the file in the page cache
print(json.dumps({"bayeval": best(lambda: read(path)), "pandas": best(lambda: own(path)),
                  "shape": [m.n_models, m.n_items]}))
'''


def write_files(folder: Path, models: int, items: int, seed: int = 0) -> dict[str, Path]:
    """Wide and long CSV and parquet files of one random binary matrix."""
    rng = np.random.default_rng(seed)
    scores = (rng.random((models, items)) < 0.6).astype(float)
    scores[rng.random(scores.shape) < 0.1] = np.nan
    wide = pd.DataFrame(scores, columns=[f"item-{j:05d}" for j in range(items)])
    wide.insert(0, "model", [f"org/model-{i:04d}" for i in range(models)])
    m, i = np.nonzero(~np.isnan(scores))
    long = pd.DataFrame({"model": wide["model"].to_numpy()[m],
                         "item": np.asarray(wide.columns[1:])[i], "score": scores[m, i]})
    paths = {"wide.csv": folder / "wide.csv", "long.csv": folder / "long.csv",
             "wide.parquet": folder / "wide.parquet", "long.parquet": folder / "long.parquet"}
    wide.to_csv(paths["wide.csv"], index=False, na_rep="")
    long.to_csv(paths["long.csv"], index=False)
    wide.to_parquet(paths["wide.parquet"], index=False)
    long.to_parquet(paths["long.parquet"], index=False)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", default="396fd1e,HEAD")
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    opts = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        files = write_files(Path(root), opts.models, opts.items)
        for commit in opts.commits.split(","):
            tree = Path(root) / commit.replace("/", "_")
            tree.mkdir()
            sha = unpack_commit(commit, tree)
            for name, path in files.items():
                done = subprocess.run(
                    [sys.executable, "-c", TIME, str(path), name.split(".")[0],
                     str(opts.repeats)], env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                    cwd=tree, capture_output=True, text=True, check=True)  # cwd: sys.path[0]
                r = json.loads(done.stdout)
                rows.append((sha, name, r["bayeval"], r["pandas"]))
                print(f"{sha} {name}: bayeval {r['bayeval']:.2f} s, pandas {r['pandas']:.2f} s",
                      file=sys.stderr, flush=True)
    print(f"{opts.models} models × {opts.items} items, best of {opts.repeats}\n")
    print("| commit | file | bayeval (s) | pandas' own reader (s) | bayeval / pandas |")
    print("|---|---|---|---|---|")
    for sha, name, ours, theirs in rows:
        print(f"| {sha} | {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.1f}× |")


if __name__ == "__main__":
    main()
