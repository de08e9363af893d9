"""The estimation experiment of seed 000 §5 (docs/methods.md §6) on the bundled data.

For each regime (interpolation, extrapolation) the targets are drawn once (``split_seed``)
and every seed s draws its own reference subset of the pool (``make_split(...,
reference_seed=s)``), so seeds vary both the reference models and the selection; every
method runs full length (n = 1..N) on each target for each seed through the vmapped
engine (bucket-GP methods padded to one bucket count, so all seeds share one compiled
program). Outputs: RMSE(n) per method, integrated RMSE, RMSE gain over RS-Mean, and
cost–accuracy points of the two-condition rule over an ε2 grid (stopping n, RMSE and
coverage at stopping).

Methods are given as specs, ``name`` or ``name(key=value, …)`` (e.g.
``bayesame(refit_every=0)``), so ablations run through the same code. ``irt`` (e.g.
``irt(kind=beta3, refit_every=50)``) is the IRT baseline of docs/methods.md §4: random
selection with NUTS fits, each run's own, in the same engine; the diagnostics of the fits
after each n are returned in ``mcmc_fits``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.data import ScoreMatrix, make_split
from bayeval.data.io import safe_file_name
from bayeval.data.sources import bench_dataset
from bayeval.experiments.metrics import (
    at_stop,
    integrated_rmse,
    irmse_ratio_interval,
    rmse_curve,
    rmse_gain,
    stopping_points,
)
from bayeval.experiments.units import Executor, Unit, run_units
from bayeval.loop.simulate import concatenate, simulate
from bayeval.methods import (
    accepts_parameter,
    make_method,
    parse_method_spec,
    resolved_parameters,
)
from bayeval.models.bucket_gp import make_buckets
from bayeval.types import SimulationResult

METHODS = ("bayesame", "bayesame-rs", "random", "bayes-aipw")
LABELS = {"bayesame": "BayesAME", "bayesame-rs": "BayesAME-RS", "random": "RS-Mean",
          "bayes-aipw": "Bayes-AIPW", "irt": "IRT-2PL", "irt(kind=beta3)": "IRT-β³",
          "irt(interval=posterior)": "IRT-2PL (posterior)",
          "bayesame-laplace": "BayesAME-Bernoulli (Laplace)"}
EPSILON2_GRID = (0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03)


def mcmc_fit_table(result) -> pd.DataFrame:
    """One row per n after which runs were re-fitted by MCMC: how many, the worst split
    R̂ and the divergent transitions in all (empty for methods without MCMC re-fits)."""
    r_hat, divergences = result.refit_r_hat, result.refit_divergences
    rows = []
    for t in np.flatnonzero(np.isfinite(r_hat).any(axis=0)):
        fitted = np.isfinite(r_hat[:, t])
        rows.append({"n": int(t + 1), "runs": int(fitted.sum()),
                     "max_r_hat": float(np.nanmax(r_hat[:, t])),
                     "divergences": int(divergences[fitted, t].sum())})
    return pd.DataFrame(rows)


def label(spec: str) -> str:
    """The display name of a method spec."""
    return LABELS.get(spec.strip(), spec.strip())


def _method(spec: str, capacity: int | None):
    """The method of ``spec``, bucket-GP methods padded to ``capacity`` buckets (one
    object per spec: :func:`~bayeval.methods.make_method` caches, so that every seed's
    unit shares one compiled program)."""
    name, params = parse_method_spec(spec)
    if capacity is not None and accepts_parameter(name, "bucket_capacity"):
        params.setdefault("bucket_capacity", capacity)
    return make_method(name, **params)


def capacity_setting(spec: str, capacity: int) -> dict[str, int]:
    """``{"capacity": capacity}`` for a method padded to a bucket count (it shares one
    compiled program over the seeds: the largest count of their splits), else nothing:
    a unit's key holds only what changes its result, so that raising ``seeds`` reuses
    the finished units of every other method."""
    from bayeval.methods.active import BUCKETED_PREDICTORS

    name, _ = parse_method_spec(spec)
    predictor = resolved_parameters(spec).get("predictor", BUCKETED_PREDICTORS[0])
    padded = accepts_parameter(name, "bucket_capacity") and predictor in BUCKETED_PREDICTORS
    return {"capacity": int(capacity)} if padded else {}


def estimation_unit(unit: Unit, data: dict[str, ScoreMatrix]) -> dict[str, np.ndarray]:
    """The runs of one cached unit: seed ``unit.first`` of one (regime, method), every
    target (``data``: matrices by dataset label). Arrays named as
    :class:`~bayeval.types.SimulationResult`'s fields."""
    s = unit.settings
    sp = make_split(data[unit.dataset], s["regime"], s["n_targets"], s["reference_fraction"],
                    seed=s["split_seed"], reference_seed=unit.first)
    method = _method(s["spec"], s.get("capacity"))
    start = time.perf_counter()
    result = simulate(method, sp.reference.scores, sp.targets.scores,
                      unit.first * s["n_targets"] + np.arange(s["n_targets"]),
                      n_steps=s["n_steps"])
    return {"seconds": np.asarray(time.perf_counter() - start),
            **{k: np.asarray(v) for k, v in result._asdict().items() if v is not None}}


