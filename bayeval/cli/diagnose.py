"""``bayeval diagnose``: a model's NUTS diagnostics on a real case."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from bayeval.cli.common import (
    DEFAULT_DATASET,
    FilterOption,
    MetricOption,
    ReferenceOption,
    RepeatedModels,
    RepeatedModelsOption,
    TaskOption,
    app,
    check_output,
    fail,
    json_text,
    out,
    setup_jax,
    working,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError
from bayeval.evaluation.sources import fresh_source


@app.command(cls=CheckedCommand)
def diagnose(
    dataset: Annotated[str | None, typer.Option(
        help=f"Bundled dataset (see `bayeval datasets`). Default: {DEFAULT_DATASET}.")
                       ] = None,
    reference: ReferenceOption = None,
    repeated_models: RepeatedModelsOption = RepeatedModels.error,
    task: TaskOption = None,
    metric: MetricOption = None,
    filter_name: FilterOption = None,
    target: Annotated[str | None, typer.Option(
        help="Model of the matrix to hold out as the target (default: one drawn with "
             "--seed).")] = None,
    model: Annotated[str, typer.Option(
        help="irt-2pl, irt-beta3, gp-bernoulli, gp-logit-normal or gp-gaussian.")
                     ] = "irt-2pl",
    coreset: Annotated[int, typer.Option(
        help="Items of the target observed (drawn at random with --seed).")] = 100,
    chains: Annotated[int, typer.Option(help="NUTS chains.")] = 4,
    warmup: Annotated[int, typer.Option(help="Warm-up draws per chain.")] = 500,
    draws: Annotated[int, typer.Option(help="Posterior draws per chain (after warm-up).")
                     ] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the target, coreset and NUTS.")] = 0,
    plot: Annotated[Path | None, typer.Option(
        help="Folder to write trace.png and rank.png (ArviZ) of the worst variables.")
                    ] = None,
    rows: Annotated[int, typer.Option(help="Variables shown, worst R-hat first.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead.")] = False,
) -> None:
    """Run a model's MCMC (NUTS) for a held-out target given a coreset of its items and
    print the diagnostics: R-hat, bulk and tail ESS per variable, divergences, energy BFMI,
    time, and the estimate against the true score."""
    try:
        check_output(plot, "--plot", folder=True)  # before the NUTS run, not after
        # a missing file: before JAX loads
        _, matrix = fresh_source(dataset, reference, task=task, metric=metric,
                                 filter_name=filter_name, repeated_models=repeated_models)
    except BayevalError as exc:
        raise fail(str(exc)) from None
    from bayeval.experiments.diagnose import (
        check_case,
        diagnose_case,
        diagnosis_summary,
        plot_diagnosis,
    )

    setup_jax()
    try:
        if target is None:
            target = str(np.random.default_rng(seed).choice(matrix.models))
        check_case(matrix, target, model, coreset)  # before the progress line starts
        with warnings.catch_warnings(), working(f"{model} on {matrix.name}") as say:
            warnings.simplefilter("ignore")
            result = diagnose_case(matrix, target, model, coreset, seed, chains, warmup,
                                   draws, progress=say)
    except BayevalError as exc:
        raise fail(str(exc)) from None
    paths = plot_diagnosis(result, plot) if plot is not None else []
    if as_json:
        print(json_text({**result.to_json(), "plots": [str(p) for p in paths]}, indent=2))
        return
    out.print(diagnosis_summary(result, matrix.name, chains, warmup, draws, rows))
    for path in paths:
        out.print(f"wrote {path}", highlight=False)
