"""MCMC diagnostics of one real case: a model's NUTS posterior for a target model given a
coreset of its items (what ``bayeval diagnose`` runs).

Models: ``irt-2pl`` and ``irt-beta3`` (items calibrated on the reference models, the
target's ability by NUTS; :mod:`bayeval.inference.irt`) and ``gp-bernoulli``,
``gp-logit-normal``, ``gp-gaussian`` (the bucket GP under NUTS;
:mod:`bayeval.inference.bucket_mcmc`). The result holds the per-variable R-hat and bulk /
tail ESS, divergences, energy BFMI per chain, the problems found against
:data:`bayeval.inference.mcmc.THRESHOLDS`, the seconds NUTS took, and the performance
posterior with the target's true score. For the IRT models it also times the refit an
evaluation runs every 50 items (50 more items observed, warm start, compiled program
reused).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayeval.data.matrix import ScoreMatrix
from bayeval.errors import BayevalError
from bayeval.evaluation.summary import Summary

MODELS = ("irt-2pl", "irt-beta3", "gp-bernoulli", "gp-logit-normal", "gp-gaussian")


@dataclass
class Diagnosis:
    model: str
    target: str
    n_coreset: int
    n_items: int
    table: pd.DataFrame  # per variable: ess_bulk, ess_tail, r_hat
    divergences: int
    bfmi: np.ndarray
    problems: list[str]
    seconds: float  # NUTS (warm-up and sampling)
    total_seconds: float  # with calibration / bucketing
    estimate: float  # E[R | C]
    sd: float  # sqrt(Var(R | C))
    truth: float  # the target's full-benchmark mean
    refit_seconds: float | None = None  # a warm-started refit after 50 more items
    idata: Any = field(repr=False, default=None)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "target": self.target, "coreset": self.n_coreset,
                "items": self.n_items, "variables": len(self.table),
                "max_r_hat": float(self.table.r_hat.max()),
                "min_ess_bulk": float(self.table.ess_bulk.min()),
                "min_ess_tail": float(self.table.ess_tail.min()),
                "divergences": self.divergences, "bfmi": [float(b) for b in self.bfmi],
                "problems": self.problems, "nuts_seconds": self.seconds,
                "total_seconds": self.total_seconds, "refit_seconds": self.refit_seconds,
                "estimate": self.estimate,
                "sd": self.sd, "truth": self.truth}


def check_case(matrix: ScoreMatrix, target: str, model: str, coreset: int) -> np.ndarray:
    """Refuse, in one line and before any work, a case :func:`diagnose_case` cannot run;
    return the target's full score row."""
    if model not in MODELS:
        raise BayevalError(f"unknown model {model!r} (known: {', '.join(MODELS)})")
    if target not in set(matrix.models):
        raise BayevalError(f"unknown target {target!r}: not a model of {matrix.name}")
    row = matrix.scores[list(matrix.models).index(target)]
    if np.isnan(row).any():
        raise BayevalError(f"target {target!r} has missing scores in {matrix.name}: the "
                           "diagnosis needs its full row for the true score")
    if not 1 <= coreset <= matrix.n_items:
        raise BayevalError(f"--coreset must be in 1..{matrix.n_items}, got {coreset}")
    return row