def run_estimation(dataset: str | ScoreMatrix,
                   regimes: Sequence[str] = ("interpolation", "extrapolation"),
                   methods: Sequence[str] = METHODS, n_targets: int = 10, seeds: int = 20,
                   reference_fraction: float = 0.5, split_seed: int = 0,
                   epsilon2_grid: Sequence[float] = EPSILON2_GRID, epsilon1: float = 0.005,
                   window: int = 30, log: Callable[[str], None] = print,
                   runs_dir: Path | None = None, n_steps: int | None = None,
                   mcmc_fits: list[pd.DataFrame] | None = None, out: Path | None = None,
                   timings: list[dict] | None = None,
                   executor: Executor | None = None,
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(curves, stops): RMSE(n) rows and cost–accuracy rows for every regime and method.

    ``dataset``: a bundled name or a user's ScoreMatrix (labelled by
    :func:`~bayeval.data.sources.bench_dataset`).
    ``n_steps``: evaluations per run (default: the whole benchmark). Every (regime,
    method, seed) is a unit of :mod:`~bayeval.experiments.units`: with ``out`` it is saved
    there as soon as it is done and reused by a rerun; ``executor`` says where the units
    run. With ``runs_dir``, every (regime, method) also leaves its raw runs there as
    ``<dataset>-<regime>-<method>.npz`` (estimate, lower, upper, items, truth, seed of
    each run, and the method spec). ``mcmc_fits``, when given, gets one table per
    MCMC-based method and regime: a row per NUTS fit.
    ``timings``, when given, gets a row per (regime, method): the seconds its units'
    simulations took, summed (saved with the units, so a rerun that reuses them reports
    the same)."""
    dataset, matrix = bench_dataset(dataset)  # a bundled name, or a user's matrix
    t0 = time.time()
    plan = {}
    for regime in regimes:
        splits = [make_split(matrix, regime, n_targets, reference_fraction, seed=split_seed,
                             reference_seed=s) for s in range(seeds)]
        capacity = max(make_buckets(sp.reference.scores).n_buckets for sp in splits)
        for spec in methods:
            settings = {"regime": regime, "spec": spec,
                        "parameters": resolved_parameters(spec), "n_targets": int(n_targets),
                        "reference_fraction": float(reference_fraction),
                        "split_seed": int(split_seed),
                        "n_steps": None if n_steps is None else int(n_steps),
                        **capacity_setting(spec, capacity)}
            plan[regime, spec] = ([Unit("estimation", dataset, f"{regime}-{spec}", s, s + 1,
                                        settings) for s in range(seeds)],
                                  splits[0].targets.scores.mean(1))
    units = [u for us, _ in plan.values() for u in us]
    done = iter(run_units(units, estimation_unit, {dataset: matrix}, out, executor, log=log))
    curves, stops = [], []
    for regime in regimes:
        rmse_by_method = {}
        for spec in methods:
            us, target_means = plan[regime, spec]
            parts = [next(done) for _ in us]
            if timings is not None:
                timings.append({"regime": regime, "method": label(spec), "seconds": float(
                    sum(float(p["seconds"]) for p in parts))})
            result = concatenate([SimulationResult(**{k: v for k, v in p.items()
                                                      if k != "seconds"}) for p in parts])
            truth = np.tile(target_means, seeds)  # runs are seed-major
            fits = mcmc_fit_table(result)
            if mcmc_fits is not None and len(fits):
                mcmc_fits.append(fits.assign(dataset=dataset, regime=regime,
                                             method=label(spec)))
            if runs_dir is not None:
                runs_dir.mkdir(parents=True, exist_ok=True)
                safe = safe_file_name(spec, "-_=.")
                np.savez_compressed(runs_dir / f"{dataset}-{regime}-{safe}.npz",
                                    estimate=result.estimate, lower=result.lower,
                                    upper=result.upper, items=result.items, truth=truth,
                                    seed=np.repeat(np.arange(seeds), n_targets),
                                    spec=np.asarray(spec))
            rmse = rmse_by_method[label(spec)] = rmse_curve(result.estimate, truth)
            for eps in epsilon2_grid:
                idx = stopping_points(result.estimate, result.lower, result.upper, eps,
                                      epsilon1, window)
                err = at_stop(result.estimate, idx) - truth
                cover = (at_stop(result.lower, idx) <= truth) & (truth <= at_stop(result.upper,
                                                                                   idx))
                stops.append({"dataset": dataset, "regime": regime, "method": label(spec),
                              "epsilon2": eps, "mean_stop_n": float(np.mean(idx + 1)),
                              "rmse_at_stop": float(np.sqrt(np.mean(err**2))),
                              "coverage_at_stop": float(np.mean(cover)),
                              "runs": int(truth.size)})
            log(f"{dataset} {regime} {label(spec)}: {truth.size} runs ({n_targets} targets × "
                f"{seeds} seeds) × {rmse.size} steps, IRMSE {integrated_rmse(rmse):.3f}")
        rmse_rs = rmse_by_method.get(LABELS["random"])
        for name, rmse in rmse_by_method.items():
            curves.append(pd.DataFrame({
                "dataset": dataset, "regime": regime, "method": name,
                "n": np.arange(1, rmse.size + 1), "rmse": rmse,
                "gain_vs_rs": np.nan if rmse_rs is None else rmse_gain(rmse, rmse_rs)}))
    log(f"{dataset}: {len(units)} units in {time.time() - t0:.0f} s")
    return pd.concat(curves, ignore_index=True), pd.DataFrame(stops)


def run_estimation_bench(sources: Sequence, regimes: Sequence[str], methods: Sequence[str],
                         n_targets: int = 10, seeds: int = 20,
                         reference_fraction: float = 0.5, split_seed: int = 0,
                         out: Path = Path("results/estimation"),
                         executor: Executor | None = None,
                         log: Callable[[str], None] = print) -> Path:
    """The BayesAME paper's estimation experiment (``bayeval bench estimation``) on each
    of ``sources`` (bundled names or the user's matrices): :func:`run_estimation` per
    dataset, the report rewritten after each (a crash keeps the finished ones); returns
    the report's path."""
    all_curves, all_stops = [], []
    for source in sources:
        curves, stops = run_estimation(
            source, regimes=regimes, methods=methods, n_targets=n_targets, seeds=seeds,
            reference_fraction=reference_fraction, split_seed=split_seed, log=log,
            runs_dir=out / "runs", out=out, executor=executor)
        all_curves.append(curves)
        all_stops.append(stops)
        report = write_report(pd.concat(all_curves), pd.concat(all_stops), out)
    return report


def irmse_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Integrated RMSE per dataset × regime × method, with the ratio to BayesAME-RS."""
    rows = []
    for (dataset, regime, method), part in curves.groupby(["dataset", "regime", "method"]):
        rows.append({"dataset": dataset, "regime": regime, "method": method,
                     "irmse": integrated_rmse(part.sort_values("n")["rmse"].to_numpy())})
    table = pd.DataFrame(rows)
    base = table[table["method"] == "BayesAME-RS"].set_index(["dataset", "regime"])["irmse"]
    table["ratio_to_bayesame_rs"] = [
        r.irmse / base.get((r.dataset, r.regime), np.nan) for r in table.itertuples()]
    return table


def write_report(curves: pd.DataFrame, stops: pd.DataFrame, out: Path) -> Path:
    """CSV files, plots (RMSE vs n on a log axis; cost–accuracy) and a markdown table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    curves.to_csv(out / "rmse_curves.csv", index=False)
    stops.to_csv(out / "cost_accuracy.csv", index=False)
    table = irmse_table(curves)
    table.to_csv(out / "irmse.csv", index=False)
    panels = list(curves.groupby(["dataset", "regime"]))
    fig, axes = plt.subplots(2, len(panels), figsize=(4.5 * len(panels), 7), squeeze=False)
    for col, ((dataset, regime), part) in enumerate(panels):
        ax = axes[0, col]
        for method, m in part.groupby("method"):
            ax.plot(m["n"], 100 * m["rmse"], label=method)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n (items evaluated)")
        ax.set_ylabel("RMSE × 100")
        ax.set_title(f"{dataset}, {regime}")
        ax.legend(fontsize=8)
        ax = axes[1, col]
        s = stops[(stops["dataset"] == dataset) & (stops["regime"] == regime)]
        for method, m in s.groupby("method"):
            ax.plot(m["mean_stop_n"], 100 * m["rmse_at_stop"], "o-", label=method)
        ax.set_xlabel("mean stopping n (ε2 grid)")
        ax.set_ylabel("RMSE at stop × 100")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "estimation.png", dpi=110)
    plt.close(fig)
    pivot = table.pivot_table(index=["dataset", "regime"], columns="method", values="irmse")
    lines = ["| dataset | regime | " + " | ".join(pivot.columns) + " | BayesAME / BayesAME-RS |",
             "|---" * (len(pivot.columns) + 3) + "|"]
    for (dataset, regime), row in pivot.iterrows():
        ratio = (row.get("BayesAME", np.nan) / row.get("BayesAME-RS", np.nan))
        lines.append(f"| {dataset} | {regime} | "
                     + " | ".join(f"{v:.3f}" for v in row.to_numpy()) + f" | {ratio:.3f} |")
    lines += ["", "| dataset | regime | method | ε2 | mean stop n | RMSE at stop | coverage |",
              "|---|---|---|---|---|---|---|"]
    for r in stops.itertuples():
        lines.append(f"| {r.dataset} | {r.regime} | {r.method} | {r.epsilon2:g} | "
                     f"{r.mean_stop_n:.1f} | {r.rmse_at_stop:.4f} | {r.coverage_at_stop:.3f} |")
    lines += _ratio_lines(out / "runs")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"


