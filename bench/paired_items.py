"""Paired comparison of two methods from the per-run CSVs of ``bench/active_predictors.py``.

Run: python bench/paired_items.py DIR --base SPEC --other SPEC

Both methods ran on the same draws (targets, references, seeds), so the difference in
items at the stop is read run by run: for each (dataset, variant), coverage of both, the
saving of both against RS-Mean (``random``, which must be in the runs), and the change in
items as a share of RS-Mean's mean items with its paired SE.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.experiments.tables import markdown_table


def compare(runs: pd.DataFrame, base: str, other: str) -> pd.DataFrame:
    """One row per (dataset, variant) of ``runs`` (module docstring)."""
    rows = []
    for (dataset, variant), group in runs.groupby(["dataset", "variant"], sort=False):
        by = {m: g.reset_index(drop=True) for m, g in group.groupby("method")}
        a, b, rs = by[base], by[other], by["random"]
        if len(a) != len(b) or not np.array_equal(a.truth, b.truth):
            raise SystemExit(f"{dataset} {variant}: the runs of {base} and {other} are not "
                             "the same draws (their counts or targets differ row by row)")
        change = (b.n - a.n) / rs.n.mean()
        rows.append({"dataset": dataset.split("-")[0], "variant": variant, "runs": len(a),
                     "coverage base": a.covered.mean(), "coverage other": b.covered.mean(),
                     "saving base": 1 - a.n.mean() / rs.n.mean(),
                     "saving other": 1 - b.n.mean() / rs.n.mean(),
                     "items change %": 100 * change.mean(),
                     "paired SE %": 100 * change.std() / np.sqrt(len(change))})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--base", default="active-pai")
    parser.add_argument("--other", required=True)
    args = parser.parse_args()
    runs = pd.concat([pd.read_csv(f) for f in sorted(args.dir.glob("*.csv"))],
                     ignore_index=True)
    table = compare(runs, args.base, args.other)
    print(markdown_table(table.round(4)))
    means = table.groupby("variant", sort=False)[["saving base", "saving other",
                                                  "items change %"]].mean()
    print()
    print(markdown_table(means.round(4).reset_index()))


if __name__ == "__main__":
    main()
