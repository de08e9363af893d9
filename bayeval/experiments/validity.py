"""The validity experiment of docs/methods.md §9 ("Metrics"): coverage of the interval at the
automatic stop, items used, and the saving against RS-Mean at the same ε.

For a dataset and a **variant**:

* ``standard`` — targets drawn at random among the models;
* ``extremes`` — targets drawn from the bottom and top 5% of models by mean score (half
  each), where a plug-in Wald interval fails;
* ``sparse`` — the benchmark cut to the items that fewer than 10% of models solve
  (targets at random), so that most targets score near 0;
* ``extrapolation`` — the weakest half of the models as the references and targets from
  the strongest 30%: outside the references' range, where a model-based interval can only
  extrapolate (not among the defaults).

Each of ``seeds`` draws its own targets and reference subset (``reference_fraction`` of
the other models); each target runs ``reps`` times with different selection seeds, all
through the vmapped engine (:func:`~bayeval.loop.simulate.simulate`) until every run has
stopped. Per (method, ε) and per score stratum of the target (< 5%, 5–95%, > 95%, and
exactly 0 or 1):
coverage of the interval at the stop with its binomial SE, mean items at the stop,
saving = 1 − items / items of RS-Mean (Wilson–FPC, same ε and stopping rule), and the
mean width at the stop. FAQ, given the first method's mean stopping n as its budget of
draws, is run beside them: its width against the first method's width at the same n.

Every run of a model-based method (bq, bayesame, irt) is also checked against the
reference models' domain at its stop (:mod:`bayeval.estimators.domain`, from the scores
observed and the model's prediction of each before it was observed): per cell the share
of runs flagged, of the runs whose interval missed, and of those whose interval covered.
A design-based interval (active-pai, RS-Mean) holds whatever the check would say; its
runs are not checked.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.data import ScoreMatrix
from bayeval.data.io import safe_file_name
from bayeval.data.sources import bench_dataset
from bayeval.data.splits import Split
from bayeval.errors import BayevalError, DataError
from bayeval.estimators.domain import domain_check
from bayeval.estimators.interval import z_value
from bayeval.experiments.estimation import capacity_setting
from bayeval.experiments.inputs import parse_shares
from bayeval.experiments.metrics import coverage, covers
from bayeval.experiments.tables import markdown_table
from bayeval.experiments.units import Executor, Unit, run_units
from bayeval.loop.call_sizes import parse_call_rule
from bayeval.loop.simulate import SimulationResult, concatenate, simulate
from bayeval.methods import (
    accepts_parameter,
    make_method,
    parse_method_spec,
    resolved_parameters,
)
from bayeval.models.bucket_gp import make_buckets

VARIANTS = ("standard", "extremes", "sparse", "extrapolation")
DEFAULT_VARIANTS = VARIANTS[:3]
EXTRAPOLATION_TARGETS = 0.30  # the strongest share of models the extrapolation variant
#                               targets; its references are the weakest half
STRATA = (("< 5%", -np.inf, 0.05), ("5–95%", 0.05, 0.95), ("> 95%", 0.95, np.inf))
# targets scoring exactly 0 or 1 (a sparse benchmark's weakest models), inside the first
# and last strata but reported on their own: the interval must hold the edge exactly
EDGES = (("= 0", 0.0), ("= 1", 1.0))
METHODS = ("active-pai", "active-pai(anytime=true)", "random")
SPARSE_SHARE = 0.10  # an item is "sparse" when fewer than this share of models solve it
EXTREME_SHARE = 0.05  # the bottom and top shares of models the extremes variant targets
NOMINAL = 0.95  # the level of the intervals judged


def variant_matrix(matrix: ScoreMatrix, variant: str) -> ScoreMatrix:
    """The score matrix of ``variant`` (module docstring)."""
    if variant not in VARIANTS:
        raise DataError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if variant != "sparse":
        return matrix
    keep = np.flatnonzero(np.nan_to_num(matrix.item_means(), nan=1.0) < SPARSE_SHARE)
    if keep.size < 50:
        raise DataError(f"{matrix.name}: only {keep.size} items are solved by fewer than "
                        f"{SPARSE_SHARE:.0%} of models; the sparse variant needs 50")
    return matrix.select_items(keep)


def variant_split(matrix: ScoreMatrix, variant: str, n_targets: int,
                  reference_fraction: float, seed: int) -> Split:
    """Targets and reference models of one seed: at random, or (``extremes``) half from
    the bottom and half from the top ``EXTREME_SHARE`` of models by mean score, or
    (``extrapolation``) from the strongest ``EXTRAPOLATION_TARGETS`` with every model of
    the weakest half as the references."""
    rng = np.random.default_rng([seed, 2024])
    order = np.argsort(np.nan_to_num(matrix.model_means(), nan=0.0), kind="stable")
    if variant == "extrapolation":
        top = order[-max(1, math.ceil(EXTRAPOLATION_TARGETS * matrix.n_models)):]
        weak = order[: matrix.n_models // 2]
        if weak.size < 2:
            raise DataError(f"{matrix.name}: {matrix.n_models} models leave no weakest "
                            "half to extrapolate from")
        targets = rng.choice(top, min(n_targets, top.size), replace=False)
        return Split(matrix.select_models(np.sort(weak)),
                     matrix.select_models(np.sort(targets)))
    if variant == "extremes":
        tail = max(1, math.ceil(EXTREME_SHARE * matrix.n_models))
        low = rng.choice(order[:tail], min(tail, n_targets // 2), replace=False)
        high = rng.choice(order[-tail:], min(tail, n_targets - n_targets // 2), replace=False)
        targets = np.concatenate([low, high])
    else:
        targets = rng.choice(matrix.n_models, min(n_targets, matrix.n_models - 2),
                             replace=False)
    pool = np.setdiff1d(np.arange(matrix.n_models), targets)
    n_ref = max(1, round(reference_fraction * pool.size))
    reference = np.sort(rng.choice(pool, n_ref, replace=False))
    return Split(matrix.select_models(reference), matrix.select_models(np.sort(targets)))


def _simulate_spec(spec: str, splits: Sequence[Split], reps: int, capacity: int | None,
                   epsilon: float | None, extra: dict | None = None, first: int = 0,
                   concurrency: int = 1, batch: int = 1, calls: str = "fixed"
                   ) -> SimulationResult:
    name, params = parse_method_spec(spec)
    if epsilon is not None and accepts_parameter(name, "epsilon"):
        params.setdefault("epsilon", epsilon)
    if capacity is not None and accepts_parameter(name, "bucket_capacity"):
        params.setdefault("bucket_capacity", capacity)
    params.update(extra or {})
    method = make_method(name, **params)
    if not streams(method):  # RS-Mean and FAQ draw regardless of what is in flight
        concurrency = batch = 1
    rule = None
    if batch > 1 or concurrency > 1:
        rule = parse_call_rule(calls, float(method.hyper_values.get("epsilon", 0.05)))
    parts = []
    for s, sp in enumerate(splits, start=first):
        targets = np.repeat(sp.targets.scores, reps, axis=0)
        seeds = 1_000_003 * s + np.arange(targets.shape[0])
        parts.append(simulate(method, sp.reference.scores, targets, seeds,
                              until_stop=not method.with_replacement,
                              concurrency=concurrency, batch=batch, call_rule=rule))
    return concatenate(parts)  # every part has N steps (NaN after an early end)


def streams(method) -> bool:
    """Whether ``bench validity``'s --concurrency and --batch change how ``method`` runs:
    a design-based estimate drawn without replacement reads the state at each draw.
    RS-Mean's draws are the same whatever is in flight, and FAQ draws with replacement
    one at a time; they run one item at a time."""
    return method.estimator.needs_probabilities and not method.with_replacement


def stream_label(spec: str, concurrency: int, batch: int, calls: str = "fixed") -> str:
    """The method's name in the tables: ``spec``, with ``[K=8]``, ``[batch=32]`` or,
    with a call rule, ``[batch=32, taper]``."""
    rule = "" if calls == "fixed" else f", {calls}"
    if concurrency > 1:
        return f"{spec} [K={concurrency}{rule}]"
    return f"{spec} [batch={batch}{rule}]" if batch > 1 else spec


def _at(values: np.ndarray, n: np.ndarray) -> np.ndarray:
    return values[np.arange(values.shape[0]), n - 1]


def stop_table(result: SimulationResult, n_items: int, reference: np.ndarray | None = None,
               targets: np.ndarray | None = None) -> pd.DataFrame:
    """One row per run: the stop n (the budget or N where the rule never fired), the
    estimate, bounds and truth there, and the distinct items evaluated; with the
    ``reference`` scores and each run's ``targets`` row, the domain check at the stop
    (:func:`domain_flags`)."""
    steps = result.estimate.shape[1]
    n = np.where(result.stop_n > 0, result.stop_n, min(steps, n_items))
    lower = np.clip(_at(result.lower, n), 0.0, 1.0)
    upper = np.clip(_at(result.upper, n), 0.0, 1.0)
    distinct = np.array([np.unique(result.items[r, :n[r]]).size for r in range(n.size)])
    # items started by the stop: with evaluations in flight, more than the items used
    drawn = distinct if result.drawn_at_stop is None else np.where(
        result.stop_n > 0, result.drawn_at_stop, distinct)
    truth = result.truth
    with np.errstate(divide="ignore", invalid="ignore"):
        rs_var = truth * (1 - truth) / distinct * (n_items - distinct) / max(n_items - 1, 1)
    # harness calls by the stop: one per item one at a time
    calls = drawn if result.calls is None else result.calls
    table = pd.DataFrame({"n": n, "items": distinct, "drawn": drawn, "calls": calls,
                          "estimate": _at(result.estimate, n),
                          "lower": lower, "upper": upper, "truth": truth,
                          "covered": covers(lower, upper, truth), "rs_var": rs_var})
    if reference is not None and result.predicted is not None:
        for column, values in domain_flags(result, n, reference, targets).items():
            table[column] = values
    return table


def domain_flags(result: SimulationResult, n: np.ndarray, reference: np.ndarray,
                 targets: np.ndarray) -> dict[str, np.ndarray]:
    """Each run's domain check (:func:`~bayeval.estimators.domain.domain_check`) after its
    first ``n`` observations, from the items it drew, its target's scores there and the
    predictions recorded before each (a repeated draw, with replacement, counts each
    time): the prequential ``domain_z``, ``domain_outside`` (the target outside the
    references' range), ``domain_bias_share`` (the bias beyond its noise over the
    half-width, :attr:`DomainCheck.bias_share`) and ``flagged``, so that a table can
    read the check at other thresholds."""
    columns = {"domain_z": np.zeros(n.size), "domain_outside": np.zeros(n.size, bool),
               "domain_bias_share": np.zeros(n.size), "flagged": np.zeros(n.size, bool)}
    half = (_at(result.upper, n) - _at(result.lower, n)) / 2
    for r in range(n.size):
        items = result.items[r, : n[r]]
        check = domain_check(reference[:, items], targets[r, items],
                             result.predicted[r, : n[r]], targets.shape[1], half[r])
        columns["domain_z"][r], columns["domain_outside"][r] = check.z, check.outside
        columns["domain_bias_share"][r], columns["flagged"][r] = check.bias_share, check.flagged
    return columns


def _variance_ratio(part: pd.DataFrame) -> float:
    """Median over runs of the interval's variance ((width / 2z)², z of the nominal level)
    over RS-Mean's at the same items, θ(1 − θ)/n (N − n)/(N − 1) with the true θ: how
    much the method gains per item, apart from the finite-population correction that
    RS-Mean shares (NaN where θ is 0 or 1 or every item was used)."""
    if "rs_var" not in part:
        return float("nan")
    z = z_value(NOMINAL)
    var = ((part.upper - part.lower) / (2 * z)) ** 2
    ratio = (var / part.rs_var).replace([np.inf, -np.inf], np.nan).dropna()
    return float(ratio.median()) if len(ratio) else float("nan")


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Coverage ± SE, mean items and width per (dataset, variant, ε, method, stratum),
    strata from the target's true score, plus an "all" row."""
    rows = []
    keys = ["dataset", "variant", "epsilon", "method"]
    for key, group in runs.groupby(keys, sort=False):
        strata = [("all", group)] + [
            (name, group[(group.truth >= lo) & (group.truth < hi)]) for name, lo, hi in STRATA
        ] + [(name, group[group.truth == edge]) for name, edge in EDGES]
        for name, part in strata:
            if part.empty:
                continue
            cov, se = coverage(part.covered)
            rows.append({**dict(zip(keys, key, strict=True)), "stratum": name,
                         "runs": len(part), "coverage": cov, "coverage_se": se,
                         "mean_items": float(part["items"].mean()),
                         "mean_drawn": float(part["drawn"].mean()) if "drawn" in part
                         else float(part["items"].mean()),
                         "mean_calls": float(part["calls"].mean()) if "calls" in part
                         else float("nan"),
                         "mean_width": float((part.upper - part.lower).mean()),
                         "variance_ratio": _variance_ratio(part),
                         "mae": float((part.estimate - part.truth).abs().mean()),
                         **_flag_shares(part)})
    table = pd.DataFrame(rows)
    rs = table[table.method == "random"].set_index(["dataset", "variant", "epsilon",
                                                   "stratum"])["mean_items"]
    idx = pd.MultiIndex.from_frame(table[["dataset", "variant", "epsilon", "stratum"]])
    rs_items = rs.reindex(idx).to_numpy()
    table["saving_vs_rs"] = 1.0 - table["mean_items"].to_numpy() / rs_items
    # counting the items in flight at the stop as spent
    table["saving_drawn_vs_rs"] = 1.0 - table["mean_drawn"].to_numpy() / rs_items
    return table


