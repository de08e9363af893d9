"""The benchmark-compression experiment of seeds 003 and 004 (docs/methods.md §8) on the
bundled data.

For every seed the models are split at random into references (half) and targets (the
rest). At each retention ratio r (subset size k = round(r L)), a subset is built from the
references only and every target's error is its subset estimate minus its full mean:

* **random**: k items uniformly;
* **BestRand**: P probe models drawn from the references, a pool of M = min(L, pool·k)
  items, C candidates (:mod:`bayeval.compression.bestrand`);
* **k-means**: medoids of k clusters of the items' reference score vectors, weighted by
  cluster size (:mod:`bayeval.compression.baselines`; on fewer seeds, it is slow).

Metrics over targets × seeds: MAE and the high-error risks P(|error| > 2 pp) and
P(|error| > 5 pp). Random and BestRand run as one vmapped program over all seeds per
retention.

MINCE (:mod:`bayeval.compression.mince`): for each seed, 7 calibration models drawn from
the references, candidate sizes on a fixed step, n* at τ = 1 pp, the subset frozen with
seed 42, and its drift on the targets (max and mean |error|), beside random subsets of the
same size.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from bayeval.compression.baselines import kmeans_subset
from bayeval.compression.bestrand import bestrand, random_subsets
from bayeval.compression.mince import freeze_subset, mince_sizing
from bayeval.data.matrix import ScoreMatrix
from bayeval.experiments.figures import panel_grid
from bayeval.experiments.units import Executor, ResultCache, Unit, run_units

RETENTIONS = (0.02, 0.05, 0.10, 0.20, 0.50)
THRESHOLDS = (0.02, 0.05)
# settled by the ablation in docs/results/compression (see bench_defaults there)
BESTRAND_DEFAULTS = {"probes": 5, "pool": 4.0, "candidates": 1000}
MINCE_DEFAULTS = {"calibration": 7, "step": 50, "tau": 0.01, "subsets": 10_000}


def subset_size(n_items: int, retention: float) -> int:
    return max(1, min(n_items, round(retention * n_items)))


def pool_size(n_items: int, size: int, pool: float) -> int:
    return int(min(n_items, max(size, round(pool * size))))


@functools.partial(jax.jit, static_argnames=("n_refs", "size", "pool", "probes", "candidates"))
def _seed_errors(scores: jnp.ndarray, keys: jnp.ndarray, n_refs: int, size: int, pool: int,
                 probes: int, candidates: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(S, T) target errors of random and of BestRand subsets, one row per seed key."""
    K, _ = scores.shape
    full = scores.mean(axis=1)

    def one(key):
        split_key, random_key, bestrand_key = jax.random.split(key, 3)
        order = jax.random.permutation(split_key, K)
        refs, targets = order[:n_refs], order[n_refs:]
        uniform = random_subsets(random_key, scores.shape[1], size, 1)[0]
        chosen = bestrand(scores[refs[:probes]], bestrand_key, size, pool, candidates).items
        estimate = lambda items: scores[targets][:, items].mean(axis=1)  # noqa: E731
        return estimate(uniform) - full[targets], estimate(chosen) - full[targets]

    return jax.vmap(one)(keys)


def split_of(key: jnp.ndarray, n_models: int, n_refs: int) -> tuple[np.ndarray, np.ndarray]:
    """The (references, targets) of a seed key, as :func:`_seed_errors` draws them."""
    order = np.asarray(jax.random.permutation(jax.random.split(key, 3)[0], n_models))
    return order[:n_refs], order[n_refs:]


def summarize(errors: np.ndarray) -> dict[str, float]:
    err = np.abs(np.asarray(errors)).ravel()
    return {"mae": float(err.mean()),
            **{f"risk_{round(100 * t)}pp": float(np.mean(err > t)) for t in THRESHOLDS}}


