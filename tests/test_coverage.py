"""Coverage of the random / sample-mean method's 95% interval at its stopping point."""

from __future__ import annotations

import numpy as np

from bayeval.evaluators import MatrixOracle
from bayeval.session import Session

RUNS = 250


def test_interval_coverage_at_stopping_on_ifeval(ifeval):
    # 250 runs, each a random held-out IFEval model with its own seed, run by the real
    # Session until the width rule stops it (ε = 0.15, ~100 of 541 items).
    # Tolerance: if the true coverage is 0.95, the observed fraction over 250 runs has
    # standard deviation sqrt(0.95·0.05/250) = 0.0138, so [0.92, 0.98] is ±2.2σ; the
    # seeds are fixed, so the test is deterministic. bench/coverage.py measures the same
    # quantity over 4000 runs (Wilson–FPC: 0.950; the Wald interval: 0.912).
    rng = np.random.default_rng(2026)
    hits, used = [], []
    for run in range(RUNS):
        target = str(ifeval.models[rng.integers(ifeval.n_models)])
        oracle = MatrixOracle(ifeval, target)
        session = Session(ifeval.drop_models([target]), target, "random",
                          method_params={"epsilon": 0.15}, seed=run)
        _, lower, upper = session.run(oracle)
        hits.append(lower <= oracle.true_score <= upper)
        used.append(session.n_observed)
        assert upper - lower <= 0.15
    coverage = float(np.mean(hits))
    assert 0.92 <= coverage <= 0.98, coverage
    assert 30 <= np.mean(used) < 541
