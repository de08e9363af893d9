"""bayeval as a library (docs/python.md): ``bayeval.evaluate``'s explicit signature over
every setting, settings plus keyword overrides, every setting's help, the typed result
(summary, table, plot; ``to_dict`` = the command's ``--json`` in a fresh interpreter is
tests/test_notebook.py's), Python evaluators (a
function, a batch function, an ``async`` function with 8 in flight) each interrupted and
resumed with nothing lost, a run file rerun under a new journal, a resume from another
folder with a corrected command, a composed ``Method`` through ``evaluate(method=…)``
and an MCMC run's posterior read by ArviZ. The harness LM object and the Inspect Task
object are tested beside their other routes (test_lm_eval_harness.py, test_inspect.py).

Every run here is on the bundled RTE matrix with one held-out model's scores as the
model's answers, so that the programs compile once per worker."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bayeval
from bayeval.cli import app
from bayeval.errors import BayevalError
from bayeval.evaluation import EvaluatorOptions, RunSettings, TaskSettings

MODEL = "rte-model-000"
MATRIX = bayeval.load_dataset("rte")
TRUTH = {item: float(s) for item, s in zip(MATRIX.items, MATRIX.row(MODEL), strict=True)}
ROOT = Path(__file__).resolve().parents[1]


def _told(journal: Path) -> list[tuple[str, float]]:
    """(item, score) of every score a journal records, in order."""
    records = [json.loads(x) for x in journal.read_text().splitlines() if x.strip()]
    return [(r["item"], r["score"]) for r in records if r.get("event") == "tell"]


def _nothing_lost(journal: Path, before: list, result) -> None:
    after = _told(journal)
    assert before and after[:len(before)] == before  # nothing lost or changed
    assert len({i for i, _ in after}) == len(after) == result.items_used  # none twice
    assert all(score == TRUTH[item] for item, score in after)


def test_the_signature_lists_every_setting():
    """Every field of the run's, the one task's and the evaluator's settings is a keyword
    of bayeval.evaluate, with a type; ``help()`` and completion read the same."""
    params = inspect.signature(bayeval.evaluate).parameters
    fields = ({f.name for f in dataclasses.fields(RunSettings)}
              | {f.name for f in dataclasses.fields(TaskSettings)}
              | {f.name for f in dataclasses.fields(EvaluatorOptions)})
    # a suite task's weight and cost are TaskSettings' alone; the one task's ``task`` is
    # ``tasks`` (a name, or several); the evaluator's kind is ``evaluator``
    per_task = {"weight", "cost", "kind", "task"}
    missing = sorted(fields - per_task - set(params))
    assert not missing, missing
    for name in fields - per_task:
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[name].annotation is not inspect.Parameter.empty, name
    assert "model" in bayeval.evaluate.__doc__ and "limit" in bayeval.evaluate.__doc__


def test_every_setting_explains_itself():
    """help(name) for every field of every settings class, and the earlier names; an
    unknown name is a one-line error that lists the settings."""
    for cls in (RunSettings, TaskSettings, EvaluatorOptions):
        for f in dataclasses.fields(cls):
            for owner in (RunSettings, TaskSettings, EvaluatorOptions):
                text = owner.help(f.name)
                assert isinstance(text, str) and len(text) > 20, (owner, f.name)
    assert RunSettings.help("target") == RunSettings.help("model")
    assert RunSettings.help("max_items") == RunSettings.help("limit")
    with pytest.raises(BayevalError, match="no setting is named 'colour'"):
        TaskSettings.help("colour")


def test_names_old_and_new_and_overrides():
    """The harness's and Inspect's names (model, tasks, limit) and the earlier ones make
    the same settings; settings plus keywords override them; a list of tasks is a list."""
    new = RunSettings.of(dataset="rte", model=MODEL, limit=40)
    assert new == RunSettings.of(dataset="rte", target=MODEL, max_items=40)
    assert (new.target, new.max_items) == (MODEL, 40)
    assert RunSettings(target=MODEL, max_items=40, tasks=TaskSettings(dataset="rte")) == new
    assert TaskSettings(target="m").model == "m"
    assert new.override(limit=50, seed=3, journal="j.jsonl") == RunSettings.of(
        dataset="rte", model=MODEL, limit=50, seed=3, journal="j.jsonl")
    assert new.override(batch=4).evaluator.batch == 4
    two = RunSettings.of(reference="lm-eval:logs", tasks=["a", "b"])
    assert [t.task for t in two.tasks] == ["a", "b"] and two.suite
    with pytest.raises(BayevalError, match="give model or its earlier name target"):
        RunSettings.of(model="a", target="b")
    with pytest.raises(BayevalError, match="did you mean 'limit'"):
        RunSettings.of(limt=3)
    for bad, message in (({"seed": 1.5}, "seed: 1.5 is not a whole number"),
                         ({"limit": 0}, "limit: 0 is not ≥ 1"),
                         ({"epsilon": 5}, r"epsilon: 5 is not in \(0, 1\]"),
                         ({"epsilon": float("nan")}, "epsilon: nan is not a finite number"),
                         ({"subtasks": "no"}, "subtasks must be true or false")):
        with pytest.raises(BayevalError, match=message):
            RunSettings.of(**bad)


def test_the_result_reads_as_the_command_prints_it():
    """The typed result: its fields, the command's text, a row in pandas, a plot with
    the estimate's trajectory, an HTML table for a notebook."""
    result = bayeval.evaluate(dataset="rte", limit=60, progress=False)
    assert isinstance(result, bayeval.TaskResult)
    assert result.estimate == result["estimate"] and result.items_used == 60
    assert f"[{result.lower:.4f}, {result.upper:.4f}]" in result.summary()
    assert "<table>" in result._repr_html_() and repr(result).startswith("TaskResult(")
    table = result.to_pandas()
    assert table.shape[0] == 1 and table["estimate"][0] == result.estimate
    figure = result.plot()
    [ax] = [a for a in figure.axes if a.get_visible()]
    assert ax.get_xlabel() == "items run" and len(ax.lines) >= 1
    trace = result.history[0][1]
    assert trace.shape == (60, 4) and trace[-1, 1] == pytest.approx(result.estimate)


