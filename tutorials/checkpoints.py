"""Tutorial: evaluate a family of related checkpoints in one joint run.

Run: python tutorials/checkpoints.py [--out checkpoints.png] [--max-evaluations N]
[--items N] [--also-bayesame-joint]

When several models of one family are to be scored on one benchmark (checkpoints of a
training run, a base model and its fine-tunes), their per-item scores are correlated.
``active-pai-joint`` (the default of ``--targets``) models them jointly with a linear
model of coregionalisation (seed 000 §3.2: every target's bucket abilities a weighted sum
of L shared latent Gaussian processes), and uses that joint model only to choose each
checkpoint's items and predict its unseen ones: each checkpoint's estimate is design-valid
(docs/methods.md §9), so its interval holds whatever the joint model gets wrong.

1. Hold out the four Yi-1.5-34B variants of the bundled IFEval matrix; the other models
   are the reference.
2. Run a :class:`~bayeval.loop.session.Session` with the four as targets (``active-pai-joint``):
   round robin over the variants that have not met their stopping rule (the interval at
   most 0.05 wide), each drawing its next item from its own design.
3. Read the fitted coregionalisation: the correlation between the variants' abilities
   that the weights imply.
4. Compare with four independent single-target ``active-pai`` sessions, and plot every
   variant's estimate against the evaluations spent.
5. With ``--also-bayesame-joint``, the model-based alternative, multi-target BayesAME
   (``bayesame-joint``): it reports the joint model's own posterior interval, which is
   only as good as the model.

What a full run (all 541 items, seed 0) printed: the joint run spent 1293 evaluations and
each of the four intervals held the true score; four independent ``active-pai`` runs spent
1246 and held all four too. On this family the joint model bought nothing: the variants'
fitted correlation is far from 1 (base and Chat −0.58), so one variant's scores say
little about another's. ``bayesame-joint`` stops at its own ε = 0.02, so its cost is not
comparable (2067 evaluations); its intervals missed the true score of 2 of the 4 variants
(the Chat-16K one by 0.006), as ``bayeval bench multitarget`` measures over many runs
(docs/results/multitarget: coverage 0.18–0.74 per cell), which is why it is not the
default.

From the shell the same joint run is
``bayeval evaluate --targets 01-ai/Yi-1.5-34B,01-ai/Yi-1.5-34B-Chat,...``
(``--method bayesame-joint`` for step 5).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bayeval.data import load_dataset
from bayeval.evaluators import MatrixOracle
from bayeval.loop.session import Session
from bayeval.precision import enable_float64

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
    parser.add_argument("--also-bayesame-joint", action="store_true",
                        help="also run the model-based bayesame-joint (minutes)")
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

    def report(name: str, estimates: dict, used: dict[str, int]) -> None:
        held = sum(lower <= truth[t] <= upper for t, (_, lower, upper) in estimates.items())
        for t, (value, lower, upper) in estimates.items():
            print(f"  {t:28s} {value:.4f} [{lower:.4f}, {upper:.4f}]  true {truth[t]:.4f}  "
                  f"{used[t]} items")
        print(f"{name}: {sum(used.values())} evaluations in all; the interval holds the "
              f"true score for {held} of {len(estimates)} variants")

    joint = Session(reference, FAMILY, "active-pai-joint", seed=0,
                    max_items=args.max_evaluations)
    trace = []

    def record(session, target, item, score):
        trace.append(np.array([v[0] for v in session.estimates().values()]))
        if session.n_observed % 250 == 0:  # a run at the defaults takes a minute
            done = int(np.sum(session.stopped_at > 0))
            print(f"  … {session.n_observed} evaluations, {done}/{len(FAMILY)} variants "
                  "stopped", flush=True)

    joint.run(evaluate, on_step=record)
    print(f"joint ({joint.stop_reason}):")
    report("joint", joint.estimates(), {t: joint.items_used(t) for t in FAMILY})

    # 3. what the joint model learned about the family
    corr = target_correlation(joint.state.params)
    print("fitted correlation of the variants' abilities (same bucket):")
    for t, row in zip(FAMILY, corr, strict=True):
        print(f"  {t.split('/')[-1]:22s} " + " ".join(f"{c:+.2f}" for c in row))

    # 4. independent single-target sessions on the same variants
    per_target = None if args.max_evaluations is None else max(1, args.max_evaluations // 4)
    single, used = {}, {}
    print("independent single-target active-pai:")
    for t in FAMILY:
        session = Session(reference, t, "active-pai", seed=0, max_items=per_target)
        single[t] = session.run(oracles[t])
        used[t] = session.n_observed
    report("single", single, used)

    # 5. the model-based joint method, for comparison
    if args.also_bayesame_joint:
        other = Session(reference, FAMILY, "bayesame-joint", seed=0,
                        max_items=args.max_evaluations)
        other.run(evaluate)
        print(f"bayesame-joint ({other.stop_reason}), model-based intervals:")
        report("bayesame-joint", other.estimates(), {t: other.items_used(t) for t in FAMILY})

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    estimates = np.asarray(trace)
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, t in enumerate(FAMILY):
        line, = ax.plot(np.arange(1, len(estimates) + 1), estimates[:, k],
                        label=t.split("/")[-1])
        ax.axhline(truth[t], color=line.get_color(), ls=":", lw=1)
    ax.set_xlabel("evaluations (all variants)")
    ax.set_ylabel("estimated IFEval score (dotted: true)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
