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
    field_table,
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
    try:
        if not subset.is_file():
            raise BayevalError(f"--subset {subset}: no such file")
        if not samples.is_dir():
            raise BayevalError(f"--samples {samples}: no such folder (the harness's "
                               "--output_path)")
        from bayeval.compression.estimate import read_subset_run, subset_estimate
        from bayeval.compression.subset import Subset

        frozen = Subset.load(subset)
        scores = read_subset_run(samples, frozen, model, metric, filter_name)
        result = subset_estimate(frozen, scores, level,
                                 str(group_mean or frozen.group_mean or "size"))
        if frozen.subtasks and group_mean:
            result["group_mean_from"] = "--group-mean"
        elif frozen.subtasks and frozen.group_mean:
            result["group_mean_from"] = "the group's aggregate_metric_list"
        elif frozen.subtasks:
            result["group_mean_from"] = "default (the subset records no aggregation of the group)"
    except BayevalError as exc:
        raise fail(str(exc)) from None
    _show(result, level, as_json)
    if harness_results is not None:  # after the estimate is shown
        try:
            _write_results(result, frozen, metric, filter_name, model or samples.name,
                           harness_results)
        except BayevalError as exc:
            raise fail(str(exc)) from None


def _show(result: dict, level: float, as_json: bool) -> None:
    """The estimate, as JSON or as a table."""
    if as_json:
        print(json_text(result))
        return
    table = field_table()
    table.add_row("benchmark", f"{result['benchmark']} ({result['n_items']} items)")
    table.add_row("subset", f"{result['method']}: {result['items']} items "
                            f"({result['items'] / result['n_items']:.1%})")
    table.add_row("estimate", "none" if result["estimate"] is None
                  else f"{result['estimate']:.4f}")
    if result["lower"] is not None:
        table.add_row(f"{level:.0%} interval", f"[{result['lower']:.4f}, "
                                               f"{result['upper']:.4f}]  (width "
                                               f"{result['upper'] - result['lower']:.4f})")
    table.add_row("interval", result["interval"])
    for row in result.get("subtasks", []):
        shown = ("no item in the subset" if row["estimate"] is None else
                 f"{row['estimate']:.4f}  [{row['lower']:.4f}, {row['upper']:.4f}]  "
                 f"({row['items']} of {row['n_items']} items)")
        table.add_row(f"  {row['task']}", shown)
    out.print(table)


def _write_results(result, frozen, metric, filter_name, model, path) -> None:
    """``--harness-results``: the subset's estimate in the harness's results layout."""
    if result["estimate"] is None:
        raise BayevalError(f"--harness-results: no group score to write ({result['interval']})")
    from bayeval.harness_results import TaskEstimate, harness_results, write_harness_results

    subtasks = tuple(TaskEstimate(r["task"], r["estimate"], r["lower"], r["upper"],
                                  r["items"], r["n_items"], result["level"])
                     for r in result.get("subtasks", []) if r["estimate"] is not None)
    estimate = TaskEstimate(frozen.task or frozen.benchmark, result["estimate"],
                            result["lower"], result["upper"], result["items"],
                            result["n_items"], result["level"], subtasks)
    info = {"method": f"subset ({result['method']})", "interval": result["interval"]}
    # a file that cannot be written is the command's one-line file error (bayeval.cli)
    write_harness_results(harness_results(estimate, metric or frozen.metric, filter_name,
                                          model, info), path)
