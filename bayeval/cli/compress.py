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
    check_output,
    comma_list,
    fail,
    field_table,
    json_text,
    out,
    working,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError
from bayeval.evaluation.sources import fresh_source


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
    try:
        result = _compress(method, dataset, reference, retention, size, probes, pool,
                           candidates, calibration, step, tau, categories, holdout, seed,
                           subset_file, export_samples, task, metric, filter_name,
                           include_path, repeated_models)
    except (BayevalError, ValueError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json_text(result))
        return
    table = field_table()
    table.add_row("benchmark", f"{result['benchmark']} ({result['n_items']} items)")
    table.add_row("method", f"{result['method']} {result['parameters']}")
    table.add_row("subset", f"{result['size']} items ({result['size'] / result['n_items']:.1%})")
    drift = result["drift"]
    over = (f"over {drift['held_out_models']} models" if drift["held_out_models"] else
            f"over the {drift['in_sample_models']} models that built it (none held out: "
            "in-sample, not a measure of drift)")
    table.add_row("drift on held-out" if drift["held_out_models"] else "drift",
                  f"max {100 * drift['held_out_max']:.2f} pp, mean "
                  f"{100 * drift['held_out_mean']:.2f} pp {over}")
    table.add_row("written", result["file"] + (f", {result['samples_file']}"
                                               if result.get("samples_file") else ""))
    out.print(table)


def _names(option: str | None) -> list[str] | None:
    return None if option is None else comma_list(option)


def _compress(method, dataset, reference, retention, size, probes, pool, candidates,
              calibration, step, tau, categories, holdout, seed, subset_file, export_samples,
              task, metric, filter_name, include_path, repeated_models="error"):
    check_output(subset_file, "--out")  # both outputs checked before any work
    check_output(export_samples, "--export-samples")

    _, matrix = fresh_source(dataset or ("arc_challenge" if reference is None else None),
                             reference, task=task, metric=metric, filter_name=filter_name,
                             repeated_models=repeated_models)
    from bayeval.compression.build import build_subset, read_categories
    from bayeval.compression.subset import export_lm_eval_samples, group_aggregation
    from bayeval.data.lm_eval import harness_task

    if export_samples is not None and not (task or harness_task(matrix)):
        raise BayevalError(f"--export-samples: {matrix.name} records no lm-evaluation-harness "
                           "task; give the harness's task name (--task NAME)")

    with working(f"{method.value}: choosing a subset of {matrix.name} "
                 f"({matrix.n_models} models × {matrix.n_items} items)"):
        subset = build_subset(
            matrix, method.value, retention=retention, size=size, probes=_names(probes),
            pool=pool, candidates=candidates, calibration=_names(calibration), step=step,
            tau=tau, categories=None if categories is None else read_categories(categories),
            holdout=holdout, seed=seed, task=task)
    if subset.subtasks and subset.task:  # a group: how the harness combines its subtasks
        subset.group_mean = group_aggregation(subset.task, subset.metric, include_path)
    if export_samples is not None:
        # its doc indices and task key are checked before anything is written
        export_lm_eval_samples(subset, include_path=include_path)
    subset.save(subset_file)
    result = {**subset.to_json(), "file": str(subset_file)}
    if export_samples is not None:
        export_lm_eval_samples(subset, export_samples, check=False)
        result["samples_file"] = str(export_samples)
    return result
