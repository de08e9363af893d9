"""``bayeval evaluate``: estimate a model's benchmark score from as few items as needed,
for one target or several (multi-target BayesAME)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from bayeval.cli.common import (
    DEFAULT_DATASET,
    DEFAULT_METHOD,
    JOINT_METHOD,
    JOINT_METHODS,
    SUBPROCESS,
    SUITE_FILE,
    TOOL_EVALUATORS,
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
    comma_list,
    err,
    evaluation_errors,
    evaluator_kind,
    failure_summary,
    field_table,
    fresh_source,
    json_text,
    names_table,
    out,
    progress_bar,
    result_estimate,
    resumable,
    setup_jax,
    write_estimate_results,
)
from bayeval.cli.evaluator_settings import EvaluatorSettings, resume_from, row_score
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError, EvaluationError
from bayeval.experiments.metrics import covers


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
             "design-valid (rounds are applied in draw order).")] = 1,
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
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Estimate a model's benchmark score from as few items as needed.

    With no options: simulate an active evaluation of one held-out model of the bundled
    IFEval matrix, and print the estimate, its 95% interval, the true score and how many
    items were used.
    """
    task = tasks[0] if tasks else None
    with evaluation_errors():
        several_tasks = tasks is not None and len(tasks) > 1
        if several_tasks:
            if suite is not None:
                raise BayevalError("give --suite FILE or several --task, not both")
            suite = _tasks_suite(tasks, reference, metric, filter_name)
        if suite is not None or subtasks or (resume and journal is not None
                                             and (journal / SUITE_FILE).is_file()):
            result = _evaluate_suite(suite, subtasks, dataset, reference,
                                     (task, metric, filter_name), target, targets,
                                     evaluator, command, timeout, retries, method, epsilon,
                                     max_items, seed, journal, resume, quiet, batch,
                                     {"concurrency": concurrency, "inspect_task": inspect_task,
                                      "output_path": output_path,
                                      "lm_eval_args": lm_eval_args,
                                      "lm_eval_mode": lm_eval_mode.value,
                                      "repeated_models": repeated_models,
                                      "group_mean": None if group_mean is None
                                      else group_mean.value},
                                     harness_results, inspect_log)
            if as_json:
                print(json_text(result))
            else:
                from bayeval.cli.evaluate_suite import print_suite

                print_suite(result, out.print)
            if harness_results is not None:  # after the estimate is shown
                write_estimate_results(result, harness_results)
            return
        if concurrency > 1 and batch is not None and batch > 1:
            raise BayevalError("give --batch or --concurrency, not both (a batch waits for "
                               "all its items; concurrency draws as each one finishes)")
        if targets is not None and target is not None:
            raise BayevalError("give either --target or --targets, not both")
        if inspect_log is not None and not resume and evaluator != EvaluatorKind.inspect:
            raise BayevalError("--inspect-log writes the target's Inspect samples: it "
                               "needs --evaluator inspect")
        if harness_results is not None and targets is not None:
            raise BayevalError("--harness-results holds one model's estimate; --targets "
                               "evaluates several (use --json)")
        if group_mean is not None:
            raise BayevalError("--group-mean is for --subtasks (a harness group's score)")
        result = _evaluate(dataset, reference, target, targets, evaluator, command, timeout,
                           retries, method, epsilon, max_items, seed, journal, resume, quiet,
                           (task, metric, filter_name), lm_eval_args, batch,
                           {"lm_eval_mode": lm_eval_mode.value,
                            "output_path": None if output_path is None else str(output_path),
                            "concurrency": concurrency, "inspect_task": inspect_task,
                            "repeated_models": repeated_models})
        if inspect_log is not None:
            result["inspect_log"] = str(_write_inspect_log(result, inspect_log))
        if as_json:
            print(json_text(result))
        elif "targets" in result:
            _print_joint_result(result)
        else:
            _print_result(result)
        if harness_results is not None:  # after the estimate is shown: a file that
            write_estimate_results(result, harness_results)  # fails loses nothing


