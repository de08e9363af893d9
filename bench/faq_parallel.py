"""One parallel FAQ run: every new model × 100 seeds at a 10% budget on IFEval+MuSR.

Usage: python bench/faq_parallel.py [--suite ifeval+musr] [--seeds 100] [--budget 0.1]
       [--chunk 128] [--k 8] [--weight-decay 0.1]

The models are split 50/50 into history and new (seed 0, as in ``bayeval bench
coverage``); the factor model is fitted on the history; then FAQ's robust default policy
((β0, ρ, γ, τ) = (1, 0, 0, 0.05)) runs on all new models × seeds, batched in chunks of
``--chunk`` runs (:func:`bayeval.methods.faq.simulate_hybrid`). Reported: fit time, compile time,
wall time of the whole run, microseconds per (run, round), and, as a ratio measured in the
same process, the speed of the fast path against the generic composed-rule path
(:func:`bayeval.loop.simulate.simulate` with :func:`bayeval.acquisition.faq_rule`) on the first
chunk of runs. JAX runs on whatever backend it finds (CPU here, a GPU where one is
installed); the device is printed.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from bayeval import acquisition as acq
from bayeval.data import load_dataset
from bayeval.estimators.pai import wald_interval
from bayeval.inference.factor_laplace import prefitted
from bayeval.loop.simulate import simulate
from bayeval.methods.faq import HybridParams, faq_with, simulate_hybrid
from bayeval.models.factor import factor_prior, fit_factors
from bayeval.precision import enable_float64
from bayeval.stopping.rules import budget_rounds

enable_float64()  # bayeval computes in float64 (README: "Precision")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--suite", default="ifeval+musr")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--budget", type=float, default=0.1)
    parser.add_argument("--chunk", type=int, default=128)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    args = parser.parse_args()

    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()})")
    matrix = load_dataset(args.suite)
    order = np.random.default_rng(0).permutation(matrix.n_models)
    half = matrix.n_models // 2
    history, new = matrix.scores[order[:half]], matrix.scores[order[half:]]
    t0 = time.time()
    fit = fit_factors(history, args.k, args.weight_decay)
    fit_s = time.time() - t0
    mean0, cov0 = factor_prior(fit.U)
    rounds = budget_rounds(args.budget, matrix.n_items)
    targets = np.tile(np.arange(len(new)), args.seeds)
    seeds = np.arange(len(targets))
    params = HybridParams(1.0, 0.0, 0.0, 0.05)

    t0 = time.time()
    simulate_hybrid(fit.V, mean0, cov0, new, targets[:args.chunk], seeds[:args.chunk], params,
                    rounds, chunk=args.chunk)
    compile_s = time.time() - t0
    t0 = time.time()
    out = simulate_hybrid(fit.V, mean0, cov0, new, targets, seeds, params, rounds,
                          chunk=args.chunk)
    wall = time.time() - t0
    lo, hi = (np.asarray(x) for x in wald_interval(out.theta, out.var))
    truth = new.mean(1)[targets]
    coverage = np.mean((lo <= truth) & (truth <= hi))

    # reference in the same process: the generic path on one chunk (after its compile)
    few = slice(0, args.chunk)
    method = faq_with(acq.faq_rule(rounds, *params), rounds, prefitted(fit.V, mean0, cov0))
    simulate(method, history, new[targets[few]], seeds[few], n_steps=rounds)
    t0 = time.time()
    simulate(method, history, new[targets[few]], seeds[few], n_steps=rounds)
    generic = (time.time() - t0) / args.chunk
    fast = wall / len(targets)

    print(f"{args.suite}: {len(new)} new models × {args.seeds} seeds = {len(targets)} runs, "
          f"{rounds} rounds each ({args.budget:.1%} of {matrix.n_items} items), k = {args.k}")
    print(f"factor fit (2000 AdamW epochs on {half} × {matrix.n_items}): {fit_s:.1f} s")
    print(f"compile: {compile_s:.1f} s; run: {wall:.1f} s wall "
          f"({fast / rounds * 1e6:.1f} µs per run-round)")
    print(f"coverage {coverage:.4f}, mean width {np.mean(hi - lo):.4f}")
    print(f"fast path vs generic composed rule (same process, per run): "
          f"{generic / fast:.1f}× faster")


if __name__ == "__main__":
    main()