def compression_table(scores: np.ndarray, dataset: str = "", seeds: int = 200,
                      retentions: Sequence[float] = RETENTIONS,
                      bestrand_params: dict | None = None, kmeans_seeds: int = 20,
                      chunk: int = 50, log: Callable[[str], None] | None = None,
                      ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """One row per method × retention (MAE, risks), and the |errors| per method and
    retention for plots."""
    params = {**BESTRAND_DEFAULTS, **(bestrand_params or {})}
    scores = np.asarray(scores, dtype=np.float64)
    if np.isnan(scores).any():
        raise ValueError(f"{dataset}: the score matrix has missing entries")
    K, L = scores.shape
    n_refs = K // 2
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(0), s))(jnp.arange(seeds))
    rows, errors = [], {}
    for r in retentions:
        k = subset_size(L, r)
        M = pool_size(L, k, params["pool"])
        parts = [_seed_errors(jnp.asarray(scores), keys[s:s + chunk], n_refs, k, M,
                              int(params["probes"]), int(params["candidates"]))
                 for s in range(0, seeds, chunk)]
        rand = np.concatenate([np.asarray(p[0]) for p in parts])
        best = np.concatenate([np.asarray(p[1]) for p in parts])
        per_method = {"random": rand, "bestrand": best}
        if kmeans_seeds > 0:
            km = []
            for s in range(min(kmeans_seeds, seeds)):
                refs, targets = split_of(keys[s], K, n_refs)
                items, weights = kmeans_subset(np.random.default_rng(s), scores[refs], k)
                km.append(scores[targets][:, items] @ weights - scores[targets].mean(axis=1))
            per_method["kmeans"] = np.asarray(km)
        for method, err in per_method.items():
            rows.append({"dataset": dataset, "method": method, "retention": r, "size": k,
                         "seeds": err.shape[0], **summarize(err)})
            errors[f"{method}@{r:g}"] = np.abs(err).ravel()
        if log is not None:
            mae = {m: 100 * np.abs(e).mean() for m, e in per_method.items()}
            log(f"{dataset} retention {r:g} (k = {k}): MAE " + ", ".join(
                f"{m} {v:.2f} pp" for m, v in mae.items()))
    return pd.DataFrame(rows), errors


def mince_table(scores: np.ndarray, dataset: str = "", seeds: int = 10,
                params: dict | None = None, log: Callable[[str], None] | None = None,
                ) -> pd.DataFrame:
    """One row per seed: n*, the reduction, P95 at n*, and the frozen subset's drift on
    the targets beside random subsets of the same size (same targets)."""
    params = {**MINCE_DEFAULTS, **(params or {})}
    scores = np.asarray(scores, dtype=np.float64)
    K, L = scores.shape
    n_refs = K // 2
    rows = []
    for s in range(seeds):
        key = jax.random.fold_in(jax.random.key(1), s)
        refs, targets = split_of(key, K, n_refs)
        calibration = refs[: int(params["calibration"])]
        sizing = mince_sizing(scores[calibration], key, int(params["step"]),
                              float(params["tau"]), int(params["subsets"]))
        frozen = freeze_subset(L, sizing.size)
        full = scores[targets].mean(axis=1)
        drift = np.abs(scores[targets][:, frozen].mean(axis=1) - full)
        rand = np.asarray(random_subsets(jax.random.fold_in(key, 7), L, sizing.size, 200))
        rand_drift = np.abs(scores[targets][:, rand].mean(axis=2) - full[:, None])  # (T, 200)
        t = int(np.flatnonzero(sizing.sizes == sizing.size)[0])
        rows.append({"dataset": dataset, "seed": s, "n_items": L, "n_star": sizing.size,
                     "reduction": 1 - sizing.size / L, "p95_at_n_star": float(sizing.p95[t]),
                     "held_out_max_drift": float(drift.max()),
                     "held_out_mean_drift": float(drift.mean()),
                     "random_max_drift_median": float(np.median(rand_drift.max(axis=0))),
                     "random_mean_drift": float(rand_drift.mean())})
        if log is not None:
            log(f"{dataset} MINCE seed {s}: n* = {sizing.size} ({rows[-1]['reduction']:.0%} "
                f"fewer), held-out max drift {100 * drift.max():.2f} pp")
    return pd.DataFrame(rows)