def test_a_function_evaluator_is_journaled_interrupted_and_resumed(tmp_path, interrupt_after):
    """A Python function as the evaluator: journaled (its journal names it), stopped
    after 20 scores, refused on a resume without it, resumed with it; nothing lost and
    the resume recorded."""
    journal = tmp_path / "fn.jsonl"
    calls: list[str] = []

    def score(item: str) -> float:
        calls.append(item)
        return TRUTH[item]

    with pytest.raises(KeyboardInterrupt):
        bayeval.evaluate(dataset="rte", model=MODEL, evaluator=score, journal=journal,
                         limit=80, watch=interrupt_after(20))
    before = _told(journal)
    with pytest.raises(BayevalError, match=r"Python object \(function .*score\).*evaluator="):
        bayeval.resume(journal, progress=False)
    result = bayeval.resume(journal, evaluator=score, progress=False)
    _nothing_lost(journal, before, result)
    assert result.items_used == 80 and len(calls) == 80 and result.true_score is None
    header = json.loads(journal.read_text().splitlines()[0])
    from bayeval.evaluation.settings import PYTHON_KIND
    from bayeval.evaluators.python import PYTHON

    # the kind's two homes (the settings' cannot import the evaluators' at start-up) agree
    assert header["extra"]["evaluator"] == PYTHON == PYTHON_KIND
    assert header["extra"]["changes"][-1]["python"]["now"].startswith("function ")


def test_a_batch_function_is_called_once_per_batch(tmp_path, interrupt_after):
    """bayeval.batched(fn): one call per batch of ``batch`` items, interrupted and resumed
    with nothing lost."""
    journal = tmp_path / "batch.jsonl"
    sizes: list[int] = []

    @bayeval.batched
    def score(items: list[str]) -> list[float]:
        sizes.append(len(items))
        return [TRUTH[i] for i in items]

    with pytest.raises(KeyboardInterrupt):
        bayeval.evaluate(dataset="rte", model=MODEL, evaluator=score, batch=8,
                         journal=journal, limit=64, watch=interrupt_after(16))
    before = _told(journal)
    result = bayeval.resume(journal, evaluator=score, progress=False)
    _nothing_lost(journal, before, result)
    assert set(sizes) == {8} and result.items_used == 64


def test_documents_run_again_after_an_interruption_are_counted(tmp_path):
    """A batch interrupted while the model ran it: its 8 documents were sent, their scores
    never journaled; the resume sends them again. ``documents_run`` is every document the
    function was called on over both processes' lives (not the 24 told), and
    ``documents_rerun`` the 8 sent twice; the summary says both."""
    journal = tmp_path / "rerun.jsonl"
    sent: list[str] = []

    @bayeval.batched
    def score(items: list[str]) -> list[float]:
        sent.extend(items)
        if len(sent) == 24:  # the third batch: the model ran it, the run stops
            raise KeyboardInterrupt
        return [TRUTH[i] for i in items]

    with pytest.raises(KeyboardInterrupt):
        bayeval.evaluate(dataset="rte", model=MODEL, evaluator=score, batch=8,
                         journal=journal, limit=32, progress=False)
    assert len(_told(journal)) == 16
    result = bayeval.resume(journal, evaluator=score, progress=False)
    assert result.items_used == 32 and len(sent) == 40
    assert result["documents_run"] == result.documents_run == len(sent) == 40
    assert result["documents_rerun"] == 8
    assert "8 run again after an interruption" in result.summary()
    # a second resume of the finished journal counts the same
    again = bayeval.resume(journal, evaluator=score, progress=False)
    assert again["documents_run"] == 40 and again["documents_rerun"] == 8