def _evaluate(dataset, reference, target, targets, evaluator, command, timeout, retries,
              method, epsilon, max_items, seed, journal, resume, quiet,
              harness=(None, None, None), lm_eval_args=None, batch=None,
              live=None) -> dict[str, Any]:
    """One evaluation run, of one target (--target) or several jointly (--targets)."""
    # options and the reference are checked before JAX starts (seconds of start-up)
    evaluate_fn = None
    if resume:
        if journal is None:
            raise BayevalError("--resume needs --journal PATH (the journal to continue)")
        from bayeval.session import Session

        if lm_eval_args is not None:
            correct_evaluator_args(journal, lm_eval_args)
        setup_jax()
        session, settings, matrix = resume_from(Session, journal, {
            "--dataset": dataset, "--reference": reference, "--target": target,
            "--targets": targets, "--evaluator": evaluator, "--command": command,
            "--method": method, "--epsilon": epsilon,
            "--seed": seed, "--task": harness[0], "--metric": harness[1],
            "--filter": harness[2], "--inspect-task": (live or {}).get("inspect_task")})
        if max_items is not None:  # a new budget: not a setting of the estimate
            session.set_budget(max_items)
        given = (live or {}).get("concurrency", 1)
        if given > 1:  # how many run at once is not a setting of the estimate: may change
            try:
                refuse_concurrency(given, settings.evaluator, session.method,
                                   session.several)
            except BayevalError:
                session.close()
                raise
            settings = settings.replace(concurrency=given)
    else:
        several = targets is not None
        usage = "CMD {target} {item}" if several else "CMD {item}"
        kind = evaluator_kind(evaluator, command, timeout, retries, usage, lm_eval_args,
                              harness=True, inspect_task=(live or {}).get("inspect_task"))
        if kind in TOOL_EVALUATORS and several:
            raise BayevalError(f"--evaluator {kind} evaluates one model (--target), not "
                               "--targets")
        source, matrix = fresh_source(dataset, reference, task=harness[0],
                                      metric=harness[1], filter_name=harness[2],
                                      harness_evaluator=kind == EvaluatorKind.lm_eval.value,
                                      repeated_models=(live or {}).get("repeated_models",
                                                                        "error"))
        seed = 0 if seed is None else seed
        if several:
            names = comma_list(targets)
            if not names:
                raise BayevalError("--targets needs at least one model name")
        elif target is not None:
            names = [target]
        elif kind != "oracle":
            raise BayevalError(f"--evaluator {kind} needs --target NAME for the new model")
        else:
            names = [str(np.random.default_rng(seed).choice(matrix.models))]
        known = set(matrix.models)
        unknown = [t for t in names if t not in known]
        if kind == "oracle" and unknown:
            raise BayevalError(f"unknown target id{'s' if len(unknown) > 1 else ''} "
                               f"{unknown if several else repr(unknown[0])}: not "
                               f"{'models' if several else 'a model'} of {matrix.name} "
                               f"({matrix.n_models} models)")
        held = [t for t in names if t in known]
        if held and len(held) == matrix.n_models:
            raise BayevalError(
                f"{matrix.name}: the targets are all its {matrix.n_models} model(s); held "
                "out they leave no reference model" if several else
                f"{matrix.name} holds one model, {held[0]!r}: held out as the target it "
                "leaves no reference model")
        ref = matrix.drop_models(held) if held else matrix
        if held:
            source["held_out"] = held
        if journal is None and kind != "oracle":
            from bayeval.data.io import safe_file_name

            stem = "joint" if several else safe_file_name(names[0])
            journal = Path(f"bayeval-{stem}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
        live = dict(live or {})
        harness_run = kind == EvaluatorKind.lm_eval.value
        inspect_run = kind == EvaluatorKind.inspect.value
        refuse_concurrency(live.get("concurrency", 1), kind)
        if live.get("output_path") is not None and not (harness_run or inspect_run):
            raise BayevalError("--output-path keeps the harness's output or Inspect's "
                               "logs: it needs --evaluator lm-eval or inspect")
        settings = EvaluatorSettings(kind, command, timeout, retries,
                                     batch or (32 if harness_run else 8 if inspect_run
                                               else 1),
                                     live.get("concurrency", 1))
        if inspect_run:
            settings = settings.replace(
                task=harness[0], metric=harness[1], inspect_task=live["inspect_task"],
                output_path=live.get("output_path") or f"{journal}.inspect")
        if harness_run:
            from bayeval.harness import harness_settings  # (pandas: after the checks)

            settings = settings.replace(
                **harness_settings(matrix, lm_eval_args, *harness),
                lm_eval_mode=live.get("lm_eval_mode") or LmEvalMode.in_process.value,
                output_path=live.get("output_path"))
        from bayeval.methods import make_method, parse_method_spec

        name, params = parse_method_spec(method or (JOINT_METHOD if several
                                                    else DEFAULT_METHOD))
        if epsilon is not None:
            params["epsilon"] = epsilon
        if several or settings.concurrency > 1:
            chosen = make_method(name, **params)
            if several and not chosen.several_targets:
                raise BayevalError(f"--targets needs a method that evaluates several "
                                   f"targets jointly ({' or '.join(JOINT_METHODS)}); "
                                   f"{name!r} evaluates one")
            refuse_concurrency(settings.concurrency, kind, chosen, several)
        from bayeval.session import Session

        if harness_run:  # the model and the task, loaded (or checked) before any journal
            evaluate_fn = _harness_evaluator(settings, matrix, names[0])
        elif inspect_run:
            try:
                evaluate_fn = settings.evaluator_for(matrix, names)
            except EvaluationError as exc:  # a task or model that does not load
                raise BayevalError(str(exc)) from None
        setup_jax()
        session = Session(ref, names if several else names[0], name, method_params=params,
                          seed=seed, journal=journal, max_items=max_items,
                          reference_source=source, extra=settings.to_json())
    with resumable(session, "evaluate"):
        if evaluate_fn is None:
            evaluate_fn = settings.evaluator_for(matrix, session.target_ids,
                                                 session.several)
        _run_with_progress(session, evaluate_fn, quiet, settings.max_failures,
                           batch if batch is not None else settings.batch,
                           settings.concurrency)
        if session.n_observed == 0:
            raise EvaluationError(f"no item was evaluated ({len(session.skipped)} failed); "
                                  "there is no estimate to report")
        common = {
            "reference": session.reference.name,
            "reference_models": session.reference.n_models,
            "method": session.method.name,
            "params": session.method.params,
            "seed": session.seed,
            "level": session.method.level,
            "n_items": session.n_items,
            "stopped": session.stop_reason,
            "journal": None if session.journal_path is None else str(session.journal_path),
        }
        if session.several:
            return {"targets": [_target_row(session, matrix, settings, k, t)
                                for k, t in enumerate(session.target_ids)],
                    **common, "evaluations": session.n_observed,
                    "skipped": len(session.skipped)}
        value, lower, upper = session.estimate()
        truth = settings.true_score(matrix, session.target_id)
        from bayeval.data.lm_eval import harness_task

        return {
            "target": session.target_id,
            **common,
            "estimate": value,
            "lower": lower,
            "upper": upper,
            "true_score": truth,
            "covered": None if truth is None else bool(covers(lower, upper, truth)),
            "reference_row_score": (None if truth is not None
                                    else row_score(matrix, session.target_id)),
            "items_used": session.n_observed,
            "items_evaluated": session.n_evaluated,
            "items_drawn": session.n_drawn,
            # what the model ran (the user's cost): every drawn item's evaluation
            "documents_run": session.n_drawn,
            "random_items_for_width": _random_items(value, upper - lower, session),
            "items_skipped": len(session.skipped),
            "skipped_items": skipped_note(session.method.estimator.name, len(session.skipped)),
            # what the interval rests on: the design (valid whatever the model gets
            # wrong) or the reference models' model (valid if it explains the target)
            "interval_basis": ("model" if session.method.estimator.model_based
                               else "design"),
            **_domain_fields(session),
            "failures": failure_summary(session.skipped),
            "items": [item for item, _ in session.observations],
            "harness_launches": _launches(session, evaluate_fn),
            # of the in-process harness: seconds in the model's calls, and building the
            # task's requests at the start (the rest of its time is per-call overhead)
            "harness_model_seconds": getattr(evaluate_fn, "model_seconds", None),
            "harness_build_seconds": getattr(evaluate_fn, "build_seconds", None),
            "evaluator": settings.evaluator,
            # the task's name: the harness's, else the reference file's stem (not its path)
            "task": (settings.task or harness_task(matrix)
                     or Path(session.reference.name).stem),
            "metric": settings.metric or matrix.metadata.get("metric"),
            "filter": settings.filter or matrix.metadata.get("filter"),
            "inspect_logs": (settings.output_path
                             if settings.evaluator == EvaluatorKind.inspect.value else None),
            "times": session.times.summary(session.n_items),
        }


def _tasks_suite(tasks: list[str], reference: Path | None, metric: str | None,
                 filter_name: str | None) -> dict[str, Any]:
    """Several ``--task`` read from one ``--reference``: the suite of those tasks, equally
    weighted (as a suite file with one [[tasks]] table each would say)."""
    if reference is None or not str(reference).startswith(("lm-eval:", "inspect:")):
        raise BayevalError("several --task make a suite of tasks read from one --reference "
                           "lm-eval:DIR or inspect:DIR (bundled datasets: --suite FILE)")
    twice = sorted({t for t in tasks if tasks.count(t) > 1})
    if twice:
        raise BayevalError(f"--task {twice[0]} is given twice")
    from bayeval.suite import task_id

    for t in tasks:  # a task's name names its files in the suite's folder
        task_id(t, f"--task {t[:60]!r}")
    extra = {k: v for k, v in (("metric", metric), ("filter", filter_name)) if v is not None}
    return {"name": "+".join(tasks),
            "tasks": [{"name": t, "reference": str(reference), "task": t, **extra}
                      for t in tasks]}


def _evaluate_suite(suite, subtasks, dataset, reference, harness, target,
                    targets, evaluator, command, timeout, retries, method, epsilon,
                    max_items, seed, journal, resume, quiet, batch, live, harness_results,
                    inspect_log) -> dict[str, Any]:
    """``--suite`` / ``--subtasks`` (and their ``--resume``): :mod:`bayeval.cli.evaluate_suite`,
    whose result the caller prints (and writes with ``--harness-results``)."""
    from bayeval.cli.evaluate_suite import evaluate_suite

    if suite is not None and subtasks:
        raise BayevalError("give --suite FILE or --subtasks, not both")
    if targets is not None:
        raise BayevalError("--targets evaluates several models on one task; a suite "
                           "evaluates one model (--target) on several tasks")
    if inspect_log is not None:
        raise BayevalError("--inspect-log writes one task's log; a suite keeps each "
                           "Inspect task's logs in its --journal folder")
    if live["group_mean"] is not None and not subtasks:
        raise BayevalError("--group-mean is for --subtasks (a harness group's score)")
    return evaluate_suite(suite, subtasks, dataset, reference, harness, target, evaluator,
                          command, timeout, retries, method, epsilon, max_items, seed,
                          journal, resume, quiet, batch, live)


def refuse_concurrency(concurrency: int, kind: str, method=None, several: bool = False
                       ) -> None:
    """``--concurrency K > 1`` needs an evaluator of one item at a time (not the harness,
    which runs a batch's documents together) and rounds in a draw order: one target,
    draws without replacement (a one-line error otherwise, before any journal is
    touched)."""
    if concurrency <= 1:
        return
    if kind in TOOL_EVALUATORS:
        raise BayevalError(f"--concurrency is for --evaluator command or oracle; {kind} "
                           "runs a batch's items together (--batch)")
    if method is not None and (several or method.with_replacement):
        raise BayevalError(f"--concurrency: {method.name} evaluates one item at a time "
                           f"({'several targets' if several else 'draws with replacement'})")


def correct_evaluator_args(journal: Path, lm_eval_args: str) -> None:
    """``--resume --lm-eval-args …``: replace the harness options a journal froze, which
    is allowed only while it holds no score (the run failed before any, e.g. on a wrong
    model path); the options are checked by the harness's parser first, and the journal's
    header is rewritten atomically."""

    from bayeval.harness import harness_config
    from bayeval.session import Session

    header, events, _, _ = Session.read_journal(journal)
    extra = header.get("extra") or {}
    settings = EvaluatorSettings.from_json(extra, f"journal {journal}")
    if settings.evaluator != EvaluatorKind.lm_eval.value:
        raise BayevalError(f"--lm-eval-args: {journal} is not a run of --evaluator lm-eval")
    if any(e.get("event") == "tell" for e in events):
        raise BayevalError(f"--resume reads the harness options from {journal}, which "
                           "already holds scores made with them; drop --lm-eval-args")
    try:
        harness_config(lm_eval_args, settings.task)
    except EvaluationError as exc:
        raise BayevalError(str(exc)) from None
    import fcntl

    from bayeval.files import write_file
    from bayeval.journal_check import CHECK, seal_header

    header = {**header, "extra": {**extra, "lm_eval_args": lm_eval_args}}
    if CHECK in header:  # a journal with checks: its header's is renewed (its run kept)
        header = seal_header(header)
    with open(journal, "ab") as held:  # one writer: not while another session runs it
        try:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise BayevalError(f"journal {journal} is in use by another session") from None
        lines = journal.read_bytes().split(b"\n")
        write_file(journal, b"\n".join([json.dumps(header).encode(), *lines[1:]]),
                   durable=True)


def _harness_evaluator(settings: EvaluatorSettings, matrix, target: str):
    """The lm-eval evaluator of a fresh run, made before its journal: in process the
    model and the task are loaded now; per batch the options and the task are checked
    now (the harness's own parser and task index), so that a wrong option or task is a
    one-line error and no journal freezes it."""
    if settings.lm_eval_mode == SUBPROCESS:
        from bayeval.harness import check_harness_task

        check_harness_task(settings.lm_eval_args, settings.task)
    return settings.evaluator_for(matrix, [target])


def _write_inspect_log(result: dict[str, Any], path: Path) -> Path:
    """``--inspect-log``: the estimate as an Inspect eval log built from the target's
    own logs (:func:`bayeval.inspect_evaluator.write_estimate_log`)."""
    from bayeval.inspect_evaluator import write_estimate_log

    if not result.get("inspect_logs"):  # only an --evaluator inspect run has them
        raise BayevalError("--inspect-log writes the target's Inspect samples: this run "
                           f"evaluated with {result.get('evaluator')}, not inspect")
    try:
        return write_estimate_log(result["inspect_logs"], path, *result_estimate(result),
                                  result["metric"])
    except OSError as exc:
        raise BayevalError(f"--inspect-log {path}: {exc.strerror or exc}") from None


def _launches(session, evaluate_fn) -> int | None:
    """Harness calls of the whole journal: one per ask of a batch journaled before a
    resume, plus this process's."""
    now = getattr(evaluate_fn, "launches", None)
    if now is None:
        return None
    return session.ask_calls_replayed + now


def skipped_note(estimator: str, skipped: int) -> str | None:
    """What the estimate assumes about the items skipped after failures (None: none)."""
    if not skipped:
        return None
    if estimator == "sample_mean":
        return (f"the estimate is the mean of the scored items: it assumes the {skipped} "
                "skipped ones score like them")
    return (f"the estimate is over all items: the {skipped} skipped ones are predicted by "
            "the model, not scored")


def _target_row(session, matrix, settings, k: int, target: str) -> dict[str, Any]:
    """One target's line of a joint run's result."""
    value, lower, upper = session.estimate(target)
    truth = settings.true_score(matrix, target)
    return {"target": target, "estimate": value, "lower": lower, "upper": upper,
            "true_score": truth,
            "covered": None if truth is None else bool(covers(lower, upper, truth)),
            "items_used": session.items_used(target),
            "stopped_after": int(session.stopped_at[k]) or None}


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


def _run_with_progress(session, evaluate_fn, quiet: bool, limit: int | None,
                       batch: int = 1, concurrency: int = 1) -> None:
    from bayeval.evaluators import closing

    with closing([evaluate_fn]):
        _run_shown(session, evaluate_fn, quiet, limit, batch, concurrency)


def _run_shown(session, evaluate_fn, quiet: bool, limit: int | None, batch: int,
               concurrency: int) -> None:
    """``session.run`` with a progress bar on a terminal, a line per batch otherwise."""
    run = {"batch": batch, "max_failures": limit, "concurrency": concurrency}
    if quiet:
        session.run(evaluate_fn, **run)
        return
    T = len(session.target_ids)
    total = T * session.n_items
    if session.max_items is not None:
        total = min(total, session.max_items)

    def status_of(s, item, score) -> str:
        if s.several:
            status = f"{int(np.sum(s.stopped_at > 0))}/{T} targets done"
        else:
            value, lower, upper = s.estimate()
            status = f"estimate {value:.3f} [{lower:.3f}, {upper:.3f}]"
        return status + (f"  (skipped {item})" if score is None else "")

    if not err.is_terminal:  # a log: one plain line per batch (or per 10 items)
        every = max(batch, 10 if batch == 1 else 1)
        last = [session.n_observed]

        def on_line(s, *asked):
            *_, item, score = asked
            if s.n_observed - last[0] >= every or s.done:
                last[0] = s.n_observed
                err.print(f"evaluating: {s.n_observed}/{total} items, "
                          f"{s.times.wall_seconds():.0f} s, "
                          f"{status_of(s, item, score)}", highlight=False)

        session.run(evaluate_fn, on_step=on_line, **run)
        return
    with progress_bar("evaluating") as progress:
        task = progress.add_task("eval", total=total, completed=session.n_observed,
                                 status="")

        def on_step(s, *asked):
            *_, item, score = asked
            progress.update(task, completed=s.n_observed, status=status_of(s, item, score))

        session.run(evaluate_fn, on_step=on_step, **run)


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


def _domain_fields(session) -> dict[str, Any]:
    """The result's check of a model-based interval against the reference models' domain
    (:mod:`bayeval.estimators.domain`): the check, and a warning when it flags the run
    (none for a design-based method)."""
    check = session.domain_check()
    if check is None:
        return {}
    return {"domain_check": check.as_dict(),
            "domain_warning": check.note(session.method.name)}


def _random_items(value: float, width: float, session) -> int:
    """RS-Mean's items for this width at this estimate
    (:func:`~bayeval.estimators.sample_mean.items_for_width`; imported here, not at the
    top, so that a bad option is reported before JAX loads)."""
    from bayeval.estimators.sample_mean import items_for_width

    return items_for_width(value, width, session.n_items, session.method.level)


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
