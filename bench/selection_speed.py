"""Wall time of SySRs over many runs and the whole budget grid (1000 runs × 107 budgets on
ARC-Challenge by default), against a straightforward per-run NumPy loop in the same
process.

Usage: python bench/selection_speed.py [--dataset arc_challenge] [--runs 1000]
                                       [--numpy-runs 1000] [--out FILE.md]

* **bayeval**: :func:`~bayeval.selection.successive_rejects.run_schedules`, jitted, R runs
  × B phase schedules per call in chunks of 20 runs (the chunking ``bayeval bench
  selection`` uses); the first chunk's compilation is timed separately.
* **NumPy loop**: for each budget and each run, draw a permutation of the items, then
  phase by phase evaluate the survivors on the phase's new items, add to their sums, drop
  the worst (ties at random). This is what one writes without batching.

Both answer the same question (is the chosen model a true best?), so their accuracy curves
must agree within Monte-Carlo error; the report gives the largest gap over the grid beside
the binomial standard error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.data import load_dataset
from bayeval.experiments.selection import BUDGET_GRID
from bayeval.precision import enable_float64
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.successive_rejects import run_schedules

enable_float64()  # bayeval computes in float64 (README: "Precision")


def sysrs_numpy(scores: np.ndarray, schedule: np.ndarray, rng: np.random.Generator) -> int:
    """One SySRs run, written plainly."""
    K, L = scores.shape
    order = rng.permutation(L)
    alive = np.arange(K)
    sums = np.zeros(K)
    previous = 0
    for n_k in schedule:
        items = order[previous:n_k]
        sums[alive] += scores[np.ix_(alive, items)].sum(axis=1)
        means = sums[alive] / n_k
        tied = alive[means == means.min()]
        alive = alive[alive != rng.choice(tied)]
        previous = n_k
    return int(alive[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="arc_challenge")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--numpy-runs", type=int, default=1000,
                        help="runs of the NumPy loop (each over the whole budget grid)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    matrix = load_dataset(args.dataset)
    scores = matrix.scores
    K, L = scores.shape
    means = scores.mean(axis=1)
    winners = np.isclose(means, means.max(), rtol=0, atol=1e-12)
    budgets = np.maximum(np.round(np.asarray(BUDGET_GRID) * K * L).astype(np.int64), K)
    schedules = np.stack([phase_schedule(K, L, int(n)) for n in budgets])
    B = len(budgets)

    chunk = 20
    keys = jax.vmap(lambda r: jax.random.fold_in(jax.random.key(0), r))(
        jnp.arange(-(-args.runs // chunk) * chunk))
    run = jax.jit(lambda k: run_schedules(jnp.asarray(scores), k, jnp.asarray(schedules),
                                          True).best)
    t0 = time.perf_counter()
    run(keys[:chunk]).block_until_ready()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    correct_jax = np.zeros(B)
    for start in range(0, args.runs, chunk):
        best = np.asarray(run(keys[start:start + chunk]))[:min(chunk, args.runs - start)]
        correct_jax += winners[best].sum(axis=0)
    jax_s = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    correct_np = np.zeros(B)
    for b, schedule in enumerate(schedules):
        for _ in range(args.numpy_runs):
            correct_np[b] += winners[sysrs_numpy(scores, schedule, rng)]
    numpy_s = time.perf_counter() - t0

    acc_jax, acc_np = correct_jax / args.runs, correct_np / args.numpy_runs
    gap = np.abs(acc_jax - acc_np)
    se = np.sqrt(acc_jax * (1 - acc_jax) / args.runs + acc_np * (1 - acc_np) / args.numpy_runs)
    per_jax = jax_s / (args.runs * B)
    per_np = numpy_s / (args.numpy_runs * B)
    lines = [
        f"SySRs on {matrix.name} ({K} models × {L} items), {B} budgets "
        f"({100 * BUDGET_GRID[0]:g}%…{100 * BUDGET_GRID[-1]:g}% of pairs), one core.", "",
        "| implementation | runs × budgets | wall time (s) | ms per run and budget |",
        "|---|---|---|---|",
        f"| bayeval `run_schedules` (jit, chunks of {chunk} runs × all budgets) | "
        f"{args.runs} × {B} | {jax_s:.1f} (+ {compile_s:.1f} first call) | "
        f"{1e3 * per_jax:.3f} |",
        f"| NumPy loop, one run and budget at a time | {args.numpy_runs} × {B} | "
        f"{numpy_s:.1f} | {1e3 * per_np:.3f} |", "",
        f"Speed-up per run and budget: **{per_np / per_jax:.1f}×** (NumPy loop / bayeval)"
        + ("." if args.numpy_runs == args.runs else
           f"; the NumPy loop's cost per run and budget is flat, so {args.runs} runs would "
           f"take it about {per_np * args.runs * B:.0f} s (measured on {args.numpy_runs})."),
        "",
        f"Accuracy curves agree: largest gap over the grid {100 * gap.max():.1f} points "
        f"(at {100 * BUDGET_GRID[int(gap.argmax())]:g}%), "
        f"{gap.max() / max(se[int(gap.argmax())], 1e-12):.1f} standard errors; "
        f"mean gap {100 * gap.mean():.2f} points.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
