"""Coverage of the random / sample-mean method's 95% interval at its stopping point."""

from __future__ import annotations

import numpy as np

from bayeval.evaluators import MatrixOracle
from bayeval.loop.session import Session
from bayeval.loop.simulate import simulate
from bayeval.methods import make_method

RUNS = 250


def test_interval_coverage_at_stopping_on_ifeval(ifeval):
    # 250 runs, each a random IFEval model as the target with its own seed, run until the
    # width rule stops it (ε = 0.15, ~100 of 541 items), by the simulator: the Session's
    # run by construction (both call the method's ask/tell; tests/test_engine.py checks
    # it for every method), and checked here once more on the first runs. Random items
    # ignore the reference, so the target's row may stay in it.
    # Tolerance: if the true coverage is 0.95, the observed fraction over 250 runs has
    # standard deviation sqrt(0.95·0.05/250) = 0.0138, so [0.92, 0.98] is ±2.2σ; the
    # seeds are fixed, so the test is deterministic. bench/coverage.py measures the same
    # quantity over 4000 runs (Wilson–FPC: 0.950; the Wald interval: 0.912).
    rng = np.random.default_rng(2026)
    targets = [str(ifeval.models[rng.integers(ifeval.n_models)]) for _ in range(RUNS)]
    rows = np.stack([ifeval.row(t) for t in targets])
    sim = simulate(make_method("random", epsilon=0.15), ifeval.scores, rows,
                   np.arange(RUNS), until_stop=True)
    at = (np.arange(RUNS), sim.stop_n - 1)
    lower, upper = sim.lower[at], sim.upper[at]
    assert np.all(sim.stop_n > 0) and np.all(upper - lower <= 0.15)
    coverage = float(np.mean((lower <= sim.truth) & (sim.truth <= upper)))
    assert 0.92 <= coverage <= 0.98, coverage
    assert 30 <= np.mean(sim.stop_n) < 541
    for run in range(3):  # the real Session, target held out, makes the same runs
        oracle = MatrixOracle(ifeval, targets[run])
        session = Session(ifeval.drop_models([targets[run]]), targets[run], "random",
                          method_params={"epsilon": 0.15}, seed=run)
        _, low, up = session.run(oracle)
        assert session.n_observed == sim.stop_n[run]
        np.testing.assert_allclose([low, up], [lower[run], upper[run]], rtol=1e-12)