def _flag_shares(part: pd.DataFrame) -> dict[str, float]:
    """The share of runs the domain check flagged: of all, of those whose interval
    missed, of those whose interval covered (NaN where none, or not checked)."""
    checked = part[part.flagged.notna()] if "flagged" in part else part.iloc[:0]
    if checked.empty:  # (runs cached before the check existed have none)
        return {"flagged": np.nan, "misses_flagged": np.nan, "covered_flagged": np.nan}
    flagged, covered = checked.flagged.astype(bool), checked.covered.astype(bool)

    def share(x: pd.Series) -> float:
        return float(x.mean()) if len(x) else float("nan")

    return {"flagged": share(flagged), "misses_flagged": share(flagged[~covered]),
            "covered_flagged": share(flagged[covered])}


def validity_unit(unit: Unit, data: dict[str, ScoreMatrix]) -> dict[str, np.ndarray]:
    """One cached unit of ``bench validity``: seed ``unit.first`` (one split) of one
    (variant, ε, method), or of FAQ at ``settings["budget"]``. Returns its per-run rows
    (:func:`stop_table`) as ``rows/<column>`` arrays and, with ``settings["bounds"]``, the
    interval at every step (``lower``, ``upper``) for the comparison with FAQ."""
    s = unit.settings
    matrix = variant_matrix(data[unit.dataset], s["variant"])
    sp = variant_split(matrix, s["variant"], s["n_targets"], s["reference_fraction"],
                       unit.first)
    extra = {"budget": s["budget"]} if s.get("budget") is not None else None
    result = _simulate_spec(s["spec"], [sp], s["reps"], s.get("capacity"), s["epsilon"],
                            extra, first=unit.first, concurrency=s.get("concurrency", 1),
                            batch=s.get("batch", 1), calls=s.get("calls", "fixed"))
    name, params = parse_method_spec(s["spec"])
    if make_method(name, **params).estimator.model_based:  # the check speaks for these
        rows = stop_table(result, matrix.n_items, sp.reference.scores,
                          np.repeat(sp.targets.scores, s["reps"], axis=0))
    else:
        rows = stop_table(result, matrix.n_items)
    out = {f"rows/{c}": rows[c].to_numpy() for c in rows.columns}
    if s.get("bounds"):
        out.update(lower=result.lower, upper=result.upper)
    return out


