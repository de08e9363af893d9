"""SySRs as a journaled ask/tell session: the same eliminations as the pure function,
batched phases, skips and resume."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from bayeval.errors import EvaluationError, JournalError, SessionError
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.session import SelectionSession
from bayeval.selection.successive_rejects import synchronised_successive_rejects

MODELS = [f"m{i}" for i in range(6)]
ITEMS = [f"q{j}" for j in range(30)]


def _scores(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((6, 30)) < rng.random((6, 1))).astype(float)  # binary: many ties


def _oracle(scores):
    return lambda model, item: float(scores[MODELS.index(model), ITEMS.index(item)])


@pytest.mark.parametrize("budget", [6, 40, 90, 180])
def test_session_eliminates_as_the_pure_function(budget):
    scores = _scores(1)
    for seed in range(3):
        session = SelectionSession(MODELS, ITEMS, budget, seed=seed)
        phases = []
        while not session.done:
            pairs = session.ask()
            items = sorted({item for _, item in pairs})
            # every surviving model on the same items, none seen before
            assert {m for m, _ in pairs} == {MODELS[i] for i in np.flatnonzero(session.alive)}
            assert len(pairs) == len(items) * int(session.alive.sum())
            phases.append(set(items))
            for model, item in reversed(pairs):  # any order within a phase
                session.tell(model, item, _oracle(scores)(model, item))
        assert sum(map(len, phases)) == len(set().union(*phases))  # unique over phases
        want = synchronised_successive_rejects(scores, jax.random.key(seed), budget)
        assert session.ranking() == [MODELS[i] for i in np.asarray(want.order)[::-1]]
        assert session.best == MODELS[int(want.best)]
        assert session.n_evaluations == int(want.evaluations) <= budget
        schedule = phase_schedule(6, 30, budget)
        assert session.n_evaluations == schedule.sum() + schedule[-1]


def test_resume_mid_phase_and_skips(tmp_path):
    scores = _scores(2)
    oracle = _oracle(scores)

    def flaky(model, item):
        if (model, item) in {("m1", ITEMS[3]), ("m4", ITEMS[7]), ("m4", ITEMS[11])}:
            raise EvaluationError("timed out")
        return oracle(model, item)

    full = SelectionSession(MODELS, ITEMS, 120, seed=5)
    full.run(flaky)

    path = tmp_path / "select.jsonl"
    part = SelectionSession(MODELS, ITEMS, 120, seed=5, journal=path)
    calls = 0
    while calls < 23:  # stop mid-phase
        model, item = part.ask()[0]
        try:
            part.tell(model, item, flaky(model, item))
        except EvaluationError as exc:
            part.skip(model, item, str(exc))
        calls += 1
    part.close()
    with open(path, "ab") as fh:  # a crash mid-write
        fh.write(b'{"event": "tell", "n": 9')
    with pytest.warns(UserWarning, match="incomplete"):
        resumed = SelectionSession.resume(path)
    assert resumed.n_evaluations + len(resumed.skipped) == 23
    resumed.run(flaky)
    resumed.close()
    assert resumed.ranking() == full.ranking()
    assert resumed.skipped == full.skipped and resumed.observations == full.observations
    again = SelectionSession.resume(path)  # the finished journal replays to the same end
    assert again.done and again.ranking() == full.ranking()
    with pytest.raises(JournalError, match="already exists"):
        SelectionSession(MODELS, ITEMS, 120, journal=path)


def test_bad_input_gives_one_line_errors():
    with pytest.raises(SessionError, match="two models"):
        SelectionSession(["a"], ITEMS, 10)
    with pytest.raises(SessionError, match="distinct"):
        SelectionSession(["a", "a"], ITEMS, 10)
    with pytest.raises(SessionError, match="budget"):
        SelectionSession(MODELS, ITEMS, 5)
    session = SelectionSession(MODELS, ITEMS, 60)
    model, item = session.ask()[0]
    with pytest.raises(SessionError, match="not one of"):
        session.tell("nope", item, 1.0)
    session.tell(model, item, 1.0)
    with pytest.raises(SessionError, match="not asked for"):
        session.tell(model, item, 1.0)
    with pytest.raises(Exception, match="score"):
        session.tell(*session.ask()[0], 3.0)


def test_cli_select_simulates_and_runs_a_command_with_resume(tmp_path):
    import json

    from typer.testing import CliRunner

    from bayeval.cli import app
    from bayeval.data import load_dataset

    runner = CliRunner()
    result = runner.invoke(app, ["select", "--dataset", "rte", "--budget", "20%", "--json",
                                 "-q", "--seed", "3"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    rte = load_dataset("rte")
    assert r["models"] == 87 and r["evaluations"] <= round(0.2 * 87 * 277)
    assert r["ranking"][0]["model"] == r["best"] and len(r["ranking"]) == 87
    means = rte.scores.mean(axis=1)
    assert r["found_best"] == bool(means[list(rte.models).index(r["best"])] == means.max())
    # not quiet, stderr a log (no terminal): a plain progress line per tenth, the last one
    # the whole budget spent, and the same selection
    shown = runner.invoke(app, ["select", "--dataset", "rte", "--budget", "20%", "--json",
                                "--seed", "3"])
    lines = [x for x in shown.stderr.splitlines() if x.startswith("selecting: ")]
    assert 1 <= len(lines) <= 10, shown.stderr
    assert lines[-1].startswith(f"selecting: {r['evaluations']}/")
    assert json.loads(shown.stdout)["best"] == r["best"]

    # live: a command that scores (model, item) from a table and fails on one pair
    models = [str(m) for m in rte.models[:5]]
    items = [str(i) for i in rte.items[:40]]
    (tmp_path / "items.txt").write_text("\n".join(items) + "\n")
    table = tmp_path / "scores.txt"
    table.write_text("".join(f"{m} {i} {rte.scores[k, j]:g}\n" for k, m in enumerate(models)
                             for j, i in enumerate(items)))
    script = tmp_path / "score.sh"
    bad_item = items[int(np.asarray(
        SelectionSession(models, items, 60).item_order)[0])]
    script.write_text(f'if [ "$1" = "{models[2]}" ] && [ "$2" = "{bad_item}" ]; then exit 3; '
                      f'fi\nawk -v m="$1" -v i="$2" \'$1 == m && $2 == i {{print $3}}\' '
                      f'{table}\n')
    journal = tmp_path / "select.jsonl"
    args = ["select", "--models", ",".join(models), "--items", str(tmp_path / "items.txt"),
            "--budget", "60", "--evaluator", "command", "--command",
            f"sh {script} {{model}} {{item}}", "--retries", "0", "--journal", str(journal),
            "--json", "-q"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["skipped"] == 1 and r["evaluations"] + 1 <= 60
    records = [json.loads(x) for x in journal.read_text().splitlines()]
    assert records[0]["models"] == models and records[-1]["event"] == "tell"
    assert [x["model"] for x in records[1:] if x["event"] == "skip"] == [models[2]]
    # resuming a finished selection reprints the same answer
    again = runner.invoke(app, ["select", "--resume", "--journal", str(journal), "--json",
                                "-q"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["ranking"] == r["ranking"]
    bad = runner.invoke(app, ["select", "--dataset", "rte", "--budget", "12 items", "-q"])
    assert bad.exit_code == 2 and "--budget" in bad.output


def test_cli_select_with_a_history_draws_the_weighted_design(tmp_path):
    """`select --history`: candidates are 6 RTE models, the history the other 81 (its
    candidate rows left out); the run is HW-SySRs, with the session's item order the
    weighted race of the seed, and the journal resumes to the same answer."""
    import json

    from typer.testing import CliRunner

    from bayeval.cli import app
    from bayeval.data import load_dataset
    from bayeval.selection.design import history_weights

    rte = load_dataset("rte")
    models = [str(m) for m in rte.models[:6]]
    journal = tmp_path / "sel.jsonl"
    runner = CliRunner()
    result = runner.invoke(app, ["select", "--dataset", "rte", "--models", ",".join(models),
                                 "--history", "rte", "--budget", "25%", "--seed", "2",
                                 "--journal", str(journal), "--json", "-q"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["method"] == "HW-SySRs" and "81 models of rte (item weights)" in r["history"]
    assert "6 candidate row(s) left out" in r["history"]
    session = SelectionSession.resume(journal)
    np.testing.assert_allclose(session.weights, history_weights(rte.scores[6:]), rtol=1e-12)
    session.close()
    again = runner.invoke(app, ["select", "--resume", "--journal", str(journal), "--json",
                                "-q"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["ranking"] == r["ranking"]