def test_an_async_function_runs_8_in_flight_on_one_event_loop(tmp_path, interrupt_after):
    """An ``async`` evaluator with concurrency 8: 8 coroutines in flight at once on one
    event loop thread; interrupted and resumed, nothing lost."""
    journal = tmp_path / "async.jsonl"
    flying, most, loops = [0], [0], set()

    async def score(item: str) -> float:
        loops.add((id(asyncio.get_running_loop()), threading.get_ident()))
        flying[0] += 1
        most[0] = max(most[0], flying[0])
        try:
            await asyncio.sleep(0.1)  # long beside a step of the loop: 8 overlap
        finally:  # (cancelled at the interruption)
            flying[0] -= 1
        return TRUTH[item]

    with pytest.raises(KeyboardInterrupt):
        bayeval.evaluate(dataset="rte", model=MODEL, evaluator=score, concurrency=8,
                         journal=journal, limit=72, watch=interrupt_after(24))
    before = _told(journal)
    assert most[0] == 8 and flying[0] == 0  # (the interrupted ones cancelled)
    # every coroutine of a run on one event loop, in one thread (a thread's id may be
    # reused by the next run's, once the first has ended: each run is counted apart)
    assert len(loops) == 1
    most[0] = 0
    loops.clear()
    result = bayeval.resume(journal, evaluator=score, concurrency=8, progress=False)
    _nothing_lost(journal, before, result)
    assert most[0] == 8 and result.items_used == 72
    assert len(loops) == 1


KILLED = """
import sys, time
import bayeval
m = bayeval.load_dataset("rte")
truth = dict(zip(m.items, m.row("{model}")))

def score(item):
    time.sleep(0.05)
    return float(truth[item])

bayeval.evaluate(dataset="rte", model="{model}", evaluator=score, journal=sys.argv[1],
                 limit=200, progress=False)
"""


def test_a_function_evaluators_run_killed_is_resumed_with_nothing_lost(tmp_path, killed_when):
    """SIGKILL of a Python process running evaluate with a function; the journal resumed
    in another process with the function given again."""
    journal = tmp_path / "killed.jsonl"
    script = tmp_path / "run.py"
    script.write_text(KILLED.replace("{model}", MODEL))
    killed_when([journal], lambda: journal.exists() and len(_told(journal)) >= 10, 240,
                script=script)
    before = _told(journal)
    result = bayeval.resume(journal, evaluator=lambda item: TRUTH[item], limit=60,
                            progress=False)
    _nothing_lost(journal, before, result)


def test_a_run_file_that_named_its_journal_reruns_under_a_new_one(tmp_path):
    """``--run FILE --journal NEW``: the file's run again (the same items and estimate),
    kept in the new journal; other options override the file's too."""
    first = tmp_path / "a.jsonl"
    file = tmp_path / "run.toml"
    common = ["--reference", str(ROOT / "examples/own_model/scores.csv"), "--model",
              "my-model", "--evaluator", "command", "--command",
              f"{ROOT / 'examples/own_model/score_item.sh'} {{item}}", "--limit", "40"]
    done = CliRunner().invoke(app, ["evaluate", *common, "--journal", str(first),
                                    "--save-run", str(file), "--json", "-q"])
    assert done.exit_code == 0, done.output
    again = CliRunner().invoke(app, ["evaluate", "--run", str(file), "--journal",
                                     str(tmp_path / "b.jsonl"), "--json", "-q"])
    assert again.exit_code == 0, again.output
    a, b = (json.loads(x.stdout.strip().splitlines()[-1]) for x in (done, again))
    assert (a["items"], a["estimate"]) == (b["items"], b["estimate"])
    assert b["journal"] == str(tmp_path / "b.jsonl")
    more = CliRunner().invoke(app, ["evaluate", "--run", str(file), "--journal",
                                    str(tmp_path / "c.jsonl"), "--limit", "50", "--json",
                                    "-q"])
    assert json.loads(more.stdout.strip().splitlines()[-1])["items_used"] == 50
    # Python: the file's settings plus keywords
    python = bayeval.evaluate(RunSettings.from_file(file), journal=tmp_path / "d.jsonl",
                              progress=False)
    assert python["items"] == a["items"]


