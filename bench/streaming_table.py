"""The price of streaming and batches: coverage and items of ``active-pai`` with K
evaluations in flight or in batches of k, from ``bayeval bench validity`` results.

Run the bench once per setting into one ``--out`` (RS-Mean's units are shared: its draws do
not depend on what is in flight), keeping each invocation's ``results.csv``::

    D=arc_challenge,commonsense,ifeval,math,mmlu,mrpc,musr,rte,sst2
    for K in 1 8 32; do
      bayeval bench validity --datasets $D --variants standard --epsilons 0.05 \\
          --methods active-pai --no-faq --concurrency $K --out OUT
      cp OUT/results.csv results_k$K.csv
    done
    bayeval bench validity ... --batch 128 --out OUT; cp OUT/results.csv results_b128.csv
    python bench/streaming_table.py results_k1.csv results_k8.csv results_k32.csv \\
        results_b128.csv --out docs/results/streaming.md

Per dataset and setting: coverage of the 95% interval at the stop ± its binomial SE (a cell
below 0.94 is marked), the items whose scores the estimate used, the items drawn by the
stop (those in flight, or the rest of the batch, are spent too), and the saving against
RS-Mean at the same ε counting either.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def table(frames: list[pd.DataFrame], stratum: str = "all") -> pd.DataFrame:
    """The design-based rows of ``stratum``; a one-at-a-time run (results written before
    the drawn count existed) has drawn = used, and is labelled ``[K=1]``."""
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[(rows.stratum == stratum) & (rows.method != "random")].copy()
    if "mean_drawn" not in rows:
        rows["mean_drawn"] = float("nan")
        rows["saving_drawn_vs_rs"] = float("nan")
    one = rows.mean_drawn.isna()
    rows.loc[one, "mean_drawn"] = rows.loc[one, "mean_items"]
    rows.loc[one, "saving_drawn_vs_rs"] = rows.loc[one, "saving_vs_rs"]
    plain = ~rows.method.str.contains(r"\[", regex=True)
    rows.loc[plain, "method"] = rows.loc[plain, "method"] + " [K=1]"
    return rows.drop_duplicates(["dataset", "variant", "epsilon", "method"])


def markdown(rows: pd.DataFrame) -> str:
    methods = list(dict.fromkeys(rows.method))
    head = "| dataset | " + " | ".join(methods) + " |"
    lines = [head, "|---|" + "---|" * len(methods)]
    for dataset, part in rows.groupby("dataset", sort=True):
        cells = []
        for m in methods:
            r = part[part.method == m]
            if r.empty:
                cells.append("–")
                continue
            r = r.iloc[0]
            flag = " **below 0.94**" if r.coverage < 0.94 else ""
            drawn, spent = r.mean_drawn, r.saving_drawn_vs_rs
            cells.append(f"{r.coverage:.3f} ± {r.coverage_se:.3f}{flag}; "
                         f"{r.mean_items:.0f} used, {drawn:.0f} drawn; saving "
                         f"{r.saving_vs_rs:.1%} ({spent:.1%})")
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    mean = rows.groupby("method", sort=False)[["coverage", "saving_vs_rs"]].agg(
        {"coverage": "min", "saving_vs_rs": "mean"})
    drawn = rows.groupby("method", sort=False)["saving_drawn_vs_rs"].mean()
    lines.append("| **lowest coverage; mean saving (counting drawn)** | " + " | ".join(
        f"{mean.loc[m, 'coverage']:.3f}; {mean.loc[m, 'saving_vs_rs']:.1%} "
        f"({drawn.loc[m]:.1%})" for m in methods) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="bench validity results.csv")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = table([pd.read_csv(p) for p in args.results])
    text = markdown(rows)
    if args.out is not None:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
