"""Inspect AI eval logs as the reference (bayeval.data.inspect_logs): logs written by a real
local Inspect task run on Inspect's mockllm model, whose answers depend on the sample and
on the model's "skill", read back into a score matrix, and a run of `bayeval evaluate` on
them."""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("inspect_ai", reason="Inspect AI (the test extra's inspect-ai, or "
                    "bayeval[inspect]) is not installed")
# Inspect's retry set-up warns of a deprecated tenacity argument at every model call
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from bayeval.data.inspect_logs import InspectWarning, read_inspect  # noqa: E402
from bayeval.errors import DataError  # noqa: E402

# the local task and its "skilled/S" model provider (a file, as `--inspect-task` loads it)
sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from inspect_doubling import N, doubling, right  # noqa: E402

SKILLS = {"weak": 0.2, "mid": 0.5, "strong": 0.8, "best": 0.9}


def mock(name: str, skill: float, flip_second_epoch: bool = False):
    """Inspect's mockllm model answering by ``skill``; its token usage set (so that
    Inspect counts no tokens itself, which would need a download): 10 + i in, 3 out.
    With ``flip_second_epoch`` a sample's second answer is the opposite of its first."""
    calls: dict[int, int] = {}

    def answer(messages, tools, tool_choice, config):
        i = int(re.search(r"\d+", messages[-1].text).group())
        calls[i] = calls.get(i, 0) + 1
        ok = right(skill, i) != (flip_second_epoch and calls[i] == 2)
        out = ModelOutput.from_content(name, str(2 * i if ok else 2 * i + 1))
        out.usage = ModelUsage(input_tokens=10 + i, output_tokens=3, total_tokens=13 + i)
        return out

    return get_model(f"mockllm/{name}", custom_outputs=answer)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect_logs")
    models = [mock(name, skill) for name, skill in SKILLS.items()]
    inspect_eval(doubling(), model=models, log_dir=str(root), display="none")
    inspect_eval(doubling(), model=mock("twice", 0.5, flip_second_epoch=True), epochs=2,
                 log_dir=str(root), display="none")
    inspect_eval(doubling(broken=True), model=mock("broken", 0.5), log_dir=str(root),
                 display="none", fail_on_error=True)
    return root


def test_logs_read_back_as_the_scores_inspect_gave(logs):
    with pytest.warns(InspectWarning, match="passed over 1 log.*did not finish"):
        ref = read_inspect(logs)
    matrix = ref.matrix
    assert sorted(matrix.models) == sorted([f"mockllm/{m}" for m in [*SKILLS, "twice"]])
    assert matrix.n_items == N and matrix.metadata["metric"] == "match"
    for name, skill in SKILLS.items():
        row = matrix.row(f"mockllm/{name}")
        expected = [float(right(skill, int(item[1:]))) for item in matrix.items]
        np.testing.assert_array_equal(row, expected)  # C → 1, I → 0
    # two epochs, the second answer the opposite of the first: every sample 0.5
    np.testing.assert_array_equal(matrix.row("mockllm/twice"), 0.5)
    # each sample's tokens as the model reported them
    k = list(matrix.models).index("mockllm/weak")
    np.testing.assert_array_equal(ref.tokens[k], [13 + int(i[1:]) for i in matrix.items])
    assert np.all(ref.seconds[k] >= 0)


def test_wrong_task_scorer_or_folder_is_one_line(logs, tmp_path):
    warnings.simplefilter("ignore", InspectWarning)
    with pytest.raises(DataError, match=r"no log of task 'nope' \(tasks: doubling\)"):
        read_inspect(logs, task="nope")
    with pytest.raises(DataError, match=r"sample 'q\d+' epoch 1: the scorer's value is one "
                                        "number, not a dict with 'x'"):
        read_inspect(logs, metric="match:x")
    with pytest.raises(DataError, match="no sample of doubling is scored by 'bogus'"):
        read_inspect(logs, metric="bogus")
    with pytest.raises(DataError, match="no Inspect eval logs"):
        read_inspect(tmp_path)
    with pytest.raises(DataError, match="no such folder"):
        read_inspect(tmp_path / "missing")