def test_a_resume_from_another_folder_takes_a_corrected_command(tmp_path):
    """A run with a relative command, interrupted; resumed from another folder the
    command is not found (exit 3); a corrected --command finishes it with every earlier
    score kept, and the journal records the change."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    answers = {i: TRUTH[i] for i in MATRIX.items}
    (work / "answers.json").write_text(json.dumps(answers))
    (work / "score.sh").write_text(
        "#!/bin/sh\nexec python3 -c \"import json,sys; "
        "print(json.load(open(sys.argv[1]))[sys.argv[2]])\" "
        f"{work / 'answers.json'} \"$1\"\n")
    (work / "score.sh").chmod(0o755)
    journal = work / "run.jsonl"
    cwd = os.getcwd()
    try:
        os.chdir(work)
        first = CliRunner().invoke(app, [
            "evaluate", "--dataset", "rte", "--model", MODEL, "--evaluator", "command",
            "--command", "./score.sh {item}", "--limit", "30", "--journal", str(journal),
            "-q"])
        assert first.exit_code == 0, first.output
        before = _told(journal)
        os.chdir(elsewhere)
        lost = CliRunner().invoke(app, ["evaluate", "--resume", "--journal", str(journal),
                                        "--limit", "50", "-q"])
        assert lost.exit_code == 3, lost.output
        fixed = CliRunner().invoke(app, [
            "evaluate", "--resume", "--journal", str(journal), "--limit", "50",
            "--command", f"{work / 'score.sh'} {{item}}", "--json", "-q"])
        assert fixed.exit_code == 0, fixed.output
    finally:
        os.chdir(cwd)
    after = _told(journal)
    assert after[:len(before)] == before and len(after) == 50
    assert all(score == TRUTH[item] for item, score in after)
    header = json.loads(journal.read_text().splitlines()[0])
    [change] = header["extra"]["changes"]
    assert change["command"] == {"was": "./score.sh {item}",
                                 "now": f"{work / 'score.sh'} {{item}}"}


def test_a_composed_method_with_a_custom_prior_runs_through_evaluate(tmp_path):
    """A Method value (BayesAME's bucket GP with a prior mean of one's own, as
    tutorials/bayesame.py composes it, on its split: the programs compile once) passed as
    ``method=``: the run is that method's, the same run a Session of it makes; a spec's
    epsilon is refused beside it."""
    import jax.numpy as jnp

    from bayeval import acquisition as acq
    from bayeval.data import make_split, write_npz
    from bayeval.evaluators.base import MatrixOracle
    from bayeval.inference.exact import ExactBucketGP
    from bayeval.methods import Method
    from bayeval.stopping.rules import any_of, budget, two_condition

    split = make_split(bayeval.load_dataset("ifeval"), "interpolation", n_targets=1,
                       reference_fraction=0.5, seed=3)
    target = str(split.targets.models[0])
    oracle = MatrixOracle(split.targets, target)
    prior = ExactBucketGP(mean=lambda phi: jnp.quantile(phi, 0.25, axis=1))
    mine = Method("bayesame-q25", prior.backend(), acq.bayesame_rule(), acq.argmax,
                  any_of(budget(40), two_condition(0.02)))
    write_npz(split.reference, tmp_path / "reference.npz")
    result = bayeval.evaluate(reference=tmp_path / "reference.npz", model=target,
                              evaluator=oracle, method=mine, progress=False,
                              journal=tmp_path / "mine.jsonl")
    assert result.method == "bayesame-q25" and result.items_used == 40
    with bayeval.Session(split.reference, target, mine, seed=0) as session:
        session.run(oracle)
    assert (result.estimate, result.lower, result.upper) == session.estimate()
    assert result["items"] == [item for item, _ in session.observations]
    with pytest.raises(BayevalError, match="carries its own stop"):
        bayeval.evaluate(reference=tmp_path / "reference.npz", model=target,
                         evaluator=oracle, method=mine, epsilon=0.1)


def test_an_mcmc_runs_posterior_goes_straight_into_arviz(engine_world, method_settings,
                                                         tmp_path):
    """irt samples the ability by NUTS (short chains, the engine tests' world and
    settings: compiled once): its result carries the last fit's posterior as
    InferenceData, which arviz.summary reads."""
    import arviz as az

    from bayeval.data import write_npz
    from bayeval.methods import make_method

    reference, target = engine_world
    write_npz(reference, tmp_path / "reference.npz")
    truth = dict(zip(reference.items, target, strict=True))
    settings = method_settings["irt"]
    result = bayeval.evaluate(reference=tmp_path / "reference.npz", model="new",
                              evaluator=lambda item: float(truth[item]),
                              method=make_method("irt", **settings), limit=18,
                              progress=False, journal=tmp_path / "irt.jsonl")
    table = az.summary(result.posterior)
    assert {"ability", "score"} <= set(table.index)
    draws = result.posterior.posterior["score"]
    assert draws.shape == (settings["num_chains"], settings["num_samples"])
    assert 0.0 <= float(draws.mean()) <= 1.0
