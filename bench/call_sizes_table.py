"""What the batch and the evaluations in flight keep of the one-at-a-time saving, and what
the call rules (docs/methods.md §9 "Call sizes") give back: coverage, items and calls at
the stop of ``active-pai`` from ``bayeval bench validity`` results.

Run the bench once per setting into one ``--out`` (RS-Mean's units are shared), keeping
each invocation's ``results.csv``; the rows of a one-at-a-time run are the reference::

    D=arc_challenge,commonsense,ifeval,math,mmlu,mrpc,musr,rte,sst2
    V="--variants standard,extrapolation --epsilons 0.05 --no-faq --seeds 3 --workers 2"
    bayeval bench validity --datasets $D $V --methods active-pai --out OUT
    cp OUT/results.csv one.csv
    bayeval bench validity --datasets $D $V --methods active-pai --batch 32 --out OUT
    cp OUT/results.csv b32.csv
    bayeval bench validity --datasets $D $V --methods active-pai --batch 32 \\
        --calls taper --out OUT
    cp OUT/results.csv b32_taper.csv
    python bench/call_sizes_table.py one.csv b32.csv b32_taper.csv --out TABLE.md

Per dataset, variant and setting: coverage at the stop ± its binomial SE (below 0.94
marked), the items at the stop, the evaluator's calls (one per item one at a time; with K
in flight each evaluation is its own), the saving against RS-Mean at the same ε, and that
saving as a share of the one-at-a-time run's ("kept"; the issue's bar is 90%). The runs of
every setting share their draws of targets, references and seeds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

ONE = "[one at a time]"


def rows_of(frames: list[pd.DataFrame], methods: list[str] | None = None,
            stratum: str = "all") -> pd.DataFrame:
    """The design-based rows of ``stratum`` (``methods``: only those specs, before their
    bracket); a method without a bracket ran one item at a time."""
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[(rows.stratum == stratum) & (rows.method != "random")].copy()
    spec = rows.method.str.replace(r"\s*\[.*$", "", regex=True)
    if methods:
        rows = rows[spec.isin(methods)]
        spec = spec[rows.index]
    plain = ~rows.method.str.contains(r"\[", regex=True)
    rows.loc[plain, "method"] = rows.loc[plain, "method"] + " " + ONE
    rows["spec"] = spec
    return rows.drop_duplicates(["dataset", "variant", "epsilon", "method"])


def _cell(cell: pd.DataFrame, setting: str) -> tuple[str, float | None]:
    """One setting's text in a dataset's row, and its share of the one-at-a-time saving
    (None where there is none to compare with)."""
    mine = cell[cell.method == setting]
    if mine.empty:
        return "–", None
    r = mine.iloc[0]
    one = cell[(cell.spec == r.spec) & cell.method.str.endswith(ONE)]
    share = None
    if not one.empty and not setting.endswith(ONE) and one.iloc[0].saving_vs_rs > 0:
        share = r.saving_vs_rs / one.iloc[0].saving_vs_rs
    flag = " **below 0.94**" if r.coverage < 0.94 else ""
    kept = "" if share is None else f", kept {share:.0%}"
    return (f"{r.coverage:.3f} ± {r.coverage_se:.3f}{flag}; {r.mean_items:.0f} items, "
            f"{r.get('mean_calls', float('nan')):.1f} calls; saving "
            f"{r.saving_vs_rs:.1%}{kept}"), share


def markdown(rows: pd.DataFrame) -> str:
    """One table per variant: a row per dataset, a column per setting."""
    settings = list(dict.fromkeys(rows.method))
    out = []
    for variant, part in rows.groupby("variant", sort=False):
        out += [f"### {variant}", "",
                "| dataset | " + " | ".join(settings) + " |",
                "|---|" + "---|" * len(settings)]
        kept_of: dict[str, list[float]] = {s: [] for s in settings}
        for dataset, cell in part.groupby("dataset", sort=True):
            texts = []
            for s in settings:
                text, share = _cell(cell, s)
                texts.append(text)
                if share is not None:
                    kept_of[s].append(share)
            out.append(f"| {dataset} | " + " | ".join(texts) + " |")
        means = part.groupby("method", sort=False).agg(
            coverage=("coverage", "min"), saving=("saving_vs_rs", "mean"))
        out.append("| **lowest coverage; mean saving; datasets kept ≥ 90%** | " + " | ".join(
            f"{means.loc[s, 'coverage']:.3f}; {means.loc[s, 'saving']:.1%}"
            + (f"; {sum(k >= 0.9 for k in kept_of[s])} of {len(kept_of[s])}"
               if kept_of[s] else "")
            if s in means.index else "–" for s in settings) + " |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="bench validity results.csv")
    parser.add_argument("--methods", default="", help="only these method specs "
                        "(comma-separated, as the bench named them before the bracket)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = rows_of([pd.read_csv(p) for p in args.results],
                   [m for m in args.methods.split(",") if m] or None)
    text = markdown(rows)
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
