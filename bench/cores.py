"""Speed-up from the second core: FAQ's and BayesAME's simulators on one core, on two
cores as one program, split over two devices, and split over two processes.

Usage: python bench/cores.py [--faq-runs 512] [--bayesame-runs 32] [--bayesame-steps 200]
                             [--repeats 3] [--out docs/results/cores.md]

Every condition runs in a fresh process (``sched_setaffinity`` before JAX starts, so
XLA sizes its thread pools to the cores it has), with the same (target, seed) pairs; after
a warm-up call (compilation) the call is timed ``--repeats`` times and the median kept.

1. 1 core, 1 device: the process pinned to core 0.
2. 2 cores, 1 device: JAX's default; XLA's CPU runtime may use the second core itself.
3. 2 cores, 2 devices: the runs of each chunk split over two CPU devices
   (:func:`bayeval.devices.over_runs`, ``devices=2``) in one process.
4. 2 processes: two processes, each pinned to its own core, started together, each running
   half of the runs (what ``--workers 2`` does with the benches' units); the wall time is
   the slower one's.

The results of 2–4 are checked equal to those of 1 (bit for bit, or the largest
difference). FAQ: :func:`bayeval.methods.faq.simulate_hybrid`, the robust default policy
at a 10% budget on IFEval+MuSR (history/new split 50/50, seed 0, as in ``bench
coverage``). BayesAME: :func:`bayeval.loop.simulate.simulate` with ``bayesame`` (exact bucket
GP, information gain, re-fit every 50 steps) for ``--bayesame-steps`` items on IFEval.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def faq_workload(runs: int, part: tuple[int, int]):
    from bayeval.data import load_dataset
    from bayeval.methods.faq import HybridParams, simulate_hybrid
    from bayeval.models.factor import factor_prior, fit_factors
    from bayeval.stopping.rules import budget_rounds

    matrix = load_dataset("ifeval+musr")
    order = np.random.default_rng(0).permutation(matrix.n_models)
    half = matrix.n_models // 2
    history, new = matrix.scores[order[:half]], matrix.scores[order[half:]]
    fit = fit_factors(history, 8, 0.1)
    mean0, cov0 = factor_prior(fit.U)
    rounds = budget_rounds(0.1, matrix.n_items)
    targets = np.resize(np.arange(len(new)), runs)[part[0]:part[1]]
    seeds = np.arange(runs)[part[0]:part[1]]

    def call(devices: int):
        out = simulate_hybrid(fit.V, mean0, cov0, new, targets, seeds,
                              HybridParams(1.0, 0.0, 0.0, 0.05), rounds, chunk=len(targets),
                              devices=devices)
        return np.stack([out.theta, out.var])

    return call, rounds


def bayesame_workload(runs: int, steps: int, part: tuple[int, int]):
    from bayeval.data import load_dataset
    from bayeval.loop.simulate import simulate
    from bayeval.methods import make_method

    matrix = load_dataset("ifeval")
    held = np.random.default_rng(0).choice(matrix.n_models, size=8, replace=False)
    reference = np.delete(matrix.scores, held, axis=0)
    rows = matrix.scores[np.resize(held, runs)][part[0]:part[1]]
    seeds = list(range(runs))[part[0]:part[1]]
    method = make_method("bayesame")

    def call(devices: int):
        out = simulate(method, reference, rows, seeds, n_steps=steps, devices=devices)
        return np.stack([out.estimate, out.var])

    return call, steps


def child(opts) -> None:
    """One condition, in this (fresh, pinned) process: prints a JSON line."""
    call, _ = (faq_workload(opts.runs, tuple(opts.part)) if opts.child == "faq"
               else bayesame_workload(opts.runs, opts.steps, tuple(opts.part)))
    result = call(opts.devices)  # warm-up: compile
    if opts.start:
        time.sleep(max(0.0, opts.start - time.time()))
    times = []
    for _ in range(opts.repeats):
        begin = time.perf_counter()
        result = call(opts.devices)
        times.append(time.perf_counter() - begin)
    np.save(opts.save, result)
    print(json.dumps({"times": times, "cores": len(os.sched_getaffinity(0)),
                      "devices": len(jax.devices()),
                      "digest": hashlib.sha256(result.tobytes()).hexdigest()}))


def spawn(opts, workload: str, cores: set[int], devices: int, part: tuple[int, int],
          save: Path, start: float = 0.0) -> subprocess.Popen:
    args = [sys.executable, str(HERE), "--child", workload, "--runs", str(opts.runs_of[workload]),
            "--steps", str(opts.bayesame_steps), "--devices", str(devices), "--part",
            str(part[0]), str(part[1]), "--repeats", str(opts.repeats), "--save", str(save),
            "--start", str(start)]
    env = {**os.environ, "BAYEVAL_BENCH_CPU_DEVICES": str(devices)}
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: os.sched_setaffinity(0, cores))


def finish(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"error: a bench process failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def measure(opts, workload: str, scratch: Path) -> list[dict]:
    runs = opts.runs_of[workload]
    whole = (0, runs)
    rows = []
    for label, cores, devices in (("1 core, 1 device", {0}, 1),
                                  ("2 cores, 1 device", {0, 1}, 1),
                                  ("2 cores, 2 devices", {0, 1}, 2)):
        save = scratch / f"{workload}-{devices}-{len(cores)}.npy"
        got = finish(spawn(opts, workload, cores, devices, whole, save))
        rows.append({"condition": label, "seconds": statistics.median(got["times"]),
                     "times": got["times"], "result": np.load(save)})
        print(f"{workload}: {label}: {rows[-1]['seconds']:.3f} s", flush=True)
    half = runs // 2
    start = time.time() + (40.0 if workload == "bayesame" else 25.0)  # after both compile
    procs = [spawn(opts, workload, {i}, 1, part, scratch / f"{workload}-proc{i}.npy", start)
             for i, part in enumerate(((0, half), (half, runs)))]
    got = [finish(p) for p in procs]
    per_repeat = [max(a, b) for a, b in zip(got[0]["times"], got[1]["times"], strict=True)]
    joined = np.concatenate([np.load(scratch / f"{workload}-proc{i}.npy") for i in range(2)],
                            axis=1)
    rows.append({"condition": "2 processes, 1 core each", "seconds":
                 statistics.median(per_repeat), "times": per_repeat, "result": joined})
    print(f"{workload}: 2 processes: {rows[-1]['seconds']:.3f} s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--faq-runs", type=int, default=512)
    parser.add_argument("--bayesame-runs", type=int, default=32)
    parser.add_argument("--bayesame-steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    # one condition in a child process
    parser.add_argument("--child", choices=("faq", "bayesame"), help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--part", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=float, default=0.0, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(opts)
        return
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("error: this bench needs 2 cores; the process may use "
                 f"{len(os.sched_getaffinity(0))}")
    opts.runs_of = {"faq": opts.faq_runs, "bayesame": opts.bayesame_runs}
    import tempfile

    labels = {"faq": f"FAQ simulator, {opts.faq_runs} runs, 10% budget (IFEval+MuSR)",
              "bayesame": f"BayesAME simulator, {opts.bayesame_runs} runs × "
                          f"{opts.bayesame_steps} steps (IFEval)"}
    head = (f"JAX {jax.__version__}, {os.cpu_count()} cores; median of {opts.repeats} "
            "timed calls after a warm-up, each condition in a fresh process")
    lines = [head, "", "| simulator | condition | seconds (each call) | speed-up vs 1 core | "
             "results against 1 core |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for workload in ("faq", "bayesame"):
            rows = measure(opts, workload, Path(scratch))
            base = rows[0]
            for r in rows:
                same = np.array_equal(r["result"], base["result"], equal_nan=True)
                diff = float(np.nanmax(np.abs(r["result"] - base["result"])))
                each = ", ".join(f"{t:.2f}" for t in r["times"])
                lines.append(f"| {labels[workload]} | {r['condition']} | {r['seconds']:.2f} "
                             f"({each}) | {base['seconds'] / r['seconds']:.2f}× | "
                             f"{'bit for bit' if same else f'max abs Δ {diff:.1e}'} |")
    from bayeval.experiments.tables import emit_report
    emit_report(lines, opts.out)


if __name__ == "__main__":
    if "--child" in sys.argv:  # the device count is set before JAX starts
        n = int(os.environ.get("BAYEVAL_BENCH_CPU_DEVICES", "1"))
        from bayeval.devices import use_cpu_cores

        use_cpu_cores(n)
    import jax
    import numpy as np

    from bayeval.precision import enable_float64

    enable_float64()  # bayeval computes in float64 (README: "Precision")
    main()
