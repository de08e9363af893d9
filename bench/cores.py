"""Speed-up from the second core: FAQ's and BayesAME's simulators on 1 core, on 2 cores
with one device, and on 2 cores with a device per core, in one process on the same runs.

Usage: python bench/cores.py [--faq-runs 512] [--bayesame-runs 32] [--bayesame-steps 300]
                             [--repeats 3] [--out docs/results/cores.md]

The process makes one JAX CPU device per core (:func:`bayeval.devices.use_cpu_cores`).
"1 core" pins every thread of the process to core 0 (``sched_setaffinity`` on each
thread: XLA's thread pools stay, but share one core); "2 cores" lets them run on both.
"1 device" runs each chunk as one program (``devices=1``), "2 devices" splits its runs
over both devices (:func:`bayeval.devices.over_runs`). Every condition runs the same
(target, seed) pairs after a warm-up call and is timed ``--repeats`` times, the conditions
interleaved; the table gives the median and the results are checked equal across
conditions. FAQ: :func:`bayeval.methods.faq.simulate_hybrid`, the robust default policy
at a 10% budget on IFEval+MuSR (history/new split 50/50, seed 0, as in ``bench
coverage``). BayesAME: :func:`bayeval.simulate.simulate` with ``bayesame`` (exact bucket
GP, information gain, re-fit every 50 steps) for ``--bayesame-steps`` items on IFEval.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from bayeval.devices import cpu_cores, use_cpu_cores

N_DEVICES = use_cpu_cores(2)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bayeval.data import load_dataset  # noqa: E402
from bayeval.methods import make_method  # noqa: E402
from bayeval.methods.faq import HybridParams, simulate_hybrid  # noqa: E402
from bayeval.models.factor import factor_prior, fit_factors  # noqa: E402
from bayeval.precision import enable_float64  # noqa: E402
from bayeval.simulate import simulate  # noqa: E402
from bayeval.stopping.rules import budget_rounds  # noqa: E402

enable_float64()  # bayeval computes in float64 (README: "Precision")

CONDITIONS = (("1 core", 1, 1), ("2 cores", 2, 1), ("2 cores", 2, 2))


def pin(cores: int) -> None:
    """Let every thread of this process run on the first ``cores`` cores only."""
    allowed = sorted(os.sched_getaffinity(0) | set(range(cpu_cores())))[:cores]
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), allowed)
        except (ProcessLookupError, PermissionError):  # a thread that just ended
            pass


def faq_workload(runs: int):
    matrix = load_dataset("ifeval+musr")
    order = np.random.default_rng(0).permutation(matrix.n_models)
    half = matrix.n_models // 2
    history, new = matrix.scores[order[:half]], matrix.scores[order[half:]]
    fit = fit_factors(history, 8, 0.1)
    mean0, cov0 = factor_prior(fit.U)
    rounds = budget_rounds(0.1, matrix.n_items)
    targets = np.resize(np.arange(len(new)), runs)
    seeds = np.arange(runs)

    def call(devices: int):
        out = simulate_hybrid(fit.V, mean0, cov0, new, targets, seeds,
                              HybridParams(1.0, 0.0, 0.0, 0.05), rounds, chunk=runs,
                              devices=devices)
        return np.stack([out.theta, out.var])

    return call, runs * rounds, f"FAQ, {runs} runs × {rounds} rounds (IFEval+MuSR)"


def bayesame_workload(runs: int, steps: int):
    matrix = load_dataset("ifeval")
    rng = np.random.default_rng(0)
    held = rng.choice(matrix.n_models, size=8, replace=False)
    reference = np.delete(matrix.scores, held, axis=0)
    rows = matrix.scores[np.resize(held, runs)]
    method = make_method("bayesame")

    def call(devices: int):
        out = simulate(method, reference, rows, list(range(runs)), n_steps=steps,
                       devices=devices)
        return np.stack([out.estimate, out.var])

    return call, runs * steps, f"BayesAME, {runs} runs × {steps} steps (IFEval)"


def measure(call, run_steps: int, repeats: int) -> list[dict]:
    results, times = {}, {c: [] for c in CONDITIONS}
    for cond in CONDITIONS:  # warm-up: compile each device count once
        pin(cond[1])
        results[cond] = call(cond[2])
    for _ in range(repeats):
        for cond in CONDITIONS:
            pin(cond[1])
            start = time.perf_counter()
            results[cond] = call(cond[2])
            times[cond].append(time.perf_counter() - start)
    pin(cpu_cores())
    first = results[CONDITIONS[0]]
    rows = []
    base = statistics.median(times[CONDITIONS[0]])
    for cond in CONDITIONS:
        med = statistics.median(times[cond])
        same = np.array_equal(np.nan_to_num(results[cond], nan=-1.0),
                              np.nan_to_num(first, nan=-1.0))
        diff = float(np.nanmax(np.abs(results[cond] - first)))
        rows.append({"cores": cond[1], "devices": cond[2], "seconds": med,
                     "spread": (min(times[cond]), max(times[cond])),
                     "us": 1e6 * med / run_steps, "speedup": base / med,
                     "same": same, "diff": diff})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faq-runs", type=int, default=512)
    parser.add_argument("--bayesame-runs", type=int, default=32)
    parser.add_argument("--bayesame-steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    opts = parser.parse_args()
    if cpu_cores() < 2 or N_DEVICES < 2:
        sys.exit(f"error: this bench needs 2 cores and 2 CPU devices; the process has "
                 f"{cpu_cores()} cores and {N_DEVICES} devices")
    head = (f"JAX {jax.__version__}, {N_DEVICES} CPU devices on {cpu_cores()} cores, "
            f"{opts.repeats} repeats (median; min–max in brackets)")
    print(head, flush=True)
    lines = [head, "", "| workload | cores | devices | seconds | µs per run-step | "
             "speed-up vs 1 core | results equal to 1 core |", "|---|---|---|---|---|---|---|"]
    for call, run_steps, label in (faq_workload(opts.faq_runs),
                                   bayesame_workload(opts.bayesame_runs,
                                                     opts.bayesame_steps)):
        for r in measure(call, run_steps, opts.repeats):
            same = "bit for bit" if r["same"] else f"max |Δ| {r['diff']:.1e}"
            lines.append(f"| {label} | {r['cores']} | {r['devices']} | {r['seconds']:.2f} "
                         f"({r['spread'][0]:.2f}–{r['spread'][1]:.2f}) | {r['us']:.2f} | "
                         f"{r['speedup']:.2f}× | {same} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(text)


if __name__ == "__main__":
    main()
