"""bayeval's own time per item in a journaled Session: ``active-pai`` on IFEval against a
known row (the evaluator takes no time), one item at a time and in batches of 32, the
first seed a warm-up (compilation). Run it against two checkouts to compare them::

    python bench/session_overhead.py
    PYTHONPATH=OTHER_CHECKOUT python bench/session_overhead.py
"""

from __future__ import annotations

import os
import tempfile
import time

from bayeval.data import load_dataset
from bayeval.evaluators import MatrixOracle
from bayeval.loop.session import Session
from bayeval.precision import enable_float64


def main() -> None:
    enable_float64()
    matrix = load_dataset("ifeval")
    target = matrix.models[7]
    reference, oracle = matrix.drop_models([target]), MatrixOracle(matrix, target)
    for batch in (1, 32):
        for seed in range(3):
            folder = tempfile.mkdtemp()
            with Session(reference, target, "active-pai", seed=seed,
                         journal=os.path.join(folder, "run.jsonl")) as session:
                began = time.perf_counter()
                session.run(oracle, batch=batch)
                seconds = time.perf_counter() - began
            if seed:
                print(f"batch {batch} seed {seed}: {seconds / session.n_observed * 1e3:.2f} "
                      f"ms per item over {session.n_observed}")


if __name__ == "__main__":
    main()
