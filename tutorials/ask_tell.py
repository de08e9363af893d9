"""Tutorial: evaluate one model with the ask/tell Session, survive a crash, plot the run.

Run: python tutorials/ask_tell.py [--out ask_tell.png]

1. Take the bundled IFEval matrix, hold one model out as the "new" model.
2. Evaluate it item by item through a Python function (here: a lookup standing in for
   running the model), journaling every answer.
3. Pretend the process died halfway: resume from the journal and finish.
4. Plot the estimate and its 95% interval against the number of items used.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bayeval.data import load_dataset
from bayeval.evaluators import CallableEvaluator, MatrixOracle
from bayeval.loop.session import Session
from bayeval.precision import enable_float64

enable_float64()  # bayeval computes in float64 (README: "Precision")

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "ask_tell.png"),
                        help="where to save the plot")
    args = parser.parse_args()

    matrix = load_dataset("ifeval")
    target = "meta-llama/Meta-Llama-3-8B-Instruct"
    held_out = [target, f"{target}#2"]  # the leaderboard lists this model twice
    reference, _ = matrix.split(held_out)
    truth = MatrixOracle(matrix, target)
    run_model = CallableEvaluator(truth)  # replace with a call to your model

    journal = Path(tempfile.mkdtemp()) / "llama3.jsonl"
    session = Session(reference, target, "random", method_params={"epsilon": 0.08},
                      seed=1, journal=journal,
                      # recorded in the journal so that resume can reload the reference
                      reference_source={"dataset": "ifeval", "held_out": held_out})
    for _ in range(60):  # ... and then the process dies
        (item,) = session.ask()
        session.tell(item, run_model(item))
    session.close()

    session = Session.resume(journal)  # reference, method and seed come from the journal
    print(f"resumed with {session.n_observed} observations from {journal}")
    value, lower, upper = session.run(run_model)
    print(f"estimate {value:.3f}, 95% interval [{lower:.3f}, {upper:.3f}], "
          f"true {truth.true_score:.3f}, {session.n_observed} of {session.n_items} items")

    n, est, lo, hi = zip(*session.history, strict=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.fill_between(n, lo, hi, alpha=0.25, label="95% interval")
    ax.plot(n, est, label="estimate")
    ax.axhline(truth.true_score, color="k", ls="--", lw=1, label="true score")
    ax.set_xlabel("items evaluated")
    ax.set_ylabel("IFEval score")
    ax.set_title(f"{target}: random items, sample mean")
    ax.legend()
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"plot saved to {args.out}")


if __name__ == "__main__":
    main()
