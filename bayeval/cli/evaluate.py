"""``bayeval evaluate``: estimate a model's benchmark score from as few items as needed,
for one target or several, one task or a suite; the options parsed into
:class:`~bayeval.evaluation.RunSettings`, the run made by :func:`bayeval.evaluate` (or
:func:`bayeval.resume`), the result printed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bayeval.cli.common import (
    DEFAULT_DATASET,
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
    RetriesOption,
    SeedOption,
    TimeoutOption,
    app,
    evaluation_errors,
    field_table,
    json_text,
    names_table,
    out,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError


@app.command(cls=CheckedCommand)
def evaluate(
    dataset: Annotated[str | None, typer.Option(
        help="Bundled dataset to use as reference (see `bayeval datasets`). "
             f"Default: {DEFAULT_DATASET}.")] = None,
    reference: ReferenceOption = None,
    repeated_models: RepeatedModelsOption = RepeatedModels.error,
    tasks: Annotated[list[str] | None, typer.Option(
        "--task", metavar="NAME",
        help="The task to read with --reference lm-eval:DIR (a harness task or "
                       "group, e.g. leaderboard_ifeval) or inspect:DIR (default there: the "
                       "logs' only task). Given more than once: a suite of those tasks, "
                       "read from the same --reference, with equal weights (see "
                       "--suite).")] = None,
    metric: MetricOption = None,
    filter_name: FilterOption = None,
    target: Annotated[str | None, typer.Option(
        help="Model to evaluate. With the oracle evaluator: a model of the matrix, held out "
             "from the reference (default: one drawn with --seed). With a command: any "
             "name for the new model.")] = None,
    targets: Annotated[str | None, typer.Option(
        help="Several models to evaluate in one run (comma-separated), e.g. checkpoints "
             "of one family: a joint model of their scores picks and predicts, and each "
             "gets its own design-valid interval (active-pai-joint). With a command, "
             "{target} in it is replaced by the model's name.")] = None,
    evaluator: Annotated[EvaluatorKind | None, typer.Option(
        help="oracle: simulate with the target's known row; command: run --command for "
             "each item; lm-eval: lm-evaluation-harness, the model and task loaded once "
             "in this process and run on each batch of --batch items (see "
             "--lm-eval-mode), reading the reference's metric back; inspect: Inspect AI "
             "runs --inspect-task on the --target model (an Inspect model name such as "
             "openai/gpt-4o-mini) in this process, one eval per batch of --batch items "
             "(default 8), scored by --metric, its logs kept in --output-path.")] = None,
    inspect_task: Annotated[str | None, typer.Option(
        help="With --evaluator inspect: the Inspect task, FILE.py@TASK (imported once, "
             "with what it registers) or a registered task name; its sample ids are the "
             "reference's item ids (e.g. --reference inspect:LOG_DIR of earlier runs).")
    ] = None,
    lm_eval_args: Annotated[str | None, typer.Option(
        help="With --evaluator lm-eval: the harness's options as `lm_eval run` takes "
             "them, e.g. '--model hf --model_args pretrained=gpt2 --include_path tasks/' "
             "or '--model local-completions --model_args model=M,base_url=URL' (bayeval "
             "sets --tasks and --samples; --limit is --max-items here).")] = None,
    lm_eval_mode: Annotated[LmEvalMode, typer.Option(
        help="in-process: load the model and the task once and run each batch on them "
             "(fast); subprocess: launch `lm_eval run` once per batch (isolated, but "
             "every launch loads the model again).")] = LmEvalMode.in_process,
    output_path: Annotated[Path | None, typer.Option(
        help="With --evaluator lm-eval: keep the harness's own per-document output of "
             "the target here (samples and results files, as --log_samples writes them); "
             "with --evaluator inspect: the folder of the target's eval logs (default: "
             "JOURNAL.inspect), so the new model can join the reference.")] = None,
    batch: Annotated[int | None, typer.Option(
        help="Items asked and evaluated together (default 32 with --evaluator lm-eval: "
             "one harness call per batch; else 1). Draw probabilities stay those of "
             "the state before the batch.")] = None,
    concurrency: Annotated[int, typer.Option(
        help="Evaluations kept in flight (--evaluator command or oracle): when one "
             "finishes, its score is told and the next item is drawn from the latest "
             "state, so a slow item never holds the others back; the interval stays "
             "design-valid (rounds are applied in draw order). A suite keeps K in "
             "flight across its tasks, each next item going where the allocation "
             "says.")] = 1,
    command: Annotated[str | None, typer.Option(
        help="Shell command that evaluates one item and prints its score (0..1) as the "
             "last line; {item} (unquoted: it is passed quoted, as one argument) becomes the "
             "item id, also in $BAYEVAL_ITEM (without {item} the id is appended). An "
             "item that still fails after --retries stops active-pai, active-pai-joint "
             "and faq (their estimate weighs every drawn item; --resume asks it again); "
             "the other methods skip it and stop after three failures in a row. Either "
             "way the exit status is 3.")] = None,
    timeout: TimeoutOption = 600.0,
    retries: RetriesOption = 1,
    method: Annotated[str | None, typer.Option(
        help="Evaluation method: active-pai (default: design-valid interval, automatic "
             "stop), bayesame, bayesame-rs, bayesame-laplace, bayes-aipw, bq, irt, random "
             "or faq, "
             "optionally with parameters, e.g. 'active-pai(anytime=true)' (an interval "
             "valid whenever you stop; predictor=exact|laplace|factor) or "
             "'faq(budget=0.1)' (FAQ: fixed budget, Pro-Active Inference interval). "
             "With --targets: active-pai-joint (the default: the joint model of the "
             "targets picks and predicts, each target's items drawn at random with a "
             "design-valid interval and stop of its own) or bayesame-joint (multi-target "
             "BayesAME, model-based intervals; e.g. 'bayesame-joint(selection=mean_ig)').")
    ] = None,
    epsilon: Annotated[float | None, typer.Option(
        help="Stop once the 95% interval is at most this wide (with bayesame, also once "
             "the estimate moved less than 0.005 over the last 30 items). Default: the "
             "method's (0.05 for active-pai, 0.02 for bayesame, 0.1 for random).")
    ] = None,
    max_items: Annotated[int | None, typer.Option(
        help="Evaluate at most this many items.")] = None,
    seed: SeedOption = None,
    journal: Annotated[Path | None, typer.Option(
        help="Append every result to this JSON-lines journal (fsync'd), so a crash loses "
             "nothing. Default: none for the oracle, bayeval-TARGET-YYYYMMDD-HHMMSS.jsonl in the "
             "current folder for a command.")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run recorded in --journal (its settings are "
                         "read from it).")] = False,
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
             "harness groups'). --journal is then a folder, --max-items a budget over all "
             "tasks.")] = None,
    subtasks: Annotated[bool, typer.Option(
        "--subtasks", help="For a harness group (e.g. --dataset musr): estimate each "
                           "subtask with its own design-valid run and interval, and the "
                           "group as the harness aggregates it, in one run (a suite of "
                           "the subtasks sharing one evaluator).")] = False,
    group_mean: Annotated[GroupMean | None, typer.Option(
        help="With --subtasks: the group's score as 'size' (the mean over all its "
             "documents) or 'equal' (the unweighted mean of its subtasks); default: as "
             "the group's harness config says, else 'size'.")] = None,
    run: Annotated[Path | None, typer.Option(
        help="Run the run file FILE (TOML: the settings --save-run writes; a suite file "
             "with the run's keys and an [evaluator] table, documented in "
             "bayeval/evaluation/run_file.py); only the output options may be given "
             "beside it.")] = None,
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
             "--metric": metric, "--filter": filter_name, "--target": target,
             "--targets": targets, "--evaluator": evaluator, "--command": command,
             "--method": method, "--epsilon": epsilon, "--seed": seed, "--suite": suite,
             "--inspect-task": inspect_task, "--subtasks": subtasks or None,
             "--group-mean": group_mean}
    with evaluation_errors():
        if resume:
            result = _resume(journal, given, run, save_run, max_items, batch, concurrency,
                             lm_eval_args, quiet)
        else:
            from bayeval.evaluation.settings import EvaluatorOptions

            live = EvaluatorOptions(
                (evaluator or EvaluatorKind.oracle).value, command, timeout, retries,
                lm_eval_args, lm_eval_mode.value, inspect_task,
                None if output_path is None else str(output_path), batch, concurrency)
            settings = (_settings(given, repeated_models, max_items, journal, live)
                        if run is None else _run_file(run, given, live, max_items, journal))
            _check_outputs(settings, inspect_log, harness_results)
            if save_run is not None:
                _save_run(settings, save_run)
            from bayeval.cli.progress import progress_watch
            from bayeval.evaluation import evaluate as run_evaluation

            result = run_evaluation(settings, watch=progress_watch(quiet))
        if inspect_log is not None and "tasks" not in result:
            from bayeval.evaluation.single import write_inspect_log

            result["inspect_log"] = str(write_inspect_log(result, inspect_log))
        _show(result, as_json)
        if harness_results is not None:  # after the estimate is shown: a file that
            from bayeval.evaluation.results import write_estimate_results

            write_estimate_results(result, harness_results)  # fails loses nothing


def _resume(journal: Path | None, given: dict[str, Any], run: Path | None,
            save_run: Path | None, max_items: int | None, batch: int | None,
            concurrency: int, lm_eval_args: str | None, quiet: bool) -> dict[str, Any]:
    """``--resume``: the journal's run continued; the options it fixes refused."""
    from bayeval.cli.progress import progress_watch
    from bayeval.evaluation import resume
    from bayeval.evaluation.sources import refuse_given

    if journal is None:
        raise BayevalError("--resume needs --journal PATH (the journal to continue)")
    refuse_given(journal, {**given, "--run": run, "--save-run": save_run})
    return resume(journal, max_items=max_items, batch=batch, concurrency=concurrency,
                  lm_eval_args=lm_eval_args, watch=progress_watch(quiet))