ABLATION = ({"probes": 1}, {"probes": 3}, {"probes": 10}, {"pool": 2.0}, {"pool": 1e9},
            {"candidates": 10}, {"candidates": 100}, {})


def ablation_table(scores: np.ndarray, dataset: str = "", seeds: int = 100,
                   retentions: Sequence[float] = (0.05, 0.10)) -> pd.DataFrame:
    """BestRand with one parameter changed at a time from the defaults (random for
    reference), one row per setting × retention."""
    rows = []
    for change in ABLATION:
        table, _ = compression_table(scores, dataset, seeds, retentions, change,
                                     kmeans_seeds=0)
        label = ", ".join(f"{k}={'all' if v >= 1e9 else v}" for k, v in change.items())
        for row in table.to_dict("records"):
            if row["method"] == "bestrand" or not change:
                rows.append({**row, "setting": label or "defaults"
                             if row["method"] == "bestrand" else "random"})
    return pd.DataFrame(rows)


def write_report(table: pd.DataFrame, mince: pd.DataFrame, errors: dict[str, dict],
                 out, ablation: pd.DataFrame | None = None):
    """results.csv, mince.csv, error-tail plots and report.md."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "results.csv", index=False)
    if len(mince):
        mince.to_csv(out / "mince.csv", index=False)
    datasets = list(dict.fromkeys(table.dataset))
    lines = []
    if len(table):
        piv = table.pivot_table(index=["dataset", "retention"], columns="method",
                                values=["mae", "risk_2pp", "risk_5pp"])
        seeds_of = table.groupby("method").seeds.max()
        lines += ["Target error of subsets built from the reference half of the models "
                  "(targets: the other half; random and BestRand over "
                  f"{int(seeds_of.get('random', 0))} seeds, k-means over "
                  f"{int(seeds_of.get('kmeans', 0))} seeds). MAE in pp; risk = "
                  "P(|error| > threshold) in %; Δ = BestRand vs random.", "",
                  "| dataset | retention | k | MAE random | MAE BestRand | MAE k-means | ΔMAE | "
                  "risk>2pp random | BestRand | Δ | risk>5pp random | BestRand | Δ | "
                  "risk>5pp k-means |", "|---" * 14 + "|"]

        def rel(a, b):
            return (b - a) / a if a > 0 else np.nan

        for (name, r), row in piv.iterrows():
            size = int(table[(table.dataset == name) & (table.retention == r)]["size"].iloc[0])
            get = functools.partial(lambda row, m, c: row.get((c, m), np.nan), row)
            cells = [name, f"{100 * r:g}%", str(size),
                     f"{100 * get('random', 'mae'):.2f}", f"{100 * get('bestrand', 'mae'):.2f}",
                     f"{100 * get('kmeans', 'mae'):.2f}",
                     f"{100 * rel(get('random', 'mae'), get('bestrand', 'mae')):+.0f}%",
                     f"{100 * get('random', 'risk_2pp'):.1f}",
                     f"{100 * get('bestrand', 'risk_2pp'):.1f}",
                     f"{100 * rel(get('random', 'risk_2pp'), get('bestrand', 'risk_2pp')):+.0f}%",
                     f"{100 * get('random', 'risk_5pp'):.1f}",
                     f"{100 * get('bestrand', 'risk_5pp'):.1f}",
                     f"{100 * rel(get('random', 'risk_5pp'), get('bestrand', 'risk_5pp')):+.0f}%",
                     f"{100 * get('kmeans', 'risk_5pp'):.1f}"]
            lines.append("| " + " | ".join(cells).replace("nan", "—") + " |")
        avg = table.groupby(["method", "retention"])[["mae", "risk_2pp", "risk_5pp"]].mean()
        lines += ["", "Mean over datasets (BestRand vs random; seed 003 reports −16.4% MAE and "
                  "−50.2% high-error risk on average over its 70 benchmarks):", "",
                  "| retention | ΔMAE | Δrisk>2pp | Δrisk>5pp |", "|---|---|---|---|"]
        deltas = []
        for r in sorted(set(table.retention)):
            d = [rel(avg.loc[("random", r), c], avg.loc[("bestrand", r), c])
                 for c in ("mae", "risk_2pp", "risk_5pp")]
            deltas.append(d)
            lines.append(f"| {100 * r:g}% | " + " | ".join(
                "—" if np.isnan(x) else f"{100 * x:+.1f}%" for x in d) + " |")
        d = np.nanmean(np.asarray(deltas), axis=0)
        lines.append("| all | " + " | ".join(f"{100 * x:+.1f}%" for x in d) + " |")
    if len(mince):
        lines += ["", "MINCE (7 calibration models from the reference half, step 50 items, "
                  "τ = 1 pp, 10 000 subsets per size, subset frozen with seed 42; drift on the "
                  "target half; median over seeds, worst seed in brackets; seed 004: MMLU "
                  "(14k items) −89% at ≤ 2.62 pp, IFEval (541 prompts) n* = 250):", "",
                  "| dataset | L | n* | reduction | P95 at n* (pp) | held-out max drift (pp) | "
                  "held-out mean drift (pp) | random same size: max drift (pp) |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, part in mince.groupby("dataset", sort=False):
            lines.append(
                f"| {name} | {int(part.n_items.iloc[0])} | {int(part.n_star.median())} "
                f"[{int(part.n_star.min())}–{int(part.n_star.max())}] | "
                f"{100 * part.reduction.median():.0f}% | "
                f"{100 * part.p95_at_n_star.median():.2f} | "
                f"{100 * part.held_out_max_drift.median():.2f} "
                f"[{100 * part.held_out_max_drift.max():.2f}] | "
                f"{100 * part.held_out_mean_drift.median():.2f} | "
                f"{100 * part.random_max_drift_median.median():.2f} |")
    if ablation is not None and len(ablation):
        lines += ["", "BestRand ablation (one parameter changed from the defaults "
                  f"{BESTRAND_DEFAULTS}; mean over datasets):", "",
                  "| setting | retention | MAE (pp) | risk>2pp (%) | risk>5pp (%) |",
                  "|---|---|---|---|---|"]
        mean = ablation.groupby(["setting", "retention"], sort=False)[
            ["mae", "risk_2pp", "risk_5pp"]].mean()
        for (setting, r), row in mean.iterrows():
            lines.append(f"| {setting} | {100 * r:g}% | {100 * row.mae:.2f} | "
                         f"{100 * row.risk_2pp:.1f} | {100 * row.risk_5pp:.1f} |")
    (out / "report.md").write_text("\n".join(lines) + "\n")

    if errors:  # the tail: P(|error| > x) at 5% and 10% retention
        shown = [d for d in datasets if d in errors]
        fig, axes = panel_grid(len(shown), 3, 5, 3.4)
        for ax, name in zip(axes, shown, strict=True):
            for r, style in ((0.05, "--"), (0.10, "-")):
                for method, color in (("random", "C0"), ("bestrand", "C1"), ("kmeans", "C2")):
                    err = errors[name].get(f"{method}@{r:g}")
                    if err is None:
                        continue
                    x = np.sort(err)
                    ax.plot(100 * x, 1 - np.arange(1, x.size + 1) / x.size, style,
                            color=color, label=f"{method} {100 * r:g}%")
            ax.set_yscale("log")
            ax.set_ylim(1e-3, 1)
            ax.set_xlabel("|error| (pp)")
            ax.set_ylabel("P(|error| > x)")
            ax.set_title(name)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "error_tails.png", dpi=110)
        plt.close(fig)
    return out / "report.md"


def compression_unit(unit: Unit, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One cached unit of ``bench compression`` (``unit.method``: ``subsets``, ``mince`` or
    ``ablation``) on ``data[unit.dataset]``: its table's columns as ``table/<column>``
    arrays, and for ``subsets`` the per-seed errors as ``errors/<method>``."""
    scores, s = data[unit.dataset], unit.settings
    errors: dict[str, np.ndarray] = {}
    if unit.method == "subsets":
        table, errors = compression_table(scores, unit.dataset, s["seeds"],
                                          kmeans_seeds=s["kmeans_seeds"])
    elif unit.method == "mince":
        table = mince_table(scores, unit.dataset, s["mince_seeds"])
    elif unit.method == "ablation":
        table = ablation_table(scores, unit.dataset)
    else:
        raise ValueError(f"unknown compression unit {unit.method!r}")
    return {**{f"table/{c}": table[c].to_numpy() for c in table.columns},
            **{f"errors/{k}": np.asarray(v) for k, v in errors.items()}}