def test_a_sample_twice_in_an_epoch_or_ids_differing_in_type_are_refused(logs, tmp_path):
    # one sample logged twice in an epoch with opposite scores (once averaged to 0.5), and
    # ids 1 and "1" (once one item): refused in one line naming the log and the id
    from inspect_ai.log import list_eval_logs, read_eval_log, write_eval_log
    from inspect_ai.scorer import Score

    warnings.simplefilter("ignore", InspectWarning)
    log = next(lg for lg in map(read_eval_log, list_eval_logs(str(logs)))
               if lg.eval.model == "mockllm/weak")
    first = log.samples[0]
    flipped = {k: Score(value="I" if v.value == "C" else "C") for k, v in first.scores.items()}
    cases = {
        "twice": ([*log.samples, first.model_copy(update={"scores": flipped})],
                  rf"sample {first.id!r} epoch 1: the sample is logged twice in this epoch"),
        "types": ([first.model_copy(update={"id": 1}),
                   log.samples[1].model_copy(update={"id": "1"}), *log.samples[2:]],
                  r"sample '1' epoch 1: ids 1 and '1' differ only in type"),
    }
    for name, (samples, message) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        # a .json log (an .eval log keeps one sample per id and epoch)
        write_eval_log(log.model_copy(update={"samples": samples}),
                       str(folder / f"{Path(log.location).stem}.json"))
        with pytest.raises(DataError, match=message):
            read_inspect(folder)


