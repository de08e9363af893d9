"""Inference backends side by side on one estimation task (docs/methods.md §1 variants, §4).

The estimation experiment (:func:`bayeval.experiments.estimation.run_estimation`) run for
a few methods that differ in their model and inference — by default Gaussian BayesAME
(exact), the Bernoulli-logit bucket GP under Laplace and the 2PL IRT baseline under NUTS
(its posterior, ``irt(interval=posterior)``: the backends' posteriors are compared)
— up to ``n_steps`` evaluations, reported as RMSE at every ``every`` evaluations, with
the IRT fits' diagnostics (each run's own NUTS fits: split R-hat, divergences).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from bayeval.data.matrix import ScoreMatrix
from bayeval.experiments.estimation import run_estimation
from bayeval.experiments.metrics import integrated_rmse
from bayeval.experiments.units import Executor

METHODS = ("bayesame", "bayesame-laplace", "irt(interval=posterior)")  # the posteriors


def run_inference_comparison(dataset: str | ScoreMatrix = "ifeval", regime: str = "interpolation",
                             methods: Sequence[str] = METHODS, seeds: int = 5,
                             n_targets: int = 10, n_steps: int = 300,
                             reference_fraction: float = 0.5,
                             log: Callable[[str], None] = print,
                             runs_dir: Path | None = None, out: Path | None = None,
                             executor: Executor | None = None
                             ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(curves, fits, timing): RMSE(n) per method, one row per NUTS fit, and seconds per
    method (its runs and all its fits: the simulations' own time, summed over its units,
    which a rerun reusing ``out``'s units reports unchanged). The units run as in
    :func:`~bayeval.experiments.estimation.run_estimation`."""
    timing, fits, times = [], [], []
    curves = []
    for spec in methods:
        part, _ = run_estimation(dataset, regimes=(regime,), methods=(spec,),
                                 n_targets=n_targets, seeds=seeds,
                                 reference_fraction=reference_fraction, log=log,
                                 runs_dir=runs_dir, n_steps=n_steps, mcmc_fits=fits,
                                 epsilon2_grid=(), out=out, timings=times,
                                 executor=executor)
        curves.append(part)
        timing.append({"method": part["method"].iloc[0], "seconds": times[-1]["seconds"],
                       "runs": n_targets * seeds, "steps": n_steps})
    return (pd.concat(curves, ignore_index=True),
            pd.concat(fits, ignore_index=True) if fits else pd.DataFrame(),
            pd.DataFrame(timing))


def rmse_table(curves: pd.DataFrame, every: int = 50) -> pd.DataFrame:
    """RMSE × 100 at n = every, 2·every, … (rows) per method (columns), and IRMSE."""
    n_max = int(curves["n"].max())
    points = list(range(every, n_max + 1, every))
    table = curves[curves["n"].isin(points)].pivot_table(index="n", columns="method",
                                                         values="rmse") * 100
    irmse = {m: integrated_rmse(part.sort_values("n")["rmse"].to_numpy())
             for m, part in curves.groupby("method")}
    table.loc[f"IRMSE (n ≤ {n_max})"] = pd.Series(irmse)
    return table


def write_report(curves: pd.DataFrame, fits: pd.DataFrame, timing: pd.DataFrame, out: Path,
                 every: int = 50) -> Path:
    """CSV files, ``inference.png`` (RMSE against n) and ``report.md``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    curves.to_csv(out / "rmse_curves.csv", index=False)
    fits.to_csv(out / "mcmc_fits.csv", index=False)
    timing.to_csv(out / "timing.csv", index=False)
    table = rmse_table(curves, every)
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, part in curves.groupby("method"):
        ax.plot(part["n"], 100 * part["rmse"], label=method)
    ax.set_yscale("log")
    ax.set_xlabel("n (items evaluated)")
    ax.set_ylabel("RMSE × 100")
    ax.set_title(", ".join(sorted(set(curves["dataset"] + " " + curves["regime"]))))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "inference.png", dpi=110)
    plt.close(fig)
    lines = ["| n | " + " | ".join(table.columns) + " |", "|---" * (len(table.columns) + 1) + "|"]
    for n, row in table.iterrows():
        lines.append(f"| {n} | " + " | ".join(f"{v:.2f}" for v in row.to_numpy()) + " |")
    lines += ["", "| method | runs | steps | seconds (its simulations, summed) |",
              "|---|---|---|---|"]
    lines += [f"| {r.method} | {r.runs} | {r.steps} | {r.seconds:.0f} |"
              for r in timing.itertuples()]
    if len(fits):
        lines += ["", "| method | n at fit | runs fitted | max split R-hat | divergences |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r.method} | {r.n} | {r.runs} | {r.max_r_hat:.3f} | {r.divergences} |"
                  for r in fits.itertuples()]
        worst = float(fits["max_r_hat"].max())
        lines.append(f"\nWorst R-hat over all fits: {worst:.3f}; divergences in all: "
                     f"{int(fits['divergences'].sum())}.")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"
