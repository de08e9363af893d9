"""One home for every setting's check, whatever door it comes in by: a bad value of a
setting (a wrong type, NaN, ±inf, negative, zero, fractional, huge, empty) given to
``bayeval.evaluate`` in Python, in a run file (``bayeval evaluate --run FILE``) or as the
command's option is the same one-line error naming the setting, before any journal is
written. The values are drawn by Hypothesis from the bad values of each kind of setting;
what is allowed is the one table (bayeval.evaluation.numbers.RANGES) that the settings
classes and the command line both read."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import bayeval
from bayeval.cli import main
from bayeval.errors import BayevalError

WHOLE = ["abc", "", float("nan"), float("inf"), 1.5, -1]
COUNT = [*WHOLE, 0]  # (a huge count is allowed: a limit that never binds)
SHARE = ["abc", "", float("nan"), float("inf"), float("-inf"), 0, -0.1, 5, 1e308]
POSITIVE = ["abc", "", float("nan"), float("inf"), 0, -5]
TEXT = [5, 1.5, True, ["a"]]
# setting → (its table in a run file: None top level, "evaluator", "tasks"; its option,
# or None where the command has none; its bad values)
SETTINGS = {
    "seed": (None, "--seed", [*WHOLE, 2**70]),
    "limit": (None, "--limit", COUNT),
    "epsilon": (None, "--epsilon", SHARE),
    "task_epsilon": (None, None, SHARE),
    "timeout": ("evaluator", "--timeout", POSITIVE),
    "retries": ("evaluator", "--retries", [*WHOLE, 10**9]),
    "batch": ("evaluator", "--batch", COUNT),
    "concurrency": ("evaluator", "--concurrency", COUNT),
    "calls": ("evaluator", "--calls", ["sometimes", "", 5, True]),
    "weight": ("tasks", None, POSITIVE),
    "cost": ("tasks", None, POSITIVE),
    "model": (None, None, TEXT),
    "method": (None, None, TEXT),
    "metric": ("tasks", None, TEXT),
}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _option(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return str(value)


def _command(*args: str) -> tuple[int, str]:
    """``bayeval ARGS`` through the console entry point, in this process: (exit status,
    what it wrote on stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0), err.getvalue()
    return 0, err.getvalue()


def _one_line_naming(text: str, name: str) -> None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    assert name.replace("_", "-") in lines[0] or name in lines[0], lines[0]


@st.composite
def bad_settings(draw):
    name = draw(st.sampled_from(sorted(SETTINGS)))
    return name, draw(st.sampled_from(SETTINGS[name][2]))


@settings(max_examples=150, deadline=None)
@given(bad_settings(), st.sampled_from(["python", "run file", "command"]))
def test_a_bad_setting_is_one_line_naming_it_before_any_journal(bad, door):
    name, value = bad
    table, option, _ = SETTINGS[name]
    where = Path(tempfile.mkdtemp())
    journal = where / "run.jsonl"
    if door == "python":
        try:
            bayeval.evaluate(dataset="rte", journal=journal, progress=False,
                             **{name: value})
        except BayevalError as exc:
            _one_line_naming(str(exc), name)
        else:
            raise AssertionError(f"{name}={value!r} was accepted")
    elif door == "run file":
        line = f"{name} = {_toml(value)}"
        top = line if table is None else ""
        evaluator = f"[evaluator]\n{line}\n" if table == "evaluator" else ""
        task = line if table == "tasks" else ""
        file = where / "run.toml"
        file.write_text(f'{top}\njournal = "{journal}"\n{evaluator}[[tasks]]\n'
                        f'dataset = "rte"\n{task}\n')
        code, said = _command("evaluate", "--run", str(file), "-q")
        assert code == 2, said
        _one_line_naming(said, name)
    else:
        if option is None:
            return  # the command has no option for it (a suite file's or Python's)
        code, said = _command("evaluate", "--dataset", "rte", "--journal", str(journal),
                              option, _option(value), "-q")
        assert code == 2, said
        _one_line_naming(said, option.lstrip("-"))
    assert not journal.exists()