def _rows(arrays: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame({k.removeprefix("rows/"): v for k, v in arrays.items()
                         if k.startswith("rows/")})


def run_validity(dataset: str | ScoreMatrix, variants: Sequence[str] = DEFAULT_VARIANTS,
                 epsilons: Sequence[float] = (0.02, 0.05, 0.1),
                 methods: Sequence[str] = METHODS, seeds: int = 10, n_targets: int = 20,
                 reps: int = 5, reference_fraction: float = 0.5, faq: bool = True,
                 log: Callable[[str], None] = print, runs_dir: Path | None = None,
                 out: Path | None = None, executor: Executor | None = None, concurrency: int = 1,
                 batch: int = 1, calls: str = "fixed") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-run rows, FAQ comparison rows) for every variant, ε and method (module
    docstring). Every (variant, ε, method, seed) is a unit of
    :mod:`~bayeval.experiments.units`: with ``out`` saved there as it finishes and reused
    by a rerun; ``executor`` says where the units run (FAQ's
    after the first method's, whose mean stop sets FAQ's budget). ``runs_dir``: each
    (variant, ε, method) leaves its per-run rows there as CSV. ``concurrency`` K > 1 runs
    the design-based methods with K evaluations in flight (docs/methods.md §9 "Streaming",
    :func:`~bayeval.loop.simulate.simulate`), ``batch`` k > 1 with batches of k, sized by
    the call rule ``calls`` (:func:`~bayeval.loop.call_sizes.parse_call_rule`); their rows are
    labelled ``spec [K=…]`` / ``spec [batch=…]`` (:func:`stream_label`)."""
    label, matrix = bench_dataset(dataset)  # a bundled name, or a user's matrix
    t0 = time.time()
    cells = []  # (variant, data, capacity)
    for variant in variants:
        try:
            data = variant_matrix(matrix, variant)
        except DataError as exc:  # e.g. no sparse items: reported, the others still run
            log(f"skipped {label} {variant}: {exc}")
            continue
        splits = [variant_split(data, variant, n_targets, reference_fraction, s)
                  for s in range(seeds)]
        cells.append((variant, data, max(make_buckets(sp.reference.scores).n_buckets
                                         for sp in splits)))

    def units_of(variant, eps, spec, capacity, **more):
        name, params = parse_method_spec(spec)
        if "budget" not in more and streams(make_method(name, **params)):
            more.update({k: v for k, v in (("concurrency", concurrency), ("batch", batch))
                         if v > 1})
            if (batch > 1 or concurrency > 1) and calls != "fixed":
                more["calls"] = calls
        settings = {"variant": variant, "epsilon": eps, "spec": spec,
                    "parameters": resolved_parameters(spec),
                    "n_targets": int(n_targets), "reps": int(reps),
                    "reference_fraction": float(reference_fraction),
                    **capacity_setting(spec, capacity), **more}
        name = (f"{variant}-{spec}-budget={more['budget']}" if "budget" in more
                else f"{variant}-{eps:g}-{spec}")
        name += "".join(f"-{k}={more[k]}" for k in ("concurrency", "batch", "calls")
                        if k in more)
        return [Unit("validity", label, name, s, s + 1, settings) for s in range(seeds)]

    plan = {(v, eps, spec): units_of(v, eps, spec, cap, bounds=(i == 0 and faq))
            for v, _, cap in cells for eps in epsilons for i, spec in enumerate(methods)}
    units = [u for us in plan.values() for u in us]
    done = dict(zip(units, run_units(units, validity_unit, {label: matrix}, out, executor,
                                     log=log), strict=True))
    all_runs, firsts = [], {}
    for (variant, eps, spec), us in plan.items():
        n_items = next(d for v, d, _ in cells if v == variant).n_items
        shown = stream_label(spec, us[0].settings.get("concurrency", 1),
                             us[0].settings.get("batch", 1),
                             us[0].settings.get("calls", "fixed"))
        runs = pd.concat([_rows(done[u]) for u in us], ignore_index=True).assign(
            dataset=label, variant=variant, epsilon=eps, method=shown)
        all_runs.append(runs)
        if us[0].settings["bounds"]:
            firsts[variant, eps] = (spec, runs, np.concatenate([done[u]["lower"] for u in us]),
                                    np.concatenate([done[u]["upper"] for u in us]))
        if runs_dir is not None:
            runs_dir.mkdir(parents=True, exist_ok=True)
            safe = safe_file_name(spec, "-_=.")
            runs.to_csv(runs_dir / f"{label}-{variant}-{eps:g}-{safe}.csv", index=False)
        log(f"{label} {variant} ε={eps:g} {spec}: {len(runs)} runs, coverage "
            f"{runs.covered.mean():.3f}, items {runs['items'].mean():.0f}/{n_items}")
    faq_rows = []
    if faq and firsts:
        budgets = {key: max(2, round(float(runs.n.mean())))
                   for key, (_, runs, _, _) in firsts.items()}
        faq_plan = {key: units_of(key[0], None, "faq", cap, budget=budgets[key])
                    for key in firsts for v, _, cap in cells if v == key[0]}
        faq_units = [u for us in faq_plan.values() for u in us]
        faq_done = dict(zip(faq_units, run_units(faq_units, validity_unit, {label: matrix},
                                                 out, executor, log=log),
                            strict=True))
        for (variant, eps), us in faq_plan.items():
            spec, runs, lower, upper = firsts[variant, eps]
            budget = budgets[variant, eps]
            faq_runs = pd.concat([_rows(faq_done[u]) for u in us], ignore_index=True)
            at = np.full(len(runs), budget)
            width_active = np.clip(_at(upper, at), 0, 1) - np.clip(_at(lower, at), 0, 1)
            faq_rows.append({
                "dataset": label, "variant": variant, "epsilon": eps,
                "method": spec, "budget": budget,
                "width": float(np.nanmean(width_active)),
                "faq_width": float((faq_runs.upper - faq_runs.lower).mean()),
                "faq_coverage": float(faq_runs.covered.mean()),
                "faq_items": float(faq_runs["items"].mean()), "runs": len(faq_runs)})
            log(f"{label} {variant} ε={eps:g} faq(budget={budget}): width "
                f"{faq_rows[-1]['faq_width']:.4f} against {faq_rows[-1]['width']:.4f}, "
                f"coverage {faq_rows[-1]['faq_coverage']:.3f}")
    log(f"{label}: {len(units)} units in {time.time() - t0:.0f} s")
    return pd.concat(all_runs, ignore_index=True), pd.DataFrame(faq_rows)


def run_validity_bench(sources: Sequence, variants: Sequence[str] = DEFAULT_VARIANTS,
                       epsilons: Sequence[float] | str = (0.02, 0.05, 0.1),
                       methods: Sequence[str] = METHODS, seeds: int = 10,
                       n_targets: int = 20, reps: int = 5, reference_fraction: float = 0.5,
                       faq: bool = True, out: Path = Path("results/validity"),
                       executor: Executor | None = None,
                       log: Callable[[str], None] = print, concurrency: int = 1,
                       batch: int = 1, calls: str = "fixed") -> Path:
    """``bayeval bench validity``: :func:`run_validity` on each of ``sources`` (bundled
    names or the user's matrices), RS-Mean (``random``, the saving's reference) always
    among the methods, the report rewritten after each dataset (a crash keeps the finished
    ones); returns the report's path. The settings are checked before any work."""
    eps = parse_shares("--epsilons", epsilons, "ε must be")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise BayevalError(f"--variants: unknown {', '.join(unknown) or '(none given)'} "
                           f"(known: {', '.join(VARIANTS)})")
    if concurrency > 1 and batch > 1:
        raise BayevalError("give --concurrency or --batch, not both")
    try:
        parse_call_rule(calls, 0.05)
    except ValueError as exc:
        raise BayevalError(f"--calls: {exc}") from None
    if calls != "fixed" and batch <= 1 and concurrency <= 1:
        raise BayevalError("--calls sizes the calls of a run in batches (or caps the "
                           "evaluations in flight near the stop): give it with --batch "
                           "k > 1 or --concurrency K > 1")
    specs = [*methods, *(() if "random" in methods else ("random",))]
    all_runs, all_faq = [], []
    for source in sources:
        runs, faq_rows = run_validity(
            source, variants, eps, specs, seeds, n_targets, reps, reference_fraction, faq,
            log=log, runs_dir=out / "runs", out=out, executor=executor,
            concurrency=concurrency, batch=batch, calls=calls)
        all_runs.append(runs)
        all_faq.append(faq_rows)
        report = write_report(pd.concat(all_runs), pd.concat(all_faq), out)
    return report


