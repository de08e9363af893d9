"""``bayeval evaluate``: estimate a model's benchmark score from as few items as needed,
for one target or several, one task or a suite; the options parsed into
:class:`~bayeval.evaluation.RunSettings`, the run made by :func:`bayeval.evaluate` (or
:func:`bayeval.resume`), the result printed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from bayeval.cli.common import (
    CallSizing,
    EvaluatorKind,
    FilterOption,
    GroupMean,
    HarnessResultsOption,
    JsonOption,
    LmEvalMode,
    MetricOption,
    QuietOption,
    ReferenceOption,
    RepeatedModels,
    RepeatedModelsOption,
    RestWhole,
    RetriesOption,
    SeedOption,
    TimeoutOption,
    app,
    err,
    evaluation_errors,
    json_text,
    out,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError
from bayeval.evaluation.settings import EvaluatorOptions, RunSettings, TaskSettings


@app.command(cls=CheckedCommand)
def evaluate(
    ctx: typer.Context,
    dataset: Annotated[str | None, typer.Option(help=TaskSettings.help("dataset"))] = None,
    reference: ReferenceOption = None,
    repeated_models: RepeatedModelsOption = RepeatedModels.error,
    tasks: Annotated[list[str] | None, typer.Option(
        "--task", metavar="NAME",
        help=TaskSettings.help("task") + " Given more than once: a suite of those tasks, "
             "read from the same --reference, with equal weights (see --suite).")] = None,
    metric: MetricOption = None,
    filter_name: FilterOption = None,
    model: Annotated[str | None, typer.Option(
        "--model", "--target", help=RunSettings.help("model"))] = None,
    models: Annotated[str | None, typer.Option(
        "--models", "--targets", help=RunSettings.help("models"))] = None,
    evaluator: Annotated[EvaluatorKind | None, typer.Option(
        help=EvaluatorOptions.help("kind"))] = None,
    inspect_task: Annotated[str | None, typer.Option(
        help=EvaluatorOptions.help("inspect_task"))] = None,
    lm_eval_args: Annotated[str | None, typer.Option(
        help=EvaluatorOptions.help("lm_eval_args"))] = None,
    lm_eval_mode: Annotated[LmEvalMode, typer.Option(
        help=EvaluatorOptions.help("lm_eval_mode"))] = LmEvalMode.in_process,
    output_path: Annotated[Path | None, typer.Option(
        help=EvaluatorOptions.help("output_path"))] = None,
    batch: Annotated[int | None, typer.Option(help=EvaluatorOptions.help("batch"))] = None,
    concurrency: Annotated[int, typer.Option(help=EvaluatorOptions.help("concurrency"))] = 1,
    calls: Annotated[CallSizing, typer.Option(
        help=EvaluatorOptions.help("calls"))] = CallSizing.taper,
    command: Annotated[str | None, typer.Option(help=EvaluatorOptions.help("command"))] = None,
    timeout: TimeoutOption = 600.0,
    retries: RetriesOption = 1,
    method: Annotated[str | None, typer.Option(
        help=RunSettings.help("method"))] = None,
    epsilon: Annotated[float | None, typer.Option(
        help=RunSettings.help("epsilon"))] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", "--max-items", help=RunSettings.help("limit"))] = None,
    seed: SeedOption = None,
    journal: Annotated[Path | None, typer.Option(help=RunSettings.help("journal"))] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run recorded in --journal (its settings are "
                         "read from it). --limit, --batch and --concurrency may change; "
                         "so may --command and --lm-eval-args, to correct the evaluator "
                         "(you vouch it is the same model: the journal keeps what changed "
                         "and when).")] = False,
    harness_results: HarnessResultsOption = None,
    inspect_log: Annotated[Path | None, typer.Option(
        help="With --evaluator inspect: also write the estimate as an Inspect eval log "
             "that `inspect view` opens (the target's scored samples, and as the scorer's "
             "metrics the estimate, its stderr, the interval): this .eval file, or one "
             "named by date in this folder (default: none).")] = None,
    suite: Annotated[Path | None, typer.Option(
        help="A suite file (TOML, or YAML with PyYAML) naming several tasks, each with "
             "its reference and weight: one run estimates every task and their weighted "
             "average, the budget going where it narrows the average most per unit of "
             "cost, and stops when the average's interval is at most --epsilon wide "
             "(docs/methods.md §9 'Suites'). The file's [[tasks]] take dataset or "
             "reference (with task, metric, filter), weight, cost, target, command, "
             "inspect_task; top-level epsilon, task_epsilon, method (README 'Suites and "
             "harness groups'). --journal is then a folder, --limit a budget over all "
             "tasks.")] = None,
    subtasks: Annotated[bool, typer.Option(
        "--subtasks", help=RunSettings.help("subtasks"))] = False,
    group_mean: Annotated[GroupMean | None, typer.Option(
        help=RunSettings.help("group_mean"))] = None,
    plan: Annotated[bool | None, typer.Option(
        "--plan/--no-plan", help=RunSettings.help("plan"))] = None,
    rest_whole: Annotated[RestWhole | None, typer.Option(
        help=RunSettings.help("rest_whole"))] = None,
    run: Annotated[Path | None, typer.Option(
        help="Run the run file FILE (TOML: the settings --save-run writes; a suite file "
             "with the run's keys and an [evaluator] table, documented in "
             "bayeval/evaluation/run_file.py); any option given beside it overrides the "
             "file's, e.g. --journal NEW to run it again under a new journal.")] = None,
    save_run: Annotated[Path | None, typer.Option(
        help="Write the run's settings to this run file (TOML) before it starts; "
             "`bayeval evaluate --run FILE` runs it again, on the same seed.")] = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Estimate a model's benchmark score from as few items as needed.

    With no options: simulate an active evaluation of one held-out model of the bundled
    IFEval matrix, and print the estimate, its 95% interval, the true score and how many
    items were used.
    """
    given = {"--dataset": dataset, "--reference": reference, "--task": tasks,
             "--metric": metric, "--filter": filter_name, "--model": model,
             "--models": models, "--evaluator": evaluator, "--command": command,
             "--method": method, "--epsilon": epsilon, "--seed": seed, "--suite": suite,
             "--inspect-task": inspect_task, "--subtasks": subtasks or None,
             "--group-mean": group_mean, "--plan": plan,
             "--rest-whole": None if rest_whole is None else rest_whole.value}
    with evaluation_errors():
        if resume:
            result = _resume(journal, given, run, save_run, limit, batch, concurrency,
                             lm_eval_args, quiet)
        else:
            from bayeval.evaluation.settings import EvaluatorOptions

            live = EvaluatorOptions(
                (evaluator or EvaluatorKind.oracle).value, command, timeout, retries,
                lm_eval_args, lm_eval_mode.value, inspect_task,
                None if output_path is None else str(output_path), batch, concurrency,
                calls.value)
            settings = (_settings(given, repeated_models, limit, journal, live)
                        if run is None else _run_file(ctx, run))
            _check_outputs(settings, inspect_log, harness_results)
            if save_run is not None:
                _save_run(settings, save_run)
            from bayeval.evaluation import evaluate as run_evaluation
            from bayeval.evaluation.progress import progress_watch

            shown = False if quiet else None
            result = run_evaluation(settings, progress=shown, watch=progress_watch(
                shown, console=err)).to_dict()
        if inspect_log is not None and "tasks" not in result:
            from bayeval.evaluation.single import write_inspect_log

            result["inspect_log"] = str(write_inspect_log(result, inspect_log))
        _show(result, as_json)
        if harness_results is not None:  # after the estimate is shown: a file that
            from bayeval.evaluation.results import write_estimate_results

            write_estimate_results(result, harness_results)  # fails loses nothing