def test_a_resume_checks_what_it_may_change(tmp_path):
    """bayeval.resume's budget, batch and concurrency meet the settings' checks (a batch
    of 0 once said 'ask(k) needs k ≥ 1' from deep inside); the journal is untouched."""
    journal = tmp_path / "run.jsonl"
    bayeval.evaluate(dataset="rte", journal=journal, limit=5, progress=False)
    before = journal.read_bytes()
    for bad in ({"batch": 0}, {"limit": 1.5}, {"concurrency": "4"}, {"command": 5}):
        name = next(iter(bad))
        try:
            bayeval.resume(journal, progress=False, **bad)
        except BayevalError as exc:
            _one_line_naming(str(exc), name)
        else:
            raise AssertionError(f"{bad} was accepted")
    assert journal.read_bytes() == before


def test_a_suites_task_journal_is_not_resumed_on_its_own(tmp_path):
    """A task's journal inside a suite's folder, resumed alone, would run past the suite's
    budget: refused in one line naming the suite's folder to resume."""
    folder = tmp_path / "suite"
    bayeval.evaluate(suite=Path(__file__).parents[1] / "examples/suites/"
                     "open_llm_leaderboard.toml", journal=folder, limit=40, progress=False)
    [task] = sorted(folder.glob("00-*.jsonl"))
    before = task.read_bytes()
    try:
        bayeval.resume(task, limit=500, progress=False)
    except BayevalError as exc:
        assert "of a suite; resume the suite" in str(exc) and str(folder) in str(exc)
    else:
        raise AssertionError("a suite's task journal was resumed on its own")
    assert task.read_bytes() == before
    code, said = _command("evaluate", "--resume", "--journal", str(task), "-q")
    assert code == 2 and "resume the suite" in said


def test_a_suite_named_like_one_of_its_tasks_is_refused():
    """--harness-results names a suite's group and its tasks alike: a suite named like
    one of its tasks would overwrite that task's entry, so it is refused in one line."""
    from bayeval.evaluation import RunSettings, TaskSettings

    try:
        RunSettings(tasks=(TaskSettings(dataset="ifeval"), TaskSettings(dataset="musr")),
                    name="musr")
    except BayevalError as exc:
        _one_line_naming(str(exc), "name")
        assert "like one of its tasks" in str(exc)
    else:
        raise AssertionError("a suite named like its task was accepted")


def test_a_suites_result_says_the_documents_each_task_and_the_suite_ran(tmp_path):
    """A suite's result holds ``documents_run`` for the whole suite and for each task (the
    audit found none): on the oracle every drawn document is in the estimate, so the
    tasks' counts add up to the suite's and to the items used."""
    result = bayeval.evaluate(suite=Path(__file__).parents[1] / "examples/suites/"
                              "open_llm_leaderboard.toml", limit=40, progress=False)
    tasks = result["tasks"]
    assert result["documents_run"] == sum(t["documents_run"] for t in tasks) == 40
    assert [t["documents_run"] for t in tasks] == [t["items_used"] for t in tasks]
    assert result["documents_rerun"] == 0


def test_a_run_file_never_changes_or_ignores_a_bad_value(tmp_path):
    """A run file's bad value is refused in one line naming it, never truncated or read
    otherwise (a fractional or negative seed was taken as it came, ``subtasks = "no"``
    read as true)."""
    from bayeval.evaluation import RunSettings

    for line in ('seed = 1.5', 'seed = -1', 'subtasks = "no"', 'epsilon = 5',
                 'epsilon = 1e308'):
        file = tmp_path / "run.toml"
        file.write_text(f'{line}\n[[tasks]]\ndataset = "rte"\n')
        name = line.split(" = ")[0]
        try:
            RunSettings.from_file(file)
        except BayevalError as exc:
            _one_line_naming(str(exc), name)
        else:
            raise AssertionError(f"{line} was accepted")