def _ratio_lines(runs_dir: Path) -> list[str]:
    """IRMSE ratios to BayesAME-RS with a 95% bootstrap interval over seeds, from the raw
    runs left by :func:`run_estimation` (none when there are no raw runs)."""
    runs: dict[tuple[str, str], dict[str, dict]] = {}
    for path in sorted(runs_dir.glob("*.npz")) if runs_dir.is_dir() else []:
        dataset, regime, spec = path.stem.split("-", 2)
        with np.load(path) as data:
            run = dict(data)
        spec = str(run.get("spec", spec))
        runs.setdefault((dataset, regime), {})[label(spec)] = run
    lines = ["", "| dataset | regime | method | IRMSE / IRMSE(BayesAME-RS) | 95% bootstrap "
             "interval (seeds resampled) |", "|---|---|---|---|---|"]
    for (dataset, regime), by_method in runs.items():
        base = by_method.get("BayesAME-RS")
        if base is None:
            continue
        for name, run in by_method.items():
            if run is base or run["truth"].shape != base["truth"].shape:
                continue
            ratio, lo, hi = irmse_ratio_interval(run["estimate"], base["estimate"],
                                                 run["truth"], run["seed"])
            lines.append(f"| {dataset} | {regime} | {name} | {ratio:.3f} | "
                         f"[{lo:.3f}, {hi:.3f}] |")
    return lines if len(lines) > 3 else []
