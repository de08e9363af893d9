"""The check of a model-based estimate against the reference models' domain
(bayeval.estimators.domain): its statistic by hand, and a Session that evaluates a target
stronger than every reference model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bayeval.data import load_dataset
from bayeval.estimators.domain import domain_check
from bayeval.loop.session import Session


def test_the_statistic_by_hand():
    reference = np.array([[1.0, 0.0, 1.0, np.nan],
                          [0.0, 0.0, 1.0, 0.0],
                          [np.nan] * 4])  # a model with none of the items is left out
    scores = np.array([1.0, 1.0, 1.0, 0.0])
    predicted = np.array([0.5, 0.2, 0.9, 0.4])
    check = domain_check(reference, scores, predicted, n_items=10, half_width=0.1)
    r = np.array([0.5, 0.8, 0.1, -0.4])
    assert check.z == pytest.approx(r.sum() / math.sqrt((r * r).sum()), rel=1e-12)
    # 6 of 10 items unseen: the mean residual 0.25 moves the estimate by 0.6 · 0.25
    assert check.shift == pytest.approx(0.6 * 0.25, rel=1e-12)
    assert check.shift_se == pytest.approx(0.6 * np.std(r, ddof=1) / 2, rel=1e-12)
    # the target's mean 0.75 against 2/3 and 1/4: above both
    assert check.mean == 0.75 and check.share_below == 1.0
    assert check.outside and check.flagged and check.n == 4
    assert "above every reference model on the 4 items" in check.note("bq")
    tie = domain_check(reference[:2, :3], np.array([1.0, 0.0, 1.0]), np.full(3, 2 / 3),
                       n_items=3, half_width=0.0)
    # a tie with the best model is inside the range and counts half; no residual bias
    assert not tie.outside and tie.share_below == 0.75 and not tie.flagged
    assert tie.note("bq") is None
    empty = domain_check(np.zeros((3, 0)), np.zeros(0), np.zeros(0), 5, 0.1)
    assert empty.n == 0 and not empty.flagged


@pytest.mark.parametrize(("half_width", "flagged"), [(0.3, True), (0.4, False)])
def test_a_bias_flags_a_target_inside_the_range_when_it_matters(half_width, flagged):
    # residuals 0.2 and 0.4 in turn, 60 of 100 items unseen: the estimate would move by
    # 0.6 · 0.3 = 0.18 ± 0.6 · sd/√40 ≈ 0.0096; flagged when 0.18 − 0.0096 is over half
    # the half-width (0.15 and 0.2 here)
    n, n_items = 40, 100
    reference = np.vstack([np.zeros(n), np.ones(n)])
    scores = np.r_[np.ones(n // 2), np.full(n // 2, 0.5)]
    residual = np.tile([0.2, 0.4], n // 2)
    check = domain_check(reference, scores, scores - residual, n_items, half_width)
    assert check.shift == pytest.approx(0.18)
    assert check.shift_se == pytest.approx(0.6 * np.std(residual, ddof=1) / math.sqrt(n))
    assert not check.outside and check.biased == flagged and check.flagged == flagged
    if flagged:
        assert ("above the model's predictions, by enough to move the estimate 0.180 "
                "(± 0.010) against a half-width of 0.300") in check.note("irt")


def test_a_bq_session_flags_a_target_above_every_reference_model():
    # RTE: the weakest half of the models as references, the strongest as the target
    matrix = load_dataset("rte")
    order = np.argsort(matrix.model_means(), kind="stable")
    reference = matrix.select_models(order[: matrix.n_models // 2])
    best = matrix.models[order[-1]]
    row = matrix.row(best)
    session = Session(reference, best, "bq", seed=0, max_items=60)
    while not session.done:
        for item in session.ask():
            session.tell(item, float(row[reference.item_index(item)]))
    check = session.domain_check()
    assert check.n == 60 and check.flagged and check.outside
    # the design-valid default is not checked: its interval does not rest on the model
    assert Session(reference, best, "active-pai").domain_check() is None


def test_evaluate_warns_when_the_references_cannot_explain_the_target(tmp_path):
    # the command line: a reference file of RTE's weakest half plus its strongest model,
    # held out as the target; bq's result carries the check and its one-line warning
    import json

    from typer.testing import CliRunner

    from bayeval.cli import app
    from bayeval.data.io import write_matrix

    matrix = load_dataset("rte")
    order = np.argsort(matrix.model_means(), kind="stable")
    keep = np.r_[order[: matrix.n_models // 2], order[-1]]
    write_matrix(matrix.select_models(keep), tmp_path / "weak.npz")
    best = matrix.models[order[-1]]
    done = CliRunner().invoke(app, ["evaluate", "--reference", str(tmp_path / "weak.npz"),
                                    "--target", best, "--method", "bq", "--max-items", "60",
                                    "--json"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["domain_check"]["flagged"] and result["domain_check"]["outside"]
    assert result["domain_warning"].startswith("bq's interval rests on the reference "
                                               "models, which do not explain this target")
    assert "active-pai's holds" in result["domain_warning"]
    assert result["interval_basis"] == "model"
    # the table says what the interval rests on, and the check's verdict, unasked
    shown = CliRunner().invoke(app, ["evaluate", "--reference", str(tmp_path / "weak.npz"),
                                     "--target", best, "--method", "bq", "--max-items", "60",
                                     "-q"])
    # the row may wrap (COLUMNS set): compare with runs of white space made one space
    assert "model-based: valid if the reference models explain the target; domain check " \
        "FLAGGED" in " ".join(shown.stdout.split()), shown.stdout