def _resume(journal: Path | None, given: dict[str, Any], run: Path | None,
            save_run: Path | None, limit: int | None, batch: int | None,
            concurrency: int, lm_eval_args: str | None, quiet: bool) -> dict[str, Any]:
    """``--resume``: the journal's run continued; the options it fixes refused (a
    corrected --command or --lm-eval-args is taken, and kept in the journal)."""
    from bayeval.evaluation import resume
    from bayeval.evaluation.progress import progress_watch
    from bayeval.evaluation.sources import refuse_given

    if journal is None:
        raise BayevalError("--resume needs --journal PATH (the journal to continue)")
    command = given.pop("--command")
    refuse_given(journal, {**given, "--run": run, "--save-run": save_run})
    return resume(journal, limit=limit, batch=batch, concurrency=concurrency,
                  lm_eval_args=lm_eval_args, command=command, progress=False if quiet else None,
                  watch=progress_watch(False if quiet else None, console=err)).to_dict()


def _settings(given: dict[str, Any], repeated: RepeatedModels, limit: int | None,
              journal: Path | None, live) -> Any:
    """The run the options describe: one task, several --task read from one
    --reference, a suite file, or a harness group's subtasks."""
    from bayeval.evaluation.run_file import read_suite_file
    from bayeval.evaluation.settings import RunSettings, TaskSettings

    names = given["--task"] or []
    harness = {"task": names[0] if names else None, "metric": given["--metric"],
               "filter": given["--filter"]}
    one = TaskSettings(given["--dataset"], given["--reference"], **harness,
                       repeated_models=repeated.value)
    spec: dict[str, Any] = {"tasks": (one,)}
    if len(names) > 1:
        if given["--suite"] is not None:
            raise BayevalError("give --suite FILE or several --task, not both")
        spec = {"name": "+".join(names), "tasks": TaskSettings.from_logs(
            given["--reference"], names, given["--metric"], given["--filter"])}
    elif given["--suite"] is not None:
        if given["--subtasks"]:
            raise BayevalError("give --suite FILE or --subtasks, not both")
        file = read_suite_file(given["--suite"])
        spec = {k: file[k] for k in ("name", "epsilon", "task_epsilon", "method")
                if k in file}
        spec["tasks"] = tuple(TaskSettings(**{"task": harness["task"], **t})
                              for t in file["tasks"])
    for key in ("method", "epsilon"):  # the options over the file's
        if given[f"--{key}"] is not None:
            spec[key] = given[f"--{key}"]
    return RunSettings(**spec, evaluator=live, model=given["--model"],
                       models=given["--models"], limit=limit,
                       seed=given["--seed"], journal=journal,
                       subtasks=bool(given["--subtasks"]),
                       group_mean=None if given["--group-mean"] is None
                       else given["--group-mean"].value, plan=given["--plan"],
                       rest_whole=given["--rest-whole"])


