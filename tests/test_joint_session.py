"""The journaled Session with several targets and `bayeval evaluate --targets`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from bayeval.cli import app
from bayeval.data import ScoreMatrix, load_dataset, write_matrix
from bayeval.errors import JournalError, SessionError
from bayeval.loop.session import Session

PARAMS = {"refit_every": 15, "adam_steps": 10, "epsilon": 0.05, "epsilon1": 0.01,
          "window": 5, "pending": 8}


def JointSession(reference, targets, params=None, **kwargs):  # noqa: N802
    return Session(reference, targets, "bayesame-joint", method_params=params or {},
                   **kwargs)


def _skip(session, reason):
    (t, item), = session.ask()
    session.skip(item, reason, target=t)


def _tell(session, t, i, score):
    session.tell(i, score, target=t)


@pytest.fixture(scope="module")
def family():
    """5 reference models and 3 related targets on 40 items (continuous scores)."""
    rng = np.random.default_rng(3)
    ability = rng.normal(size=8)
    difficulty = rng.normal(size=40)
    scores = 0.9 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    scores = scores + 0.05 * rng.random((8, 40))
    items = [f"q{j:02d}" for j in range(40)]
    reference = ScoreMatrix(scores[:5], [f"r{i}" for i in range(5)], items)
    truth = {f"ckpt{k}": scores[5 + k] for k in range(3)}
    return reference, truth


def _answer(truth, reference, target, item):
    return float(truth[target][reference.item_index(item)])


def test_resume_continues_exactly_as_the_uninterrupted_run(family, tmp_path):
    reference, truth = family
    targets = list(truth)
    whole = JointSession(reference, targets, PARAMS, seed=7)
    whole.run(lambda t, i: _answer(truth, reference, t, i))
    assert whole.done and whole.n_observed < 3 * 40

    path = tmp_path / "joint.jsonl"
    first = JointSession(reference, targets, PARAMS, seed=7, journal=path)
    _skip(first, "evaluation failed")  # a skip inside the design
    for _ in range(25):  # past the design (12 pairs) and the first re-fit
        (t, i), = first.ask()
        _tell(first, t, i, _answer(truth, reference, t, i))
    asked, = first.ask()  # journaled when asked, never told: asked first on resume
    first.close()
    resumed = Session.resume(path, reference=reference)
    assert resumed.n_observed == 25 and len(resumed.skipped) == 1
    assert resumed.unanswered == 1 and resumed.ask() == [asked]
    _tell(resumed, *asked, _answer(truth, reference, *asked))
    assert [r["n"] for r in resumed.refits] == [r["n"] for r in first.refits] == [12]
    resumed.run(lambda t, i: _answer(truth, reference, t, i))
    resumed.close()
    # the same run as one that skipped the same pair and was never interrupted
    again = JointSession(reference, targets, PARAMS, seed=7)
    _skip(again, "evaluation failed")
    again.run(lambda t, i: _answer(truth, reference, t, i))
    assert resumed.observations == again.observations
    assert resumed.estimates() == again.estimates()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["targets"] == targets and lines[0]["method"]["name"] == "bayesame-joint"
    assert [x["n"] for x in lines[1:] if x["event"] == "tell"] == list(
        range(1, resumed.n_observed + 1))
    for target, (value, lower, upper) in resumed.estimates().items():
        assert lower <= value <= upper
        assert abs(value - truth[target].mean()) < 0.03


def test_joint_session_errors(family, tmp_path):
    reference, truth = family
    with pytest.raises(SessionError, match="also a reference model"):
        JointSession(reference, ["r0", "ckpt0"])
    with pytest.raises(SessionError, match="distinct"):
        JointSession(reference, ["a", "a"])
    session = JointSession(reference, list(truth), PARAMS, journal=tmp_path / "j.jsonl")
    (t, i), = session.ask()
    _tell(session, t, i, 0.5)
    with pytest.raises(SessionError, match="already observed"):
        _tell(session, t, i, 0.5)
    with pytest.raises(SessionError, match="not one of the targets"):
        _tell(session, "other", i, 0.5)
    session.close()
    with pytest.raises(JournalError, match="already exists"):
        JointSession(reference, list(truth), journal=tmp_path / "j.jsonl")


def test_cli_evaluates_several_targets_with_a_command(tmp_path):
    rte = load_dataset("rte")
    targets = [str(m) for m in rte.models[3:5]]
    reference = tmp_path / "rte.csv"
    write_matrix(rte, reference)
    table = tmp_path / "scores.txt"
    table.write_text("".join(f"{t} {i} {rte.row(t)[j]:g}\n" for t in targets
                             for j, i in enumerate(rte.items)))
    script = tmp_path / "score.sh"  # looks the score up; fails on items ending in 7
    script.write_text('case "$2" in *7) echo "crashed" >&2; exit 1;; esac\n'
                      f'awk -v t="$1" -v id="$2" \'$1 == t && $2 == id {{print $3}}\' {table}\n')
    journal = tmp_path / "family.jsonl"
    result = CliRunner().invoke(app, [
        "evaluate", "--json", "-q", "--reference", str(reference),
        "--targets", ",".join(targets), "--evaluator", "command",
        "--command", f"sh {script} {{target}} {{item}}", "--retries", "0",
        "--max-items", "70", "--journal", str(journal), "--method", "bayesame-joint"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["reference_models"] == 85 and r["evaluations"] == 70
    assert [t["target"] for t in r["targets"]] == targets
    records = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    told = [x for x in records if x["event"] == "tell"]
    assert len(told) == 70 and not any(x["item"].endswith("7") for x in told)
    assert all(rte.row(x["target"])[rte.item_index(x["item"])] == x["score"] for x in told)
    assert all(x["item"].endswith("7") for x in records if x["event"] == "skip")
    both = CliRunner().invoke(app, ["evaluate", "--target", "a", "--targets", "b,c"])
    assert both.exit_code != 0 and "not both" in both.output


def test_cli_targets_default_to_a_design_valid_interval_per_target():
    """Without --method, --targets runs active-pai-joint: every told score carries the
    probability it was drawn with, and each target gets an interval of its own."""
    rte = load_dataset("rte")
    targets = [str(m) for m in rte.models[3:5]]
    result = CliRunner().invoke(app, ["evaluate", "--json", "-q", "--dataset", "rte",
                                      "--targets", ",".join(targets), "--max-items", "40"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["method"] == "active-pai-joint" and r["evaluations"] == 40
    for t in r["targets"]:
        assert t["lower"] <= t["estimate"] <= t["upper"] and t["items_used"] == 20