def _settings(given: dict[str, Any], repeated: RepeatedModels, max_items: int | None,
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
        spec = _tasks_suite(names, given["--reference"], given["--metric"],
                            given["--filter"])
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
    return RunSettings(**spec, evaluator=live, target=given["--target"],
                       targets=given["--targets"], max_items=max_items,
                       seed=given["--seed"], journal=journal,
                       subtasks=bool(given["--subtasks"]),
                       group_mean=None if given["--group-mean"] is None
                       else given["--group-mean"].value)


def _tasks_suite(tasks: list[str], reference: Path | None, metric: str | None,
                 filter_name: str | None) -> dict[str, Any]:
    """Several ``--task`` read from one ``--reference``: the suite of those tasks, equally
    weighted (as a suite file with one [[tasks]] table each would say)."""
    from bayeval.evaluation.settings import TaskSettings
    from bayeval.suite import task_id

    if reference is None or not str(reference).startswith(("lm-eval:", "inspect:")):
        raise BayevalError("several --task make a suite of tasks read from one --reference "
                           "lm-eval:DIR or inspect:DIR (bundled datasets: --suite FILE)")
    twice = sorted({t for t in tasks if tasks.count(t) > 1})
    if twice:
        raise BayevalError(f"--task {twice[0]} is given twice")
    for t in tasks:  # a task's name names its files in the suite's folder
        task_id(t, f"--task {t[:60]!r}")
    return {"name": "+".join(tasks),
            "tasks": tuple(TaskSettings(name=t, reference=str(reference), task=t,
                                        metric=metric, filter=filter_name) for t in tasks)}


def _run_file(path: Path, given: dict[str, Any], live, max_items: int | None,
              journal: Path | None) -> Any:
    """``--run FILE``: the file's settings; the options that would change them refused."""
    from bayeval.evaluation.settings import EvaluatorOptions, RunSettings

    clash = [k for k, v in given.items() if v is not None]
    clash += [k for k, v in (("--max-items", max_items), ("--journal", journal)) if v]
    if live != EvaluatorOptions(live.kind):
        clash.append("the evaluator's options")
    if clash:
        raise BayevalError(f"--run {path} holds the run's settings; drop "
                           f"{', '.join(clash)}")
    return RunSettings.from_file(path)


def _save_run(settings: Any, path: Path) -> None:
    """``--save-run FILE``: the settings written as a run file, the seed made explicit
    (a run file reproduces its run)."""
    from bayeval.cli.common import check_output
    from bayeval.files import write_file

    check_output(path, "--save-run")
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
    if harness_results is not None and settings.targets is not None:
        raise BayevalError("--harness-results holds one model's estimate; --targets "
                           "evaluates several (use --json)")


def _show(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json_text(result))
    elif "tasks" in result:
        print_suite(result)
    elif "targets" in result:
        _print_joint_result(result)
    else:
        _print_result(result)


def _print_joint_result(r: dict[str, Any]) -> None:
    """The joint run's table: a row per target, names never broken (the other columns
    give way), the true score and the stop only where some target has one (a live run
    has no true score)."""
    rows = r["targets"]
    columns = {"target": [t["target"] for t in rows],
               "estimate": [f"{t['estimate']:.4f}" for t in rows],
               f"{r['level']:.0%} interval": [f"[{t['lower']:.4f}, {t['upper']:.4f}]"
                                              for t in rows],
               "true score": ["" if t["true_score"] is None else
                              f"{t['true_score']:.4f}" + ("" if t["covered"] else " (outside)")
                              for t in rows],
               "items": [f"{t['items_used']}/{r['n_items']}" for t in rows],
               "stopped after": ["" if t["stopped_after"] is None else
                                 f"{t['stopped_after']} evals" for t in rows]}
    columns = {k: v for k, v in columns.items() if any(v)}
    table = names_table(list(columns), [list(row) for row in zip(*columns.values(),
                                                                   strict=True)])
    out.print(table)
    total = len(r["targets"]) * r["n_items"]
    out.print(f"reference {r['reference']} ({r['reference_models']} models); "
              f"{r['evaluations']} evaluations of {total} ({r['evaluations'] / total:.1%}); "
              f"stopped: {r['stopped']}" + (f"; journal {r['journal']}" if r["journal"] else ""))


def _print_result(r: dict[str, Any]) -> None:
    table = field_table()
    width = r["upper"] - r["lower"]
    table.add_row("target", r["target"])
    table.add_row("reference", f"{r['reference']} ({r['reference_models']} models × "
                               f"{r['n_items']} items)")
    table.add_row("method", f"{r['method']} {r['params']}")
    table.add_row("estimate", f"{r['estimate']:.4f}")
    table.add_row(f"{r['level']:.0%} interval",
                  f"[{r['lower']:.4f}, {r['upper']:.4f}]  (width {width:.4f})")
    if r.get("reference_row_score") is not None:
        table.add_row("matrix row", f"{r['reference_row_score']:.4f}  (the matrix's row of this "
                                    "name: another run, not judged against)")
    if r["true_score"] is not None:
        inside = "inside" if r["covered"] else "OUTSIDE"
        table.add_row("true score", f"{r['true_score']:.4f}  ({inside} the interval)")
    used = f"{r['items_used']} of {r['n_items']} ({r['items_used'] / r['n_items']:.1%})"
    if r.get("items_evaluated", r["items_used"]) != r["items_used"]:
        used += f" draws, {r['items_evaluated']} distinct items evaluated"
    if r["items_skipped"]:
        used += f", {r['items_skipped']} left unevaluated after failures"
    table.add_row("items used", used)
    if r.get("evaluator") != EvaluatorKind.oracle.value and "documents_run" in r:
        late = r["documents_run"] - r["items_used"] - r["items_skipped"]
        table.add_row("documents run", f"{r['documents_run']}" + (
            " (every one in the estimate)" if late <= 0 else
            f" ({late} not in the estimate: in flight when the run ended)"))
    rs = r.get("random_items_for_width")
    if rs is not None and r["method"] != "random":
        saved = 1.0 - r["items_evaluated"] / rs if rs else 0.0
        # RS-Mean's items for this width at this estimate (sample_mean.items_for_width)
        table.add_row("random sampling", f"≈ {rs} items for this width: {abs(saved):.0%} "
                                         f"{'saved' if saved >= 0 else 'more used'}")
    for failure in r.get("failures", []):
        table.add_row("failed", f"{failure['count']}× {failure['reason']}")
    if r.get("skipped_items"):
        table.add_row("skipped items", r["skipped_items"])
    check = r.get("domain_check")
    if check is not None:  # a model-based interval: what it rests on, and its check
        table.add_row("interval", "model-based: valid if the reference models explain the "
                                  "target; domain check " + (
                                      "FLAGGED (below)" if check.get("flagged") else
                                      f"passed (shift {check.get('shift', 0):+.3f} ± "
                                      f"{check.get('shift_se', 0):.3f})"))
    if r.get("domain_warning"):
        table.add_row("[yellow]warning[/]", r["domain_warning"])
    if r.get("harness_launches") is not None:
        runs = "Inspect runs" if r.get("evaluator") == "inspect" else "harness runs"
        table.add_row(runs, f"{r['harness_launches']} (one per batch)")
    if r.get("evaluator") != EvaluatorKind.oracle.value:  # a simulation's times say nothing
        for name, text in time_rows(r.get("times"), r["n_items"]):
            table.add_row(name, text)
    table.add_row("stopped by", str(r["stopped"]))
    if r["journal"]:
        table.add_row("journal", r["journal"])
    if r.get("inspect_log"):
        table.add_row("Inspect log", f"{r['inspect_log']} (inspect view opens it)")
    out.print(table)


def time_rows(times: dict[str, Any] | None, n_items: int) -> list[tuple[str, str]]:
    """The result's time lines: the run's wall time split into the evaluator's and
    bayeval's own, and what evaluating every item one after another would take at the
    per-item time measured."""
    if not times or not times.get("items_timed"):
        return []
    rows = [("time", f"{times['wall_seconds']:.1f} s wall: evaluator "
                     f"{times['evaluator_seconds']:.1f} s over {times['items_timed']} items, "
                     f"bayeval {times['own_seconds']:.1f} s "
                     f"({times['own_seconds_per_item'] * 1e3:.0f} ms per item)")]
    if times.get("full_run_seconds") is not None:
        rows.append(("full run", f"≈ {times['full_run_seconds']:.0f} s "
                                 f"[{times['full_run_lower']:.0f}, "
                                 f"{times['full_run_upper']:.0f}] for the documents of all "
                                 f"{n_items} items at the measured "
                                 f"{times['item_seconds_mean']:.3f} s per document (plus a "
                                 "full run's start-up); this run's documents took "
                                 f"{times['evaluator_seconds']:.0f} s"))
    return rows


def print_suite(r: dict[str, Any]) -> None:
    """The suite's table: a row per task and the average's."""
    from rich.table import Table

    title = (f"{r['group']} by subtask ({r['group_mean']}-weighted, as the harness "
             "aggregates it)" if r.get("group") else f"suite {r['suite']}")
    table = Table(title=title)
    table.add_column("task", overflow="fold")  # a subtask's long name wraps, whole
    for col in ("weight", "estimate", f"{r['level']:.0%} interval", "items", "true score"):
        table.add_column(col, no_wrap=True)
    for t in r["tasks"]:
        truth = "" if t["true_score"] is None else (
            f"{t['true_score']:.4f}{'' if t['covered'] else ' (OUTSIDE)'}")
        table.add_row(t["task"], f"{t['weight']:.3f}", f"{t['estimate']:.4f}",
                      f"[{t['lower']:.4f}, {t['upper']:.4f}]",
                      f"{t['items_used']} of {t['n_items']}", truth)
    truth = "" if r["true_score"] is None else (
        f"{r['true_score']:.4f}{'' if r['covered'] else ' (OUTSIDE)'}")
    table.add_row("[bold]average[/]" if not r.get("group") else f"[bold]{r['group']}[/]",
                  "1", f"{r['estimate']:.4f}", f"[{r['lower']:.4f}, {r['upper']:.4f}]",
                  f"{r['items_used']} of {r['n_items']}", truth)
    out.print(table)
    targets = sorted({t["target"] for t in r["tasks"]})
    out.print(f"target {', '.join(targets)} · method {r['method']} · stopped: {r['stopped']} · "
        f"cost {r['cost']:g}" + (f" · journal {r['journal']}" if r["journal"] else ""))