def test_a_model_logged_twice_is_refused_or_numbered(logs, tmp_path):
    import shutil

    warnings.simplefilter("ignore", InspectWarning)
    for path in logs.iterdir():
        shutil.copy(path, tmp_path / path.name)
    inspect_eval(doubling(), model=mock("mid", 0.5), log_dir=str(tmp_path), display="none")
    with pytest.raises(DataError, match=r"model 'mockllm/mid' has several finished logs "
                                        "of doubling scoring the same samples"):
        read_inspect(tmp_path)
    numbered = read_inspect(tmp_path, repeated_models="number").matrix
    assert sum(m.startswith("mockllm/mid") for m in numbered.models) == 2
    # the command line: refused in one line naming the option, or numbered with it
    from typer.testing import CliRunner

    from bayeval.cli import app

    argv = ["evaluate", "--reference", f"inspect:{tmp_path}", "--target", "mockllm/mid#2",
            "--method", "random", "--max-items", "5", "--json", "-q"]
    refused = CliRunner().invoke(app, argv)
    assert refused.exit_code == 2 and "--repeated-models number" in refused.output
    done = CliRunner().invoke(app, [*argv, "--repeated-models", "number"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout.strip().splitlines()[-1])["target"] == "mockllm/mid#2"


def test_evaluate_on_inspect_logs(logs):
    # the oracle answers from the held-out row of the strongest model; its estimate and
    # the resumable source record
    from typer.testing import CliRunner

    from bayeval.cli import app

    done = CliRunner().invoke(app, ["evaluate", "--reference", f"inspect:{logs}",
                                    "--target", "mockllm/strong", "--method", "random",
                                    "--max-items", "20", "--json"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["reference"] == "inspect:doubling" and result["items_used"] == 20
    assert result["true_score"] == pytest.approx(np.mean([right(0.8, i) for i in range(N)]))
    bad = CliRunner().invoke(app, ["evaluate", "--reference", f"inspect:{logs}",
                                   "--filter", "strict"])
    assert bad.exit_code == 2 and "Inspect logs name their scorer with --metric" in bad.output


def test_a_session_runs_the_target_on_the_asked_samples_only(logs, tmp_path):
    # the target (a mockllm model of skill 0.7) run by Inspect in this process, a batch
    # of asked samples per eval call; Inspect's own logs hold exactly the asked samples,
    # and the estimate holds the full run's score
    from inspect_ai.log import list_eval_logs, read_eval_log

    from bayeval import Session
    from bayeval.evaluators.inspect_eval import InspectEvaluator

    warnings.simplefilter("ignore", InspectWarning)
    reference = read_inspect(logs).matrix
    target = InspectEvaluator(doubling(), mock("target", 0.7), tmp_path / "target")
    session = Session(reference, "mockllm/target", "random", seed=3, max_items=12)
    _, lower, upper = session.run(target, batch=4)
    assert target.launches == 3 and session.n_observed == 12
    asked = {item for item, _ in session.observations}
    logged = [read_eval_log(info) for info in list_eval_logs(str(tmp_path / "target"))]
    assert sorted(str(s.id) for lg in logged for s in lg.samples) == sorted(asked)
    for item, score in session.observations:  # Inspect's score of each
        assert score == float(right(0.7, int(item[1:])))
    full = np.mean([right(0.7, i) for i in range(N)])
    assert lower <= full <= upper
    # the target's own logs join the reference as one more model
    assert "mockllm/target" in read_inspect(tmp_path / "target").matrix.models


TASK_FILE = Path(__file__).parent / "fixtures" / "inspect_doubling.py"


def _told(journal: Path) -> list[tuple[str, float]]:
    """(item, score) of every score a journal records, in order."""
    if not journal.exists():
        return []
    records = [json.loads(x) for x in journal.read_text().splitlines() if x.strip()]
    return [(r["item"], r["score"]) for r in records if r.get("event") == "tell"]


def test_cli_runs_the_target_with_inspect_and_resumes_after_sigkill(logs, tmp_path,
                                                                   killed_when):
    # `bayeval evaluate --evaluator inspect`: Inspect runs the local task on the target
    # (skilled/0.7, a provider the task file registers) one batch of asked samples at a
    # time; SIGKILL after the first scores, then --resume: nothing journaled is lost,
    # Inspect's own logs hold exactly the samples asked, and the estimate holds the full
    # run's score (exact once every sample is scored)
    journal, out = tmp_path / "run.jsonl", tmp_path / "target-logs"
    argv = ["evaluate", "--reference", f"inspect:{logs}", "--evaluator", "inspect",
            "--inspect-task", f"{TASK_FILE}@doubling", "--target", "skilled/0.7", "--batch",
            "4", "--output-path", out, "--journal", journal, "-q", "--json"]
    killed_when(argv, lambda: bool(_told(journal)), 300)  # a cold cache compiles first
    before = _told(journal)
    assert before
    # the resume in this process (what it reads is the killed process's journal and logs)
    from typer.testing import CliRunner

    from bayeval.cli import app

    done = CliRunner().invoke(app, ["evaluate", "--resume", "--journal", str(journal),
                                    "--inspect-log", str(out), "-q", "--json"])
    assert done.exit_code == 0, done.output[-800:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    after = _told(journal)
    assert after[:len(before)] == before  # nothing lost or changed
    assert len({item for item, _ in after}) == len(after) == result["items_used"]
    for item, score in after:  # Inspect's score of each asked sample
        assert score == float(right(0.7, int(item[1:])))
    # Inspect's finished logs hold the asked samples and no other (the batch in flight at
    # the SIGKILL may have finished in Inspect unjournaled: asked once more on resume)
    from inspect_ai.log import list_eval_logs, read_eval_log

    every = list(map(read_eval_log, list_eval_logs(str(out))))
    [estimated] = [lg for lg in every if "bayeval" in (lg.eval.metadata or {})]
    finished = [lg for lg in every if lg.status == "success" and lg is not estimated]
    logged = [str(s.id) for lg in finished for s in lg.samples]
    assert set(logged) == {item for item, _ in after}
    assert len(after) <= len(logged) <= len(after) + 4
    full = float(np.mean([right(0.7, i) for i in range(N)]))
    assert result["lower"] <= full <= result["upper"]
    if result["items_used"] == N:
        assert result["estimate"] == result["lower"] == result["upper"] == pytest.approx(full)
    assert result["evaluator"] == "inspect"
    # the estimate as an Inspect log (what `inspect view` opens): the target's samples,
    # the estimate and its interval as the scorer's metrics; the reader passes over it
    assert Path(result["inspect_log"]).name == Path(estimated.location).name
    assert sorted(str(s.id) for s in estimated.samples) == sorted(i for i, _ in after)
    metrics = {k: m.value for k, m in estimated.results.scores[0].metrics.items()}
    assert metrics["accuracy"] == result["estimate"] and estimated.eval.model == "skilled/0.7"
    assert (metrics["lower"], metrics["upper"]) == (result["lower"], result["upper"])
    assert estimated.eval.metadata["bayeval"]["method"] == "active-pai"
    if len(logged) == len(after):  # no batch asked twice: the logs join as one model
        joined = read_inspect(out).matrix
        assert joined.models.tolist() == ["skilled/0.7"] and joined.n_items == len(after)


def test_cli_inspect_evaluator_errors_are_one_line(logs, tmp_path):
    from typer.testing import CliRunner

    from bayeval.cli import app

    base = ["evaluate", "--reference", f"inspect:{logs}", "--evaluator", "inspect",
            "--target", "skilled/0.7", "--journal", str(tmp_path / "j.jsonl")]
    cases = [
        ([], "--evaluator inspect needs --inspect-task FILE.py@TASK"),
        (["--inspect-task", str(tmp_path / "none.py@t")], "no such file"),
        (["--inspect-task", f"{TASK_FILE}@nope"], "name the task as"),
        (["--inspect-task", f"{TASK_FILE}@doubling", "--concurrency", "2"],
         "--concurrency is for --evaluator command or oracle; inspect runs"),
    ]
    for extra, message in cases:
        done = CliRunner().invoke(app, [*base, *extra])
        assert done.exit_code == 2 and message in done.output, (extra, done.output)
        assert not (tmp_path / "j.jsonl").exists()  # refused before any journal
    done = CliRunner().invoke(app, ["evaluate", "--inspect-task", "x.py@t"])
    assert done.exit_code == 2 and "only used with --evaluator inspect" in done.output
    done = CliRunner().invoke(app, ["evaluate", "--inspect-log", str(tmp_path / "x")])
    assert done.exit_code == 2 and "--inspect-log writes the target's Inspect" in done.output


def test_a_suite_of_inspect_tasks_runs_each_with_inspect_at_its_logs_cost(logs, tmp_path, cli):
    # --suite with --evaluator inspect: each task runs the target with Inspect on the samples
    # asked of it, its logs in the suite's folder; its cost per item is the reference logs'
    # mean tokens per sample (10 + i in, 3 out for sample i < 30: 13 + 14.5)
    suite = tmp_path / "suite.toml"
    suite.write_text("".join(
        f"[[tasks]]\nname = '{name}'\nreference = 'inspect:{logs}'\ntask = 'doubling'\n"
        f"inspect_task = '{TASK_FILE}@doubling'\n" for name in ("first", "second")))
    done = cli("evaluate", "--suite", suite, "--evaluator", "inspect", "--target", "skilled/0.7",
               "--method", "active-pai(n_min=6)", "--epsilon", "0.5", "--batch", "4",
               "--journal", tmp_path / "run", "--json", "-q")
    assert done.returncode == 0, done.stderr[-800:]
    r = json.loads(done.stdout)
    assert [t["cost_per_item"] for t in r["tasks"]] == [27.5, 27.5]
    assert r["cost"] == pytest.approx(27.5 * r["items_used"])
    full = float(np.mean([right(0.7, i) for i in range(N)]))
    from inspect_ai.log import list_eval_logs, read_eval_log

    for t in r["tasks"]:
        assert t["lower"] <= full <= t["upper"] and t["true_score"] is None
        folder = tmp_path / "run" / f"{t['task']}.inspect"
        asked = [str(s.id) for info in list_eval_logs(str(folder))
                 for s in read_eval_log(info).samples]
        assert len(asked) == len(set(asked)) == t["items_used"]  # the asked samples only
    assert r["estimate"] == pytest.approx(np.mean([t["estimate"] for t in r["tasks"]]))


def test_the_inspect_run_from_python_is_the_commands(logs, tmp_path):
    # README "With Inspect AI": `bayeval evaluate --reference inspect:LOGS --evaluator
    # inspect --inspect-task FILE@TASK --target MODEL` and bayeval.evaluate with the same
    # settings ask the same samples and give the same estimate and interval
    from typer.testing import CliRunner

    import bayeval
    from bayeval.cli import app
    from bayeval.evaluation import EvaluatorOptions, RunSettings, TaskSettings

    done = CliRunner().invoke(app, [
        "evaluate", "--reference", f"inspect:{logs}", "--evaluator", "inspect",
        "--inspect-task", f"{TASK_FILE}@doubling", "--target", "skilled/0.7", "--batch",
        "4", "--max-items", "12", "--journal", str(tmp_path / "a.jsonl"), "-q", "--json"])
    assert done.exit_code == 0, done.output[-800:]
    command = json.loads(done.stdout.strip().splitlines()[-1])
    python = bayeval.evaluate(RunSettings(
        tasks=TaskSettings(reference=f"inspect:{logs}"),
        evaluator=EvaluatorOptions("inspect", inspect_task=f"{TASK_FILE}@doubling", batch=4),
        model="skilled/0.7", limit=12, journal=tmp_path / "b.jsonl"))
    for key in ("estimate", "lower", "upper", "items_used", "items"):
        assert python[key] == command[key], key
    assert python["inspect_logs"] == f"{tmp_path / 'b.jsonl'}.inspect"


def test_an_inspect_task_object_with_task_arguments_and_a_model_object(logs, tmp_path,
                                                                   interrupt_after):
    # Inspect's habit: eval(task, model=Model) with task arguments. bayeval.evaluate takes
    # the task function, its task_args and a Model object (mockllm answering by skill);
    # interrupted after the first batch, resumed with them given again: nothing lost

    import bayeval
    from bayeval.errors import BayevalError

    journal = tmp_path / "task.jsonl"


    model = mock("new", 0.7)
    with pytest.raises(KeyboardInterrupt):
        bayeval.evaluate(reference=f"inspect:{logs}", evaluator=doubling,
                         task_args={"n": N}, model=model, batch=4, limit=12,
                         journal=journal, watch=interrupt_after(4))
    before = _told(journal)
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["target"] == "mockllm/new"
    assert header["extra"]["python"] == "Inspect task doubling"
    with pytest.raises(BayevalError, match="evaluator="):
        bayeval.resume(journal, progress=False)
    result = bayeval.resume(journal, evaluator=doubling, task_args={"n": N}, model=model,
                            progress=False)
    after = _told(journal)
    assert len(before) == 4 and after[:4] == before
    assert len({i for i, _ in after}) == len(after) == result.items_used == 12
    for item, score in after:
        assert score == float(right(0.7, int(item[1:])))
