"""``bayeval estimate``: a model's score and interval from its run on a frozen subset
(:mod:`bayeval.compression.estimate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bayeval.cli.common import (
    GroupMean,
    HarnessResultsOption,
    app,
    fail,
    json_text,
    out,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError


@app.command(cls=CheckedCommand)
def estimate(
    subset: Annotated[Path, typer.Option(
        help="The subset file `bayeval compress` wrote.")],
    samples: Annotated[Path, typer.Option(
        help="The --output_path of the harness run on the subset (lm_eval … --samples "
             "FILE --log_samples).")],
    model: Annotated[str | None, typer.Option(
        help="The model's folder under --samples when it holds several models' runs.")
    ] = None,
    metric: Annotated[str | None, typer.Option(
        help="The per-sample metric of the --samples run to read (default: the one the "
             "subset was built on, else the log's first, e.g. acc).")] = None,
    filter_name: Annotated[str | None, typer.Option(
        "--filter", help="The harness filter to read when the --samples run logs several "
                         "(e.g. strict-match).")] = None,
    level: Annotated[float, typer.Option(help="Interval level.")] = 0.95,
    group_mean: Annotated[GroupMean | None, typer.Option(
        help="For a harness group: its score as 'size' (the mean over all its documents, "
             "weight_by_size: true) or 'equal' (the unweighted mean of its subtasks); "
             "default: as the group's harness config says, recorded by compress, else "
             "'size'. Each subtask's estimate is given either way.")] = None,
    harness_results: HarnessResultsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")
                       ] = False,
) -> None:
    """Estimate a model's full-benchmark score from its lm-evaluation-harness run on a
    subset: the subset's mean (uniform subsets: random, mince, bestrand) with a Wilson–FPC
    interval, or its weighted mean (stratified, kmeans) with an empirical interval from
    the models held out when the subset was built."""
    from bayeval.evaluation.subsets import estimate_from_subset, write_subset_results
    from bayeval.evaluation.summary import subset_estimate_summary

    try:
        result = estimate_from_subset(subset, samples, model, metric, filter_name, level,
                                      None if group_mean is None else group_mean.value)
    except BayevalError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json_text(result))
    else:
        out.print(subset_estimate_summary(result))
    if harness_results is not None:  # after the estimate is shown
        try:
            write_subset_results(result, subset, harness_results, model or samples.name,
                                 metric, filter_name)
        except BayevalError as exc:
            raise fail(str(exc)) from None