def diagnose_case(matrix: ScoreMatrix, target: str, model: str = "irt-2pl",
                  coreset: int = 100, seed: int = 0, chains: int = 4, warmup: int = 500,
                  samples: int = 1000,
                  progress: Callable[[str], None] | None = None) -> Diagnosis:
    """Run ``model``'s NUTS for ``target`` (held out of ``matrix``) given ``coreset``
    of its items drawn at random with ``seed``; ``progress`` hears each phase."""
    from bayeval.inference import irt
    from bayeval.inference.bucket_mcmc import bucket_gp_nuts

    row = check_case(matrix, target, model, coreset)
    n_items = matrix.n_items
    reference = matrix.drop_models([target]).scores
    items = np.sort(np.random.default_rng(seed).permutation(n_items)[:coreset])
    nuts = {"num_chains": chains, "num_warmup": warmup, "num_samples": samples,
            "seed": seed, "warn": False}
    say = progress or (lambda text: None)
    run = f"NUTS, {chains} chains × ({warmup} warm-up + {samples} draws)"
    start = time.perf_counter()
    if model.startswith("irt"):
        kind = model.removeprefix("irt-")
        say(f"{model}: calibrating {n_items} items on {reference.shape[0]} reference models")
        items_fit = irt.calibrate(kind, reference)
        say(f"{model}: {run} of the ability given {coreset} items (compiling first)")
        mask = np.zeros((1, n_items), bool)
        mask[0, items] = True
        result = irt.fit_ability(kind, items_fit, np.where(mask, row[None], np.nan), mask,
                                 **nuts)
        draws = result.samples["ability"].reshape(-1, 1)
        mean, var = irt.estimate(kind, draws, items_fit, row[None], mask)
        estimate, sd = float(mean[0]), float(np.sqrt(var[0]))
        # the refit an evaluation runs every 50 items: same shapes, so compiled already,
        # warm-started from this fit's last draws
        more = np.random.default_rng(seed).permutation(np.flatnonzero(~mask[0]))[:50]
        mask_more = mask.copy()
        mask_more[0, more] = True
        say(f"{model}: the re-fit after 50 more items (warm start)")
        refit = irt.fit_ability(kind, items_fit, np.where(mask_more, row[None], np.nan),
                                mask_more, init=result, **{**nuts, "seed": seed + 1})
        refit_seconds = refit.seconds
    else:
        likelihood = model.removeprefix("gp-").replace("-", "_")
        say(f"{model}: {run} of the bucket abilities given {coreset} items (compiling "
            "first)")
        result, prediction = bucket_gp_nuts(reference, items, row[items], likelihood, **nuts)
        estimate, sd = float(prediction.mean), float(np.sqrt(prediction.var))
        refit_seconds = None
    return Diagnosis(model, target, coreset, n_items, result.diagnostics, result.divergences,
                     result.bfmi, result.problems, result.seconds,
                     time.perf_counter() - start, estimate, sd, float(row.mean()),
                     refit_seconds, result.idata)


def plot_diagnosis(diagnosis: Diagnosis, folder: Path, max_variables: int = 4) -> list[Path]:
    """``trace.png`` and ``rank.png`` (ArviZ) of the worst variables by R-hat."""
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    worst = diagnosis.table.sort_values("r_hat", ascending=False).index[:max_variables]
    names = sorted({str(v).split("[")[0] for v in worst})
    coords = {}
    for name in names:
        dims = [d for d in diagnosis.idata.posterior[name].dims if d not in ("chain", "draw")]
        if dims:
            picks = [int(str(v).split("[")[1].rstrip("]").split(",")[0])
                     for v in worst if str(v).startswith(name + "[")]
            coords[dims[0]] = picks
    paths = []
    for kind, plot in (("trace", az.plot_trace), ("rank", az.plot_rank)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ArviZ's own deprecation notices
            axes = plot(diagnosis.idata, var_names=names, coords=coords or None)
        fig = np.asarray(axes).ravel()[0].figure
        fig.suptitle(f"{diagnosis.model}, {diagnosis.target}: {kind}")
        fig.tight_layout()
        path = folder / f"{kind}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


__all__ = ["MODELS", "Diagnosis", "diagnose_case", "plot_diagnosis"]


def diagnosis_summary(d: Diagnosis, reference: str, chains: int, warmup: int, draws: int,
                      rows: int = 10) -> Summary:
    """What ``bayeval diagnose`` shows (a :class:`~bayeval.evaluation.summary.Summary`):
    the ``rows`` variables of worst R-hat with their ESS, then divergences, BFMI, times,
    the estimate against the true score and the verdict."""
    worst = d.table.sort_values("r_hat", ascending=False)
    lines = []
    if len(worst) > rows:
        lines.append(f"({len(worst) - rows} more variables; all R-hat ≤ "
                     f"{worst.r_hat.max():.4f}, bulk ESS ≥ {worst.ess_bulk.min():.0f}, "
                     f"tail ESS ≥ {worst.ess_tail.min():.0f})")
    lines.append(f"divergences: {d.divergences} · energy BFMI per chain: "
                 + ", ".join(f"{b:.2f}" for b in d.bfmi))
    lines.append(f"NUTS: {chains} chains × ({warmup} warm-up + {draws} draws) in "
                 f"{d.seconds:.1f} s with compilation ({d.total_seconds:.1f} s in all)")
    if d.refit_seconds is not None:
        lines.append(f"refit after 50 more items (warm start, compiled): "
                     f"{d.refit_seconds:.2f} s")
    lines.append(f"estimate {d.estimate:.4f} ± {d.sd:.4f} (sd), true score {d.truth:.4f}")
    lines.append("; ".join(d.problems) if d.problems else
                 "all diagnostics within thresholds")
    return Summary([(str(name), f"{r.r_hat:.4f}", f"{r.ess_bulk:.0f}", f"{r.ess_tail:.0f}")
                    for name, r in worst.head(rows).iterrows()],
                   ("variable", "R-hat", "bulk ESS", "tail ESS"),
                   f"{d.model} on {reference}, target {d.target}, {d.n_coreset} of "
                   f"{d.n_items} items observed", lines)
