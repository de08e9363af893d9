"""Multi-target vs independent single-target BayesAME (seed 000 §3.2, App. C.4; docs/methods.md
§2) on the bundled data.

For each regime the T targets are drawn once (``split_seed``); every seed s draws its own
reference subset (as in :mod:`bayeval.experiments.estimation`). Per seed:

* **multi-target**: one :func:`~bayeval.loop.simulate.simulate` run of ``bayesame-joint`` over
  the T targets (initial design, round robin, per-target two-condition stopping, done when
  every target has met its rule or has no item left);
* **single-target**: T independent full-length BayesAME runs (seeds s·T + t); their
  two-condition stopping points at ε2 are read off the runs.

Reported per dataset × regime: total evaluations (all targets) until every target has
stopped, RMSE and coverage of the reported estimates at that point, and RMSE against total
evaluations E — for independent runs E = T·n (targets evaluated in lock-step, as round
robin does), for the joint run the estimate after its E-th evaluation (frozen once it
stops). Each seed's raw runs are saved as soon as they finish, and a rerun with the same
``runs_dir`` skips seeds already done.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bayeval.data import ScoreMatrix, make_split
from bayeval.data.sources import bench_dataset
from bayeval.experiments.figures import panel_grid
from bayeval.experiments.metrics import at_stop, stopping_points
from bayeval.experiments.units import Executor, Unit, run_units
from bayeval.loop.simulate import simulate
from bayeval.methods import make_method, resolved_parameters
from bayeval.models.bucket_gp import make_buckets


class JointRecord(NamedTuple):
    """One simulated multi-target run up to its end; step k is the (k+1)-th evaluation."""

    targets: np.ndarray  # (E,) target of each evaluation
    items: np.ndarray  # (E,) item of each evaluation
    estimate: np.ndarray  # (E, T) every target's estimate after each evaluation
    lower: np.ndarray  # (E, T) clipped to [0, 1]
    upper: np.ndarray  # (E, T)
    stopped_at: np.ndarray  # (T,) evaluations when each target met its rule (0: never)
    n_init: int
    refits: int


def joint_run(method, reference: np.ndarray, targets: np.ndarray, seed: int) -> JointRecord:
    """Simulate ``method`` (``bayesame-joint``) on the T target rows with ``seed`` until
    every target has met its rule or has no item left, the end of a Session's run."""
    T, N = targets.shape
    sim = simulate(method, reference, targets[None], [seed], until_stop=True)
    cells, stopped = sim.items[0], sim.stop_n[0]
    ends = []
    for t in range(T):
        mine = np.flatnonzero(cells // N == t)
        exhausted = mine[N - 1] + 1 if mine.size >= N else cells.size
        ends.append(stopped[t] if stopped[t] > 0 else exhausted)
    E = int(max(ends))
    due = method.backend.settings.refit_schedule(np.arange(1, E + 1), T, N)  # its schedule
    refits = 0 if due is None else int(np.sum(due))
    return JointRecord(cells[:E] // N, cells[:E] % N, sim.estimate[0, :E],
                       np.clip(sim.lower[0, :E], 0, 1), np.clip(sim.upper[0, :E], 0, 1),
                       stopped, T * method.turns.design_size(N), refits)


def _seed_runs(seed: int, split, joint_params: dict[str, Any], epsilon2: float,
               capacity: int) -> dict[str, np.ndarray]:
    reference, targets = split.reference.scores, split.targets.scores
    T = targets.shape[0]
    t0 = time.time()
    joint = joint_run(make_method("bayesame-joint", epsilon=epsilon2, **joint_params),
                      reference, targets, seed)
    joint_s = time.time() - t0
    t0 = time.time()
    method = make_method("bayesame", epsilon=epsilon2, bucket_capacity=capacity)
    single = simulate(method, reference, targets, seed * T + np.arange(T))
    single_s = time.time() - t0
    return {"joint_targets": joint.targets, "joint_items": joint.items,
            "joint_estimate": joint.estimate, "joint_lower": joint.lower,
            "joint_upper": joint.upper, "joint_stopped_at": joint.stopped_at,
            "joint_n_init": np.asarray(joint.n_init), "joint_refits": np.asarray(joint.refits),
            "single_estimate": single.estimate, "single_lower": single.lower,
            "single_upper": single.upper, "truth": targets.mean(1),
            "seconds": np.asarray([joint_s, single_s])}


def multitarget_unit(unit: Unit, data: dict[str, ScoreMatrix]) -> dict[str, np.ndarray]:
    """One cached unit of ``bench multitarget``: seed ``unit.first`` of one regime, the
    joint and the single-target runs (``data``: matrices by dataset label)."""
    s = unit.settings
    split = make_split(data[unit.dataset], s["regime"], s["n_targets"],
                       s["reference_fraction"], seed=s["split_seed"],
                       reference_seed=unit.first)
    return _seed_runs(unit.first, split, s["joint_params"], s["epsilon2"], s["capacity"])


def summarize_seed(runs: dict[str, np.ndarray], epsilon2: float, epsilon1: float = 0.005,
                   window: int = 30) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
    """(cost row, joint error (N, T) at E = T·n, single error (N, T) at n) for one seed."""
    truth = runs["truth"]
    T = truth.size
    single = runs["single_estimate"]  # (T, N)
    N = single.shape[1]
    idx = stopping_points(single, runs["single_lower"], runs["single_upper"], epsilon2,
                          epsilon1, window)
    s_est = at_stop(single, idx)
    s_cover = (at_stop(runs["single_lower"], idx) <= truth) & (
        truth <= at_stop(runs["single_upper"], idx))
    j_est = runs["joint_estimate"]  # (E, T)
    E = j_est.shape[0]
    j_cover = (runs["joint_lower"][-1] <= truth) & (truth <= runs["joint_upper"][-1])
    stopped = runs["joint_stopped_at"]
    row = {"joint_total": float(E), "single_total": float(np.sum(idx + 1)),
           "joint_sq_err": float(np.mean((j_est[-1] - truth) ** 2)),
           "single_sq_err": float(np.mean((s_est - truth) ** 2)),
           "joint_cover": float(np.mean(j_cover)), "single_cover": float(np.mean(s_cover)),
           "joint_all_stopped": float(np.all(stopped > 0)),
           "single_all_stopped": float(np.all(idx < N - 1)),
           "joint_refits": float(runs["joint_refits"]),
           "joint_seconds": float(runs["seconds"][0]),
           "single_seconds": float(runs["seconds"][1])}
    steps = np.minimum(T * np.arange(1, N + 1), E) - 1
    joint_err = j_est[steps] - truth
    single_err = single.T - truth
    return row, joint_err, single_err


def run_multitarget(dataset: str | ScoreMatrix,
                    regimes: Sequence[str] = ("interpolation", "extrapolation"),
                    n_targets: int = 5, seeds: int = 10, reference_fraction: float = 0.5,
                    split_seed: int = 0, epsilon2: float = 0.02,
                    joint_params: dict[str, Any] | None = None,
                    log: Callable[[str], None] = print, out: Path | None = None,
                    executor: Executor | None = None
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(costs, curves): one cost row per dataset × regime × seed, and RMSE against total
    evaluations per dataset × regime × method. ``dataset``: a bundled name or a user's
    ScoreMatrix (labelled by :func:`~bayeval.data.sources.bench_dataset`). Every (regime,
    seed) is a unit of :mod:`~bayeval.experiments.units`: with ``out`` saved there as it
    finishes and reused by a rerun; ``executor`` says where the units run."""
    joint_params = dict(joint_params or {})
    dataset, matrix = bench_dataset(dataset)  # a bundled name, or a user's matrix
    plan = {}
    for regime in regimes:
        splits = [make_split(matrix, regime, n_targets, reference_fraction, seed=split_seed,
                             reference_seed=s) for s in range(seeds)]
        capacity = max(make_buckets(sp.reference.scores).n_buckets for sp in splits)
        settings = {"regime": regime, "n_targets": int(n_targets),
                    "reference_fraction": float(reference_fraction),
                    "split_seed": int(split_seed), "epsilon2": float(epsilon2),
                    "joint_params": joint_params, "capacity": int(capacity),
                    "parameters": {name: resolved_parameters(name)
                                   for name in ("bayesame-joint", "bayesame")}}
        plan[regime] = [Unit("multitarget", dataset, regime, s, s + 1, settings)
                        for s in range(seeds)]
    units = [u for us in plan.values() for u in us]
    done = iter(run_units(units, multitarget_unit, {dataset: matrix}, out, executor, log=log))
    costs, curves = [], []
    for regime in regimes:
        joint_errs, single_errs = [], []
        for s in range(seeds):
            runs = next(done)
            row, je, se = summarize_seed(runs, epsilon2)
            costs.append({"dataset": dataset, "regime": regime, "seed": s, **row})
            joint_errs.append(je)
            single_errs.append(se)
            log(f"{dataset} {regime} seed {s}: joint {row['joint_total']:.0f} evaluations "
                f"(|err| {np.sqrt(row['joint_sq_err']):.4f}, {row['joint_seconds']:.0f} s), "
                f"single {row['single_total']:.0f} (|err| {np.sqrt(row['single_sq_err']):.4f})")
        N = joint_errs[0].shape[0]
        for name, errs in (("multi-target", joint_errs), ("single-target", single_errs)):
            rmse = np.sqrt(np.mean(np.stack(errs) ** 2, axis=(0, 2)))
            curves.append(pd.DataFrame({"dataset": dataset, "regime": regime, "method": name,
                                        "total_evaluations": n_targets * np.arange(1, N + 1),
                                        "rmse": rmse}))
    return pd.DataFrame(costs), pd.concat(curves, ignore_index=True)


def run_multitarget_bench(sources: Sequence, regimes: Sequence[str], n_targets: int = 5,
                          seeds: int = 10, reference_fraction: float = 0.5,
                          split_seed: int = 0, epsilon2: float = 0.02,
                          joint_params: dict[str, Any] | None = None,
                          out: Path = Path("results/multitarget"),
                          executor: Executor | None = None,
                          log: Callable[[str], None] = print) -> Path:
    """Multi-target against independent single-target BayesAME (``bayeval bench
    multitarget``) on each of ``sources``: :func:`run_multitarget` per dataset, the report
    rewritten after each (a crash keeps the finished ones); returns the report's path."""
    n_items: dict[str, int] = {}
    all_costs, all_curves = [], []
    for source in sources:
        name, matrix = bench_dataset(source)
        n_items[name] = matrix.n_items
        costs, curves = run_multitarget(  # by name: the label n_items is keyed by
            source, regimes=regimes, n_targets=n_targets, seeds=seeds,
            reference_fraction=reference_fraction, split_seed=split_seed,
            epsilon2=epsilon2, joint_params=joint_params, log=log, out=out,
            executor=executor)
        all_costs.append(costs)
        all_curves.append(curves)
        report = write_report(pd.concat(all_costs), pd.concat(all_curves), out, n_items,
                              n_targets, epsilon2)
    return report


def cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per dataset × regime (seconds: median); RMSE = sqrt of the mean
    squared error."""
    g = costs.groupby(["dataset", "regime"], sort=False)
    table = g.agg(seeds=("seed", "size"), joint_total=("joint_total", "mean"),
                  single_total=("single_total", "mean"),
                  joint_mse=("joint_sq_err", "mean"), single_mse=("single_sq_err", "mean"),
                  joint_cover=("joint_cover", "mean"), single_cover=("single_cover", "mean"),
                  joint_all_stopped=("joint_all_stopped", "mean"),
                  single_all_stopped=("single_all_stopped", "mean"),
                  joint_seconds=("joint_seconds", "median")).reset_index()
    table["joint_rmse"] = np.sqrt(table.pop("joint_mse"))
    table["single_rmse"] = np.sqrt(table.pop("single_mse"))
    table["total_ratio"] = table["joint_total"] / table["single_total"]
    return table


def write_report(costs: pd.DataFrame, curves: pd.DataFrame, out: Path, n_items: dict[str, int],
                 n_targets: int, epsilon2: float) -> Path:
    """CSV files, the RMSE-vs-total-evaluations plot and report.md."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    costs.to_csv(out / "costs.csv", index=False)
    curves.to_csv(out / "rmse_vs_evaluations.csv", index=False)
    table = cost_table(costs)
    table.to_csv(out / "cost_table.csv", index=False)
    panels = list(curves.groupby(["dataset", "regime"], sort=False))
    fig, axes = panel_grid(len(panels), 2, 5.5, 3.8)
    for ax, ((dataset, regime), part) in zip(axes, panels, strict=True):
        # up to 95% of N·T: at N·T every single-target run is exact and the log axis
        # would be spent on the last few items; a joint run's estimates are frozen once
        # every target has stopped (dotted lines: mean totals at stop)
        for method, m in part.groupby("method"):
            m = m[m["total_evaluations"] <= 0.95 * n_items[dataset] * n_targets]
            ax.plot(m["total_evaluations"], 100 * m["rmse"], label=method)
        row = table[(table.dataset == dataset) & (table.regime == regime)].iloc[0]
        ax.axvline(row.joint_total, color="C0", ls=":", lw=1)
        ax.axvline(row.single_total, color="C1", ls=":", lw=1)
        ax.set_yscale("log")
        ax.set_xlabel(f"total evaluations ({n_targets} targets)")
        ax.set_ylabel("RMSE × 100")
        ax.set_title(f"{dataset}, {regime}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "multitarget.png", dpi=110)
    plt.close(fig)
    lines = [f"Total evaluations until every one of {n_targets} targets meets the two-condition "
             f"rule at ε2 = {epsilon2:g} (mean over seeds), with RMSE and 95% coverage of the "
             "estimates reported then.", "",
             "| dataset | regime | seeds | N·T | multi-target total | single-target total | "
             "multi / single | multi RMSE | single RMSE | multi coverage | single coverage | "
             "multi s/run (median) |", "|---" * 12 + "|"]
    for r in table.itertuples():
        lines.append(
            f"| {r.dataset} | {r.regime} | {r.seeds} | {n_items[r.dataset] * n_targets} | "
            f"{r.joint_total:.0f} | {r.single_total:.0f} | {r.total_ratio:.3f} | "
            f"{r.joint_rmse:.4f} | {r.single_rmse:.4f} | {r.joint_cover:.2f} | "
            f"{r.single_cover:.2f} | {r.joint_seconds:.0f} |")
    lines += ["", "RMSE × 100 at a few total-evaluation budgets:", "",
              "| dataset | regime | method | " + " | ".join(
                  f"{f:.0%} of N·T" for f in (0.1, 0.25, 0.5, 0.75)) + " |",
              "|---" * 7 + "|"]
    for (dataset, regime, method), m in curves.groupby(["dataset", "regime", "method"],
                                                       sort=False):
        total = n_items[dataset] * n_targets
        vals = [np.interp(f * total, m["total_evaluations"], m["rmse"]) * 100
                for f in (0.1, 0.25, 0.5, 0.75)]
        lines.append(f"| {dataset} | {regime} | {method} | "
                     + " | ".join(f"{v:.3f}" for v in vals) + " |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"