def _unpack(arrays: dict[str, np.ndarray]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    table = pd.DataFrame({k.removeprefix("table/"): v for k, v in arrays.items()
                          if k.startswith("table/")})
    errors = {k.removeprefix("errors/"): v for k, v in arrays.items()
              if k.startswith("errors/")}
    return table, errors


def _units(name: str, seeds: int, kmeans_seeds: int, mince_seeds: int,
           ablation: bool) -> list[Unit]:
    """A dataset's units of ``bench compression``: its subset table, MINCE table and
    (with ``ablation``) ablation, in that order."""
    settings = {"seeds": int(seeds), "kmeans_seeds": int(kmeans_seeds),
                "mince_seeds": int(mince_seeds)}
    kinds = ("subsets", "mince", "ablation") if ablation else ("subsets", "mince")
    return [Unit("compression", name, kind, 0, int(seeds), settings) for kind in kinds]


def saved_errors(out: Path, name: str, seeds: int = 200, kmeans_seeds: int = 20,
                 mince_seeds: int = 10) -> dict[str, np.ndarray] | None:
    """The |errors| (``method@retention`` → seed-major array, as
    :func:`compression_table` returns them) that ``bench compression --out out`` saved for
    dataset ``name`` with these settings; None when that run is not there."""
    saved = ResultCache(out).get(_units(name, seeds, kmeans_seeds, mince_seeds, False)[0])
    return None if saved is None else _unpack(saved)[1]


def run_compression_bench(names: Sequence[str | ScoreMatrix], out: Path, seeds: int = 200,
                          kmeans_seeds: int = 20, mince_seeds: int = 10,
                          ablation: bool = True,
                          log: Callable[[str], None] = lambda line: None,
                          executor: Executor | None = None) -> Path:
    """Every table of ``bayeval bench compression`` for ``names`` (bundled datasets or
    user matrices, :func:`~bayeval.data.sources.bench_dataset`). Each dataset's subset
    table, MINCE table and ablation is a unit of :mod:`~bayeval.experiments.units`, saved
    under ``out/units`` as it finishes and reused by a rerun with the same seeds;
    ``executor`` says where they run. Returns the path of the report."""
    from bayeval.data.sources import bench_dataset
    from bayeval.errors import BayevalError

    data, units = {}, []
    for dataset in names:
        name, matrix = bench_dataset(dataset)
        if np.isnan(matrix.scores).any():
            raise BayevalError(f"{name}: the score matrix has missing entries")
        data[name] = matrix.scores
        units += _units(name, seeds, kmeans_seeds, mince_seeds, ablation)
    done = iter(run_units(units, compression_unit, data, out, executor,
                          log=log))
    tables, minces, ablations, errors = [], [], [], {}
    for name in data:
        table, errors[name] = _unpack(next(done))
        tables.append(table)
        minces.append(_unpack(next(done))[0])
        if ablation:
            ablations.append(_unpack(next(done))[0])
    write_report(pd.concat(tables), pd.concat(minces), errors, out,
                 pd.concat(ablations) if ablations else None)
    return out / "report.md"
