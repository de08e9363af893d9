"""The ceiling on active-pai's saving: how many items any design-unbiased estimator needs
for a width ε when a predictor already knows the target's whole row (cross-fitted), beside
what active-pai measured on the same draws.

Run: python bench/saving_bound.py [--datasets a,b] [--variants standard,extremes,sparse]
    [--epsilons 0.02,0.05,0.1] [--seeds 25] [--targets 10] [--p-min 0.02]
    [--measured docs/results/validity/results.csv,...] [--out DIR]

The draws are ``bench validity``'s (same seeds, targets and reference models). For each
target, RS-Mean's items for the width (the normal width of a mean without replacement),
the Godambe–Joshi bound's items for a calibrated predictor, and the items of a design
that draws in proportion to the predictor's σ with a 5% uniform share, its variance
taken from the residuals the predictor really leaves (bayeval.experiments.saving_bound),
and with ``--p-min`` (active-pai's default 0.02) the same design ``floored``: drawn from
and floored by the predictor's variances clipped at p_min, as active-pai's rule and
variance floor read them.
Saving = 1 − Σ items / Σ items of RS-Mean over the targets, as bench validity computes it;
its SE is a bootstrap over the draws. None of these charge for estimating the variance
from the sample, nor for learning the target from its first items, so a real run's saving
is below them. ``--measured`` reads bench validity's results.csv files and puts
active-pai's measured saving beside the ceiling. Writes runs.csv, saving.csv, report.md
and saving.png to --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from bayeval.cli.common import progress_bar
from bayeval.data import load_dataset
from bayeval.data.bundled import list_datasets
from bayeval.errors import DataError
from bayeval.experiments.saving_bound import run_saving_bound, saving_table
from bayeval.experiments.tables import markdown_table

SHOWN = ("difficulty(5) gj", "difficulty(5) policy", "difficulty(10) policy",
         "similar-models policy", "stacked policy", "difficulty(5) floored",
         "stacked floored")


def measured_saving(paths: list[Path], method: str = "active-pai") -> pd.DataFrame:
    """active-pai's saving per (dataset, variant, ε) from bench validity's results.csv."""
    frames = [pd.read_csv(p) for p in paths]
    if not frames:
        return pd.DataFrame(columns=["dataset", "variant", "epsilon", "measured"])
    res = pd.concat(frames, ignore_index=True)
    res = res[(res.method == method) & (res.stratum == "all")]
    res = res.drop_duplicates(["dataset", "variant", "epsilon"], keep="last")
    return res[["dataset", "variant", "epsilon", "saving_vs_rs"]].rename(
        columns={"saving_vs_rs": "measured"})


def cell(value: float, se: float) -> str:
    return f"{100 * value:.1f} ± {100 * se:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--datasets", default=",".join(list_datasets()))
    parser.add_argument("--variants", default="standard")
    parser.add_argument("--epsilons", default="0.02,0.05,0.1")
    parser.add_argument("--seeds", type=int, default=25)
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--p-min", type=float, default=0.02,
                        help="the clip of the floored design (active-pai's p_min)")
    parser.add_argument("--measured", default="",
                        help="comma-separated results.csv files of bench validity")
    parser.add_argument("--out", type=Path, default=Path("results/saving_bound"))
    parser.add_argument("--reuse", action="store_true",
                        help="read OUT/runs.csv from an earlier run instead of computing it "
                             "(to put new --measured results beside it)")
    args = parser.parse_args()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    parts = []
    if args.reuse:
        if not (args.out / "runs.csv").exists():
            raise SystemExit(f"--reuse: {args.out / 'runs.csv'} does not exist")
        parts.append(pd.read_csv(args.out / "runs.csv"))
    names = [] if args.reuse else args.datasets.split(",")
    cells = [(name, variant) for name in names for variant in args.variants.split(",")]
    with progress_bar("bounding") as bar:
        task = bar.add_task("", total=len(cells) * args.seeds, status="")
        for k, (name, variant) in enumerate(cells):
            bar.update(task, status=f"{name} {variant}")
            try:
                runs = run_saving_bound(
                    load_dataset(name), [variant], epsilons, args.seeds, args.targets,
                    p_min=args.p_min,
                    progress=lambda done, _, k=k: bar.update(
                        task, completed=k * args.seeds + done))
            except DataError as err:  # a sparse variant with too few sparse items
                bar.console.print(f"skipped {name} {variant}: {err}")
                bar.update(task, completed=(k + 1) * args.seeds)
                continue
            parts.append(runs)
            bar.console.print(f"{name} {variant}: {runs.target.nunique()} targets × "
                              f"{len(epsilons)} ε")
    runs = pd.concat(parts, ignore_index=True)
    epsilons = sorted(runs.epsilon.unique())
    runs.to_csv(args.out / "runs.csv", index=False, float_format="%.6g")
    table = saving_table(runs)
    measured = measured_saving([Path(p) for p in args.measured.split(",") if p])
    table = table.merge(measured, on=["dataset", "variant", "epsilon"], how="left")
    table.to_csv(args.out / "saving.csv", index=False)
    shown_columns = [c for c in SHOWN if c in table]  # an older runs.csv has no floored

    shown = pd.DataFrame({
        "dataset": table.dataset, "variant": table.variant, "ε": table.epsilon,
        "targets": table.targets, "RS-Mean items": table.rs_mean.round(1),
        **{f"{c} (%)": [cell(v, s) for v, s in zip(table[c], table[f"{c} se"], strict=True)]
           for c in shown_columns},
        "active-pai measured (%)": (100 * table.measured).round(1)})
    means = table.groupby(["variant", "epsilon"], sort=False)[
        [*shown_columns, "measured"]].mean().mul(100).round(1).reset_index()
    report = ["# The ceiling on the saving against RS-Mean", "",
              "```bash", "python bench/saving_bound.py " + " ".join(
                  f"--{k} {v}" for k, v in (("datasets", args.datasets),
                                             ("variants", args.variants),
                                             ("epsilons", args.epsilons),
                                             ("seeds", args.seeds),
                                             ("targets", args.targets),
                                             ("p-min", args.p_min),
                                             ("measured", args.measured),
                                             ("out", args.out)) if v != "")
              + (" --reuse" if args.reuse else ""), "```", "",
              "Saving (%) = 1 − Σ items / Σ items of RS-Mean over the targets ± bootstrap SE "
              "over the draws.", "", markdown_table(shown), "",
              "Mean over the datasets of each variant (%):", "", markdown_table(means), ""]
    (args.out / "report.md").write_text("\n".join(report))
    print("\n".join(report))

    fig, axes = plt.subplots(1, len(epsilons), figsize=(5 * len(epsilons) + 2, 4), sharey=True,
                             squeeze=False)
    standard = table[table.variant == "standard"]
    for ax, eps in zip(axes[0], epsilons, strict=True):
        part = standard[standard.epsilon == eps].reset_index(drop=True)
        x = range(len(part))
        for k, c in enumerate(shown_columns):
            ax.errorbar([i + 0.1 * (k - 3) for i in x], 100 * part[c],
                        yerr=100 * part[f"{c} se"], fmt="o", ms=4, label=c)
        if part.measured.notna().any():
            ax.plot(list(x), 100 * part.measured, "k*", ms=9, label="active-pai measured")
        ax.axhline(40, color="grey", ls=":", lw=1)
        ax.set_xticks(list(x), part.dataset, rotation=60)
        ax.set_title(f"standard, ε = {eps}")
    axes[0][0].set_ylabel("saving against RS-Mean (%)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(args.out / "saving.png", dpi=130)


if __name__ == "__main__":
    main()
