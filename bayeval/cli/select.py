"""``bayeval select``: find the best of several models on a budget of model–item
evaluations."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from bayeval.cli.common import (
    EvaluatorKind,
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
    command_evaluator,
    evaluation_errors,
    evaluator_kind,
    fresh_source,
    json_text,
    load_source,
    names_table,
    out,
    progress_bar,
    resumable,
    resume_session,
)
from bayeval.cli.evaluator_settings import EvaluatorSettings
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError


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
    with evaluation_errors():
        result = _select(dataset, reference, models, items, budget, evaluator, command,
                         timeout, retries, seed, journal, resume, quiet, history,
                         (task, metric, filter_name), history_method, repeated_models)
    if as_json:
        print(json_text(result))
    else:
        _print_selection(result, top)


HISTORY_METHODS = ("weights", "factor", "both")  # --history-method: what --history feeds
# the method a session runs, by (factor model?, item weights?)
METHOD_NAMES = {(False, False): "SySRs", (False, True): "HW-SySRs", (True, False): "HI-SySRs",
                (True, True): "HIW-SySRs"}


def _history(source: str, candidates: list[str], item_ids: list[str], quiet: bool,
             method: str = "weights"):
    """(factor model or None, item weights or None, a one-line account) from the --history
    matrix's non-candidate rows on the selection's items."""
    from bayeval.errors import DataError
    from bayeval.selection.design import history_weights
    from bayeval.selection.history import fit_history

    path = Path(source)  # a file name has a suffix; a bundled name has none
    _, matrix = (fresh_source(None, path) if path.suffix else fresh_source(source, None))
    index = {it: j for j, it in enumerate(matrix.items)}
    missing = [it for it in item_ids if it not in index]
    if missing:
        raise DataError(f"--history {source}: {len(missing)} of the selection's items are "
                        f"not in it, e.g. {missing[0]!r}")
    keep = [i for i, m in enumerate(matrix.models) if m not in set(candidates)]
    left_out = len(matrix.models) - len(keep)
    if len(keep) < 5:
        raise DataError(f"--history {source}: {len(keep)} of its models are not candidates; "
                        "the history needs at least 5 earlier models")
    scores = matrix.scores[np.asarray(keep, int)][:, [index[it] for it in item_ids]]
    fitted, weights, how = None, None, []
    if method in ("weights", "both"):
        weights = history_weights(scores)
        how.append("item weights")
    if method in ("factor", "both"):
        if not quiet:
            from bayeval.cli.common import err

            err.print(f"fitting the factor model on {len(keep)} history models "
                      "(cross-validated rank)…", highlight=False)
        fitted, cv = fit_history(scores)
        how.append(f"factor model k={cv.k}, λ={cv.weight_decay:g}")
    note = (f"{len(keep)} models of {source} ({', '.join(how)})"
            + (f", {left_out} candidate row(s) left out" if left_out else ""))
    return fitted, weights, note


def _select(dataset, reference, models, items, budget, evaluator, command, timeout, retries,
            seed, journal, resume, quiet, history=None,
            harness: tuple = (None, None, None), history_method=None,
            repeated_models="error") -> dict[str, Any]:
    if history_method is not None and history_method not in HISTORY_METHODS:
        raise BayevalError(f"--history-method {history_method}: use one of "
                           f"{', '.join(HISTORY_METHODS)}")
    if history_method is not None and history is None and not resume:
        raise BayevalError("--history-method needs --history (the earlier models' scores)")
    if history is not None and Path(history).suffix and not Path(history).exists():
        from bayeval.errors import DataError

        raise DataError(f"--history {history}: no such file")  # before pandas and JAX
    # options and the reference are checked before JAX starts (seconds of start-up)
    if resume:
        if journal is None:
            raise BayevalError("--resume needs --journal PATH (the selection to continue)")
        from bayeval.selection.session import SelectionSession

        session = resume_session(SelectionSession, journal, {
            "--dataset": dataset, "--reference": reference, "--models": models,
            "--items": items, "--evaluator": evaluator, "--command": command, "--seed": seed,
            "--history": history, "--history-method": history_method,
            "--task": harness[0], "--metric": harness[1],
            "--filter": harness[2]})
        settings = EvaluatorSettings.from_json(session.extra, f"journal {journal}")
        source = settings.source
        matrix = load_source(source, journal) if source else None
    else:
        kind = evaluator_kind(evaluator, command, timeout, retries, "CMD {model} {item}")
        matrix, source = None, None
        if kind == "oracle" or items is None or models is None:
            source, matrix = fresh_source(dataset, reference, "arc_challenge", *harness,
                                          repeated_models=repeated_models)
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
            from bayeval.files import read_text

            try:
                item_ids = [ln.strip() for ln in read_text(items, f"--items {items}")
                            .splitlines() if ln.strip()]
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
        fitted, weights, history_note = (None, None, None) if history is None else _history(
            history, names, item_ids, quiet, history_method or "weights")
        settings = EvaluatorSettings(kind, command, timeout, retries, source=source,
                                     history=history_note)
        from bayeval.selection.session import SelectionSession

        session = SelectionSession(names, item_ids, n, seed=0 if seed is None else seed,
                                   journal=journal, extra=settings.to_json(), history=fitted,
                                   weights=weights)
    with resumable(session, "select"):
        if settings.evaluator == EvaluatorKind.command.value:
            runner = command_evaluator(settings.command, settings.timeout, settings.retries)

            def evaluate_fn(model, item):
                return runner(item, model)
        else:
            if matrix is None:
                raise BayevalError(f"journal {journal}: no score matrix recorded for the oracle")
            from bayeval.evaluators import MatrixPairOracle

            evaluate_fn = MatrixPairOracle(matrix)
        schedule = session.schedule
        total = int(schedule.sum() + schedule[-1])
        if quiet:
            session.run(evaluate_fn, max_failures=settings.max_failures)
        else:
            with progress_bar("selecting") as progress:
                task = progress.add_task("select", total=total, status="",
                                         completed=session.n_evaluations + len(session.skipped))

                def on_step(s, model, item, score):
                    phase = min(s.phase + 1, len(schedule))
                    status = f"phase {phase}/{len(schedule)}, {int(s.alive.sum())} left"
                    progress.update(task, completed=s.n_evaluations + len(s.skipped),
                                    status=status)

                session.run(evaluate_fn, on_step=on_step,
                            max_failures=settings.max_failures)
        means = session.means()
        truth = None
        if matrix is not None and not settings.live:
            rows = {m: i for i, m in enumerate(matrix.models)}
            cols = [matrix.item_index(i) for i in session.items]
            truth = {m: float(np.nanmean(matrix.scores[rows[m], cols])) for m in session.models}
        ranking = session.ranking()
        result: dict[str, Any] = {
            "best": session.best, "models": len(session.models), "items": len(session.items),
            "budget": session.budget, "evaluations": session.n_evaluations,
            "skipped": len(session.skipped), "phases": len(schedule), "seed": session.seed,
            "method": METHOD_NAMES[(session.history is not None, session.weights is not None)],
            "history": settings.history,
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
    headers = ["model", "rank", "mean", "items"]
    if truth:
        headers += ["true mean", "true rank"]
        true_rank = {row["model"]: k for k, row in enumerate(
            sorted(r["ranking"], key=lambda row: -row["true_mean"]), start=1)}
    rows = []
    for k, row in enumerate(r["ranking"][:top], start=1):
        cells = [row["model"], str(k), f"{row['mean']:.4f}", str(row["evaluated"])]
        if truth:
            cells += [f"{row['true_mean']:.4f}", str(true_rank[row["model"]])]
        rows.append(cells)
    out.print(names_table(headers, rows, f"ranking (best first, top {top})"))
    pairs = r["models"] * r["items"]
    line = (f"best: {r['best']}  ·  {r['evaluations']} evaluations of {r['budget']} allowed "
            f"({r['evaluations'] / pairs:.1%} of {r['models']} models × {r['items']} items)")
    if r["skipped"]:
        line += f", {r['skipped']} left unevaluated after failures"
    out.print(line, highlight=False)
    if "found_best" in r:
        out.print("the true best" if r["found_best"] else
                  f"[bold]not[/] the true best (that is {r['true_best']})", highlight=False)
    if r.get("history"):
        out.print(f"history: {r['history']}", highlight=False)
    if r["journal"]:
        out.print(f"journal: {r['journal']}", highlight=False)
