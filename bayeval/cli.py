"""The ``bayeval`` command line."""

from __future__ import annotations

import json
import sys
import time
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bayeval.errors import BayevalError

app = typer.Typer(
    help="bayeval: evaluate a language model on fewer items, with an interval and a "
         "stopping rule, using the per-item scores of models evaluated before.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

DEFAULT_DATASET = "ifeval"
DEFAULT_METHOD = "bayesame"


class EvaluatorKind(StrEnum):
    oracle = "oracle"
    command = "command"


def _enable_compilation_cache() -> None:
    """Keep compiled JAX programs between runs of the command (first run compiles)."""
    import os

    import jax

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    try:
        jax.config.update("jax_compilation_cache_dir", os.path.join(base, "bayeval", "jax"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except (AttributeError, ValueError):  # an older JAX without these options
        pass


@app.callback()
def _configure() -> None:
    # every command computes in float64 (bayeval.precision); the library leaves that to
    # the program that uses it
    from bayeval.precision import enable_float64

    enable_float64()


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


@app.command()
def datasets() -> None:
    """List the bundled real score matrices with their shapes, source and metric."""
    from bayeval.data import list_datasets, load_dataset

    table = Table(title="bundled datasets (bayeval.data.load_dataset(name))",
                  box=box.SIMPLE_HEAD)
    for col in ("name", "models", "items", "kind", "source", "metric"):
        table.add_column(col, justify="right" if col in ("models", "items") else "left",
                         no_wrap=col not in ("source", "metric"), overflow="fold")
    for name in list_datasets():
        m = load_dataset(name)
        table.add_row(name, str(m.n_models), str(m.n_items), m.kind,
                      m.metadata.get("source", ""), m.metadata.get("metric", ""))
    out.print(table)


def _make_evaluator(settings: dict[str, Any], matrix, target: str):
    from bayeval.evaluators import CommandEvaluator, MatrixOracle

    if settings["evaluator"] == EvaluatorKind.command.value:
        return CommandEvaluator(settings["command"], timeout=settings["timeout"],
                                retries=settings["retries"])
    return MatrixOracle(matrix, target)


@app.command()
def evaluate(
    dataset: Annotated[str | None, typer.Option(
        help="Bundled dataset to use as reference (see `bayeval datasets`). "
             f"Default: {DEFAULT_DATASET}.")] = None,
    reference: Annotated[Path | None, typer.Option(
        help="Reference score matrix file (.npz, .csv or .parquet, wide or long) instead "
             "of a bundled dataset.")] = None,
    target: Annotated[str | None, typer.Option(
        help="Model to evaluate. With the oracle evaluator: a model of the matrix, held out "
             "from the reference (default: one drawn with --seed). With a command: any "
             "name for the new model.")] = None,
    targets: Annotated[str | None, typer.Option(
        help="Several models to evaluate jointly (comma-separated), e.g. checkpoints of "
             "one family: multi-target BayesAME shares what it learns between them. With "
             "a command, {target} in it is replaced by the model's name.")] = None,
    evaluator: Annotated[EvaluatorKind | None, typer.Option(
        help="oracle: simulate with the target's known row; command: run --command for "
             "each item.")] = None,
    command: Annotated[str | None, typer.Option(
        help="Shell command that evaluates one item and prints its score (0..1) as the "
             "last line; {item} is replaced by the item id (else appended).")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds before a command is killed.")] = 600.0,
    retries: Annotated[int, typer.Option(
        help="Retries of a failing command before the item is left unevaluated.")] = 1,
    method: Annotated[str | None, typer.Option(
        help="Evaluation method: bayesame (default), bayesame-rs, bayesame-laplace, "
             "bayes-aipw, random or faq, optionally with parameters, e.g. "
             "'faq(budget=0.1)' (FAQ: fixed budget, Pro-Active Inference interval).")
    ] = None,
    epsilon: Annotated[float | None, typer.Option(
        help="Stop once the 95% interval is at most this wide (with bayesame, also once "
             "the estimate moved less than 0.005 over the last 30 items). Default: the "
             "method's (0.02 for bayesame, 0.1 for random).")] = None,
    max_items: Annotated[int | None, typer.Option(
        help="Evaluate at most this many items.")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed (default 0).")] = None,
    journal: Annotated[Path | None, typer.Option(
        help="Append every result to this JSON-lines journal (fsync'd), so a crash loses "
             "nothing. Default: none for the oracle, bayeval-TARGET-YYYYMMDD-HHMMSS.jsonl in the "
             "current folder for a command.")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run recorded in --journal (its settings are "
                         "read from it).")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the result as one JSON object.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Estimate a model's benchmark score from as few items as needed.

    With no options: simulate an active evaluation of one held-out model of the bundled
    IFEval matrix, and print the estimate, its 95% interval, the true score and how many
    items were used.
    """
    try:
        if targets is not None or (resume and journal is not None and _is_joint(journal)):
            if target is not None:
                raise BayevalError("give either --target or --targets, not both")
            if method is not None:
                raise BayevalError("--targets always uses multi-target BayesAME; drop --method")
            result = _evaluate_joint(dataset, reference, targets, evaluator, command, timeout,
                                     retries, epsilon, max_items, seed, journal, resume, quiet)
            printer = _print_joint_result
        else:
            result = _evaluate(dataset, reference, target, evaluator, command, timeout,
                               retries, method, epsilon, max_items, seed, journal, resume,
                               quiet)
            printer = _print_result
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps(result))
    else:
        printer(result)


def _resume_session(session_class, journal: Path, given: dict[str, Any]):
    """The session ``journal`` records, its repair warnings printed; options that the
    journal fixes must not be given again."""
    clash = [k for k, v in given.items() if v is not None]
    if clash:
        raise BayevalError(f"--resume reads the settings from {journal}; drop "
                           f"{', '.join(clash)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = session_class.resume(journal)
    for w in caught:
        err.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    return session


def _resume(session_class, journal: Path, given: dict[str, Any]):
    """(session, its evaluator settings, the whole source matrix) from ``journal``."""
    from bayeval.session import load_source_matrix

    session = _resume_session(session_class, journal, given)
    return session, session.extra, load_source_matrix(session.reference_source or {})


def _progress_bar(verb: str) -> Progress:
    """The progress bar of long runs: verb, bar, done/total, a status field, time."""
    return Progress(TextColumn(f"[bold]{verb}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err,
                    transient=False)


def _fresh_source(dataset: str | None, reference: Path | None):
    """(source record for the journal header, the matrix) of --dataset / --reference."""
    from bayeval.session import load_source_matrix

    if dataset is not None and reference is not None:
        raise BayevalError("give either --dataset or --reference, not both")
    source: dict[str, Any] = ({"path": str(reference.resolve())} if reference is not None
                              else {"dataset": dataset or DEFAULT_DATASET})
    return source, load_source_matrix(source)


def _evaluate(dataset, reference, target, evaluator, command, timeout, retries, method,
              epsilon, max_items, seed, journal, resume, quiet) -> dict[str, Any]:
    from bayeval.session import Session

    _enable_compilation_cache()
    if resume:
        if journal is None:
            raise BayevalError("--resume needs --journal PATH (the journal to continue)")
        session, settings, matrix = _resume(Session, journal, {
            "--dataset": dataset, "--reference": reference, "--target": target,
            "--evaluator": evaluator, "--command": command, "--method": method,
            "--epsilon": epsilon, "--max-items": max_items, "--seed": seed})
    else:
        source, matrix = _fresh_source(dataset, reference)
        kind = (evaluator or EvaluatorKind.oracle).value
        seed = 0 if seed is None else seed
        if kind == "command":
            if not command:
                raise BayevalError("--evaluator command needs --command 'CMD {item}'")
            if target is None:
                raise BayevalError("--evaluator command needs --target NAME for the new model")
        elif command is not None:
            raise BayevalError("--command is only used with --evaluator command")
        if target is None:
            target = str(np.random.default_rng(seed).choice(matrix.models))
        if target in set(matrix.models):
            ref = matrix.drop_models([target])
            source["held_out"] = [target]
        elif kind == "oracle":
            raise BayevalError(f"unknown target id {target!r}: not a model of "
                               f"{matrix.name} ({matrix.n_models} models)")
        else:
            ref = matrix
        if journal is None and kind == "command":
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in target)
            journal = Path(f"bayeval-{safe}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
        settings = {"evaluator": kind, "command": command, "timeout": timeout,
                    "retries": retries}
        from bayeval.methods import parse_method_spec

        name, params = parse_method_spec(method or DEFAULT_METHOD)
        if epsilon is not None:
            params["epsilon"] = epsilon
        session = Session(ref, target, name, method_params=params, seed=seed,
                          journal=journal, max_items=max_items, reference_source=source,
                          extra=settings)
    with session:
        evaluate_fn = _make_evaluator(settings, matrix, session.target_id)
        _run_with_progress(session, evaluate_fn, quiet)
        value, lower, upper = session.estimate()
        truth = None
        if session.target_id in set(matrix.models):
            row = matrix.row(session.target_id)
            if not np.isnan(row).any():
                truth = float(row.mean())
        return {
            "target": session.target_id,
            "reference": session.reference.name,
            "reference_models": session.reference.n_models,
            "method": session.method.name,
            "params": session.method.params,
            "seed": session.seed,
            "estimate": value,
            "lower": lower,
            "upper": upper,
            "level": session.method.level,
            "true_score": truth,
            "covered": None if truth is None else bool(lower <= truth <= upper),
            "items_used": session.n_observed,
            "items_evaluated": session.n_evaluated,
            "items_skipped": len(session.skipped),
            "n_items": session.n_items,
            "stopped": session.stop_reason,
            "items": [item for item, _ in session.observations],
            "journal": None if session.journal_path is None else str(session.journal_path),
        }


def _is_joint(journal: Path) -> bool:
    from bayeval.session import Session

    header = Session.read_journal(journal)[0]
    return "targets" in header


def _evaluate_joint(dataset, reference, targets, evaluator, command, timeout, retries,
                    epsilon, max_items, seed, journal, resume, quiet) -> dict[str, Any]:
    from bayeval.evaluators import CommandEvaluator
    from bayeval.joint_session import JointSession

    _enable_compilation_cache()
    if resume:
        session, settings, matrix = _resume(JointSession, journal, {
            "--dataset": dataset, "--reference": reference, "--targets": targets,
            "--evaluator": evaluator, "--command": command, "--epsilon": epsilon,
            "--max-items": max_items, "--seed": seed})
    else:
        source, matrix = _fresh_source(dataset, reference)
        names = [t.strip() for t in targets.split(",") if t.strip()]
        if not names:
            raise BayevalError("--targets needs at least one model name")
        kind = (evaluator or EvaluatorKind.oracle).value
        if kind == "command" and not command:
            raise BayevalError("--evaluator command needs --command 'CMD {target} {item}'")
        if kind != "command" and command is not None:
            raise BayevalError("--command is only used with --evaluator command")
        known = set(matrix.models)
        if kind == "oracle":
            unknown = [t for t in names if t not in known]
            if unknown:
                raise BayevalError(f"unknown target id(s) {unknown}: not models of "
                                   f"{matrix.name} ({matrix.n_models} models)")
        held = [t for t in names if t in known]
        ref = matrix.drop_models(held) if held else matrix
        if held:
            source["held_out"] = held
        if journal is None and kind == "command":
            journal = Path(f"bayeval-joint-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
        settings = {"evaluator": kind, "command": command, "timeout": timeout,
                    "retries": retries}
        params = {} if epsilon is None else {"epsilon": epsilon}
        session = JointSession(ref, names, params, seed=0 if seed is None else seed,
                               journal=journal, max_evaluations=max_items,
                               reference_source=source, extra=settings)
    with session:
        if settings["evaluator"] == EvaluatorKind.command.value:
            runner = CommandEvaluator(settings["command"], timeout=settings["timeout"],
                                      retries=settings["retries"])

            def evaluate_fn(target, item):
                return runner(item, target)
        else:
            rows = {t: matrix.row(t) for t in session.target_ids}
            index = {item: j for j, item in enumerate(matrix.items)}

            def evaluate_fn(target, item):
                return float(rows[target][index[item]])
        if quiet:
            session.run(evaluate_fn)
        else:
            T = len(session.target_ids)
            with _progress_bar("evaluating") as progress:
                task = progress.add_task("eval", total=T * session.reference.n_items,
                                         completed=session.n_evaluations, status="")

                def on_step(s, target, item, score):
                    run = s.run_state
                    phase = "initial design" if run.in_design else (
                        f"{int(run.done.sum())}/{T} targets done")
                    progress.update(task, completed=s.n_evaluations, status=phase)

                session.run(evaluate_fn, on_step=on_step)
        run = session.run_state
        per_target = []
        for k, (t, (value, lower, upper)) in enumerate(session.estimates().items()):
            truth = None
            if t in set(matrix.models):
                row = matrix.row(t)
                if not np.isnan(row).any():
                    truth = float(row.mean())
            per_target.append({
                "target": t, "estimate": value, "lower": lower, "upper": upper,
                "true_score": truth,
                "covered": None if truth is None else bool(lower <= truth <= upper),
                "items_used": int((~run.available[k]).sum()),
                "stopped_after": int(run.stopped_at[k]) or None})
        return {
            "targets": per_target,
            "reference": session.reference.name,
            "reference_models": session.reference.n_models,
            "method": "bayesame-joint",
            "params": session.config.params,
            "seed": session.seed,
            "level": session.config.level,
            "evaluations": session.n_evaluations,
            "skipped": len(session.skipped),
            "n_items": session.reference.n_items,
            "stopped": session.stop_reason,
            "journal": None if session.journal_path is None else str(session.journal_path),
        }


def _print_joint_result(r: dict[str, Any]) -> None:
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("target", "estimate", f"{r['level']:.0%} interval", "true score", "items",
                "stopped after"):
        table.add_column(col, justify="left" if col == "target" else "right",
                         no_wrap=col != "target", overflow="fold")
    for t in r["targets"]:
        truth = "" if t["true_score"] is None else (
            f"{t['true_score']:.4f}" + ("" if t["covered"] else " (outside)"))
        table.add_row(t["target"], f"{t['estimate']:.4f}",
                      f"[{t['lower']:.4f}, {t['upper']:.4f}]", truth,
                      f"{t['items_used']}/{r['n_items']}",
                      "" if t["stopped_after"] is None else f"{t['stopped_after']} evals")
    out.print(table)
    total = len(r["targets"]) * r["n_items"]
    out.print(f"reference {r['reference']} ({r['reference_models']} models); "
              f"{r['evaluations']} evaluations of {total} ({r['evaluations'] / total:.1%}); "
              f"stopped: {r['stopped']}" + (f"; journal {r['journal']}" if r["journal"] else ""))


def _run_with_progress(session, evaluate_fn, quiet: bool) -> None:
    if quiet:
        session.run(evaluate_fn)
        return
    with _progress_bar("evaluating") as progress:
        task = progress.add_task("eval", total=session.n_items, completed=session.n_observed,
                                 status="")

        def on_step(s, item, score):
            value, lower, upper = s.estimate()
            status = f"estimate {value:.3f} [{lower:.3f}, {upper:.3f}]"
            if score is None:
                status += f"  (skipped {item})"
            progress.update(task, completed=s.n_observed, status=status)

        session.run(evaluate_fn, on_step=on_step)


def _print_result(r: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    width = r["upper"] - r["lower"]
    table.add_row("target", r["target"])
    table.add_row("reference", f"{r['reference']} ({r['reference_models']} models × "
                               f"{r['n_items']} items)")
    table.add_row("method", f"{r['method']} {r['params']}")
    table.add_row("estimate", f"{r['estimate']:.4f}")
    table.add_row(f"{r['level']:.0%} interval",
                  f"[{r['lower']:.4f}, {r['upper']:.4f}]  (width {width:.4f})")
    if r["true_score"] is not None:
        inside = "inside" if r["covered"] else "OUTSIDE"
        table.add_row("true score", f"{r['true_score']:.4f}  ({inside} the interval)")
    used = f"{r['items_used']} of {r['n_items']} ({r['items_used'] / r['n_items']:.1%})"
    if r.get("items_evaluated", r["items_used"]) != r["items_used"]:
        used += f" draws, {r['items_evaluated']} distinct items evaluated"
    if r["items_skipped"]:
        used += f", {r['items_skipped']} left unevaluated after failures"
    table.add_row("items used", used)
    table.add_row("stopped by", str(r["stopped"]))
    if r["journal"]:
        table.add_row("journal", r["journal"])
    out.print(table)


def _parse_budget(text: str, n_pairs: int) -> int:
    """'12%' of the model–item pairs, or a count of evaluations."""
    text = text.strip()
    try:
        if text.endswith("%"):
            value = float(text[:-1])
            if not 0 < value <= 100:
                raise ValueError
            return max(round(value / 100 * n_pairs), 1)
        value = int(text)
        if value < 1:
            raise ValueError
        return value
    except ValueError:
        raise BayevalError(f"--budget {text!r}: give a percentage of the model–item pairs "
                           "(e.g. 12%) or a number of evaluations") from None


@app.command()
def select(
    dataset: Annotated[str | None, typer.Option(
        help="Bundled dataset whose models and items to use (see `bayeval datasets`); with "
             "the oracle its scores answer. Default: arc_challenge.")] = None,
    reference: Annotated[Path | None, typer.Option(
        help="A score matrix file instead of a bundled dataset.")] = None,
    models: Annotated[str | None, typer.Option(
        help="Comma-separated candidate models (default: every model of the matrix).")
    ] = None,
    items: Annotated[Path | None, typer.Option(
        help="File of item ids, one per line (live runs; default: the matrix's items).")
    ] = None,
    budget: Annotated[str, typer.Option(
        help="Model–item evaluations allowed: a percentage of all pairs (12%) or a count.")
    ] = "12%",
    evaluator: Annotated[EvaluatorKind | None, typer.Option(
        help="oracle: simulate with the matrix's scores; command: run --command for each "
             "(model, item).")] = None,
    command: Annotated[str | None, typer.Option(
        help="Shell command that evaluates one model on one item and prints the score "
             "(0..1) as its last line; {model} and {item} are replaced.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds before a command is killed.")] = 600.0,
    retries: Annotated[int, typer.Option(
        help="Retries of a failing command before the pair is left unevaluated.")] = 1,
    seed: Annotated[int | None, typer.Option(help="Random seed (default 0).")] = None,
    journal: Annotated[Path | None, typer.Option(
        help="Append every result to this JSON-lines journal (fsync'd). Default: none for "
             "the oracle, bayeval-select-YYYYMMDD-HHMMSS.jsonl for a command.")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the selection recorded in --journal.")] = False,
    top: Annotated[int, typer.Option(help="Rows of the ranking to print.")] = 10,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the result as one JSON object.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Find the best of several models with a budget of model–item evaluations
    (synchronised successive rejects, seed 002).

    With no options: simulate on the bundled ARC-Challenge matrix with 12% of its pairs,
    and print the ranking, the evaluations used and whether the true best was found.
    """
    try:
        result = _select(dataset, reference, models, items, budget, evaluator, command,
                         timeout, retries, seed, journal, resume, quiet)
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps(result))
    else:
        _print_selection(result, top)


def _select(dataset, reference, models, items, budget, evaluator, command, timeout, retries,
            seed, journal, resume, quiet) -> dict[str, Any]:
    from bayeval.evaluators import CommandEvaluator, MatrixPairOracle
    from bayeval.selection.session import SelectionSession
    from bayeval.session import load_source_matrix

    if resume:
        if journal is None:
            raise BayevalError("--resume needs --journal PATH (the selection to continue)")
        session = _resume_session(SelectionSession, journal, {
            "--dataset": dataset, "--reference": reference, "--models": models,
            "--items": items, "--evaluator": evaluator, "--command": command, "--seed": seed})
        settings = session.extra
        source = settings.get("source")
        matrix = load_source_matrix(source, journal) if source else None
    else:
        kind = (evaluator or EvaluatorKind.oracle).value
        if kind == "command" and not command:
            raise BayevalError("--evaluator command needs --command 'CMD {model} {item}'")
        if kind == "oracle" and command is not None:
            raise BayevalError("--command is only used with --evaluator command")
        matrix, source = None, None
        if kind == "oracle" or items is None or models is None:
            if dataset is not None and reference is not None:
                raise BayevalError("give either --dataset or --reference, not both")
            source = ({"path": str(reference.resolve())} if reference is not None
                      else {"dataset": dataset or "arc_challenge"})
            matrix = load_source_matrix(source)
        elif dataset is not None or reference is not None:
            raise BayevalError("--items and --models name everything a live run needs; drop "
                               "--dataset/--reference")
        if models is not None:
            names = [m.strip() for m in models.split(",") if m.strip()]
            if matrix is not None and kind == "oracle":
                unknown = [m for m in names if m not in set(matrix.models)]
                if unknown:
                    raise BayevalError(f"model(s) {unknown} are not in {matrix.name}")
        else:
            names = list(matrix.models)
        if items is not None:
            try:
                item_ids = [ln.strip() for ln in items.read_text().splitlines() if ln.strip()]
            except OSError as exc:
                raise BayevalError(f"--items {items}: {exc.strerror}") from None
            if matrix is not None and kind == "oracle":
                unknown = [i for i in item_ids if i not in set(matrix.items)]
                if unknown:
                    raise BayevalError(f"--items {items}: {len(unknown)} item(s) are not in "
                                       f"{matrix.name}, e.g. {unknown[0]!r}")
        else:
            item_ids = list(matrix.items)
        n = _parse_budget(budget, len(names) * len(item_ids))
        if journal is None and kind == "command":
            journal = Path(f"bayeval-select-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
        settings = {"evaluator": kind, "command": command, "timeout": timeout,
                    "retries": retries, "source": source}
        session = SelectionSession(names, item_ids, n, seed=0 if seed is None else seed,
                                   journal=journal, extra=settings)
    with session:
        if settings["evaluator"] == EvaluatorKind.command.value:
            runner = CommandEvaluator(settings["command"].replace("{model}", "{target}"),
                                      timeout=settings["timeout"], retries=settings["retries"])

            def evaluate_fn(model, item):
                return runner(item, model)
        else:
            if matrix is None:
                raise BayevalError(f"journal {journal}: no score matrix recorded for the oracle")
            evaluate_fn = MatrixPairOracle(matrix)
        schedule = session.schedule
        total = int(schedule.sum() + schedule[-1])
        if quiet:
            session.run(evaluate_fn)
        else:
            with _progress_bar("selecting") as progress:
                task = progress.add_task("select", total=total, status="",
                                         completed=session.n_evaluations + len(session.skipped))

                def on_step(s, model, item, score):
                    phase = min(s.phase + 1, len(schedule))
                    status = f"phase {phase}/{len(schedule)}, {int(s.alive.sum())} left"
                    progress.update(task, completed=s.n_evaluations + len(s.skipped),
                                    status=status)

                session.run(evaluate_fn, on_step=on_step)
        means = session.means()
        truth = None
        if matrix is not None and settings["evaluator"] == "oracle":
            rows = {m: i for i, m in enumerate(matrix.models)}
            cols = [matrix.item_index(i) for i in session.items]
            truth = {m: float(np.nanmean(matrix.scores[rows[m], cols])) for m in session.models}
        ranking = session.ranking()
        result: dict[str, Any] = {
            "best": session.best, "models": len(session.models), "items": len(session.items),
            "budget": session.budget, "evaluations": session.n_evaluations,
            "skipped": len(session.skipped), "phases": len(schedule), "seed": session.seed,
            "ranking": [{"model": m, "mean": means[m][0], "evaluated": means[m][1],
                         **({"true_mean": truth[m]} if truth else {})} for m in ranking],
            "journal": str(session.journal_path) if session.journal_path else None}
        if truth:
            best_true = max(truth.values())
            result["found_best"] = bool(truth[session.best] >= best_true - 1e-12)
            order = sorted(session.models, key=lambda m: -truth[m])
            result["true_best"] = order[0]
        return result


def _print_selection(r: dict[str, Any], top: int) -> None:
    truth = "true_mean" in (r["ranking"][0] if r["ranking"] else {})
    table = Table(box=box.SIMPLE_HEAD, title=f"ranking (best first, top {top})")
    for col in ("rank", "model", "mean", "items"):
        table.add_column(col, justify="left" if col == "model" else "right")
    if truth:
        table.add_column("true mean", justify="right")
        table.add_column("true rank", justify="right")
        true_rank = {row["model"]: k for k, row in enumerate(
            sorted(r["ranking"], key=lambda row: -row["true_mean"]), start=1)}
    for k, row in enumerate(r["ranking"][:top], start=1):
        cells = [str(k), row["model"], f"{row['mean']:.4f}", str(row["evaluated"])]
        if truth:
            cells += [f"{row['true_mean']:.4f}", str(true_rank[row["model"]])]
        table.add_row(*cells)
    out.print(table)
    pairs = r["models"] * r["items"]
    line = (f"best: {r['best']}  ·  {r['evaluations']} evaluations of {r['budget']} allowed "
            f"({r['evaluations'] / pairs:.1%} of {r['models']} models × {r['items']} items)")
    if r["skipped"]:
        line += f", {r['skipped']} left unevaluated after failures"
    out.print(line, highlight=False)
    if "found_best" in r:
        out.print("the true best" if r["found_best"] else
                  f"[bold]not[/] the true best (that is {r['true_best']})", highlight=False)
    if r["journal"]:
        out.print(f"journal: {r['journal']}", highlight=False)


class CompressionMethod(StrEnum):
    bestrand = "bestrand"
    mince = "mince"
    random = "random"
    kmeans = "kmeans"
    stratified = "stratified"


@app.command()
def compress(
    method: Annotated[CompressionMethod, typer.Option(
        help="bestrand: best of C random candidates by probe imbalance; mince: size by "
             "Monte Carlo drift of calibration models, then freeze a random subset; "
             "random, kmeans, stratified: baselines.")] = CompressionMethod.bestrand,
    dataset: Annotated[str | None, typer.Option(
        help="Bundled dataset (see `bayeval datasets`). Default: arc_challenge.")] = None,
    reference: Annotated[Path | None, typer.Option(
        help="A score matrix file instead of a bundled dataset.")] = None,
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
        help="Task name for the --samples file (default: the matrix's task).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")
                       ] = False,
) -> None:
    """Shrink a benchmark to a fixed subset (BestRand, seed 003; MINCE, seed 004), write it
    as a subset file, and report its drift on models not used to build it."""
    try:
        result = _compress(method, dataset, reference, retention, size, probes, pool,
                           candidates, calibration, step, tau, categories, holdout, seed,
                           subset_file, export_samples, task)
    except (BayevalError, ValueError) as exc:
        raise _fail(str(exc)) from None
    if as_json:
        print(json.dumps(result))
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("benchmark", f"{result['benchmark']} ({result['n_items']} items)")
    table.add_row("method", f"{result['method']} {result['parameters']}")
    table.add_row("subset", f"{result['size']} items ({result['size'] / result['n_items']:.1%})")
    drift = result["drift"]
    table.add_row("drift on held-out", f"max {100 * drift['held_out_max']:.2f} pp, mean "
                                       f"{100 * drift['held_out_mean']:.2f} pp over "
                                       f"{drift['held_out_models']} models")
    table.add_row("written", result["file"] + (f", {result['samples_file']}"
                                               if result.get("samples_file") else ""))
    out.print(table)


def _compress(method, dataset, reference, retention, size, probes, pool, candidates,
              calibration, step, tau, categories, holdout, seed, out, export_samples, task):
    import jax

    from bayeval.compression.baselines import kmeans_subset, stratified_subset, uniform_subset
    from bayeval.compression.bestrand import bestrand
    from bayeval.compression.mince import freeze_subset, mince_sizing
    from bayeval.compression.subset import Subset, export_lm_eval_samples
    from bayeval.session import load_source_matrix

    if dataset is not None and reference is not None:
        raise BayevalError("give either --dataset or --reference, not both")
    source = ({"path": str(reference.resolve())} if reference is not None
              else {"dataset": dataset or "arc_challenge"})
    matrix = load_source_matrix(source)
    scores = matrix.scores
    if np.isnan(scores).any():
        raise BayevalError(f"{matrix.name}: the score matrix has missing entries")
    K, L = scores.shape
    names = [str(m) for m in matrix.models]
    if not 0 <= holdout < 1:
        raise BayevalError(f"--holdout must be in [0, 1), got {holdout}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(K)
    n_held = round(holdout * K)
    held, build = order[:n_held], order[n_held:]

    def models_of(option: str | None, flag: str, default: int) -> np.ndarray:
        if option is None:
            return build[:default]
        wanted = [m.strip() for m in option.split(",") if m.strip()]
        unknown = [m for m in wanted if m not in names]
        if unknown:
            raise BayevalError(f"{flag}: model(s) {unknown} are not in {matrix.name}")
        return np.array([names.index(m) for m in wanted])

    if method != CompressionMethod.mince:
        if retention is not None and size is not None:
            raise BayevalError("give either --retention or --size, not both")
        if size is None:
            size = max(1, round((0.1 if retention is None else retention) * L))
        if not 1 <= size <= L:
            raise BayevalError(f"subset size must be in 1..{L}, got {size}")
    elif retention is not None or size is not None:
        raise BayevalError("mince chooses the size itself; drop --retention/--size")
    weights, used, params = None, [], {}
    key = jax.random.key(seed)
    if method == CompressionMethod.bestrand:
        probe_rows = models_of(probes, "--probes", 5)
        M = int(min(L, max(size, round(pool * size))))
        result = bestrand(scores[probe_rows], key, size, M, candidates)
        items = np.sort(np.asarray(result.items))
        used = probe_rows
        params = {"probes": len(probe_rows), "pool": M, "candidates": candidates,
                  "imbalance": float(np.min(np.asarray(result.imbalance)))}
    elif method == CompressionMethod.mince:
        cal = models_of(calibration, "--calibration", 7)
        sizing = mince_sizing(scores[cal], key, step, tau)
        items = freeze_subset(L, sizing.size)
        used = cal
        t = int(np.flatnonzero(sizing.sizes == sizing.size)[0])
        params = {"step": step, "tau": tau, "subsets": 10_000,
                  "p95_at_size": float(sizing.p95[t]), "freeze_seed": 42}
    elif method == CompressionMethod.random:
        items, _ = uniform_subset(rng, L, size)
    elif method == CompressionMethod.kmeans:
        items, weights = kmeans_subset(rng, scores[build], size)
        used = build
    else:
        if categories is None:
            raise BayevalError("stratified needs --categories FILE (CSV of item,category)")
        import pandas as pd

        try:
            table = pd.read_csv(categories, header=None, names=["item", "category"], dtype=str)
        except OSError as exc:
            raise BayevalError(f"--categories {categories}: {exc.strerror}") from None
        label = dict(zip(table["item"], table["category"], strict=False))
        missing = [i for i in matrix.items if i not in label]
        if missing:
            raise BayevalError(f"--categories {categories}: no category for {len(missing)} "
                               f"item(s), e.g. {missing[0]!r}")
        items, weights = stratified_subset(rng, [label[i] for i in matrix.items], size)
    w = np.full(len(items), 1 / len(items)) if weights is None else np.asarray(weights)
    held_rows = held if len(held) else order
    error = scores[held_rows][:, items] @ w - scores[held_rows].mean(axis=1)
    drift = {"held_out_max": float(np.abs(error).max()),
             "held_out_mean": float(np.abs(error).mean()),
             "held_out_models": len(held_rows)}
    subset = Subset(matrix.name, L, [str(matrix.items[j]) for j in items], method.value,
                    params, seed, [names[i] for i in used], drift,
                    None if weights is None else [float(x) for x in weights],
                    task or matrix.metadata.get("task"))
    subset.save(out)
    result = {**subset.to_json(), "file": str(out)}
    if export_samples is not None:
        export_lm_eval_samples(subset, export_samples)
        result["samples_file"] = str(export_samples)
    return result


@app.command()
def diagnose(
    dataset: Annotated[str | None, typer.Option(
        help=f"Bundled dataset (see `bayeval datasets`). Default: {DEFAULT_DATASET}.")
                       ] = None,
    reference: Annotated[Path | None, typer.Option(
        help="Score matrix file (.npz, .csv or .parquet) instead of a bundled dataset.")
                         ] = None,
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
    samples: Annotated[int, typer.Option(help="Draws per chain.")] = 1000,
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
    from bayeval.diagnose import diagnose_case, plot_diagnosis

    _enable_compilation_cache()
    try:
        _, matrix = _fresh_source(dataset, reference)
        if target is None:
            target = str(np.random.default_rng(seed).choice(matrix.models))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = diagnose_case(matrix, target, model, coreset, seed, chains, warmup,
                                   samples)
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    paths = plot_diagnosis(result, plot) if plot is not None else []
    if as_json:
        print(json.dumps({**result.to_json(), "plots": [str(p) for p in paths]}, indent=2))
        return
    table = Table(title=f"{model} on {matrix.name}, target {target}, {coreset} of "
                        f"{matrix.n_items} items observed", box=box.SIMPLE_HEAD)
    for col in ("variable", "R-hat", "bulk ESS", "tail ESS"):
        table.add_column(col, justify="left" if col == "variable" else "right")
    worst = result.table.sort_values("r_hat", ascending=False)
    for name, r in worst.head(rows).iterrows():
        table.add_row(str(name), f"{r.r_hat:.4f}", f"{r.ess_bulk:.0f}", f"{r.ess_tail:.0f}")
    out.print(table)
    if len(worst) > rows:
        out.print(f"({len(worst) - rows} more variables; all R-hat ≤ {worst.r_hat.max():.4f}, "
                  f"bulk ESS ≥ {worst.ess_bulk.min():.0f}, tail ESS ≥ "
                  f"{worst.ess_tail.min():.0f})", highlight=False)
    out.print(f"divergences: {result.divergences} · energy BFMI per chain: "
              + ", ".join(f"{b:.2f}" for b in result.bfmi), highlight=False)
    out.print(f"NUTS: {chains} chains × ({warmup} warm-up + {samples} draws) in "
              f"{result.seconds:.1f} s with compilation ({result.total_seconds:.1f} s in all)",
              highlight=False)
    if result.refit_seconds is not None:
        out.print(f"refit after 50 more items (warm start, compiled): "
                  f"{result.refit_seconds:.2f} s", highlight=False)
    out.print(f"estimate {result.estimate:.4f} ± {result.sd:.4f} (sd), true score "
              f"{result.truth:.4f}", highlight=False)
    verdict = ("[green]all diagnostics within thresholds[/]" if not result.problems else
               "[yellow]" + "; ".join(result.problems) + "[/]")
    out.print(verdict)
    for path in paths:
        out.print(f"wrote {path}", highlight=False)


bench_app = typer.Typer(help="Experiments that reproduce the papers' tables.",
                        no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("estimation")
def bench_estimation(
    datasets: Annotated[str, typer.Option(
        "--datasets", help="Comma-separated bundled datasets.")] = "ifeval",
    regimes: Annotated[str, typer.Option(
        help="Comma-separated: interpolation, extrapolation.")] = "interpolation,extrapolation",
    methods: Annotated[str, typer.Option(
        help="Comma-separated method specs: name or name(key=value, ...), e.g. "
             "'bayesame,bayesame(refit_every=0)'.")] = "bayesame,bayesame-rs,random,bayes-aipw",
    targets: Annotated[int, typer.Option(help="Target models per regime.")] = 10,
    seeds: Annotated[int, typer.Option(
        help="Seeds: each draws its own reference subset and selection.")] = 20,
    reference_fraction: Annotated[float, typer.Option(
        help="Share of the pool used as reference models.")] = 0.5,
    split_seed: Annotated[int, typer.Option(help="Seed of the target draw.")] = 0,
    out: Annotated[Path, typer.Option(help="Folder for CSV files, plots and report.md.")
                   ] = Path("results/estimation"),
) -> None:
    """Seed 000's estimation experiment: RMSE(n), integrated RMSE, gain over RS-Mean and
    cost–accuracy of the two-condition rule, for every method, full-length runs."""
    import pandas as pd

    from bayeval.experiments.estimation import run_estimation, write_report
    from bayeval.methods import split_method_specs

    _enable_compilation_cache()
    all_curves, all_stops = [], []
    try:
        for name in [d.strip() for d in datasets.split(",") if d.strip()]:
            curves, stops = run_estimation(
                name, regimes=[r.strip() for r in regimes.split(",")],
                methods=split_method_specs(methods), n_targets=targets,
                seeds=seeds, reference_fraction=reference_fraction, split_seed=split_seed,
                log=lambda line: err.print(line, highlight=False), runs_dir=out / "runs")
            all_curves.append(curves)
            all_stops.append(stops)
            write_report(pd.concat(all_curves), pd.concat(all_stops), out)  # keep partial
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    report = write_report(pd.concat(all_curves), pd.concat(all_stops), out)
    out_text = report.read_text()
    print(out_text)
    err.print(f"wrote {out}/rmse_curves.csv, cost_accuracy.csv, irmse.csv, estimation.png, "
              "report.md")


@bench_app.command("inference")
def bench_inference(
    dataset: Annotated[str, typer.Option(help="Bundled dataset.")] = "ifeval",
    regime: Annotated[str, typer.Option(help="interpolation or extrapolation.")
                      ] = "interpolation",
    methods: Annotated[str, typer.Option(
        help="Comma-separated method specs, e.g. 'bayesame,bayesame-laplace,irt,"
             "irt(num_chains=2)'.")] = "bayesame,bayesame-laplace,irt",
    seeds: Annotated[int, typer.Option(
        help="Seeds: each draws its own reference subset and selection.")] = 5,
    targets: Annotated[int, typer.Option(help="Target models.")] = 10,
    steps: Annotated[int, typer.Option(help="Evaluations per run.")] = 300,
    every: Annotated[int, typer.Option(help="Report RMSE every this many items.")] = 50,
    reference_fraction: Annotated[float, typer.Option(
        help="Share of the pool used as reference models.")] = 0.5,
    out: Annotated[Path, typer.Option(help="Folder for CSV files, inference.png and "
                                           "report.md.")] = Path("results/inference"),
) -> None:
    """Gaussian BayesAME (exact), the Bernoulli-logit bucket GP (Laplace) and 2PL IRT
    (NUTS) on one estimation task: RMSE every EVERY items, wall time, and every NUTS fit's
    R-hat, ESS, divergences and seconds."""
    from bayeval.experiments.inference import run_inference_comparison, write_report
    from bayeval.methods import split_method_specs

    _enable_compilation_cache()
    try:
        curves, fits, timing = run_inference_comparison(
            dataset, regime, split_method_specs(methods), seeds=seeds, n_targets=targets,
            n_steps=steps, reference_fraction=reference_fraction,
            log=lambda line: err.print(line, highlight=False), runs_dir=out / "runs")
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    print(write_report(curves, fits, timing, out, every).read_text())
    err.print(f"wrote {out}/rmse_curves.csv, mcmc_fits.csv, timing.csv, inference.png, "
              "report.md")


@bench_app.command("multitarget")
def bench_multitarget(
    datasets: Annotated[str, typer.Option(
        "--datasets", help="Comma-separated bundled datasets.")] = "ifeval",
    regimes: Annotated[str, typer.Option(
        help="Comma-separated: interpolation, extrapolation.")] = "interpolation,extrapolation",
    targets: Annotated[int, typer.Option(help="Targets evaluated jointly.")] = 5,
    seeds: Annotated[int, typer.Option(
        help="Seeds: each draws its own reference subset and selection.")] = 10,
    epsilon: Annotated[float, typer.Option(
        help="ε2 of the two-condition rule (interval width).")] = 0.02,
    refit_every: Annotated[int, typer.Option(
        help="Re-fit the joint hyperparameters every this many evaluations (all targets) "
             "after the initial design.")] = 250,
    selection: Annotated[str, typer.Option(
        help="round_robin (per-target IG) or mean_ig.")] = "round_robin",
    reference_fraction: Annotated[float, typer.Option(
        help="Share of the pool used as reference models.")] = 0.5,
    split_seed: Annotated[int, typer.Option(help="Seed of the target draw.")] = 0,
    out: Annotated[Path, typer.Option(help="Folder for CSV files, the plot and report.md; "
                                           "raw runs go to OUT/runs and are reused.")
                   ] = Path("results/multitarget"),
) -> None:
    """Multi-target vs independent single-target BayesAME: total evaluations until every
    target stops at ε2, RMSE and coverage then, and RMSE against total evaluations."""
    import pandas as pd

    from bayeval.data import load_dataset
    from bayeval.experiments.multitarget import run_multitarget, write_report

    _enable_compilation_cache()
    names = [d.strip() for d in datasets.split(",") if d.strip()]
    n_items = {}
    all_costs, all_curves = [], []
    try:
        for name in names:
            n_items[name] = load_dataset(name).n_items
            costs, curves = run_multitarget(
                name, regimes=[r.strip() for r in regimes.split(",")], n_targets=targets,
                seeds=seeds, reference_fraction=reference_fraction, split_seed=split_seed,
                epsilon2=epsilon, joint_params={"refit_every": refit_every,
                                                "selection": selection},
                runs_dir=out / "runs", log=lambda line: err.print(line, highlight=False))
            all_costs.append(costs)
            all_curves.append(curves)
            write_report(pd.concat(all_costs), pd.concat(all_curves), out, n_items, targets,
                         epsilon)
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    report = write_report(pd.concat(all_costs), pd.concat(all_curves), out, n_items, targets,
                          epsilon)
    print(report.read_text())
    err.print(f"wrote {out}/costs.csv, cost_table.csv, rmse_vs_evaluations.csv, "
              "multitarget.png, report.md")


@bench_app.command("selection")
def bench_selection(
    datasets: Annotated[str, typer.Option(
        "--datasets", help="Comma-separated bundled datasets, or 'all'.")] = "all",
    runs: Annotated[int, typer.Option(help="Runs (seeds) per algorithm and budget.")] = 1000,
    max_budget: Annotated[float, typer.Option(
        help="Largest budget fraction of the grid (1%…100% plus 1.25…5.5%).")] = 1.0,
    algorithms: Annotated[str, typer.Option(
        help="Comma-separated: SR, SySRs, UCB-E(a=0.1), UCB-E(a=1), UCB-E(a=10), "
             "SyUCB-E(a=1), US, SyUS.")] = ",".join(
        ("SR", "SySRs", "UCB-E(a=0.1)", "UCB-E(a=1)", "UCB-E(a=10)", "SyUCB-E(a=1)", "US",
         "SyUS")),
    out: Annotated[Path, typer.Option(help="Folder for accuracy.csv, selection.png, "
                                           "top_m.png, report.md and runs/.")
                   ] = Path("results/selection"),
) -> None:
    """Seed 002's experiment: accuracy of identifying the best model, and the top-3/5/10
    identification error, against the budget, with confidence budgets, for every algorithm
    on the bundled datasets. Each (dataset, algorithm) is saved under OUT/runs as soon as
    it is done and reused by a rerun with the same runs and grid."""
    import pandas as pd

    from bayeval.data import list_datasets, load_dataset
    from bayeval.experiments.selection import (
        ALGORITHMS,
        BUDGET_GRID,
        TABLE_BUDGETS,
        cached_accuracy_table,
        write_report,
    )

    names = list_datasets() if datasets == "all" else [
        d.strip() for d in datasets.split(",") if d.strip()]
    algos = [a.strip() for a in algorithms.split(",") if a.strip()]
    unknown = [a for a in algos if a not in ALGORITHMS]
    if unknown:
        raise _fail(f"unknown algorithm(s) {unknown} (known: {', '.join(ALGORITHMS)})")
    grid = sorted({*(b for b in BUDGET_GRID if b <= max_budget + 1e-12),
                   *(b for b in TABLE_BUDGETS if b <= max_budget + 1e-12)})
    tables = []
    try:
        for name in names:
            matrix = load_dataset(name)
            scores = matrix.scores
            if np.isnan(scores).any():
                raise BayevalError(f"{name}: the score matrix has missing entries")
            for algo in algos:  # each (dataset, algorithm) saved as soon as it is done
                cache = out / "runs" / name / f"{algo}.csv"
                tables.append(cached_accuracy_table(
                    scores, algo, grid, runs, cache, name,
                    log=lambda line: err.print(line, highlight=False)))
                write_report(pd.concat(tables), out, runs)
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    print((out / "report.md").read_text())
    err.print(f"wrote {out}/accuracy.csv, selection.png, top_m.png, report.md")


@bench_app.command("coverage")
def bench_coverage(
    suite: Annotated[str, typer.Option(
        help="Bundled dataset or suite of datasets sharing models (a+b).")] = "ifeval+musr",
    history: Annotated[str, typer.Option(
        help="'full' (fully observed history) or 'mcar' (--full-rows whole rows, every "
             "other entry kept with probability --p-obs).")] = "full",
    budgets: Annotated[str, typer.Option(
        help="Comma-separated budget shares of the items.")] = ",".join(
        f"{b:g}" for b in (0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.225, 0.25)),
    seeds: Annotated[int, typer.Option(help="Seeds per new model.")] = 100,
    val_seeds: Annotated[int, typer.Option(help="Seeds per validation model in tuning.")] = 5,
    full_rows: Annotated[int, typer.Option(help="Fully observed rows (mcar).")] = 50,
    p_obs: Annotated[float, typer.Option(help="Share of other entries kept (mcar).")] = 0.1,
    split_seed: Annotated[int, typer.Option(help="Seed of the historical/new split.")] = 0,
    factor_selection: Annotated[str, typer.Option(
        help="How CV picks (k, λ): 'one-se' (the 1-SE rule) or 'best' (highest mean "
             "accuracy).")] = "one-se",
    grid: Annotated[str, typer.Option(
        help="Policy tuning grid: 'full' (β0, ρ, γ, τ) or 'default' (ρ, γ only, with the "
             "robust (β0, τ) = (1, 0.05)).")] = "full",
    out: Annotated[Path, typer.Option(help="Folder for results.csv, report.md, coverage.png "
                                           "and the CV/tuning caches.")
                   ] = Path("results/coverage"),
) -> None:
    """Seed 001's experiment: coverage, mean width and ESS multiplier over uniform of
    FAQ's 95% interval (tuned and robust-default policy) per budget; models split 50/50
    into history and new, everything tuned on historical models only. Finished budgets
    are kept in OUT and skipped by a rerun."""
    from bayeval.experiments.coverage import DEFAULT, GRID, Setting, run_setting

    try:
        budget_list = [float(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        raise _fail(f"--budgets: not a comma-separated list of numbers: {budgets!r}") from None
    if not budget_list or any(not 0 < b < 1 for b in budget_list):
        raise _fail(f"--budgets: every budget must be a share in (0, 1), got {budgets!r}")
    if grid not in ("full", "default"):
        raise _fail(f"--grid must be 'full' or 'default', got {grid!r}")
    search = GRID if grid == "full" else {
        **GRID, **{name: (value,) for name, value in DEFAULT.items()}}
    setting = Setting(suite, history, full_rows, p_obs, split_seed, seeds, val_seeds,
                      factor_selection=factor_selection)
    try:
        with _progress_bar("simulating") as bar:
            task = bar.add_task("runs", total=None, status="")

            def progress(label: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, status=label)

            run_setting(setting, budget_list, out, grid=search, progress=progress,
                        log=lambda line: bar.console.print(
                            f"[{time.strftime('%H:%M:%S')}] {line}", highlight=False))
    except (BayevalError, ValueError) as exc:
        raise _fail(str(exc)) from None
    print((out / "report.md").read_text())
    err.print(f"wrote {out}/results.csv, report.md, coverage.png")


@bench_app.command("compression")
def bench_compression(
    datasets: Annotated[str, typer.Option(
        "--datasets", help="Comma-separated bundled datasets, or 'all'.")] = "all",
    seeds: Annotated[int, typer.Option(help="Seeds (model splits) for random and "
                                            "BestRand.")] = 200,
    kmeans_seeds: Annotated[int, typer.Option(help="Seeds for the k-means baseline.")] = 20,
    mince_seeds: Annotated[int, typer.Option(help="Seeds for MINCE (calibration draws).")
                           ] = 10,
    ablation: Annotated[bool, typer.Option(help="Also run the BestRand ablation "
                                                "(100 seeds, 5% and 10%).")] = True,
    out: Annotated[Path, typer.Option(help="Folder for results.csv, mince.csv, "
                                           "error_tails.png, report.md and runs/.")
                   ] = Path("results/compression"),
) -> None:
    """Seeds 003/004's experiment: random, BestRand and k-means subsets at 2–50% retention
    (MAE, high-error risk) and MINCE's size and drift, with references and targets split
    by model. Each dataset's results are saved under OUT/runs as they finish and reused by
    a rerun with the same settings."""
    import pandas as pd

    from bayeval.data import list_datasets, load_dataset
    from bayeval.experiments.compression import (
        ablation_table,
        compression_table,
        mince_table,
        write_report,
    )

    names = list_datasets() if datasets == "all" else [
        d.strip() for d in datasets.split(",") if d.strip()]
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    tables, minces, ablations, errors = [], [], [], {}

    def cached(path: Path, make):
        tag = f"{seeds}-{kmeans_seeds}-{mince_seeds}"
        if path.exists() and path.with_suffix(".tag").exists() and \
                path.with_suffix(".tag").read_text() == tag:
            return pd.read_csv(path)
        frame = make()
        frame.to_csv(path, index=False)
        path.with_suffix(".tag").write_text(tag)
        return frame

    def log(line: str) -> None:
        err.print(line, highlight=False)

    try:
        for name in names:
            scores = load_dataset(name).scores
            if np.isnan(scores).any():
                raise BayevalError(f"{name}: the score matrix has missing entries")
            holder: dict = {}

            def make(scores=scores, name=name, holder=holder):
                table, errs = compression_table(scores, name, seeds,
                                                kmeans_seeds=kmeans_seeds, log=log)
                np.savez_compressed(runs / f"{name}_errors.npz", **errs)
                return table

            tables.append(cached(runs / f"{name}.csv", make))
            with np.load(runs / f"{name}_errors.npz") as z:
                errors[name] = {k: z[k] for k in z.files}
            minces.append(cached(runs / f"{name}_mince.csv",
                                 lambda scores=scores, name=name: mince_table(
                                     scores, name, mince_seeds, log=log)))
            if ablation:
                ablations.append(cached(runs / f"{name}_ablation.csv",
                                        lambda scores=scores, name=name: ablation_table(
                                            scores, name)))
                log(f"{name}: ablation done")
            write_report(pd.concat(tables), pd.concat(minces), errors, out,
                         pd.concat(ablations) if ablations else None)
    except BayevalError as exc:
        raise _fail(str(exc)) from None
    print((out / "report.md").read_text())
    err.print(f"wrote {out}/results.csv, mince.csv, error_tails.png, report.md")


def main() -> None:  # pragma: no cover - console entry point alias
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
