"""``bayeval select``: find the best of several models on a budget of model–item
evaluations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bayeval.cli.common import (
    FilterOption,
    JsonOption,
    MetricOption,
    PairEvaluatorKind,
    QuietOption,
    ReferenceOption,
    RepeatedModels,
    RepeatedModelsOption,
    RetriesOption,
    SeedOption,
    TaskOption,
    TimeoutOption,
    app,
    err,
    evaluation_errors,
    json_text,
    out,
)
from bayeval.cli.numbers import CheckedCommand


@app.command(cls=CheckedCommand)
def select(
    dataset: Annotated[str | None, typer.Option(
        help="Bundled dataset whose models and items to use (see `bayeval datasets`); with "
             "the oracle its scores answer. Default: arc_challenge.")] = None,
    reference: ReferenceOption = None,
    repeated_models: RepeatedModelsOption = RepeatedModels.error,
    task: TaskOption = None,
    metric: MetricOption = None,
    filter_name: FilterOption = None,
    models: Annotated[str | None, typer.Option(
        help="Comma-separated candidate models (default: every model of the matrix).")
    ] = None,
    items: Annotated[Path | None, typer.Option(
        help="File of item ids, one per line (live runs; default: the matrix's items).")
    ] = None,
    budget: Annotated[str, typer.Option(
        help="Model–item evaluations allowed: a percentage of all pairs (12%) or a count.")
    ] = "12%",
    evaluator: Annotated[PairEvaluatorKind | None, typer.Option(
        help="oracle: simulate with the matrix's scores; command: run --command for each "
             "(model, item).")] = None,
    command: Annotated[str | None, typer.Option(
        help="Shell command that evaluates one model on one item and prints the score "
             "(0..1) as its last line; {model} and {item} (unquoted) become the ids, passed "
             "as single arguments.")] = None,
    timeout: TimeoutOption = 600.0,
    retries: RetriesOption = 1,
    seed: SeedOption = None,
    journal: Annotated[Path | None, typer.Option(
        help="Append every result to this JSON-lines journal (fsync'd). Default: none for "
             "the oracle, bayeval-select-YYYYMMDD-HHMMSS.jsonl for a command.")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the selection recorded in --journal.")] = False,
    history: Annotated[str | None, typer.Option(
        help="Scores of earlier models on the same items (a bundled dataset name or a "
             "score-matrix file); rows named like a candidate are left out. By default "
             "the items where the strongest of them disagree are drawn more often "
             "(HW-SySRs, docs/methods.md §10); see --history-method.")
    ] = None,
    history_method: Annotated[str | None, typer.Option(
        help="How --history is used: 'weights' (default: the weighted item design, "
             "HW-SySRs), 'factor' (a factor model fitted on them as control variate, "
             "HI-SySRs; cross-validates for up to minutes) or 'both'.")] = None,
    top: Annotated[int, typer.Option(help="Rows of the ranking to print.")] = 10,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Find the best of several models with a budget of model–item evaluations
    (synchronised successive rejects, SySRs; with --history, HW-SySRs or HI-SySRs, which
    also read the scores of earlier models).

    With no options: simulate on the bundled ARC-Challenge matrix with 12% of its pairs,
    and print the ranking, the evaluations used and whether the true best was found.
    """
    from bayeval.evaluation.progress import progress_watch
    from bayeval.evaluation.select import run_selection

    with evaluation_errors():
        result = run_selection(
            dataset, reference, models, items, budget,
            None if evaluator is None else evaluator.value, command, timeout, retries, seed,
            journal, resume, history, (task, metric, filter_name), history_method,
            repeated_models.value, watch=progress_watch(False if quiet else None, console=err),
            say=None if quiet else lambda text: err.print(text, highlight=False))
    from bayeval.evaluation.summary import selection_summary

    if as_json:
        print(json_text(result))
    else:
        out.print(selection_summary(result, top))
