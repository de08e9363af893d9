"""What a suite's allocation buys where its tasks differ, and why a task's interval inside
a suite can cover less than 95%: the two-task suite of ``bench/end_to_end_suite.py`` (the
harness's multiple-choice ``e2e_mc`` and generative ``e2e_gen`` on the 85M-parameter
target among 13 reference checkpoints; a generative document costs about 2.3 times a
multiple-choice one in the full runs) over many seeds.

Each task's ``active-pai`` run is simulated once per seed to its last document, as the
suite runs it (the suite's seed for the task, batches of 32, the target's harness log on
every document as the oracle), and the suite is composed from the runs under each scheme
(:func:`bayeval.loop.suite.compose`, the live suite's rule, checked against it in the tests):

* ``suite``: the default allocation (each task's variance read from its interval), cost 1
  per document;
* ``suite, costs``: the same with each task's cost per document from its full run
  (``docs/results/end_to_end_suite.json``): the allocation bayeval makes when told costs;
* ``pilot``: per-document variances frozen after each task's first batch;
* ``even``: equal per-document variances (documents split by weight);
* ``known``: per-document variances known beforehand (each task's mean over the seeds
  at 256 documents, or half the task where it is smaller: a bound, no run knows them);
* ``independent``: each task alone to ε_k = ε / (w_k sqrt(K)), the even split of the
  average's variance (the width an average of independent runs needs).

Every scheme stops when the average's interval is at most ε wide (independent: when each
task's is at most ε_k). Reported per ε: coverage ± binomial SE of the average and of each
task, documents, cost, and the saving against independent runs; and each task's coverage
at fixed numbers of documents (no stop), the estimator's own.

Needs the oracle matrices that ``bench/end_to_end_suite.py --coverage`` writes under
``--work``; the simulated runs are kept there (``allocation-runs-R.npz``). With
``--bundled DIR`` the same schemes are composed for the bundled suites of ``bayeval bench
suite`` instead (its draws and units, kept in DIR; every item costing 1; coverage SEs
clustered by target model)::

    python bench/suite_allocation.py --work /tmp/e2e --seeds 1000
    python bench/suite_allocation.py --bundled results/suite --seeds 10 \
        --epsilons 0.02,0.05,0.1 --out docs/results/suite_allocation_bundled.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from end_to_end_suite import SETTING, TASKS

BATCH = 32
SCHEMES = ("suite", "suite, costs", "pilot", "even", "known", "independent")
FIXED_N = (64, 128, 192, 256, 320, 416, 512)


def simulated_runs(work: Path, seeds: int) -> dict[str, np.ndarray]:
    """Each task's run for seeds 0 … ``seeds`` − 1 to its last document: estimate and
    interval after each, and the full run's score (kept in ``work``)."""
    saved = work / f"allocation-runs-{seeds}.npz"
    if saved.exists():
        return dict(np.load(saved))
    import bayeval
    from bayeval.loop.simulate import simulate
    from bayeval.loop.suite import NEVER, task_seed
    from bayeval.methods import make_method

    bayeval.enable_float64()
    out = {}
    for k, task in enumerate(TASKS):
        with np.load(work / f"oracle-{SETTING}-{task}.npz", allow_pickle=True) as data:
            scores, models = data["scores"].astype(np.float64), [str(m) for m in data["models"]]
        target = models.index(str(work / "targets" / SETTING))
        row = scores[target]
        t0 = time.time()
        result = simulate(make_method("active-pai", epsilon=NEVER),
                          np.delete(scores, target, 0), np.repeat(row[None], seeds, 0),
                          [task_seed(s, k) for s in range(seeds)], batch=BATCH)
        print(f"{task}: {seeds} runs simulated in {time.time() - t0:.0f} s", flush=True)
        out.update({f"{task}/estimate": result.estimate, f"{task}/lower": result.lower,
                    f"{task}/upper": result.upper, f"{task}/truth": np.full(seeds, row.mean())})
    np.savez(saved, **out)
    return out


def document_costs(timings: Path) -> np.ndarray:
    """Seconds per document of each task in its full runs (their evaluate time, start-up
    left out), median over the repeats."""
    runs = json.loads(timings.read_text())["runs"]
    return np.array([np.median([r["times"]["evaluate_seconds"] for r in runs[f"full {t}"]])
                     for t in TASKS]) / 1000.0


