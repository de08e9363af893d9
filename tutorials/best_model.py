"""Tutorial: choose the best of a set of models with a budget of evaluations (SySRs).

Run: python tutorials/best_model.py [--out best_model.png] [--runs 200]

1. Take 24 candidate models of the bundled ARC-Challenge matrix (standing in for "the
   fine-tunes we could ship") and a budget of 10% of all model–item pairs.
2. Run synchronised successive rejects with the ask/tell SelectionSession: each phase asks
   for every surviving model on the same new items, so the pairs are evaluated in one
   batch per model (here: a lookup standing in for an inference server).
3. Compare the choice with the full evaluation it avoided.
4. How often does it pick the true best? Simulate many runs at several budgets with the
   pure function (one call for all runs and budgets), against evaluating every model on
   the same number of random items (uniform sampling), and plot accuracy against budget.
5. The other 194 models of the matrix are earlier models we already scored: draw the
   items where the strongest of them disagree more often (HW-SySRs, docs/methods.md §10; the
   estimates stay unbiased), once live (``SelectionSession(..., weights=...)``) and then
   simulated on the same budgets.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bayeval.data import load_dataset
from bayeval.precision import enable_float64
from bayeval.selection.bandits import uniform_rankings
from bayeval.selection.design import history_weights
from bayeval.selection.history import run_history_schedules
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.session import SelectionSession
from bayeval.selection.successive_rejects import run_schedules

enable_float64()  # bayeval computes in float64 (README: "Precision")

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "best_model.png"),
                        help="where to save the plot")
    parser.add_argument("--runs", type=int, default=200, help="simulated runs per budget")
    args = parser.parse_args()

    matrix = load_dataset("arc_challenge")
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(matrix.n_models, 24, replace=False))
    models = [str(matrix.models[i]) for i in rows]
    scores = matrix.scores[rows]
    truth = dict(zip(models, scores.mean(axis=1), strict=True))
    K, L = scores.shape

    def run_batch(model: str, items: list[str]) -> list[float]:
        """Stand-in for one batched inference call of ``model`` on ``items``."""
        return [float(scores[models.index(model), matrix.item_index(i)]) for i in items]

    def run_session(session: SelectionSession) -> int:
        """Ask/tell until the session has chosen; returns how many phases it took."""
        phases = 0
        while not session.done:
            by_model = defaultdict(list)
            for model, item in session.ask():  # every survivor on the phase's new items
                by_model[model].append(item)
            for model, items in by_model.items():
                for item, score in zip(items, run_batch(model, items), strict=True):
                    session.tell(model, item, score)
            phases += 1
        return phases

    budget = round(0.10 * K * L)
    session = SelectionSession(models, matrix.items, budget, seed=0)
    phases = run_session(session)
    ranking = session.ranking()
    true_order = sorted(models, key=lambda m: -truth[m])
    print(f"{K} candidates × {L} items; budget {budget} evaluations "
          f"({budget / (K * L):.0%} of the pairs), {phases} phases")
    print(f"chosen: {session.best} (full-benchmark accuracy {truth[session.best]:.4f}, "
          f"true rank {true_order.index(session.best) + 1})")
    print(f"true best: {true_order[0]} ({truth[true_order[0]]:.4f})")
    print(f"evaluations used: {session.n_evaluations} of {K * L} for the full benchmark")
    print("top 5 by SySRs:", ", ".join(f"{m.split('/')[-1]} ({truth[m]:.3f})"
                                       for m in ranking[:5]))

    # 4. many simulated runs at many budgets: one compiled call each
    fractions = np.array([0.02, 0.04, 0.06, 0.08, 0.10, 0.15, 0.20, 0.30])
    budgets = np.round(fractions * K * L).astype(int)
    schedules = jnp.asarray(np.stack([phase_schedule(K, L, int(n)) for n in budgets]))
    keys = jax.random.split(jax.random.key(1), args.runs)
    best = np.isclose(scores.mean(1), scores.mean(1).max(), rtol=0, atol=1e-12)
    sysrs = best[np.asarray(run_schedules(jnp.asarray(scores), keys, schedules, True).best)]
    uniform = jax.vmap(lambda k: uniform_rankings(jnp.asarray(scores), k, budgets, True, 1))
    us = best[np.asarray(uniform(keys))[..., 0]]
    # 5. the earlier models' scores as item weights: live with ask/tell, then simulated
    earlier = np.delete(matrix.scores, rows, axis=0)
    weights = history_weights(earlier)
    weighted = SelectionSession(models, matrix.items, budget, seed=0, weights=weights)
    run_session(weighted)
    print(f"HW-SySRs (item weights from the {len(earlier)} earlier models): chosen "
          f"{weighted.best} (true rank {true_order.index(weighted.best) + 1}), "
          f"{weighted.n_evaluations} evaluations (one run: the simulation below says how "
          f"often each finds the best)")
    hw = best[np.asarray(run_history_schedules(jnp.asarray(scores), keys, schedules, None,
                                               jnp.asarray(weights)).best)]
    print("budget   SySRs   HW-SySRs   uniform (shared items)")
    for f, a, c, b in zip(fractions, sysrs.mean(0), hw.mean(0), us.mean(0), strict=True):
        print(f"{f:6.0%}   {a:5.1%}   {c:8.1%}   {b:5.1%}")

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(100 * fractions, 100 * sysrs.mean(0), "o-", label="SySRs")
    ax.plot(100 * fractions, 100 * hw.mean(0), "^-", label="HW-SySRs (194 earlier models)")
    ax.plot(100 * fractions, 100 * us.mean(0), "s--", label="uniform sampling (SyUS)")
    ax.set_xlabel("budget (% of model–item pairs)")
    ax.set_ylabel(f"true best found (% of {args.runs} runs)")
    ax.set_title(f"best of {K} models on ARC-Challenge")
    ax.legend()
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