def write_report(runs: pd.DataFrame, faq_rows: pd.DataFrame, out: Path,
                 min_coverage: float = 0.94) -> Path:
    """results.csv, faq.csv, validity.png and report.md in ``out``; cells below
    ``min_coverage`` are listed as failures."""
    out.mkdir(parents=True, exist_ok=True)
    table = summarise(runs)
    table.to_csv(out / "results.csv", index=False)
    if not faq_rows.empty:
        faq_rows.to_csv(out / "faq.csv", index=False)
    lines = ["# Validity at the automatic stop (docs/methods.md §9)", "",
             "Coverage of the 95% interval at the stop ± its binomial SE, mean items at the "
             "stop, saving against RS-Mean at the same ε, the median ratio of the interval's "
             "variance to RS-Mean's at the same items (the gain per item, apart from the "
             "finite-population correction both share), mean width and MAE at the stop.",
             ""]
    shown = table.assign(
        coverage=[f"{c:.3f} ± {s:.3f}" for c, s in zip(table.coverage, table.coverage_se,
                                                        strict=True)],
        saving_vs_rs=[f"{s:.1%}" if np.isfinite(s) else "" for s in table.saving_vs_rs])
    cols = ["dataset", "variant", "epsilon", "method", "stratum", "runs", "coverage",
            "mean_items", "mean_calls", "saving_vs_rs", "variance_ratio", "mean_width", "mae"]
    lines += [markdown_table(shown[cols]), ""]
    bad = table[(table.coverage < min_coverage) & (table.method != "random")]
    lines += [f"## Cells below {min_coverage} ({len(bad)})", ""]
    lines += ([markdown_table(bad[[*cols[:6], "coverage", "coverage_se"]], ".3f")]
              if len(bad) else ["none"])
    # a cell where every run covers has an observed SE of 0: judge it at the nominal level
    # too, whose SE is at most 0.01 from this many runs on
    enough = math.ceil(NOMINAL * (1 - NOMINAL) / 0.01**2 - 1e-9)
    thin = table[(table.coverage_se > 0.01) | (table.runs < enough)]
    lines += ["", f"Cells whose SE (the observed one, or the one at the nominal {NOMINAL}) "
              f"is above 0.01, which need more runs (≥ {enough} each): {len(thin)} of "
              f"{len(table)}.", ""]
    checked = table[(table.stratum == "all") & table.flagged.notna()] if (
        "flagged" in table) else table.iloc[:0]
    if len(checked):
        lines += ["## Domain check of the model-based intervals", "",
                  "The share of runs flagged at the stop (bayeval.estimators.domain: the "
                  "target outside the reference models' range, or a bias of the model's "
                  "predictions that moves the estimate by over half the interval), of the "
                  "runs whose interval missed, and of those whose interval covered.", "",
                  markdown_table(checked[["dataset", "variant", "epsilon", "method", "runs",
                                          "coverage", "flagged", "misses_flagged",
                                          "covered_flagged"]], ".3f"), ""]
    if not faq_rows.empty:
        lines += ["## Width at equal items against FAQ", "",
                  markdown_table(faq_rows), ""]
    _plot(table, out / "validity.png")
    lines += ["![coverage and items](validity.png)", ""]
    report = out / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    return report