def compose_schemes(runs: dict[str, np.ndarray], tasks: list[str], weights: np.ndarray,
                    epsilon: float, costs: np.ndarray, batch: int) -> dict[str, dict]:
    """Per scheme (module docstring): items per task, estimates and intervals at the stop
    (``batch`` items per choice, as the runs were simulated)."""
    from bayeval.estimators.interval import z_value
    from bayeval.experiments.suite import independent_runs
    from bayeval.loop.suite import SuiteRule, compose

    est, low, high = ([runs[f"{t}/{f}"] for t in tasks] for f in ("estimate", "lower", "upper"))
    rule, z = SuiteRule(epsilon), z_value(0.95)
    # per-document variance after a batch of n: n ((u − l) / 2z)²
    def per_document(n: int) -> np.ndarray:  # at n items, at most half the task's (at
        # all of them the interval has no width left: a task of 250 items read at 256
        # would look certain)
        return np.stack([m * ((u[:, m - 1] - lo[:, m - 1]) / (2 * z)) ** 2
                         for lo, u in zip(low, high, strict=True)
                         for m in [min(n, u.shape[1] // 2)]], 1)

    variances = {"suite": None, "pilot": per_document(max(batch, rule.n_min)),
                 "even": np.ones(len(tasks)), "known": per_document(256).mean(0)}
    out = {}
    for scheme in SCHEMES[:-1]:
        key = "suite" if scheme == "suite, costs" else scheme
        r = compose(est, low, high, weights, rule,
                    costs=costs if scheme == "suite, costs" else None, batch=batch,
                    variances=variances[key])
        out[scheme] = {"n": r.n, "estimate": r.estimate, "lower": r.lower, "upper": r.upper}
    # independent: each task stops by itself when its interval is at most ε_k wide
    n, *at = independent_runs([{"estimate": e, "lower": lo, "upper": u}
                               for e, lo, u in zip(est, low, high, strict=True)],
                              weights, epsilon, rule.n_min, batch)
    out["independent"] = dict(zip(("n", "estimate", "lower", "upper"), (n, *at),
                                  strict=True))
    return out


def covered(lower: np.ndarray, upper: np.ndarray, truth: np.ndarray,
            cluster: np.ndarray | None = None) -> tuple[float, float]:
    """Coverage of ``truth`` and its SE (clustered by target model where ``cluster`` names
    each run's: :func:`bayeval.experiments.metrics.coverage`)."""
    from bayeval.experiments.metrics import coverage, covers

    return coverage(covers(lower, upper, truth), cluster)


def measure(runs: dict[str, np.ndarray], tasks: list[str], weights: np.ndarray,
            epsilons: list[float], costs: np.ndarray, batch: int,
            cluster: np.ndarray | None = None) -> dict:
    """The tables of the module docstring as records."""
    from bayeval.loop.suite import average_interval

    truth = np.stack([runs[f"{t}/truth"] for t in tasks], 1)
    w = np.asarray(weights, np.float64) / np.sum(weights)
    rows = []
    for eps in epsilons:
        schemes = compose_schemes(runs, tasks, w, eps, costs, batch)
        base = (schemes["independent"]["n"] * costs).sum(1).mean()
        base_items = schemes["independent"]["n"].sum(1).mean()
        for scheme, r in schemes.items():
            _, lo, hi = average_interval(r["estimate"], r["lower"], r["upper"], w)
            row = {"epsilon": eps, "scheme": scheme, "runs": int(truth.shape[0])}
            row["average"] = covered(lo, hi, truth @ w, cluster)
            row["width"] = float((hi - lo).mean())
            for k, task in enumerate(tasks):
                row[task] = covered(r["lower"][:, k], r["upper"][:, k], truth[:, k], cluster)
                row[f"{task} documents"] = float(r["n"][:, k].mean())
            row["documents"] = float(r["n"].sum(1).mean())
            row["documents_se"] = float(r["n"].sum(1).std() / math.sqrt(truth.shape[0]))
            row["cost"] = float((r["n"] * costs).sum(1).mean())
            row["saving_documents"] = 1 - row["documents"] / base_items
            row["saving_cost"] = 1 - row["cost"] / base
            rows.append(row)
    fixed = []
    for task in tasks:
        est, low, high = (runs[f"{task}/{f}"] for f in ("estimate", "lower", "upper"))
        t = runs[f"{task}/truth"]
        for n in (m for m in FIXED_N if m <= est.shape[1]):
            err = est[:, n - 1] - t
            half = (high[:, n - 1] - low[:, n - 1]) / 2
            fixed.append({"task": task, "documents": n,
                          "coverage": covered(low[:, n - 1], high[:, n - 1], t, cluster),
                          "misses_above": int((low[:, n - 1] > t).sum()),
                          "misses_below": int((high[:, n - 1] < t).sum()),
                          "corr_error_halfwidth": float(np.corrcoef(err, half)[0, 1])})
    return {"tasks": list(tasks), "schemes": rows, "fixed": fixed,
            "costs": [float(c) for c in costs]}


def tables(result: dict, label: str) -> list[str]:
    """One suite's two tables (markdown lines)."""
    tasks = result["tasks"]
    pm = lambda c: f"{c[0]:.3f} ± {c[1]:.3f}"  # noqa: E731
    short = [t.split(":")[-1].removeprefix("leaderboard_musr_") for t in tasks]
    lines = [f"### {label}", "",
             "| ε | scheme | average | " + " | ".join(short) + " | items | "
             + " | ".join(short) + " | cost | saves vs independent: items | cost |",
             "|---|---|---|" + "---|" * (2 * len(tasks) + 4)]
    for r in result["schemes"]:
        lines.append(
            f"| {r['epsilon']:g} | {r['scheme']} | {pm(r['average'])} | "
            + " | ".join(pm(r[t]) for t in tasks)
            + f" | {r['documents']:.1f} ± {r['documents_se']:.1f} | "
            + " | ".join(f"{r[f'{t} documents']:.0f}" for t in tasks)
            + f" | {r['cost']:.1f} | {r['saving_documents']:+.1%} | {r['saving_cost']:+.1%} |")
    lines += ["", "Each task's interval at a fixed number of items (no stop):", "",
              "| task | items | coverage | misses above / below | corr(error, half-width) |",
              "|---|---|---|---|---|"]
    for r in result["fixed"]:
        lines.append(f"| {r['task'].split(':')[-1]} | {r['documents']} | {pm(r['coverage'])} "
                     f"| {r['misses_above']} / {r['misses_below']} | "
                     f"{r['corr_error_halfwidth']:+.2f} |")
    return [*lines, ""]


def bundled_runs(label: str, units: Path, seeds: int) -> tuple[dict, list[str], np.ndarray,
                                                                np.ndarray]:
    """(runs, tasks, weights, each run's target model) of a bundled suite of ``bayeval
    bench suite`` with its defaults (:func:`bayeval.experiments.suite.suite_draws`), its
    units read from (or computed into) ``units``."""
    from bayeval.experiments.suite import SUITE_WEIGHTS, SUITES, suite_draws, task_matrix
    from bayeval.experiments.units import Executor

    names = list(SUITES[label])
    data = {name: task_matrix(name) for name in names}
    done, cluster = suite_draws(names, data, seeds, ("active-pai",), out=units,
                                executor=Executor(workers=2), log=lambda _: None)
    runs = {f"{name}/{f}": a[f] for name, a in zip(names, done["active-pai"], strict=True)
            for f in ("estimate", "lower", "upper", "truth")}
    weights = np.asarray(SUITE_WEIGHTS.get(label, [1.0] * len(names)), np.float64)
    return runs, names, weights, cluster


def write(results: list[tuple[str, dict]], out: Path, command: str, about: str) -> None:
    """``out`` (.md) and its .json."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(dict(results), indent=1))
    lines = ["# A suite's allocation against other allocations and independent runs "
             "(`bench/suite_allocation.py`)", "", f"`{command}` — {about}", ""]
    for label, result in results:
        lines += tables(result, label)
    out.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path,
                        help="bench/end_to_end_suite.py's working folder (its oracle logs)")
    parser.add_argument("--bundled", type=Path, help="instead of --work: the bundled suites "
                        "of `bayeval bench suite`, their units kept in this folder (its "
                        "--out: units already there are read)")
    parser.add_argument("--seeds", type=int, default=1000,
                        help="--work: seeds of the suite; --bundled: draws of 100 runs")
    parser.add_argument("--epsilons", default="0.03,0.05,0.1",
                        help="widths of the average's interval")
    parser.add_argument("--timings", type=Path,
                        default=Path("docs/results/end_to_end_suite.json"),
                        help="the full runs' timings (costs per document)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/suite_allocation.md"))
    args = parser.parse_args()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    command = "python bench/suite_allocation.py " + " ".join(sys.argv[1:])
    if args.bundled is not None:
        from bayeval.experiments.suite import SUITES

        results = []
        for label in SUITES:
            runs, tasks, weights, cluster = bundled_runs(label, args.bundled, args.seeds)
            results.append((label, measure(runs, tasks, weights, epsilons,
                                           np.ones(len(tasks)), 1, cluster)))
            print(f"{label}: composed", flush=True)
        write(results, args.out, command,
              f"the bundled suites of `bayeval bench suite` ({args.seeds} draws × 20 targets "
              "× 5 runs), items allocated one at a time, every item costing 1 (so `suite, "
              "costs` is `suite`); coverage ± SE clustered by target model.")
    else:
        if args.work is None:
            parser.error("give --work DIR (the end-to-end suite) or --bundled DIR")
        work = args.work.resolve()
        for task in TASKS:
            if not (work / f"oracle-{SETTING}-{task}.npz").exists():
                parser.error(f"--work {work}: no oracle-{SETTING}-{task}.npz; run "
                             "bench/end_to_end_suite.py --coverage N there first")
        costs = document_costs(args.timings)
        result = measure(simulated_runs(work, args.seeds), list(TASKS),
                         np.ones(len(TASKS)), epsilons, costs, BATCH)
        write([("e2e_mc + e2e_gen", result)], args.out, command,
              "the two-task suite of `bench/end_to_end_suite.py` (harness tasks `e2e_mc`, "
              "multiple choice, and `e2e_gen`, generative, 1000 documents each; the "
              f"85M-parameter target among 13 reference checkpoints), {args.seeds} seeds, "
              "each task's run simulated once per seed (batches of 32) and the suite "
              "composed from the runs under each scheme (the module docstring); coverage "
              "± binomial SE. Cost per document from the full runs: "
              + ", ".join(f"{t} {c * 1000:.0f} ms" for t, c in zip(TASKS, costs, strict=True))
              + ".")
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
