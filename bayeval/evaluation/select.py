"""A live selection of the best model (``bayeval select``): the SelectionSession made
from the options (or resumed from its journal), its evaluator, the loop run, and the
ranking as a result (:mod:`bayeval.selection` holds the algorithms)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bayeval.errors import BayevalError
from bayeval.evaluation.evaluator_settings import (
    EvaluatorSettings,
    command_evaluator,
    evaluator_kind,
)
from bayeval.evaluation.options import EvaluatorKind, comma_list
from bayeval.evaluation.sources import (
    fresh_source,
    load_source,
    refuse_given,
    resumable,
    resume_session,
)
from bayeval.evaluation.watch import Watch, watched

__all__ = ["HISTORY_METHODS", "run_selection"]


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


HISTORY_METHODS = ("weights", "factor", "both")  # --history-method: what --history feeds
# the method a session runs, by (factor model?, item weights?)
METHOD_NAMES = {(False, False): "SySRs", (False, True): "HW-SySRs", (True, False): "HI-SySRs",
                (True, True): "HIW-SySRs"}


def _history(source: str, candidates: list[str], item_ids: list[str],
             say: Callable[[str], None] | None, method: str = "weights"):
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
        if say is not None:
            say(f"fitting the factor model on {len(keep)} history models "
                "(cross-validated rank)…")
        fitted, cv = fit_history(scores)
        how.append(f"factor model k={cv.k}, λ={cv.weight_decay:g}")
    note = (f"{len(keep)} models of {source} ({', '.join(how)})"
            + (f", {left_out} candidate row(s) left out" if left_out else ""))
    return fitted, weights, note


def run_selection(dataset: str | None = None, reference: Path | None = None,
                  models: str | None = None, items: Path | None = None, budget: str = "12%",
                  evaluator: str | None = None, command: str | None = None,
                  timeout: float = 600.0, retries: int = 1, seed: int | None = None,
                  journal: Path | None = None, resume: bool = False,
                  history: str | None = None, harness: tuple = (None, None, None),
                  history_method: str | None = None, repeated_models: str = "error",
                  watch: Watch | None = None,
                  say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Find the best of several models with a budget of model–item evaluations (SySRs,
    Cutting LLM Evaluation Costs with SySRs; with ``history``, HW-SySRs or HI-SySRs,
    docs/methods.md §10), fresh or resumed from ``journal``; what ``bayeval select
    --json`` prints. ``watch``: follows the loop (:mod:`bayeval.evaluation.watch`);
    ``say``: told of a long step (a factor model's fit)."""
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

        refuse_given(journal, {
            "--dataset": dataset, "--reference": reference, "--models": models,
            "--items": items, "--evaluator": evaluator, "--command": command, "--seed": seed,
            "--history": history, "--history-method": history_method,
            "--task": harness[0], "--metric": harness[1],
            "--filter": harness[2]})
        session = resume_session(SelectionSession, journal)
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
            names = comma_list(models)
            if matrix is not None and kind == "oracle":
                unknown = [m for m in names if m not in set(matrix.models)]
                if unknown:
                    raise BayevalError(f"model(s) {unknown} are not in {matrix.name}")
        else:
            names = list(matrix.models)
        if items is not None:
            from bayeval.records.files import read_text

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
            history, names, item_ids, say, history_method or "weights")
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
            from bayeval.evaluators.base import MatrixPairOracle

            evaluate_fn = MatrixPairOracle(matrix)
        with watched(watch, session, 1) as on_step:
            session.run(evaluate_fn, on_step=on_step, max_failures=settings.max_failures)
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
            "skipped": len(session.skipped), "phases": len(session.schedule),
            "seed": session.seed,
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
