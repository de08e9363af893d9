"""Tutorial: a new method in one file — a new acquisition rule and a new estimator,
registered by name, run in the Session and in the simulator (the same run), and checked
over many simulated runs.

Run: python tutorials/new_method.py [--out new_method.png] [--runs 200]

A method is backend + rule + policy + estimator + stopping (``bayeval.methods.Method``):

* the rule here prefers items whose score the posterior is least sure of
  (log-weight = log Var(s_i | data)); it reads only the backend's Prediction, so it runs
  with any backend; ``uniform_floor`` keeps every item reachable;
* the estimator corrects the backend's predictions by the observed residuals, weighted by
  the probability of each draw (the martingale estimator of docs/methods.md §9 in its
  equal-weight form): before round t, with O the items observed so far and R_t the rest,
      θ̂_t = (1/N) [Σ_{j∈O} s_j + Σ_{i∈R_t} p̂_i + (s_I − p̂_I) / q_t(I)],
  unbiased for the benchmark score whatever the backend predicts; the estimate is the mean
  of the θ̂_t and its variance their sample variance over t;
* the bucket GP (exact inference) predicts, random draws from the rule choose, and the run
  stops once the 95% interval is narrower than ε (after at least 30 items).

The Session and the simulator run the same loop, so they choose the same items and give
the same estimates; the simulator then measures the interval's coverage at the stop.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bayeval import acquisition as acq
from bayeval.data import load_dataset
from bayeval.estimators.base import Estimator, gaussian_estimate
from bayeval.evaluators import MatrixOracle
from bayeval.inference.exact import ExactBucketGP
from bayeval.loop.session import Session
from bayeval.loop.simulate import simulate
from bayeval.methods import Method, make_method, method_factory
from bayeval.precision import enable_float64
from bayeval.stopping import rules as stop

enable_float64()  # bayeval computes in float64 (README: "Precision")


# ---------------------------------------------------------------- the new rule

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def uncertainty() -> acq.Rule:
    """log Var(s_i | data): the items the posterior is least sure of."""

    def rule(prediction, available):
        return jnp.log(jnp.maximum(prediction.item_var, 1e-12))

    return rule


# ---------------------------------------------------------------- the new estimator
class MartingaleState(NamedTuple):
    observed: jnp.ndarray  # (N,) bool
    observed_sum: jnp.ndarray  # Σ of the observed scores
    rounds: jnp.ndarray  # T
    total: jnp.ndarray  # Σ_t θ̂_t
    total_sq: jnp.ndarray  # Σ_t θ̂_t²


def martingale() -> Estimator:
    """The equal-weight martingale estimator of the module docstring."""

    def init(n_items):
        zero = jnp.zeros((), jnp.float64)
        return MartingaleState(jnp.zeros(n_items, bool), zero, zero, zero, zero)

    def update(state, prediction, item, score, draw):
        # ``prediction`` is the backend's from before this draw, ``draw.q`` its probability
        q = draw.q
        p = jnp.clip(prediction.item_mean, 0.0, 1.0)
        unseen = jnp.sum(jnp.where(state.observed, 0.0, p))
        theta = (state.observed_sum + unseen + (score - p[item]) / q) / p.shape[0]
        return MartingaleState(state.observed.at[item].set(True),
                               state.observed_sum + score, state.rounds + 1.0,
                               state.total + theta, state.total_sq + theta * theta)

    def estimate(state, prediction, z):
        t = jnp.maximum(state.rounds, 1.0)
        mean = state.total / t
        spread = jnp.maximum(state.total_sq - t * mean * mean, 0.0) / jnp.maximum(t - 1.0, 1.0)
        early = state.rounds < 2  # no variance yet: the posterior's, uninformative
        return gaussian_estimate(jnp.where(early, prediction.mean, mean),
                                 jnp.where(early, 1.0, spread / t), z)

    return Estimator("martingale", init, update, estimate, needs_probabilities=True)


# ---------------------------------------------------------------- the method, by name
# One function composing existing parts with the two new ones. Its parameters are the
# method's settings (the CLI's ``uncertainty-martingale(epsilon=0.05)``, the journal header
# and the bench keys read them from its signature); ``hyper`` names those that are values
# of the compiled programs rather than part of them, so that another ε or τ compiles
# nothing (the parts then receive them as traced numbers: arithmetic only, no Python
# ``if`` on them).
@method_factory("uncertainty-martingale", hyper=("epsilon", "tau"))
def uncertainty_martingale(epsilon: float = 0.1, tau: float = 0.2, min_n: int = 30,
                           level: float = 0.95) -> Method:
    """Uncertainty sampling with a uniform floor τ, the martingale estimator, a stop at
    width ε after ``min_n`` items."""
    return Method("uncertainty-martingale", ExactBucketGP(refit_every=0).backend(),
                  acq.uniform_floor(uncertainty(), tau), acq.sample,
                  stop.width_after(min_n, epsilon), level=level, estimator=martingale())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "new_method.png"))
    parser.add_argument("--runs", type=int, default=200,
                        help="simulated runs (targets × seeds)")
    parser.add_argument("--epsilon", type=float, default=0.1)
    args = parser.parse_args()

    matrix = load_dataset("ifeval")
    order = np.random.default_rng(0).permutation(matrix.n_models)
    targets = [str(m) for m in matrix.models[order[:20]]]
    reference = matrix.drop_models(targets)
    method = make_method("uncertainty-martingale", epsilon=args.epsilon)

    # 1. one live-style run in the Session, then the same seed in the simulator
    session = Session(reference, targets[0], method, seed=1)
    session.run(MatrixOracle(matrix, targets[0]))
    row = matrix.row(targets[0])
    sim = simulate(method, reference.scores, row[None], [1], until_stop=True)
    n = session.n_observed
    asked = [reference.item_index(i) for i, _ in session.observations]
    same = (asked == list(sim.items[0, :n])
            and abs(session.estimate()[0] - sim.estimate[0, n - 1]) < 1e-12)
    value, low, high = session.estimate()
    print(f"session: {n} items, estimate {value:.4f} [{low:.4f}, {high:.4f}], "
          f"truth {row.mean():.4f}; simulator: the same run: {same}")
    other = make_method("uncertainty-martingale", epsilon=args.epsilon / 2, tau=0.3)
    print(f"another epsilon and tau share the compiled programs: "
          f"{other.compiled_as == method.compiled_as}")

    # 2. coverage at the stop over many runs, against random sampling with the same ε
    rows = np.stack([matrix.row(t) for t in targets])
    runs = np.arange(args.runs)
    results = {}
    for name in ("uncertainty-martingale", "random"):
        m = make_method(name, epsilon=args.epsilon)
        out = simulate(m, reference.scores, rows[runs % len(targets)], runs, until_stop=True)
        at = np.where(out.stop_n > 0, out.stop_n, matrix.n_items) - 1
        lo, hi = out.lower[runs, at], out.upper[runs, at]
        covered = (lo <= out.truth + 1e-12) & (out.truth <= hi + 1e-12)
        results[name] = (covered.mean(), covered.std() / np.sqrt(len(runs)), (at + 1).mean())
        print(f"{name:24s} coverage at the stop {covered.mean():.3f} ± "
              f"{results[name][1]:.3f}, mean items {(at + 1).mean():.1f}")
        if name == "uncertainty-martingale":
            first = out
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    steps = np.arange(1, first.estimate.shape[1] + 1)
    ok = np.isfinite(first.estimate[0]) & ((steps <= first.stop_n[0]) | (first.stop_n[0] == 0))
    ax.fill_between(steps[ok], np.clip(first.lower[0][ok], 0, 1),
                    np.clip(first.upper[0][ok], 0, 1), alpha=0.3, label="95% interval")
    ax.plot(steps[ok], first.estimate[0][ok], label="estimate")
    ax.axhline(first.truth[0], color="k", lw=0.8, label="true score")
    if first.stop_n[0]:
        ax.axvline(first.stop_n[0], color="tab:red", ls="--", lw=0.8, label="stop")
    ax.set(xlabel="items evaluated", ylabel="score", ylim=(0, 1),
           title="uncertainty sampling + martingale estimator (one run)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