def _run_file(ctx: Any, path: Path) -> Any:
    """``--run FILE``: the file's settings, with every option given on the command line
    over them (a rerun under a new --journal, another --seed, …)."""
    from bayeval.evaluation.settings import RunSettings

    def typed(param: str) -> bool:  # given on the command line, not a default
        source = ctx.get_parameter_source(param)
        return getattr(source, "name", None) == "COMMANDLINE"

    # every option that is a setting, by its parameter's name (the setting's but one)
    settings_of = {"filter_name": "filter"}
    given = {}
    for param in ("dataset", "reference", "tasks", "metric", "filter_name", "model",
                  "models", "command", "timeout", "retries", "lm_eval_args",
                  "lm_eval_mode", "inspect_task", "output_path", "batch", "concurrency",
                  "calls",
                  "method", "epsilon", "limit", "seed", "journal", "subtasks",
                  "group_mean", "repeated_models", "evaluator", "plan", "rest_whole"):
        if typed(param):
            value = ctx.params[param]
            given[settings_of.get(param, param)] = getattr(value, "value", value)
    if typed("suite"):
        raise BayevalError(f"--run {path} holds the run's tasks; drop --suite")
    for key in ("output_path", "journal"):
        if given.get(key) is not None:
            given[key] = str(given[key])
    if isinstance(given.get("tasks"), list | tuple) and len(given["tasks"]) == 1:
        given["tasks"] = given["tasks"][0]
    settings = RunSettings.from_file(path)
    try:
        return settings.override(**given) if given else settings
    except BayevalError as exc:
        raise BayevalError(f"--run {path}: {exc}") from None


def _save_run(settings: Any, path: Path) -> None:
    """``--save-run FILE``: the settings written as a run file, the seed made explicit
    (a run file reproduces its run)."""
    from bayeval.cli.common import check_output
    from bayeval.records.files import write_file

    check_output(path, "--save-run", new=True)
    write_file(path, settings.replace(seed=settings.seed or 0).to_toml(), durable=True)


def _check_outputs(settings: Any, inspect_log: Path | None,
                   harness_results: str | None) -> None:
    """The output options the run's kind cannot fill, refused before it starts."""
    if inspect_log is not None and settings.suite:
        raise BayevalError("--inspect-log writes one task's log; a suite keeps each "
                           "Inspect task's logs in its --journal folder")
    if inspect_log is not None and settings.evaluator.kind != EvaluatorKind.inspect.value:
        raise BayevalError("--inspect-log writes the target's Inspect samples: it "
                           "needs --evaluator inspect")
    if harness_results is not None and not str(harness_results).endswith(("/", os.sep)) \
            and not Path(harness_results).is_dir():  # a file: checked before the run
        from bayeval.cli.common import check_output

        check_output(Path(harness_results), "--harness-results", new=True)
    if harness_results is not None and settings.models is not None:
        raise BayevalError("--harness-results holds one model's estimate; --models "
                           "evaluates several (use --json)")


def _show(result: dict[str, Any], as_json: bool) -> None:
    from bayeval.evaluation.summary import summary

    if as_json:
        print(json_text(result))
    else:
        out.print(summary(result))
