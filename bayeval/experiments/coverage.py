"""FAQ's coverage experiment (seed 001 §4; docs/methods.md §3) on the bundled data.

Protocol, for one suite and one kind of history:

1. The models are split at random (seeded) into historical and new halves. The historical
   matrix H is used fully observed, or MCAR-masked: ``n_full_obs`` rows kept whole, every
   other entry kept with probability ``p_obs``.
2. H's rows are split 80/20 into train and validation models. (k, λ) are chosen by 5-fold
   cross-validation on H_train with the 1-SE rule (:func:`~bayeval.models.factor.
   cross_validate`); the policy's (β0, ρ, γ, τ) are tuned per budget on the validation
   models (their complete rows, as queries made for tuning; ``val_seeds`` seeds each) with
   factors fitted on H_train, minimising the mean interval width. The robust default fixes
   (β0, τ) = (1.0, 0.05) and tunes only (ρ, γ) the same way. Nothing about the new models
   is used.
3. Factors are refitted on all of H; FAQ (tuned and default) runs ``seeds`` times on every
   new model at every budget, drawing from its complete row; the uniform baseline is
   Poisson sampling with π = T/N (:func:`~bayeval.estimators.pai.horvitz_thompson_uniform`).
4. Per budget and method: coverage of the 95% interval of R* (mean over models and seeds),
   mean width, and the ESS multiplier (mean width of uniform / mean width of the method)²,
   the widths averaged over models within a seed and the ratio over seeds.

The CV, each budget's tuning and each (budget, configuration)'s runs are units of
:mod:`~bayeval.experiments.units`: saved under ``OUT/units`` as they finish and reused by
a rerun with the same settings.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.data import ScoreMatrix, load_dataset
from bayeval.data.sources import bench_dataset
from bayeval.errors import BayevalError, DataError
from bayeval.estimators.pai import finite_bank_target, horvitz_thompson_uniform, wald_interval
from bayeval.experiments.figures import panel_grid
from bayeval.experiments.inputs import parse_shares
from bayeval.experiments.units import Executor, Unit, run_units
from bayeval.methods.faq import HybridParams, simulate_hybrid
from bayeval.models.factor import cross_validate, factor_prior, fit_factors
from bayeval.stopping.rules import budget_rounds

BUDGETS = tuple(round(0.025 * i, 4) for i in range(1, 11))
GRID = {"beta0": (0.5, 1.0), "rho": (0.0, 0.25, 0.5), "gamma": (0.0, 0.25),
        "tau": (0.05, 0.2)}
DEFAULT = {"beta0": 1.0, "tau": 0.05}
LEVEL = 0.95
# seed 001's five-benchmark suite (reference/faq_faq_summary.csv), fully observed history
AUTHORS_ESS = {0.025: 3.05, 0.1: 4.10, 0.25: 4.13}


@dataclass(frozen=True)
class Setting:
    """One experiment: suite, history kind and seeds."""

    suite: str = "ifeval+musr"
    history: str = "full"  # or "mcar"
    n_full_obs: int = 50
    p_obs: float = 0.1
    split_seed: int = 0
    seeds: int = 100
    val_seeds: int = 5
    val_fraction: float = 0.2
    factor_selection: str = "one-se"  # or "best": the (k, λ) of highest mean CV accuracy

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def best_setting(table: list[str]) -> tuple[int, float]:
    """The (k, λ) of highest mean accuracy in a CV table of :meth:`CrossValidation.rows`."""
    cells = [row.strip("|").split("|") for row in table[2:]]
    best = max(cells, key=lambda c: float(c[2]))
    return int(best[0]), float(best[1])


@dataclass(frozen=True)
class Data:
    history: np.ndarray  # historical scores as used (NaN = masked)
    train: np.ndarray  # row indices into history
    val: np.ndarray
    val_truth: np.ndarray  # complete rows of the validation models
    new: np.ndarray  # complete rows of the new models


def prepare(setting: Setting, matrix: ScoreMatrix | None = None) -> Data:
    """The split and the (masked) history of the module docstring, step 1–2, of the
    bundled suite ``setting.suite``, or of ``matrix`` (a user's, labelled by the suite)."""
    matrix = load_dataset(setting.suite) if matrix is None else matrix
    scores = matrix.scores
    if np.isnan(scores).any():
        raise DataError(f"{setting.suite}: the coverage experiment needs a complete matrix")
    if matrix.kind != "binary":
        raise DataError(f"{setting.suite}: FAQ's factor model needs binary scores")
    rng = np.random.default_rng(setting.split_seed)
    order = rng.permutation(matrix.n_models)
    half = matrix.n_models // 2
    hist, new = scores[order[:half]], scores[order[half:]]
    history = hist.copy()
    if setting.history == "mcar":
        full = rng.choice(half, size=min(setting.n_full_obs, half), replace=False)
        hide = rng.random(history.shape) >= setting.p_obs
        hide[full] = False
        history[hide] = np.nan
    elif setting.history != "full":
        raise ValueError(f"history must be 'full' or 'mcar', got {setting.history!r}")
    rows = rng.permutation(half)
    n_val = max(1, round(setting.val_fraction * half))
    val = np.sort(rows[:n_val])
    return Data(history, np.sort(rows[n_val:]), val, hist[val], new)


def run_widths(v: np.ndarray, mean0: np.ndarray, cov0: np.ndarray, truth_rows: np.ndarray,
               seeds: int, params: HybridParams, rounds: int, seed_offset: int = 0,
               progress: Callable[[int], None] | None = None) -> pd.DataFrame:
    """FAQ on every row × seed: one line per run with covered, width, distinct items."""
    n_rows = truth_rows.shape[0]
    targets = np.tile(np.arange(n_rows), seeds)
    seed_of = np.repeat(np.arange(seeds), n_rows)
    run_seeds = seed_offset + seed_of * n_rows + targets
    out = simulate_hybrid(v, mean0, cov0, truth_rows, targets, run_seeds, params, rounds,
                          progress=progress)
    truth = np.asarray(finite_bank_target(truth_rows))[targets]
    frame = pd.DataFrame({"model": targets, "seed": seed_of, "theta": out.theta,
                          "distinct": out.distinct})
    for suffix, var in (("", out.var), ("_ht", out.var_ht)):
        lo, hi = (np.asarray(x) for x in wald_interval(out.theta, var, LEVEL))
        frame["covered" + suffix] = (lo <= truth) & (truth <= hi)
        frame["width" + suffix] = hi - lo
    return frame


def uniform_widths(truth_rows: np.ndarray, seeds: int, rounds: int, seed: int) -> pd.DataFrame:
    """The Poisson-sampling baseline with π = T/N on every row × seed."""
    n_rows, n_items = truth_rows.shape
    pi = rounds / n_items
    rng = np.random.default_rng(seed)
    frames = []
    for s in range(seeds):
        kept = rng.random((n_rows, n_items)) < pi
        theta, var = horvitz_thompson_uniform(truth_rows, kept, pi)
        lo, hi = (np.asarray(x) for x in wald_interval(theta, var, LEVEL))
        truth = truth_rows.mean(1)
        frames.append(pd.DataFrame({"model": np.arange(n_rows), "seed": s, "theta": theta,
                                    "covered": (lo <= truth) & (truth <= hi),
                                    "width": hi - lo, "distinct": kept.sum(1)}))
    return pd.concat(frames, ignore_index=True)


def summarise(runs: pd.DataFrame, uniform: pd.DataFrame, suffix: str = "") -> dict[str, float]:
    """Coverage (± SE over models: runs of one model are not independent of its
    difficulty), mean width and the ESS multiplier over uniform (per seed, then mean), of
    the interval in columns ``covered{suffix}``/``width{suffix}`` (suffix "_ht": the
    authors' variance form)."""
    per_model = runs.groupby("model")["covered" + suffix].mean()
    w_method = runs.groupby("seed")["width" + suffix].mean()
    w_uniform = uniform.groupby("seed")["width"].mean()
    ess = (w_uniform / w_method) ** 2
    out = {"coverage": float(runs["covered" + suffix].mean()),
           "coverage_se": float(per_model.std(ddof=1) / np.sqrt(len(per_model))),
           "mean_width": float(runs["width" + suffix].mean()),
           "ess_multiplier": float(ess.mean()),
           "ess_multiplier_se": float(ess.std(ddof=1) / np.sqrt(len(ess)))}
    if not suffix:
        out["distinct_items"] = float(runs["distinct"].mean())
    return {key + suffix: value for key, value in out.items()}


def grid_configs(grid: dict[str, Sequence[float]]) -> list[HybridParams]:
    return [HybridParams(*c) for c in itertools.product(
        grid["beta0"], grid["rho"], grid["gamma"], grid["tau"])]


_FITS: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _fit(data: Data, rows: np.ndarray | None, k: int, weight_decay: float, seed: int
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(V, û0, Σ0) of the factor model on the history's ``rows`` (all: None), fitted once
    per process and arguments."""
    history = data.history if rows is None else data.history[rows]
    key = f"{hash(history.tobytes())}-{history.shape}-{k}-{weight_decay}-{seed}"
    if key not in _FITS:
        fit = fit_factors(history, k, weight_decay, seed=seed)
        _FITS.clear()  # one fit at a time is all a setting needs
        _FITS[key] = (fit.V, *factor_prior(fit.U))
    return _FITS[key]


def _setting_of(unit: Unit) -> Setting:
    return Setting(**unit.settings["setting"])


def cv_unit(unit: Unit, data: dict[str, ScoreMatrix]) -> dict[str, np.ndarray]:
    """Step 2's cross-validation of (k, λ) on H_train (a cached unit): the 1-SE choice, its
    table (:meth:`~bayeval.models.factor.CrossValidation.rows`) and its seconds."""
    setting = _setting_of(unit)
    prepared = prepare(setting, data[unit.dataset])
    t0 = time.time()
    result = cross_validate(prepared.history[prepared.train], seed=setting.split_seed)
    return {"k": np.asarray(result.k), "weight_decay": np.asarray(result.weight_decay),
            "table": np.asarray(result.rows()), "seconds": np.asarray(time.time() - t0)}


def tuning_unit(unit: Unit, data: dict[str, ScoreMatrix]) -> pd.DataFrame:
    """Mean validation width of every grid configuration at one budget (a cached unit),
    with factors fitted on H_train."""
    setting, s = _setting_of(unit), unit.settings
    prepared = prepare(setting, data[unit.dataset])
    v, mean0, cov0 = _fit(prepared, prepared.train, s["k"], s["weight_decay"],
                          setting.split_seed)
    rounds = budget_rounds(s["budget"], prepared.history.shape[1])
    rows = []
    for params in grid_configs(s["grid"]):
        runs = run_widths(v, mean0, cov0, prepared.val_truth, setting.val_seeds, params,
                          rounds, seed_offset=10**6)
        rows.append({"budget": s["budget"], **params._asdict(),
                     "val_width": runs["width"].mean(), "val_coverage": runs["covered"].mean()})
    return pd.DataFrame(rows)


def faq_unit(unit: Unit, data: dict[str, ScoreMatrix]) -> pd.DataFrame:
    """FAQ with one configuration at one budget on every new model × seed (a cached unit):
    one summary row against the uniform baseline; ``data["progress"]``, when set, follows
    its runs."""
    setting, s = _setting_of(unit), unit.settings
    prepared = prepare(setting, data[unit.dataset])
    v, mean0, cov0 = _fit(prepared, None, s["k"], s["weight_decay"], setting.split_seed)
    rounds = budget_rounds(s["budget"], prepared.new.shape[1])
    params = HybridParams(*s["params"])
    uniform = uniform_widths(prepared.new, setting.seeds, rounds, seed=int(s["budget"] * 1e4))
    t0 = time.time()
    step = data.get("progress")
    runs = run_widths(v, mean0, cov0, prepared.new, setting.seeds, params, rounds,
                      progress=None if step is None else step(unit))
    return pd.DataFrame([{"suite": setting.suite, "history": setting.history,
                          "budget": s["budget"], "rounds": rounds, **params._asdict(),
                          **summarise(runs, uniform), **summarise(runs, uniform, "_ht"),
                          "seconds": time.time() - t0, "runs": len(runs)}])


def choose(tuning: pd.DataFrame, budget: float, fixed: dict[str, float] | None = None
           ) -> HybridParams:
    """The configuration of least validation width at ``budget`` (among those matching
    ``fixed``)."""
    table = tuning[np.isclose(tuning["budget"], budget)]
    for name, value in (fixed or {}).items():
        table = table[np.isclose(table[name], value)]
    best = table.loc[table["val_width"].idxmin()]
    return HybridParams(*(float(best[f]) for f in HybridParams._fields))


def run_coverage_bench(source: str | ScoreMatrix, budgets: Sequence[float] | str = BUDGETS,
                       grid: str = "full", history: str = "full", full_rows: int = 50,
                       p_obs: float = 0.1, split_seed: int = 0, seeds: int = 100,
                       val_seeds: int = 5, factor_selection: str = "one-se",
                       out: Path = Path("results/coverage"),
                       executor: Executor | None = None,
                       log: Callable[[str], None] = print,
                       progress: Callable[[str, int, int], None] | None = None) -> Path:
    """``bayeval bench coverage``: :func:`run_setting` on one source (a bundled dataset or
    suite ``a+b``, or the user's matrix), FAQ's policy tuned over the ``grid`` 'full'
    (β0, ρ, γ, τ) or 'default' (ρ, γ only, with the robust (β0, τ) of
    :data:`DEFAULT`); returns the report's path. The settings are checked before any
    work."""
    shares = parse_shares("--budgets", budgets, "budget must be a share")
    if grid not in ("full", "default"):
        raise BayevalError(f"--grid must be 'full' or 'default', got {grid!r}")
    search = GRID if grid == "full" else {
        **GRID, **{name: (value,) for name, value in DEFAULT.items()}}
    label, matrix = bench_dataset(source)
    setting = Setting(label, history, full_rows, p_obs, split_seed, seeds, val_seeds,
                      factor_selection=factor_selection)
    run_setting(setting, shares, out, grid=search, progress=progress, log=log,
                matrix=matrix, executor=executor)
    return out / "report.md"


def run_setting(setting: Setting, budgets: Sequence[float] = BUDGETS, out: Path = Path("."),
                grid: dict[str, Sequence[float]] | None = None,
                log: Callable[[str], None] = print,
                progress: Callable[[str, int, int], None] | None = None,
                matrix: ScoreMatrix | None = None,
                executor: Executor | None = None) -> pd.DataFrame:
    """The whole experiment of the module docstring for one setting (on ``matrix`` when
    given, a user's matrix labelled ``setting.suite``); returns (and writes to
    ``out/results.csv``) one row per budget and method. The CV, each budget's tuning and
    each (budget, configuration)'s runs are units of :mod:`~bayeval.experiments.units`,
    saved under ``out/units`` as they finish and reused by a rerun (the tuned and default
    FAQ share theirs when the tuning picks the default); ``executor`` says where they
    run. ``progress(label, done, total)`` follows the runs of each (budget, method) when
    they run in this process."""
    grid = {k: [float(x) for x in v] for k, v in (grid or GRID).items()}
    out.mkdir(parents=True, exist_ok=True)
    matrix = load_dataset(setting.suite) if matrix is None else matrix
    data: dict = {setting.suite: matrix}
    base = {"setting": asdict(setting)}
    go = dict(executor=executor, log=log)
    history = {f: getattr(setting, f) for f in ("suite", "history", "n_full_obs", "p_obs",
                                               "split_seed", "val_fraction")}
    # the CV reads the split and history only; the tuning also the validation seeds
    [cv] = run_units([Unit("coverage", setting.suite, "cv", 0, 0, {"setting": history})],
                     cv_unit, data, out, **go)
    table = [str(row) for row in cv["table"]]
    if setting.factor_selection == "best":
        k, lam = best_setting(table)
        rule = "highest mean accuracy"
    elif setting.factor_selection == "one-se":
        k, lam = int(cv["k"]), float(cv["weight_decay"])
        rule = "1-SE rule"
    else:
        raise ValueError(f"factor_selection must be 'one-se' or 'best', got "
                         f"{setting.factor_selection!r}")
    cv = {"k": k, "weight_decay": lam, "table": table, "seconds": float(cv["seconds"]),
          "rule": rule}
    (out / "cv.json").write_text(json.dumps(cv, indent=1))
    log(f"factor model: k = {k}, λ = {lam:g} (5-fold CV, {rule})")
    fitted = {**base, "k": k, "weight_decay": lam}
    tuned_on = {"setting": {**history, "val_seeds": setting.val_seeds}, "k": k,
                "weight_decay": lam}
    tunings = run_units([Unit("coverage", setting.suite, "tuning", 0, setting.val_seeds,
                              {**tuned_on, "budget": float(b), "grid": grid})
                         for b in budgets],
                        tuning_unit, data, out, **go)
    tuning = pd.concat(tunings, ignore_index=True)
    tuning.to_csv(out / "tuning.csv", index=False)
    labels = (("FAQ (tuned)", None), ("FAQ (default)", DEFAULT))
    plan = [(budget, method, tuple(choose(tuning, budget, fixed))) for budget in budgets
            for method, fixed in labels]
    units = [Unit("coverage", setting.suite, "faq", 0, setting.seeds,
                  {**fitted, "budget": float(b), "params": [float(x) for x in params]})
             for b, _, params in plan]
    if progress is not None and (executor is None or executor.in_process):
        n_new = matrix.n_models - matrix.n_models // 2  # prepare's split

        def follow(unit: Unit) -> Callable[[int], None]:
            return _counter(progress, f"FAQ at {unit.settings['budget']:.1%}",
                            n_new * setting.seeds)

        data["progress"] = follow  # only this process's units can report
    new = prepare(setting, matrix).new
    rows = []
    faq_rows = iter(run_units(units, faq_unit, data, out, **go))
    for i, (budget, method, _) in enumerate(plan):
        first = next(faq_rows).iloc[0].to_dict()
        row = {k: first[k] for k in ("suite", "history", "budget", "rounds")}
        row = {**row, "method": method, **first}
        rows.append(row)
        log(f"{method} at {budget:.1%}: coverage {row['coverage']:.4f}, width "
            f"{row['mean_width']:.4f}, ESS ×{row['ess_multiplier']:.2f}; with the "
            f"authors' variance: coverage {row['coverage_ht']:.4f}, ESS "
            f"×{row['ess_multiplier_ht']:.2f} ({row['seconds']:.0f} s, "
            f"{row['runs']:.0f} runs)")
        if i % len(labels) == len(labels) - 1:  # the budget's uniform baseline last
            rounds = budget_rounds(budget, new.shape[1])
            uniform = uniform_widths(new, setting.seeds, rounds, seed=int(budget * 1e4))
            rows.append({"suite": setting.suite, "history": setting.history,
                         "budget": budget, "rounds": rounds, "method": "uniform",
                         **summarise(uniform, uniform)})
    done = pd.DataFrame(rows)
    done.to_csv(out / "results.csv", index=False)
    write_report(done, setting, cv, out)
    return done


def _counter(progress: Callable[[str, int, int], None] | None, label: str,
             total: int) -> Callable[[int], None]:
    """A per-chunk callback ``(n runs)`` that reports ``(label, runs so far, total)``."""
    so_far = 0

    def step(n: int) -> None:
        nonlocal so_far
        so_far += n
        if progress is not None:
            progress(label, so_far, total)

    return step


def write_report(results: pd.DataFrame, setting: Setting, cv: dict, out: Path) -> None:
    """``report.md`` (tables) and ``coverage.png`` (coverage and ESS against the budget)."""
    lines = [f"# FAQ coverage: {setting.suite}, {setting.history} history",
             "", f"Setting: `{setting.key()}`", "",
             f"Factor model: k = {cv['k']}, λ = {cv['weight_decay']:g} (5-fold CV over "
             f"historical training models, {cv.get('rule', '1-SE rule')}).", "",
             "Columns \"(authors' v²)\": the same runs with the variance centred at A "
             "(`centre=\"ht\"`, seed 001's code) instead of N θ̂.", "",
             "| budget | method | (β0, ρ, γ, τ) | coverage | ± SE | mean width | ESS × | "
             "coverage (authors' v²) | ESS × (authors' v²) | distinct items |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in results.sort_values(["budget", "method"]).iterrows():
        uniform = r["method"] == "uniform"
        params = ("–" if uniform else
                  f"({r['beta0']:g}, {r['rho']:g}, {r['gamma']:g}, {r['tau']:g})")
        authors = ("– | –" if uniform else
                   f"{r['coverage_ht']:.4f} | {r['ess_multiplier_ht']:.2f}")
        lines.append(f"| {r['budget']:.1%} | {r['method']} | {params} | {r['coverage']:.4f} | "
                     f"{r['coverage_se']:.4f} | {r['mean_width']:.4f} | "
                     f"{r['ess_multiplier']:.2f} | {authors} | {r['distinct_items']:.1f} |")
    lines += ["", "CV accuracy (held-out entries of held-out models):", "", *cv["table"]]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    fig, (ax_cov, ax_ess) = panel_grid(2, 2, 4.5, 3.4)
    for method, part in results.groupby("method"):
        part = part.sort_values("budget")
        ax_cov.errorbar(part["budget"] * 100, part["coverage"], yerr=part["coverage_se"],
                        marker="o", label=method, capsize=2)
        ax_ess.plot(part["budget"] * 100, part["ess_multiplier"], marker="o", label=method)
    ax_cov.axhspan(0.94, 0.96, color="0.9")
    ax_cov.axhline(LEVEL, color="k", lw=0.8)
    ax_cov.set(xlabel="budget (% of items)", ylabel="coverage of the 95% interval",
               title=f"{setting.suite}, {setting.history} history")
    ax_ess.set(xlabel="budget (% of items)", ylabel="ESS multiplier over uniform")
    if setting.history == "full":
        ax_ess.plot([b * 100 for b in AUTHORS_ESS], list(AUTHORS_ESS.values()), "k^",
                    label="seed 001, 5-benchmark suite")
    ax_ess.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "coverage.png", dpi=120)
