"""bayeval.evaluate and bayeval.resume, the Python form of ``bayeval evaluate``: each
``bayeval evaluate`` example of the README that runs on the bundled data (the own-model
command and its resume, a joint run, the leaderboard suite, a harness
group's subtasks) gives, called from Python on the same seed, the same estimate, interval
and items as the command; the settings round-trip to a run file, and ``--save-run`` then
``--run`` reproduces a run. The harness and Inspect examples need a model: their routes
are tested in test_lm_eval_harness.py and test_inspect.py through the same function; the
default run, ``bayeval.evaluate()`` in a fresh interpreter, in test_notebook.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bayeval
from bayeval.cli import app
from bayeval.errors import BayevalError
from bayeval.evaluation import EvaluatorOptions, RunSettings, TaskSettings
from bayeval.evaluation.summary import summary

ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "examples" / "own_model"
COMMAND = f"{OWN / 'score_item.sh'} {{item}}"


def _command(*args: str) -> dict:
    """``bayeval evaluate ARGS --json -q``: its JSON result (exit status 0 asserted)."""
    result = CliRunner().invoke(app, ["evaluate", *args, "--json", "-q"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def _same(command: dict, python: dict) -> None:
    """The same estimate, interval and items (the run is a function of its seed: equal
    to the last digit, not within a tolerance)."""
    rows = [(command, python)]
    if "tasks" in command:
        rows += list(zip(command["tasks"], python["tasks"], strict=True))
    if "targets" in command:
        rows = list(zip(command["targets"], python["targets"], strict=True))
    for a, b in rows:
        for key in ("estimate", "lower", "upper", "items_used"):
            assert a[key] == b[key], key
    if "items" in command:
        assert command["items"] == python["items"]


def test_own_model_command_and_resume_twin(tmp_path):
    """README: the own model's command run, then ``--resume`` of its journal; the same
    through bayeval.evaluate and bayeval.resume (a first leg stopped by a budget, the
    rest after a resume with a new one)."""
    common = ["--reference", str(OWN / "scores.csv"), "--target", "my-model",
              "--evaluator", "command", "--command", COMMAND, "--epsilon", "0.05"]
    first = _command(*common, "--journal", str(tmp_path / "a.jsonl"), "--max-items", "40")
    done = _command("--journal", str(tmp_path / "a.jsonl"), "--resume",
                    "--max-items", "1000")
    run = RunSettings(tasks=TaskSettings(reference=OWN / "scores.csv"), model="my-model",
                      evaluator=EvaluatorOptions("command", command=COMMAND), epsilon=0.05,
                      journal=tmp_path / "b.jsonl", limit=40)
    python_first = bayeval.evaluate(run)
    _same(first, python_first)
    assert python_first["items_used"] == 40
    python_done = bayeval.resume(tmp_path / "b.jsonl", max_items=1000)
    _same(done, python_done)
    assert python_done["items_used"] > 40 and python_done["true_score"] is None
    # keywords make the same settings as the values
    assert RunSettings.of(reference=OWN / "scores.csv", target="my-model",
                          evaluator="command", command=COMMAND, epsilon=0.05,
                          journal=tmp_path / "b.jsonl", max_items=40) == run


def test_joint_run_twin():
    """README: several models in one run (``--targets``), here two of the bundled RTE
    matrix with the oracle (the shapes of test_cli's live joint run: compiled once)."""
    args = ["--dataset", "rte", "--targets", "rte-model-001,rte-model-002",
            "--max-items", "60"]
    python = bayeval.evaluate(dataset="rte", targets=["rte-model-001", "rte-model-002"],
                              max_items=60)
    _same(_command(*args), python)
    assert [t["target"] for t in python["targets"]] == ["rte-model-001", "rte-model-002"]


def test_suite_twin_and_run_file(tmp_path):
    """README: ``bayeval evaluate --suite examples/suites/open_llm_leaderboard.toml``;
    the suite file read as a run file is the same run, and ``--save-run`` then ``--run``
    reproduces it."""
    suite = ROOT / "examples" / "suites" / "open_llm_leaderboard.toml"
    command = _command("--suite", str(suite), "--save-run", str(tmp_path / "run.toml"))
    python = bayeval.evaluate(RunSettings.from_file(suite))
    _same(command, python)
    assert python["suite"] == "open_llm_leaderboard" and len(python["tasks"]) == 2
    rows = summary(python).rows  # a row per task, then the average's
    assert [r[0] for r in rows] == [t["task"] for t in python["tasks"]] + ["average"]
    assert rows[-1][2] == f"{python['estimate']:.4f}"
    again = _command("--run", str(tmp_path / "run.toml"))
    _same(command, again)


def test_group_subtasks_twin_and_run_file(tmp_path):
    """README: ``bayeval evaluate --dataset musr --subtasks`` (a harness group), and its
    run file reproduces it."""
    command = _command("--dataset", "musr", "--subtasks", "--save-run",
                       str(tmp_path / "group.toml"))
    python = bayeval.evaluate(dataset="musr", subtasks=True)
    _same(command, python)
    assert python["group"] == command["group"]
    _same(command, _command("--run", str(tmp_path / "group.toml")))


def test_single_task_run_file_reproduces(tmp_path):
    """A run of one task written by --save-run and run with --run: the same estimate and
    items on the same seed, the target drawn by the seed kept."""
    file = tmp_path / "one.toml"
    first = _command("--dataset", "ifeval", "--seed", "3", "--epsilon", "0.08",
                     "--save-run", str(file))
    _same(first, _command("--run", str(file)))
    settings = RunSettings.from_file(file)
    assert settings.seed == 3 and settings.epsilon == 0.08
    assert settings.tasks[0].dataset == "ifeval"


def test_run_file_round_trip(tmp_path):
    """Settings written as a run file read back equal (references made absolute), for a
    suite with every field set and for the defaults."""
    ref = tmp_path / "m.csv"
    ref.write_text("model,a\nx,1\n")
    full = RunSettings(
        tasks=(TaskSettings(reference=str(ref), name="one", weight=2.0, cost=3.5,
                            model="t1", command="run {item} \"q\"", metric="acc"),
               TaskSettings(dataset="musr", repeated_models="number")),
        evaluator=EvaluatorOptions("command", command="x {item}", timeout=5.0, retries=2,
                                   batch=4),
        model="new", method="active-pai(anytime=true)", epsilon=0.07, task_epsilon=0.2,
        limit=300, seed=11, journal=str(tmp_path / "j"), name="mine")
    for settings in (full, RunSettings()):
        file = tmp_path / "r.toml"
        file.write_text(settings.to_toml())
        assert RunSettings.from_file(file) == settings


@pytest.mark.parametrize("options, message", [
    ({"dataset": "ifeval", "reference": "x.csv"}, "either --dataset or --reference"),
    ({"target": "a", "targets": "a,b"}, "either --model or --models"),
    ({"group_mean": "size"}, "--group-mean is for --subtasks"),
    ({"batch": 2, "concurrency": 2}, "--batch or --concurrency"),
    ({"evaluator": "shell"}, "evaluator 'shell' is not one of"),
    ({"weight": -1.0}, r"weight: -1 is not > 0"),
    ({"colour": "red"}, "unknown setting 'colour'"),
])
def test_settings_refused_in_one_line(options, message):
    """A bad setting is a one-line BayevalError when the settings are made, before any
    reference is read."""
    with pytest.raises(BayevalError, match=message) as caught:
        RunSettings.of(**options)
    assert "\n" not in str(caught.value)


def test_run_file_errors_name_the_file(tmp_path):
    file = tmp_path / "bad.toml"
    file.write_text('seed = 1\n[evaluator]\nkind = "oracle"\ncolour = 1\n[[tasks]]\n'
                    'dataset = "ifeval"\n')
    with pytest.raises(BayevalError, match=f"--run {file}: .*colour"):
        RunSettings.from_file(file)
    file.write_text('seed = 1\nspeed = 2\n[[tasks]]\ndataset = "ifeval"\n')
    with pytest.raises(BayevalError, match="unknown key 'speed'"):
        RunSettings.from_file(file)
    result = CliRunner().invoke(app, ["evaluate", "--run", str(tmp_path / "none.toml")])
    assert result.exit_code == 2 and f"--run {tmp_path / 'none.toml'}: no such file" in (
        result.output)


def test_a_run_files_journal_is_read_from_beside_it_as_its_reference_is(tmp_path):
    """A relative ``journal`` in a run file names a file beside the run file (as a
    relative ``reference`` does), wherever the run starts from."""
    here = tmp_path / "runs"
    here.mkdir()
    (here / "run.toml").write_text('journal = "j.jsonl"\nlimit = 5\n[[tasks]]\n'
                                   'dataset = "rte"\n')
    settings = RunSettings.from_file(here / "run.toml")
    assert settings.journal == str(here / "j.jsonl")
