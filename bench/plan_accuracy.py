"""How well a run's plan predicts the documents it needs: ``bayeval plan`` against the
runs themselves, on the bundled datasets.

Per dataset, targets held out of the reference: ``inside`` (models at evenly spaced ranks
between the 10th and 90th percentile of scores, the rest the reference) and ``beyond``
(the strongest models, the weakest 70% the reference: a target better than every
reference model). For each target: the plan made on its reference alone
(:func:`bayeval.evaluation.plan.plan_of`'s stand-ins), the plan revised after the first
batch with the run's own interval width (``Plan.revised``; the median over runs, and each
run's against what that run needed) beside the earlier revision by the stand-ins nearest
the run's estimate, and the documents ``--runs``
simulated runs of the target needed (a seed each, batch ``--batch``, ε ``--epsilon``):
their median and range. A cell is within tolerance when the plan's prediction is within
±15% of the runs' median inside the range, ±30% beyond it (the revised plan's too).

    python bench/plan_accuracy.py --out docs/results/plan_accuracy.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def cell(method, scores: np.ndarray, target: int, reference: np.ndarray, runs: int,
         batch: int, seed: int, rule=None) -> dict:
    from bayeval.evaluation.plan import Plan
    from bayeval.loop.plan import stand_in_runs
    from bayeval.loop.simulate import simulate

    ref = scores[reference]
    stand = stand_in_runs(method, ref, batch=batch, seed=seed, call_rule=rule)
    made = Plan.from_stand_ins(stand, [str(r) for r in stand.rows], task="",
                               documents=scores.shape[1], method=method, batch=batch,
                               call_rule=rule)
    sim = simulate(method, ref, np.repeat(scores[[target]], runs, 0),
                   seed + 1000 + np.arange(runs), until_stop=True, batch=batch,
                   call_rule=rule)
    needed = np.where(sim.drawn_at_stop > 0, sim.drawn_at_stop, scores.shape[1])
    first = made.first_call - 1  # the step after the first call's scores
    revised = [made.revised(float(e), first + 1, float(u - lo)).predicted for e, lo, u in
               zip(sim.estimate[:, first], sim.lower[:, first], sim.upper[:, first],
                   strict=True)]
    by_score = [made.revised(float(e), first + 1).predicted for e in sim.estimate[:, first]]
    median = float(np.median(needed))
    return {"target_score": float(scores[target].mean()), "plan": made.predicted,
            "plan_low": made.low, "plan_high": made.high,
            "revised": float(np.median(revised)), "runs_median": median,
            "runs_low": int(needed.min()), "runs_high": int(needed.max()),
            "plan_error": made.predicted / median - 1,
            "revised_error": float(np.median(revised)) / median - 1,
            # each run's own revision against what that run needed
            "revised_run_error": float(np.median(np.abs(np.asarray(revised) / needed - 1))),
            "by_score": float(np.median(by_score)),
            "by_score_error": float(np.median(by_score)) / median - 1,
            "plan_seconds": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="arc_challenge,commonsense,ifeval,math,mmlu,"
                        "mrpc,musr,rte,sst2")
    parser.add_argument("--inside", type=int, default=4, help="targets inside the range")
    parser.add_argument("--beyond", type=int, default=2, help="targets beyond it")
    parser.add_argument("--runs", type=int, default=24, help="simulated runs per target")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--calls", default="taper", help="the call rule (fixed, taper, "
                        "grow: bayeval evaluate --calls), the plan's and the runs' alike")
    parser.add_argument("--out", type=Path, default=Path("docs/results/plan_accuracy.md"))
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    from bayeval.data.bundled import load_dataset
    from bayeval.loop.call_sizes import parse_call_rule
    from bayeval.methods import make_method

    method = make_method("active-pai", epsilon=args.epsilon)
    rule = parse_call_rule(args.calls, args.epsilon)
    rows = []
    began = time.time()
    for name in args.datasets.split(","):
        scores = np.asarray(load_dataset(name).scores, np.float64)
        scores = scores[~np.isnan(scores).any(axis=1)]
        order = np.argsort(scores.mean(axis=1), kind="stable")
        m = order.size
        inside = order[np.round(np.linspace(0.1 * (m - 1), 0.9 * (m - 1),
                                            args.inside)).astype(int)]
        for k, t in enumerate(inside):
            ref = np.setdiff1d(np.arange(m), [t])
            rows.append({"dataset": name, "where": "inside", "N": scores.shape[1],
                         **cell(method, scores, t, ref, args.runs, args.batch, 10 * k,
                                rule)})
            print(json.dumps(rows[-1]), flush=True)
        weakest = order[:int(0.7 * m)]
        for k, t in enumerate(order[::-1][:args.beyond]):
            rows.append({"dataset": name, "where": "beyond", "N": scores.shape[1],
                         **cell(method, scores, t, weakest, args.runs, args.batch,
                                100 + 10 * k, rule)})
            print(json.dumps(rows[-1]), flush=True)
        write(rows, args, time.time() - began)


def write(rows: list[dict], args: argparse.Namespace, seconds: float) -> None:
    tol = {"inside": 0.15, "beyond": 0.30}
    lines = ["# The plan against the runs it predicts",
             "",
             f"`python bench/plan_accuracy.py --runs {args.runs} --batch {args.batch} "
             f"--epsilon {args.epsilon} --calls {args.calls}` — {os.cpu_count()} cores, "
             f"{seconds:.0f} s; active-pai, batches of {args.batch} ({args.calls} calls), "
             f"ε = {args.epsilon}. Per target: the "
             "plan made on its reference alone (8 stand-ins), the plan revised after the "
             "first batch with the run's own interval width (median over runs; *per run*: "
             "the median of each run's own revision's absolute error against what that "
             "run needed), the revision by the 3 stand-ins nearest the run's estimate "
             f"(the earlier rule), and the documents {args.runs} simulated runs (a seed "
             "each) needed. Tolerance: ±15% of the runs' median inside the references' "
             "range, ±30% beyond it.",
             "",
             "| dataset | target | N | score | plan [range] | revised | by score | runs: "
             "median [range] | plan error | revised error (per run) | by-score error | "
             "within: plan / revised / by score |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = ["yes" if abs(r[k]) <= tol[r["where"]] else "no"
              for k in ("plan_error", "revised_error", "by_score_error")]
        lines.append(
            f"| {r['dataset']} | {r['where']} | {r['N']} | {r['target_score']:.3f} | "
            f"{r['plan']} [{r['plan_low']}, {r['plan_high']}] | {r['revised']:.0f} | "
            f"{r['by_score']:.0f} | "
            f"{r['runs_median']:.0f} [{r['runs_low']}, {r['runs_high']}] | "
            f"{r['plan_error']:+.0%} | {r['revised_error']:+.0%} "
            f"({r['revised_run_error']:.0%}) | {r['by_score_error']:+.0%} | "
            f"{' / '.join(ok)} |")
    for where in ("inside", "beyond"):
        part = [r for r in rows if r["where"] == where]
        if part:
            within = [abs(r["plan_error"]) <= tol[where] for r in part]
            rev = [abs(r["revised_error"]) <= tol[where] for r in part]
            per_run = [r["revised_run_error"] <= tol[where] for r in part]
            near = [abs(r["by_score_error"]) <= tol[where] for r in part]
            lines += ["", f"{where}: the plan within ±{tol[where]:.0%} in {sum(within)} of "
                      f"{len(part)} cells, revised in {sum(rev)} ({sum(per_run)} by the "
                      f"runs' own revisions), by score in {sum(near)}; median absolute "
                      f"error {np.median([abs(r['plan_error']) for r in part]):.0%} (plan), "
                      f"{np.median([abs(r['revised_error']) for r in part]):.0%} (revised), "
                      f"{np.median([abs(r['by_score_error']) for r in part]):.0%} "
                      "(by score)."]
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
