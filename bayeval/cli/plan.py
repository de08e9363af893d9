"""``bayeval plan``: the documents a run will need and its time against a full run,
predicted from the reference alone before anything is evaluated
(:func:`bayeval.evaluation.plan.plan`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bayeval.cli.common import (
    EvaluatorKind,
    FilterOption,
    JsonOption,
    MetricOption,
    ReferenceOption,
    SeedOption,
    app,
    evaluation_errors,
    json_text,
    out,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.evaluation.settings import EvaluatorOptions, RunSettings, TaskSettings


@app.command(cls=CheckedCommand)
def plan(
    dataset: Annotated[str | None, typer.Option(help=TaskSettings.help("dataset"))] = None,
    reference: ReferenceOption = None,
    task: Annotated[str | None, typer.Option(help=TaskSettings.help("task"))] = None,
    metric: MetricOption = None,
    filter_name: FilterOption = None,
    model: Annotated[str | None, typer.Option(
        "--model", "--target", help="With the oracle evaluator: a model of the matrix, "
                                    "held out of the reference (default: one drawn with "
                                    "--seed); else the new model's name.")] = None,
    evaluator: Annotated[EvaluatorKind | None, typer.Option(
        help="The evaluator the run will use (its default batch: 32 with lm-eval, 8 "
             "with inspect, else 1).")] = None,
    method: Annotated[str | None, typer.Option(
        help="The run's method spec, as bayeval evaluate's --method (default: "
             "active-pai).")] = None,
    epsilon: Annotated[float | None, typer.Option(help=RunSettings.help("epsilon"))] = None,
    batch: Annotated[int | None, typer.Option(help=EvaluatorOptions.help("batch"))] = None,
    concurrency: Annotated[int, typer.Option(
        help=EvaluatorOptions.help("concurrency"))] = 1,
    seed: SeedOption = None,
    run: Annotated[Path | None, typer.Option(
        help="Plan the run of this run file (the options given beside it override "
             "the file's).")] = None,
    seconds_per_document: Annotated[float | None, typer.Option(
        help="What a full run pays per document (seconds), where known: turns the "
             "share into a time ratio.")] = None,
    seconds_per_call: Annotated[float | None, typer.Option(
        help="What each of bayeval's calls costs beyond its documents (seconds), where "
             "known.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Predict, from the reference alone, how many documents a run of one task will
    need at its epsilon (median and range over reference models standing in for the new
    model, each run through the same method, stop and batch), the share of the task, and
    the time against a full run; say where the saving is under 15% and what would save
    more. Nothing is evaluated; `bayeval evaluate` prints the same line first."""
    from bayeval.evaluation.plan import plan as make_plan

    options: dict[str, Any] = {
        "dataset": dataset, "reference": None if reference is None else str(reference),
        "tasks": task, "metric": metric, "filter": filter_name, "model": model,
        "evaluator": None if evaluator is None else evaluator.value, "method": method,
        "epsilon": epsilon, "batch": batch,
        "concurrency": None if concurrency == 1 else concurrency, "seed": seed}
    options = {k: v for k, v in options.items() if v is not None}
    with evaluation_errors():
        settings = None if run is None else RunSettings.from_file(run)
        made = make_plan(settings, seconds_per_document=seconds_per_document,
                         seconds_per_call=seconds_per_call, **options)
    out.print(json_text(made.to_dict()) if as_json else made.summary(), soft_wrap=True,
              markup=False, highlight=False)
