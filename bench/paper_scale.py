"""FAQ's paper scale: a synthetic 2.2K-model × 12K-item matrix drawn from a fitted factor
model, and the time per run-round and peak memory of FAQ, active-pai and BayesAME's
engine on it.

Usage: python bench/paper_scale.py [--models 2200] [--items 12000] [--runs 32]
                                   [--faq-rounds 1200] [--steps 100] [--bayesame-runs 2]
                                   [--engines faq,active-pai,bayesame] [--out FILE.md]

The matrix: the logistic factor model (k = 8, λ = 0.1) fitted on IFEval+MuSR; model
factors drawn from the Gaussian of its fitted model rows, item factors from the Gaussian
of its fitted item rows (seed 0), scores Bernoulli(σ(u·v)). The last ``--runs`` models are
the targets, the rest the references. Each engine runs in a fresh process (so that its
peak resident memory is its own): the matrix is loaded, the engine's start (fit,
buckets, prior) timed, then one call that compiles and one steady call, each over the
same runs. Per engine: start seconds, first-call and steady seconds, µs per run-step, and
the process's peak resident set (``ru_maxrss``) against the matrix's own size.

* FAQ: the factor model re-fitted on the references would take 2000 AdamW epochs over
  2.2K × 12K entries; the bench times ``--fit-epochs`` of them and reports the per-epoch
  cost, then runs :func:`bayeval.methods.faq.simulate_hybrid` from the generating item
  factors and the Gaussian of the reference models' factors for ``--faq-rounds`` draws
  (10% of the items).
* active-pai: :func:`bayeval.loop.simulate.simulate` with the default ``active-pai``
  (calibrated-difficulty predictor) for ``--steps`` items.
* BayesAME: :func:`bayeval.loop.simulate.simulate` with ``bayesame`` (exact bucket GP,
  information gain) for ``--steps`` items on ``--bayesame-runs`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def make_matrix(models: int, items: int, path: Path) -> dict:
    """Draw the synthetic matrix (module docstring) into ``path`` (npz)."""
    import numpy as np

    from bayeval.data import load_dataset
    from bayeval.models.factor import fit_factors

    start = time.perf_counter()
    source = load_dataset("ifeval+musr")
    fit = fit_factors(source.scores, 8, 0.1)
    U, V = np.asarray(fit.U), np.asarray(fit.V)
    rng = np.random.default_rng(0)
    u = rng.multivariate_normal(U.mean(0), np.cov(U, rowvar=False), size=models)
    v = rng.multivariate_normal(V.mean(0), np.cov(V, rowvar=False), size=items)
    scores = np.empty((models, items))
    for lo in range(0, models, 256):  # in blocks: the logits of all would double the peak
        logits = u[lo:lo + 256] @ v.T
        scores[lo:lo + 256] = rng.random(logits.shape) < 1.0 / (1.0 + np.exp(-logits))
    np.savez(path, scores=scores, u=u, v=v)
    return {"seconds": time.perf_counter() - start, "mean": float(scores.mean()),
            "bytes": scores.nbytes}


def _timed(call):
    import jax

    start = time.perf_counter()
    out = call()
    jax.block_until_ready(jax.tree_util.tree_leaves(out))
    return time.perf_counter() - start, out


def child(opts) -> dict:
    import jax
    import numpy as np

    from bayeval.precision import enable_float64

    enable_float64()
    with np.load(opts.matrix) as saved:
        scores, u, v = saved["scores"], saved["u"], saved["v"]
    reference, targets = scores[:-opts.runs], scores[-opts.runs:]
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    row = {"engine": opts.child, "devices": len(jax.devices())}
    if opts.child == "faq":
        from bayeval.methods.faq import HybridParams, simulate_hybrid
        from bayeval.models.factor import factor_prior, fit_factors

        row["fit_epoch_s"] = _timed(lambda: fit_factors(
            reference, 8, 0.1, epochs=opts.fit_epochs).U)[0] / opts.fit_epochs
        mean0, cov0 = (np.asarray(x) for x in factor_prior(u[:-opts.runs]))
        runs = np.arange(opts.runs)

        def call():
            out = simulate_hybrid(v, mean0, cov0, targets, runs, runs,
                                  HybridParams(1.0, 0.0, 0.0, 0.05), opts.faq_rounds,
                                  chunk=opts.runs, devices=1)
            return out.theta

        steps, n_runs = opts.faq_rounds, opts.runs
        row["start_s"] = 0.0
    else:
        from bayeval.loop.simulate import simulate
        from bayeval.methods import make_method

        n_runs = opts.runs if opts.child == "active-pai" else opts.bayesame_runs
        method = make_method(opts.child)
        rows = targets[:n_runs]
        steps = opts.steps
        row["start_s"] = _timed(lambda: method.start(reference, scores.shape[1], 1))[0]
        print(f"start done in {row['start_s']:.0f} s", file=sys.stderr, flush=True)

        def call():
            return simulate(method, reference, rows, list(range(n_runs)), n_steps=steps,
                            devices=1).estimate

    row["first_s"], _ = _timed(call)
    print(f"first call done in {row['first_s']:.0f} s", file=sys.stderr, flush=True)
    row["steady_s"], out = _timed(call)
    row.update(runs=n_runs, steps=steps,
               us_per_run_step=1e6 * row["steady_s"] / (n_runs * steps),
               peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
               loaded_rss=base_rss, finite=bool(np.isfinite(np.asarray(out)).all()))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--models", type=int, default=2200)
    parser.add_argument("--items", type=int, default=12000)
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--faq-rounds", type=int, default=1200)
    parser.add_argument("--fit-epochs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--bayesame-runs", type=int, default=2)
    parser.add_argument("--engines", default="faq,active-pai,bayesame")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="Seconds an engine may take before it is reported as not done.")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--matrix", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(child(opts)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "matrix.npz"
        made = make_matrix(opts.models, opts.items, path)
        print(f"matrix {opts.models} × {opts.items} ({made['bytes'] / 2**20:.0f} MiB, mean "
              f"{made['mean']:.3f}) drawn in {made['seconds']:.0f} s", flush=True)
        rows = []
        for engine in [e.strip() for e in opts.engines.split(",") if e.strip()]:
            args = [sys.executable, str(HERE), "--child", engine, "--matrix", str(path)]
            for flag in ("runs", "faq_rounds", "fit_epochs", "steps", "bayesame_runs"):
                args += [f"--{flag.replace('_', '-')}", str(getattr(opts, flag))]
            start = time.perf_counter()
            try:
                done = subprocess.run(args, capture_output=True, text=True,
                                      timeout=opts.timeout, env=os.environ)
            except subprocess.TimeoutExpired as exc:
                said = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr
                phase = ", ".join((said or "").strip().splitlines()[-2:]) or "start not done"
                rows.append({"engine": engine,
                             "error": f"not done in {opts.timeout:.0f} s ({phase})"})
                print(f"{engine}: not done in {opts.timeout:.0f} s", flush=True)
                continue
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["?"])[-1]
                rows.append({"engine": engine, "error": f"exit {done.returncode}: {last}"})
            else:
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"{engine}: {time.perf_counter() - start:.0f} s: {rows[-1]}", flush=True)
    mib = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
    lines = [f"Synthetic {opts.models} × {opts.items} matrix ({mib(made['bytes'])} MiB of "
             f"float64), {os.cpu_count()} cores", "",
             "| engine | runs × steps | start (s) | first call (s) | steady (s) | "
             "µs per run-step | peak RSS (MiB) | RSS after loading (MiB) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['engine']} | — | — | — | — | — | — | {r['error']} |")
            continue
        lines.append(f"| {r['engine']} | {r['runs']} × {r['steps']} | {r['start_s']:.1f} | "
                     f"{r['first_s']:.1f} | {r['steady_s']:.1f} | {r['us_per_run_step']:.0f} | "
                     f"{mib(r['peak_rss'])} | {mib(r['loaded_rss'])} |")
    for r in rows:
        if "fit_epoch_s" in r:
            lines += ["", f"FAQ's factor fit on the references: {r['fit_epoch_s']:.2f} s per "
                          f"AdamW epoch, so the paper's 2000 epochs ≈ "
                          f"{2000 * r['fit_epoch_s'] / 60:.0f} min (not run)."]
    from bayeval.experiments.tables import emit_report
    emit_report(lines, opts.out)


if __name__ == "__main__":
    main()
