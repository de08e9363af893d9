"""A short run of each vmapped engine on whatever devices JAX finds, with per-step times:
one command that gives numbers on a lent accelerator (or on this machine's CPU).

    python bench/device_check.py [--runs 64] [--steps 100] [--dataset ifeval]
                                 [--methods random,active-pai,bayesame,faq] [--out FILE.md]

For every method, :func:`bayeval.loop.simulate.simulate` runs ``--runs`` (target, seed) pairs
for ``--steps`` evaluations twice: the first call's time includes compilation, the
second's is the steady state, reported per run-step (one ask, observe and estimate of one
run). SySRs (:func:`bayeval.selection.successive_rejects.run_schedules`) runs the same way
over ``--runs`` seeds of one budget. The numbers are for the device's own comparison
(what a step costs there against here), not a timed claim.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import jax
import numpy as np

from bayeval.data import load_dataset
from bayeval.loop.simulate import simulate
from bayeval.methods import make_method, parse_method_spec
from bayeval.precision import enable_float64
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.successive_rejects import run_schedules

enable_float64()  # bayeval computes in float64 (README: "Precision")


def _timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    out = call()
    jax.block_until_ready(jax.tree_util.tree_leaves(out))
    return time.perf_counter() - start, out


def engine_rows(dataset: str, methods: list[str], runs: int, steps: int) -> list[dict]:
    """First-call and steady seconds of each method's vmapped simulator."""
    matrix = load_dataset(dataset)
    rng = np.random.default_rng(0)
    complete = np.flatnonzero(~np.isnan(matrix.scores).any(axis=1))
    targets = rng.choice(complete, size=min(8, complete.size // 4), replace=False)
    reference = np.delete(matrix.scores, targets, axis=0)
    rows = matrix.scores[np.resize(targets, runs)]
    seeds = list(range(runs))
    out = []
    for spec in methods:
        name, params = parse_method_spec(spec)
        method = make_method(name, **params)
        first, _ = _timed(lambda m=method: simulate(m, reference, rows, seeds, n_steps=steps))
        steady, result = _timed(lambda m=method: simulate(m, reference, rows, seeds,
                                                          n_steps=steps))
        out.append({"engine": spec, "runs": runs, "steps": steps, "first_s": first,
                    "steady_s": steady, "us_per_run_step": 1e6 * steady / (runs * steps),
                    "mean_estimate": float(np.nanmean(np.asarray(result.estimate)[:, -1]))})
        print(f"{spec}: first call {first:.1f} s, steady {steady:.2f} s, "
              f"{out[-1]['us_per_run_step']:.1f} µs per run-step", flush=True)
    return out


def selection_row(dataset: str, runs: int, fraction: float = 0.1) -> dict:
    """SySRs over ``runs`` seeds at one budget: first-call and steady seconds."""
    matrix = load_dataset(dataset)
    scores = matrix.scores[~np.isnan(matrix.scores).any(axis=1)]
    budget = int(fraction * scores.size)
    schedule = phase_schedule(scores.shape[0], scores.shape[1], budget)

    def call():
        return run_schedules(jax.numpy.asarray(scores),
                             jax.random.split(jax.random.key(0), runs),
                             jax.numpy.asarray(schedule)[None], True)

    first, _ = _timed(call)
    steady, _ = _timed(call)
    print(f"SySRs: first call {first:.1f} s, steady {steady:.3f} s over {runs} runs",
          flush=True)
    return {"engine": f"SySRs ({fraction:.0%} of pairs)", "runs": runs, "steps": budget,
            "first_s": first, "steady_s": steady,
            "us_per_run_step": 1e6 * steady / (runs * budget), "mean_estimate": float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="ifeval")
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--methods", default="random,active-pai,bayesame,faq")
    parser.add_argument("--out", type=Path, default=None)
    opts = parser.parse_args()
    devices = jax.devices()
    head = (f"JAX {jax.__version__} on {len(devices)} × {devices[0].device_kind} "
            f"({devices[0].platform}); host {platform.machine()}, "
            f"{platform.python_version()}; dataset {opts.dataset}")
    print(head, flush=True)
    rows = engine_rows(opts.dataset, [m.strip() for m in opts.methods.split(",") if m.strip()],
                       opts.runs, opts.steps)
    rows.append(selection_row(opts.dataset, opts.runs))
    lines = [head, "", "| engine | runs | steps | first call (s) | steady (s) | µs per "
             "run-step |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['engine']} | {r['runs']} | {r['steps']} | {r['first_s']:.1f} | "
              f"{r['steady_s']:.2f} | {r['us_per_run_step']:.1f} |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if opts.out:
        opts.out.write_text(text)


if __name__ == "__main__":
    main()
