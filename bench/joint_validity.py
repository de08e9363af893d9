"""Coverage of active-pai-joint's per-target intervals at each target's own stop, on the
bundled data (docs/methods.md §9 over the joint posterior of seed 000 §3.2).

Usage: python bench/joint_validity.py [--datasets rte,mrpc,ifeval] [--draws 20]
                                      [--targets 3] [--epsilon 0.1] [--out FILE]

For each dataset, a pool of ``--pool`` models drawn at random is held out and the other
models are the reference; each of ``--draws`` runs (seed = run) evaluates ``--targets``
models drawn from the pool jointly with ``active-pai-joint`` until every target has met
its rule (all runs in one vmapped simulation). The same target rows are also run one by
one with single-target ``active-pai`` at the same ε (seed = run · T + target), and the
items per target at stop are compared. Reported per dataset: runs × targets, the
coverage of the 95% interval at each target's stop (with its binomial SE), the mean items
per target at stop against N, and the mean width. A target that never met its rule is
reported, not dropped.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bayeval.data import load_dataset
from bayeval.loop.simulate import simulate
from bayeval.methods import make_method
from bayeval.precision import enable_float64

enable_float64()  # bayeval computes in float64 (README: "Precision")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--datasets", default="rte,mrpc,ifeval")
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--targets", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--pool", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    method = make_method("active-pai-joint", epsilon=args.epsilon)
    single = make_method("active-pai", epsilon=args.epsilon)
    lines = [f"active-pai-joint, ε = {args.epsilon:g}, {args.targets} targets per run, "
             f"{args.draws} runs per dataset (targets drawn from {args.pool} held-out "
             "models, the other models the reference)", "",
             "| dataset | N | target runs | coverage at stop | SE | never stopped | "
             "items per target at stop | mean width | independent active-pai: coverage | "
             "items per target | joint / independent items | seconds |",
             "|---" * 12 + "|"]
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        matrix = load_dataset(name)
        rng = np.random.default_rng(0)
        complete = np.flatnonzero(~np.isnan(matrix.scores).any(axis=1))
        pool = rng.choice(complete, args.pool, replace=False)
        reference = matrix.drop_models([matrix.models[r] for r in pool]).scores
        picks = np.stack([rng.choice(pool, args.targets, replace=False)
                          for _ in range(args.draws)])
        targets = matrix.scores[picks]  # (runs, T, N)
        t0 = time.time()
        sim = simulate(method, reference, targets, np.arange(args.draws), until_stop=True)
        covered, used, widths, never = [], [], [], 0
        truth = targets.mean(axis=2)
        for r in range(args.draws):
            for t in range(args.targets):
                n = int(sim.stop_n[r, t])
                if n == 0:
                    never += 1
                    continue
                lo, hi = sim.lower[r, n - 1, t], sim.upper[r, n - 1, t]
                covered.append(lo <= truth[r, t] <= hi)
                widths.append(hi - lo)
                used.append(int(np.sum(sim.items[r, :n] // matrix.n_items == t)))
        rows = targets.reshape(-1, matrix.n_items)
        alone = simulate(single, reference, rows, np.arange(rows.shape[0]), until_stop=True)
        n_alone = np.where(alone.stop_n > 0, alone.stop_n, matrix.n_items)
        k = n_alone - 1
        runs = np.arange(rows.shape[0])
        alone_cover = np.mean((alone.lower[runs, k] <= rows.mean(1))
                              & (rows.mean(1) <= alone.upper[runs, k]))
        c = np.mean(covered)
        se = np.sqrt(c * (1 - c) / len(covered))
        lines.append(f"| {name} | {matrix.n_items} | {len(covered) + never} | {c:.3f} | "
                     f"{se:.3f} | {never} | {np.mean(used):.0f} | {np.mean(widths):.4f} | "
                     f"{alone_cover:.3f} | {np.mean(n_alone):.0f} | "
                     f"{np.mean(used) / np.mean(n_alone):.3f} | {time.time() - t0:.0f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
