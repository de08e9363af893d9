"""``bayeval compress``: shrink a benchmark to a fixed subset
(:func:`bayeval.compression.build.build_subset`) and write it."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bayeval.cli.common import (
    FilterOption,
    MetricOption,
    ReferenceOption,
    RepeatedModels,
    RepeatedModelsOption,
    app,
    comma_list,
    fail,
    json_text,
    out,
    working,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError


class CompressionMethod(StrEnum):
    bestrand = "bestrand"
    mince = "mince"
    random = "random"
    kmeans = "kmeans"
    stratified = "stratified"


@app.command(cls=CheckedCommand)
def compress(
    method: Annotated[CompressionMethod, typer.Option(
        help="bestrand: best of C random candidates by probe imbalance; mince: size by "
             "Monte Carlo drift of calibration models, then freeze a random subset; "
             "random, kmeans, stratified: baselines.")] = CompressionMethod.bestrand,
    dataset: Annotated[str | None, typer.Option(
        help="Bundled dataset (see `bayeval datasets`). Default: arc_challenge.")] = None,
    reference: ReferenceOption = None,
    repeated_models: RepeatedModelsOption = RepeatedModels.error,
    retention: Annotated[float | None, typer.Option(
        help="Subset size as a fraction of the items (default 0.1; not for mince).")] = None,
    size: Annotated[int | None, typer.Option(help="Subset size in items (not for mince).")
                    ] = None,
    probes: Annotated[str | None, typer.Option(
        help="bestrand: comma-separated probe models (default: 5 drawn from the "
             "construction models).")] = None,
    pool: Annotated[float, typer.Option(help="bestrand: pool size as a multiple of the "
                                             "subset size (capped at all items).")] = 4.0,
    candidates: Annotated[int, typer.Option(help="bestrand: candidate subsets.")] = 1000,
    calibration: Annotated[str | None, typer.Option(
        help="mince: comma-separated calibration models (default: 7 drawn from the "
             "construction models).")] = None,
    step: Annotated[int, typer.Option(help="mince: step between candidate sizes.")] = 50,
    tau: Annotated[float, typer.Option(help="mince: marginal-gain threshold (0.01 = 1 pp).")
                   ] = 0.01,
    categories: Annotated[Path | None, typer.Option(
        help="stratified: CSV of item,category.")] = None,
    holdout: Annotated[float, typer.Option(
        help="Fraction of the matrix's models kept out of construction to measure the "
             "subset's drift on.")] = 0.5,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    subset_file: Annotated[Path, typer.Option("--out", help="Subset file to write (JSON).")
                           ] = Path("subset.json"),
    export_samples: Annotated[Path | None, typer.Option(
        help="Also write the lm-evaluation-harness --samples file {task: [doc indices]}.")
    ] = None,
    task: Annotated[str | None, typer.Option(
        help="lm-evaluation-harness task: the one to read with --reference lm-eval:DIR, "
             "and the key of the --samples file (default: the matrix's harness task, e.g. "
             "leaderboard_ifeval for the bundled ifeval). Checked against the harness's "
             "task list when it is installed.")] = None,
    metric: MetricOption = None,
    filter_name: FilterOption = None,
    include_path: Annotated[Path | None, typer.Option(
        help="Folder of local harness task YAMLs (as lm_eval --include_path), for the "
             "task check of --export-samples.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")
                       ] = False,
) -> None:
    """Shrink a benchmark to a fixed subset (BestRand: probe-guided random compression;
    MINCE: Monte Carlo subset sizing), write it as a subset file, and report its drift on
    models not used to build it."""
    from bayeval.evaluation.subsets import compress as build
    from bayeval.evaluation.summary import subset_summary

    try:
        result = build(
            method.value, dataset, reference, retention=retention, size=size,
            probes=None if probes is None else comma_list(probes), pool=pool,
            candidates=candidates,
            calibration=None if calibration is None else comma_list(calibration),
            step=step, tau=tau, categories=categories, holdout=holdout, seed=seed,
            out=subset_file, export_samples=export_samples, task=task, metric=metric,
            filter_name=filter_name, include_path=include_path,
            repeated_models=repeated_models.value, working=working)
    except (BayevalError, ValueError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json_text(result))
    else:
        out.print(subset_summary(result))
