"""FAQ's run-round against a plain NumPy transcription of docs/methods.md §3, in one process on
one core, the same draws giving the same results; and what a run-round costs against its
O(N k) arithmetic.

Usage: python bench/faq_numpy.py [--runs 512] [--budget 0.1] [--repeats 3] [--cores 1]
                                 [--out docs/results/faq_numpy.md]

The process pins itself to ``--cores`` cores before NumPy and JAX start (their thread
pools then have that many threads). Workload: IFEval+MuSR, models split 50/50 into
history and new (seed 0, as in ``bench coverage``), the factor model (k = 8, λ = 0.1)
fitted on the history, FAQ's robust default policy ((β0, ρ, γ, τ) = (1, 0, 0, 0.05)) at a
``--budget`` share of the items, on ``--runs`` (new model, seed) pairs.

bayeval: :func:`bayeval.methods.faq.simulate_hybrid`, one chunk of all runs, and beside
it the program it compiles for ρ > 0 (with the latent variances of the active part), run
at ρ = 0, to show what leaving them out saves. NumPy: the
formulas of docs/methods.md §3 written out with NumPy arrays, batched over runs round by round
(prediction p̂ = σ(û·V), q from h_o, the inverse-CDF draw, the PAI sums, the rank-one
Laplace update of û and Σ), fed the uniforms bayeval's keys draw (run r, round s:
``uniform(fold_in(key(seed_r), s))``) so that both pick the same items. Reported: µs per
(run, round) of each after a warm-up, their ratio, the largest difference of θ̂ and of
its variance, and the compiled program's own count of floating-point operations and bytes
touched per run-round (XLA's cost analysis of a one-round program, which includes the
prior's start) against the O(N k) the formulas need, and where a run-round's time goes:
the round timed in cumulative stages (:func:`round_stages`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path


def _pin() -> int:
    cores = 1
    if "--cores" in sys.argv:
        cores = int(sys.argv[sys.argv.index("--cores") + 1])
    allowed = sorted(os.sched_getaffinity(0))[:cores]
    os.sched_setaffinity(0, allowed)
    return len(allowed)


CORES = _pin()  # before NumPy's and XLA's thread pools start

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bayeval.acquisition import draw_index  # noqa: E402
from bayeval.acquisition.hybrid import hybrid_probabilities  # noqa: E402
from bayeval.data import load_dataset  # noqa: E402
from bayeval.experiments.tables import emit_report  # noqa: E402
from bayeval.methods import faq as faq_module  # noqa: E402
from bayeval.methods.faq import HybridParams, simulate_hybrid  # noqa: E402
from bayeval.models.factor import factor_prior, fit_factors  # noqa: E402
from bayeval.precision import enable_float64  # noqa: E402
from bayeval.stopping.rules import budget_rounds  # noqa: E402
from bayeval.types import clip_probability  # noqa: E402

enable_float64()  # bayeval computes in float64 (README: "Precision")

P_CLIP = 1e-12


def numpy_faq(V: np.ndarray, mean0: np.ndarray, cov0: np.ndarray, scores: np.ndarray,
              targets: np.ndarray, uniforms: np.ndarray, tau: float = 0.05
              ) -> tuple[np.ndarray, np.ndarray]:
    """docs/methods.md §3 with ρ = γ = 0 and β0 = 1 (the robust default): (θ̂, Var θ̂) per run,
    the variance centred at N θ̂ with T − 1 degrees of freedom as bayeval reports it."""
    R, T = uniforms.shape
    N = V.shape[0]
    mean = np.broadcast_to(mean0, (R, mean0.size)).copy()
    cov = np.broadcast_to(cov0, (R, *cov0.shape)).copy()
    rows = np.arange(R)
    phi = np.zeros((R, T))
    resid2 = np.zeros(R)
    totals = np.zeros((R, T))
    for s in range(T):
        p = np.clip(1.0 / (1.0 + np.exp(-(mean @ V.T))), P_CLIP, 1.0 - P_CLIP)
        h = np.sqrt(p * (1.0 - p))
        q = (1.0 - tau) * h / h.sum(1, keepdims=True) + tau / N
        cdf = np.cumsum(q, 1)
        item = np.minimum((cdf <= uniforms[:, s:s + 1]).sum(1), N - 1)
        z = scores[targets, item]
        p_i, q_i = p[rows, item], q[rows, item]
        total = p.sum(1)
        r = (z - p_i) / q_i
        phi[:, s], totals[:, s] = total + r, total
        resid2 += r * r
        v = V[item]  # (R, k): the Laplace update of (û, Σ)
        sv = np.einsum("bkl,bl->bk", cov, v)
        w = p_i * (1.0 - p_i)
        gain = w / (1.0 + w * np.einsum("bk,bk->b", v, sv))
        cov -= gain[:, None, None] * sv[:, :, None] * sv[:, None, :]
        mean += ((z - p_i) * gain / w)[:, None] * sv
    theta = phi.sum(1) / (T * N)
    spread = ((theta[:, None] * N - totals) ** 2).sum(1)
    v2 = np.maximum(0.0, (resid2 - spread) / ((T - 1) * N**2))
    return theta, v2 / T


def workload(budget: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int,
                                     HybridParams]:
    """The FAQ benches' workload (that of ``bench/faq_parallel.py``): IFEval+MuSR, models
    split 50/50 into history and new (seed 0), the factor model (k = 8, λ = 0.1) fitted on
    the history, the robust default policy at a ``budget`` share of the items. Returns
    (V, prior mean, prior covariance, the new models' scores, rounds, policy)."""
    matrix = load_dataset("ifeval+musr")
    order = np.random.default_rng(0).permutation(matrix.n_models)
    half = matrix.n_models // 2
    history, new = matrix.scores[order[:half]], matrix.scores[order[half:]]
    fit = fit_factors(history, 8, 0.1)
    mean0, cov0 = (np.asarray(x) for x in factor_prior(fit.U))
    return (np.asarray(fit.V), mean0, cov0, new, budget_rounds(budget, matrix.n_items),
            HybridParams(1.0, 0.0, 0.0, 0.05))


def round_stages(V: np.ndarray, mean0: np.ndarray, runs: int, rounds: int, tau: float
                 ) -> dict[str, Callable[[], object]]:
    """What a run-round's parts cost: one program per stage, each a scan of ``rounds``
    rounds over ``runs`` runs doing the round's work up to that stage (the prediction's
    N k product û·V; p̂ = clip(σ(·)); h_o = √(p̂(1 − p̂)) and its sum; q and the draw), its
    output fed back into û by a negligible amount so that no round can be hoisted out of
    the loop. Cumulative: each stage's time less the one before is that part's cost."""
    v = jnp.asarray(V, jnp.float64)
    start = jnp.broadcast_to(jnp.asarray(mean0, jnp.float64), (runs, V.shape[1]))
    rows = jnp.arange(runs)

    def stage(level: int):
        def step(m, s):
            logits = m @ v.T
            if level == 0:
                return m + 1e-12 * logits.sum(1)[:, None], None
            p = clip_probability(jax.nn.sigmoid(logits))
            if level == 1:
                return m + 1e-12 * p.sum(1)[:, None], None
            h = jnp.sqrt(p * (1.0 - p))
            if level == 2:
                return m + 1e-12 * (h.sum(1) + p.sum(1))[:, None], None
            q = hybrid_probabilities(p, jnp.zeros_like(p), 0.0, 1.0, tau)
            item = draw_index(q, jnp.mod(0.37 + 0.01 * s + 1e-3 * rows, 1.0))
            return m + 1e-12 * (q[rows, item] + p.sum(1))[:, None], None

        program = jax.jit(lambda m: jax.lax.scan(step, m, jnp.arange(rounds, dtype=float))[0])
        return lambda: program(start).block_until_ready()

    names = ("the N k product û·V", "+ p̂ = clip(σ(û·V))", "+ h_o = √(p̂(1 − p̂)), Σ h_o",
             "+ q (Eq. 4) and the draw")
    return {name: stage(level) for level, name in enumerate(names)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--runs", type=int, default=512)
    parser.add_argument("--budget", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    opts = parser.parse_args()

    V, mean0, cov0, new, rounds, params = workload(opts.budget)
    targets = np.resize(np.arange(len(new)), opts.runs)
    seeds = np.arange(opts.runs)
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds, jnp.uint32))
    steps = jnp.arange(rounds, dtype=jnp.float64)  # the rounds as simulate_hybrid folds them
    uniforms = np.asarray(jax.vmap(lambda k: jax.vmap(lambda s: jax.random.uniform(
        jax.random.fold_in(k, s), (), jnp.float64))(steps))(keys))

    def ours():
        out = simulate_hybrid(V, mean0, cov0, new, targets, seeds, params, rounds,
                              chunk=opts.runs, devices=1)
        return np.asarray(out.theta), np.asarray(out.var)

    def theirs():
        return numpy_faq(V, mean0, cov0, new, targets, uniforms)

    cast = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    program_args = (cast(V), cast(mean0), cast(cov0), cast(new),
                    jnp.asarray(targets, jnp.int32), keys, cast(tuple(params)))

    def with_active_part():  # the program for ρ > 0, run at ρ = 0: what ρ = 0 saves
        out = faq_module._compiled_hybrid(int(rounds), 1, True)(*program_args)
        return np.asarray(out.theta), np.asarray(out.var)

    a, b = ours(), theirs()  # warm-up (compilation) and the equality check
    c = with_active_part()
    stages = round_stages(V, mean0, opts.runs, rounds, params.tau)
    for call in stages.values():
        call()  # compilation
    calls = {"bayeval": ours, "numpy": theirs, "active": with_active_part, **stages}
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(opts.repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    us = {k: 1e6 * statistics.median(v) / (opts.runs * rounds) for k, v in times.items()}

    # XLA's own count of what the compiled program does
    # of a one-round program: XLA counts a loop's body once, whatever its trip count
    lowered = faq_module._compiled_hybrid(1, 1, False).lower(
        cast(V), cast(mean0), cast(cov0), cast(new), jnp.asarray(targets, jnp.int32), keys,
        cast(tuple(params)))
    cost = lowered.compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    flops = float(cost.get("flops", float("nan"))) / opts.runs
    touched = float(cost.get("bytes accessed", float("nan"))) / opts.runs
    N, k = V.shape
    # the formulas per run-round: p̂ = σ(û·V) (N k multiply-adds: 2 N k operations), the
    # Σ v and gain (k²), h, q, the cumsum and the draw (about 10 N), the PAI sums (a few)
    needed = 2 * N * k + 10 * N

    lines = [
        f"JAX {jax.__version__}, NumPy {np.__version__}; {CORES} core(s); IFEval+MuSR "
        f"(N = {N}, k = {k}), {opts.runs} runs × {rounds} rounds, median of "
        f"{opts.repeats}", "",
        "| implementation | µs per run-round | speed against NumPy (its µs ÷ these µs) |",
        "|---|---|---|",
        f"| NumPy transcription of docs/methods.md §3 | {us['numpy']:.2f} | 1 |",
        f"| bayeval `simulate_hybrid` | {us['bayeval']:.2f} | "
        f"{us['numpy'] / us['bayeval']:.2f} |",
        f"| bayeval's program with the active part (for ρ > 0), at ρ = 0 | "
        f"{us['active']:.2f} | {us['numpy'] / us['active']:.2f} |", "",
        f"The two bayeval programs give the same θ̂: "
        f"{'bit for bit' if np.array_equal(a[0], c[0]) else 'NOT bit for bit'}.", "",
        f"Same draws: largest |Δθ̂| {np.max(np.abs(a[0] - b[0])):.1e}, largest |ΔVar| "
        f"{np.max(np.abs(a[1] - b[1])):.1e} over {opts.runs} runs.", "",
        "| per run-round | value |", "|---|---|",
        f"| floating-point operations, XLA's count (one-round program) | {flops:,.0f} |",
        f"| bytes touched, XLA's count (one-round program) | {touched:,.0f} |",
        f"| bytes of one N-vector of float64 | {8 * N:,} |",
        f"| operations the formulas need (2 N k + 10 N) | {needed:,} |",
        f"| achieved: GFLOP/s | {flops / us['bayeval'] / 1e3:.2f} |",
        f"| achieved: GB/s | {touched / us['bayeval'] / 1e3:.2f} |", "",
        "Where a run-round's time goes (each stage one program doing the round up to that "
        "part; the part's cost is the difference):", "",
        "| stage | µs per run-round | this part |", "|---|---|---|",
    ]
    before = 0.0
    for name in (*stages, "bayeval"):
        label = "whole round (`simulate_hybrid`): + the estimate's sums, the Laplace update" \
            if name == "bayeval" else name
        lines.append(f"| {label} | {us[name]:.2f} | {us[name] - before:+.2f} |")
        before = us[name]
    emit_report(lines, opts.out)


if __name__ == "__main__":
    main()