def _plot(table: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    allrows = table[table.stratum == "all"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{d}/{v}/ε={e:g}" for d, v, e in allrows[["dataset", "variant", "epsilon"]]
              .drop_duplicates().itertuples(index=False)]
    x = np.arange(len(labels))
    methods = list(dict.fromkeys(allrows.method))
    position = {label: i for i, label in enumerate(labels)}
    for k, method in enumerate(methods):
        part = allrows[allrows.method == method]
        at = np.array([position[f"{d}/{v}/ε={e:g}"] for d, v, e in
                       part[["dataset", "variant", "epsilon"]].itertuples(index=False)])
        offset = (k - (len(methods) - 1) / 2) * 0.8 / max(len(methods), 1)
        line = axes[0].errorbar(at + offset, part.coverage, yerr=part.coverage_se,
                                fmt="o", label=method, capsize=2)
        strata = table[(table.method == method) & (table.stratum != "all")]
        worst = strata.loc[strata.groupby(["dataset", "variant", "epsilon"], sort=False)
                           .coverage.idxmin()]
        at_worst = np.array([position[f"{d}/{v}/ε={e:g}"] for d, v, e in
                             worst[["dataset", "variant", "epsilon"]].itertuples(index=False)])
        axes[0].errorbar(at_worst + offset, worst.coverage, yerr=worst.coverage_se, fmt="o",
                         mfc="none", color=line[0].get_color(), capsize=2, alpha=0.7,
                         label=f"{method}: worst score stratum")
        axes[1].bar(at + offset, part.mean_items, width=0.8 / len(methods),
                    label=method)
    axes[0].axhline(0.95, color="k", lw=0.8)
    axes[0].axhline(0.94, color="r", lw=0.8, ls="--")
    axes[0].set_ylabel("coverage at the stop (± SE)")
    axes[1].set_ylabel("mean items at the stop")
    for ax in axes:
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    axes[0].legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
