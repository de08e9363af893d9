"""FAQ's run-round against the authors' own PyTorch code, side by side in one process:
the same new models, factors, prior, budget and policy, timed alternately, so that the
ratio does not depend on how fast the machine happens to be.

Usage: python bench/faq_authors.py --authors DIR [--cores 1] [--seeds 3] [--repeats 5]
                                   [--budget 0.1] [--out docs/results/faq_authors.md]

``DIR`` is a checkout of the FAQ paper's code (github.com/skbwu/efficiently-evaluating-llms,
seed 001); it needs PyTorch (``pip install torch``; any CPU build). The bench runs its
``trial`` function from ``faq_final.py`` as published: the function is read from that
file and run as it is, with two names of its module supplied (``ALPHA = 0.05``, and a
silent stand-in for its ``tqdm`` progress bar, which is display, not method). Nothing of
it is copied into bayeval.

Workload (that of ``bench/faq_parallel.py``): IFEval+MuSR, models split 50/50 into history
and new (seed 0, as in ``bayeval bench coverage``), the factor model (k = 8, λ = 0.1)
fitted on the history, FAQ's robust default policy ((β0, ρ, γ, τ) = (1, 0, 0, 0.05)) at a
``--budget`` share of the items. One call runs every new model once, as one batch in both
codes: the authors' ``trial`` (float32, its default) and bayeval's
:func:`bayeval.methods.faq.simulate_hybrid` (float64, ``chunk`` = all new models, one
device). Each repeat times one call of each, alternating which goes first; reported are
the median µs per (run, round) of each, the median of the per-repeat ratios and their
range. The process pins itself to ``--cores`` cores before PyTorch and JAX start, and
PyTorch is given that many threads.

As a check that the two run the same procedure, each of ``--seeds`` seeds gives both
codes' coverage and mean width of the 95% interval over the new models (the authors'
variance is their A-centred form, bayeval's is centred at the estimate: docs/methods.md §3).
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
from pathlib import Path

import faq_numpy  # first: it pins the process to --cores before JAX and NumPy start
import jax
import numpy as np

from bayeval.estimators import gaussian_bounds, z_value
from bayeval.experiments.tables import emit_report
from bayeval.methods.faq import simulate_hybrid

CORES = faq_numpy.CORES

SOURCE = "faq_final.py"


def load_trial(directory: Path):
    """The authors' ``trial`` function, read from ``directory/faq_final.py`` and defined in
    a namespace holding the names it uses from its module."""
    try:
        import torch
        from scipy.stats import norm
        from torch.nn.functional import sigmoid
    except ImportError as err:
        sys.exit(f"error: this bench needs PyTorch and SciPy beside bayeval ({err}); "
                 "install them with: pip install torch scipy")
    path = directory / SOURCE
    if not path.is_file():
        sys.exit(f"error: {path} not found: --authors must be a checkout of "
                 "github.com/skbwu/efficiently-evaluating-llms")
    tree = ast.parse(path.read_text(), filename=str(path))
    found = [node for node in tree.body
             if isinstance(node, ast.FunctionDef) and node.name == "trial"]
    if not found:
        sys.exit(f"error: {path} defines no function 'trial' (another version of the code?)")

    def silent(iterable, **_):  # their progress bar: display only
        return iterable

    namespace = {"torch": torch, "sigmoid": sigmoid, "norm": norm, "tqdm": silent,
                 "ALPHA": 0.05}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)
    torch.set_num_threads(CORES)
    return namespace["trial"], torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--authors", type=Path, required=True,
                        help="a checkout of github.com/skbwu/efficiently-evaluating-llms")
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=None)
    opts = parser.parse_args()
    trial, torch = load_trial(opts.authors)

    V, mean0, cov0, new, rounds, params = faq_numpy.workload(opts.budget)
    n_new, n_items = new.shape
    truth = new.mean(1)

    def as_torch(x):
        return torch.tensor(np.asarray(x), dtype=torch.float32)

    M2, Vt, MU0, SIGMA0 = as_torch(new), as_torch(V), as_torch(mean0), as_torch(cov0)

    def theirs(seed: int):
        return trial(M2, Vt, MU0, SIGMA0, n_new, n_items, rounds, *params, seed, "cpu", 0)

    def ours(seed: int):
        out = simulate_hybrid(V, mean0, cov0, new, np.arange(n_new),
                              seed * n_new + np.arange(n_new), params, rounds, chunk=n_new,
                              devices=1)
        lower, upper = (np.asarray(x) for x in gaussian_bounds(out.theta, out.var,
                                                               z_value(0.95)))
        # clamped as the authors' trial clamps its bounds (lower ≤ 1, upper ≥ 0), so that
        # the two widths compare like for like
        lower, upper = np.minimum(lower, 1.0), np.maximum(upper, 0.0)
        return float(np.mean(upper - lower)), float(np.mean((lower <= truth)
                                                            & (truth <= upper)))

    checks = [(seed, theirs(seed), ours(seed)) for seed in range(opts.seeds)]  # + warm-up
    times: dict[str, list[float]] = {"authors": [], "bayeval": []}
    for repeat in range(opts.repeats):
        pair = (("authors", theirs), ("bayeval", ours))
        for name, call in (pair if repeat % 2 == 0 else pair[::-1]):
            start = time.perf_counter()
            call(repeat)
            times[name].append(time.perf_counter() - start)
        print(f"repeat {repeat + 1}/{opts.repeats}: authors {times['authors'][-1]:.2f} s, "
              f"bayeval {times['bayeval'][-1]:.2f} s", flush=True)
    per = n_new * rounds / 1e6
    us = {k: statistics.median(v) / per for k, v in times.items()}
    ratios = [a / b for a, b in zip(times["authors"], times["bayeval"], strict=True)]

    lines = [
        f"JAX {jax.__version__}, PyTorch {torch.__version__}; {CORES} core(s); IFEval+MuSR "
        f"(N = {n_items}, k = {V.shape[1]}), {n_new} new models × {rounds} rounds per call; "
        f"median of {opts.repeats} alternating repeats", "",
        "| implementation | µs per run-round | speed-up of bayeval (per repeat: median, "
        "range) |", "|---|---|---|",
        f"| authors' `trial` (PyTorch, float32) | {us['authors']:.2f} | |",
        f"| bayeval `simulate_hybrid` (JAX, float64) | {us['bayeval']:.2f} | "
        f"**{statistics.median(ratios):.2f}×** ({min(ratios):.2f}–{max(ratios):.2f}) |", "",
        "Same procedure, checked on the 95% interval over the new models (each seed: "
        f"{n_new} runs):", "",
        "| seed | coverage, authors | coverage, bayeval | mean width, authors | "
        "mean width, bayeval |", "|---|---|---|---|---|",
    ]
    for seed, (width_a, cover_a), (width_b, cover_b) in checks:
        lines.append(f"| {seed} | {cover_a:.3f} | {cover_b:.3f} | {width_a:.4f} | "
                     f"{width_b:.4f} |")
    emit_report(lines, opts.out)


if __name__ == "__main__":
    main()
