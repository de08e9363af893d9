"""Tutorial: evaluate a family of related checkpoints jointly with multi-target BayesAME.

Run: python tutorials/checkpoints.py [--out checkpoints.png] [--max-evaluations N]
[--items N]

When several models of one family are to be scored on one benchmark (checkpoints of a
training run, a base model and its fine-tunes), their per-item scores are correlated.
Multi-target BayesAME (seed 000 §3.2) models them jointly with a linear model of
coregionalisation: every target's bucket abilities are a weighted sum of L shared latent
Gaussian processes, so a score of one checkpoint also moves the estimates of the others.

1. Hold out the four Yi-1.5-34B variants of the bundled IFEval matrix; the other models
   are the reference.
2. Run a :class:`~bayeval.session.Session` with the four as targets and the method
   ``bayesame-joint``: all four on the same random 10% of
   the items first, then round robin over the variants that have not met their stopping
   rule, each on the item with the most information about its own score.
3. Read the fitted coregionalisation: the correlation between the variants' abilities
   that the weights imply.
4. Compare with four independent single-target sessions, and plot every variant's estimate
   against the evaluations spent.

From the shell the same joint run is
``bayeval evaluate --targets 01-ai/Yi-1.5-34B,01-ai/Yi-1.5-34B-Chat,... --method
bayesame-joint``; without ``--method``, ``--targets`` runs ``active-pai-joint``, the same
joint model as the predictor of a design-valid interval per checkpoint.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bayeval.data import load_dataset
from bayeval.evaluators import MatrixOracle
from bayeval.precision import enable_float64
from bayeval.session import Session

enable_float64()  # bayeval computes in float64 (README: "Precision")

FAMILY = ["01-ai/Yi-1.5-34B", "01-ai/Yi-1.5-34B-32K", "01-ai/Yi-1.5-34B-Chat",
          "01-ai/Yi-1.5-34B-Chat-16K"]

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def target_correlation(params: dict) -> np.ndarray:
    """Corr(θ^t_b, θ^{t'}_b) = Σ_l α_l w_l^t w_l^{t'} normalised (same bucket, K_l(0)=α_l)."""
    w = np.asarray(params["weights"])
    cov = (w * np.asarray(params["alpha"])[None, :]) @ w.T
    sd = np.sqrt(np.diag(cov))
    return cov / np.outer(sd, sd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "checkpoints.png"))
    parser.add_argument("--max-evaluations", type=int, default=None,
                        help="stop the joint run (and each single run, per target share) "
                             "after this many evaluations")
    parser.add_argument("--items", type=int, default=None,
                        help="run on this many of IFEval's items (a seeded random slice; "
                             "default: all 541)")
    args = parser.parse_args()

    matrix = load_dataset("ifeval")
    if args.items is not None:
        keep = np.random.default_rng(0).choice(matrix.n_items, args.items, replace=False)
        matrix = matrix.select_items(np.sort(keep))
    reference, _ = matrix.split(FAMILY)
    oracles = {t: MatrixOracle(matrix, t) for t in FAMILY}
    truth = {t: oracles[t].true_score for t in FAMILY}

    # 2. the joint run; `evaluate` stands in for running a checkpoint on an item
    def evaluate(target: str, item: str) -> float:
        return oracles[target](item)

    joint = Session(reference, FAMILY, "bayesame-joint", seed=0,
                    max_items=args.max_evaluations)
    trace = []

    def record(session, target, item, score):
        trace.append(np.array([v[0] for v in session.estimates().values()]))
        if session.n_observed % 250 == 0:  # a run at the defaults takes minutes
            done = int(np.sum(session.stopped_at > 0))
            print(f"  … {session.n_observed} evaluations, {done}/{len(FAMILY)} variants "
                  "stopped", flush=True)

    joint.run(evaluate, on_step=record)
    print(f"joint: {joint.n_observed} evaluations in all ({joint.stop_reason})")
    for t, (value, lower, upper) in joint.estimates().items():
        used = joint.items_used(t)
        print(f"  {t:28s} {value:.4f} [{lower:.4f}, {upper:.4f}]  true {truth[t]:.4f}  "
              f"{used} items")

    # 3. what the model learned about the family
    corr = target_correlation(joint.state.params)
    print("fitted correlation of the variants' abilities (same bucket):")
    for t, row in zip(FAMILY, corr, strict=True):
        print(f"  {t.split('/')[-1]:22s} " + " ".join(f"{c:+.2f}" for c in row))

    # 4. independent single-target sessions on the same variants
    per_target = None if args.max_evaluations is None else max(1, args.max_evaluations // 4)
    single_total = 0
    print("independent single-target BayesAME:")
    for t in FAMILY:
        session = Session(reference, t, "bayesame", seed=0, max_items=per_target)
        value, lower, upper = session.run(oracles[t])
        single_total += session.n_observed
        print(f"  {t:28s} {value:.4f} [{lower:.4f}, {upper:.4f}]  true {truth[t]:.4f}  "
              f"{session.n_observed} items")
    print(f"single: {single_total} evaluations in all")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    estimates = np.asarray(trace)
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, t in enumerate(FAMILY):
        line, = ax.plot(np.arange(1, len(estimates) + 1), estimates[:, k],
                        label=t.split("/")[-1])
        ax.axhline(truth[t], color=line.get_color(), ls=":", lw=1)
    design = joint.loop.plan.design.size  # (target, item) pairs of the initial design
    ax.axvline(design, color="grey", lw=0.8)
    ax.text(design, ax.get_ylim()[1], " end of the initial design", va="top", fontsize=8,
            color="grey")
    ax.set_xlabel("evaluations (all variants)")
    ax.set_ylabel("estimated IFEval score (dotted: true)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
