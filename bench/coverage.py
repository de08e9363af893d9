"""Coverage of the random / sample-mean method's interval when a width rule stops it.

Usage: python bench/coverage.py [--dataset ifeval] [--runs 4000] [--session-runs 250]

Part 1 simulates many runs at once with numpy (a random permutation of the items of a
random held-out model per run) and compares, at the first n ≥ 30 where the 95% interval
is at most ε wide, the Wald–FPC interval (R̂ ± z sqrt((1 − n/N) S²/n)) with the
Wilson–FPC interval bayeval uses for binary scores. Part 2 runs the real Session the way
tests/test_coverage.py does and prints its coverage.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayeval.data import load_dataset
from bayeval.estimators import gaussian_bounds, wilson_fpc_bounds, z_value
from bayeval.evaluators import MatrixOracle
from bayeval.loop.session import Session
from bayeval.precision import enable_float64

enable_float64()  # bayeval computes in float64 (README: "Precision")


def vectorised(matrix, runs: int, epsilons, min_n: int = 30, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    S, N, z = matrix.scores, matrix.n_items, z_value(0.95)
    targets = rng.integers(matrix.n_models, size=runs)
    order = np.argsort(rng.random((runs, N)), axis=1)
    x = S[targets[:, None], order]
    n = np.arange(1, N + 1)
    mean = np.cumsum(x, 1) / n
    ss = np.cumsum(x * x, 1) - n * mean**2
    s2 = np.where(n >= 2, ss / np.maximum(n - 1, 1), 0.25)
    truth = S[targets].mean(1)[:, None]
    rows = ["| ε | interval | coverage | mean n at stop |", "|---|---|---|---|"]
    bounds = {"Wald–FPC": gaussian_bounds(mean, (1 - n / N) * s2 / n, z),
              "Wilson–FPC": wilson_fpc_bounds(mean, n, N, z)}
    for eps in epsilons:
        for name, (lo, hi) in bounds.items():
            lo, hi = np.asarray(lo), np.asarray(hi)
            stop = (((hi - lo) <= eps) & (n >= min_n)).argmax(1)
            pick = np.arange(runs), stop
            covered = (lo[pick] <= truth[:, 0]) & (truth[:, 0] <= hi[pick])
            rows.append(f"| {eps:g} | {name} | {covered.mean():.4f} | {(stop + 1).mean():.1f} |")
    return rows


def with_session(matrix, runs: int, epsilon: float) -> str:
    rng = np.random.default_rng(2026)
    hits, used, t0 = [], [], time.time()
    for run in range(runs):
        target = str(matrix.models[rng.integers(matrix.n_models)])
        oracle = MatrixOracle(matrix, target)
        session = Session(matrix.drop_models([target]), target, "random",
                          method_params={"epsilon": epsilon}, seed=run)
        _, lo, hi = session.run(oracle)
        hits.append(lo <= oracle.true_score <= hi)
        used.append(session.n_observed)
    return (f"Session, ε = {epsilon:g}, {runs} runs: coverage {np.mean(hits):.4f}, "
            f"mean n {np.mean(used):.1f}, {time.time() - t0:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--dataset", default="ifeval")
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--session-runs", type=int, default=250)
    args = parser.parse_args()
    matrix = load_dataset(args.dataset)
    print(f"{args.dataset}: {matrix.n_models} models × {matrix.n_items} items, "
          f"{args.runs} simulated runs per row")
    print("\n".join(vectorised(matrix, args.runs, (0.15, 0.1, 0.05))))
    if args.session_runs:
        print(with_session(matrix, args.session_runs, 0.15))


if __name__ == "__main__":
    main()
