"""Peak memory and time per step of multi-target BayesAME (10 targets on ARC-Challenge by
default), against the single-target engine on the same reference in the same process.

Usage: python bench/joint_memory.py [--dataset arc_challenge] [--targets 10]
                                    [--steps 300] [--out bench/results/joint_memory.md]

Runs one :class:`~bayeval.loop.session.Session` of ``bayesame-joint`` through its initial
design (every target on 10% of the items), the first re-fit (AdamW on ≤ 256 observed pairs, then the
posterior rebuilt on all of them), then ``--steps`` round-robin steps. Reports the peak
resident memory of the process after each phase (``ru_maxrss``; the process holds nothing
else of that size), the size of Σ_c (J² floats), the median time of a step (observe,
predict, stopping update, selection), of a compaction and of a re-fit, all with
compilation excluded, and the same step of single-target BayesAME (one target, same
reference) as the reference run for the time ratio.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import jax
import numpy as np

from bayeval.data import load_dataset, make_split
from bayeval.loop.session import Session
from bayeval.methods import make_method
from bayeval.precision import enable_float64

enable_float64()  # bayeval computes in float64 (README: "Precision")


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    jax.block_until_ready(out)
    return out, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--dataset", default="arc_challenge")
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    matrix = load_dataset(args.dataset)
    split = make_split(matrix, "interpolation", args.targets, 0.5, seed=0, reference_seed=0)
    reference, targets = split.reference.scores, split.targets.scores
    lines = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    rss0 = peak_gb()
    names = [f"t{k}" for k in range(args.targets)]
    # only the first re-fit, timed on its own below
    run = Session(split.reference, names, "bayesame-joint",
                  method_params={"refit_every": 10**9}, seed=0)
    cfg = run.method.config
    joint = run.state.joint
    T, B, N = args.targets, joint.sizes.shape[0], run.n_items
    J = T * B
    n_init = int(run.loop.plan.design.size)
    say(f"# multi-target BayesAME on {args.dataset}: {T} targets × {B} buckets (J = {J}), "
        f"N = {N}, {reference.shape[0]} reference models")
    say("")
    say(f"- Σ_c: J² floats = {J * J * 8 / 1e9:.2f} GB; peak RSS before the run "
        f"{rss0:.2f} GB, after the prior state {peak_gb():.2f} GB")

    def one() -> None:
        (t, item), = run.ask()
        run.tell(item, float(targets[names.index(t), run.reference.item_index(item)]),
                 target=t)

    step_times, compact_times, refit_times = [], [], []
    t_init = time.perf_counter()
    while run.n_observed < n_init - 1:
        one()
    t_init = time.perf_counter() - t_init
    say(f"- initial design: {n_init} evaluations in {t_init:.1f} s (compilation "
        f"included); peak RSS {peak_gb():.2f} GB")
    t0 = time.perf_counter()
    one()  # the first re-fit is due here
    jax.block_until_ready(run.state.joint.mu)
    first_refit = time.perf_counter() - t0
    pairs = int(np.sum(np.asarray(run.state.joint.count) > 0))
    say(f"- first re-fit ({pairs} observed pairs, fit on ≤ 256, rebuild on all; compilation "
        f"included): {first_refit:.1f} s; peak RSS {peak_gb():.2f} GB")
    # a second re-fit at the same sizes, compiled
    fit, size = cfg.posterior.slots(run.state, pairs)
    fit_at = jax.jit(cfg.posterior.fit_at, static_argnums=2)
    rebuild_at = jax.jit(cfg.posterior.rebuild_at, static_argnums=2, donate_argnums=0)
    fit_at(run.state, jax.random.key(1), fit)  # compiled here, timed below
    params, refit_s = timed(fit_at, run.state, jax.random.key(1), fit)
    (state, _), rebuild_s = timed(rebuild_at, run.state, params, size)  # donated
    run._loop = run.loop._replace(backend=state)
    refit_times.append(refit_s + rebuild_s)
    say(f"- re-fit compiled: AdamW fit {refit_s:.2f} s + rebuild {rebuild_s:.2f} s; peak RSS "
        f"{peak_gb():.2f} GB")
    for _ in range(args.steps):
        if run.done:
            break
        n = run.n_observed + 1
        t0 = time.perf_counter()
        one()
        jax.block_until_ready(run.prediction.mean)
        dt = time.perf_counter() - t0
        (compact_times if n % cfg.posterior.pending == 0 else step_times).append(dt)
    say(f"- {len(step_times) + len(compact_times)} round-robin steps: median step "
        f"{1e3 * np.median(step_times[5:]):.1f} ms, median step with compaction "
        f"{1e3 * np.median(compact_times[1:] or compact_times):.0f} ms; peak RSS "
        f"{peak_gb():.2f} GB")

    single = make_method("bayesame", refit_every=0)
    loop = single.start(reference, N)
    key = jax.random.key(0)
    available = np.ones(N, bool)
    times = []
    for n in range(1, 201):
        t0 = time.perf_counter()
        items, draws = single.select(loop, available, key, n, 1)
        item = int(items[0])
        draw = jax.tree_util.tree_map(lambda x: x[0], draws)
        loop, _, _ = single.step(loop, item, targets[0, item], draw, n, key)
        jax.block_until_ready(loop.prediction.mean)
        times.append(time.perf_counter() - t0)
        available[item] = False
    single_ms = 1e3 * np.median(times[10:])
    joint_ms = 1e3 * np.median(step_times[5:])
    say(f"- single-target BayesAME step on the same reference (B = {B}): {single_ms:.2f} ms; "
        f"joint step / single step = {joint_ms / single_ms:.1f} (J / B = {T})")
    say(f"- per evaluation, amortised: step {joint_ms:.1f} ms + compaction "
        f"{1e3 * np.median(compact_times or [0]) / cfg.posterior.pending:.1f} ms + re-fit "
        f"every F = 250 "
        f"evaluations {1e3 * refit_times[0] / 250:.1f} ms")
    say(f"- peak RSS of the whole run: {peak_gb():.2f} GB")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
