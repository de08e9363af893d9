"""lm-evaluation-harness end to end, the real harness with ``--model dummy`` on the local
task of ``tests/fixtures/lm_eval`` (40 three-choice documents): its logs as a reference,
``evaluate --evaluator lm-eval`` launching it once per batch, a compressed subset exported
and run by the harness, and ``bayeval estimate`` on that run. Plus the traps of reading
harness output: a subset run beside a full one, a dataset-version mismatch, a group task,
and an export key the harness does not know.

The dummy model answers at random (seeded per run by the harness's ``random_seed``), so
the reference models differ from one another; nothing here judges accuracy. One suite runs
a small Hugging Face model made here, where torch and transformers are installed (the
bench extra; skipped otherwise).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayeval.data import read_lm_eval_samples
from bayeval.data.lm_eval import SubsetRunWarning, harness_samples
from bayeval.errors import BayevalError, DataError, EvaluationError

pytest.importorskip("lm_eval", reason="lm-evaluation-harness (the test extra's lm-eval) "
                                      "is not installed")

FIXTURE = Path(__file__).parent / "fixtures" / "lm_eval"
TASK = "toy_add"
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _harness_logs(folder: Path, models: int, task: str = TASK) -> None:
    """Reference logs of ``task`` (a task or a group) written by the harness itself (its
    EvaluationTracker, as the CLI's --log_samples does), in process so that eight models
    cost one harness start."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(folder), include_defaults=False)  # no 15k YAMLs
    for k in range(models):
        tracker = EvaluationTracker(output_path=str(folder / "logs"))
        result = simple_evaluate(model="dummy", model_args=f"pretrained=org/model-{k}",
                                 tasks=[task], log_samples=True, task_manager=manager,
                                 evaluation_tracker=tracker, random_seed=k)
        samples = result.pop("samples")
        tracker.save_results_aggregated(results=result, samples=samples)
        for name, rows in samples.items():  # a group's: each subtask's
            tracker.save_results_samples(task_name=name, samples=rows)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder holding the task (the harness reads its data file relative to the folder
    it runs in) and eight dummy models' logs."""
    folder = tmp_path_factory.mktemp("harness")
    for path in FIXTURE.iterdir():
        shutil.copy(path, folder / path.name)
    old = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        _harness_logs(folder, 8)
    finally:
        os.chdir(cwd)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return folder


def _bayeval(folder: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bayeval.cli", *args], cwd=folder,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **OFFLINE})


def test_logs_to_evaluate_to_subset_to_estimate(workdir, cli):
    reference = read_lm_eval_samples(workdir / "logs", TASK)
    assert reference.n_models == 8 and reference.n_items == 40
    assert reference.models[0] == "org/model-0"  # the results file's model_name
    assert reference.metadata["metric"] == "acc"  # the log's first metric by default

    # evaluate: the harness launched once per batch of 20 asked items
    done = _bayeval(workdir, "evaluate", "--reference", "lm-eval:logs", "--task", TASK,
                    "--evaluator", "lm-eval", "--lm-eval-args",
                    "--model dummy --model_args pretrained=org/new --include_path .",
                    "--target", "org/new", "--batch", "20", "--journal", "run.jsonl",
                    "--harness-results", "estimated.json", "--json", "-q")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["items_evaluated"] >= 20
    # every drawn item was evaluated (a batch is run whole) and every document run is in
    # the estimate, the rest of the batch in which the stopping rule fired included
    assert result["harness_launches"] == math.ceil(result["items_drawn"] / 20)
    assert result["documents_run"] == result["items_drawn"] == result["items_evaluated"]
    assert result["lower"] <= result["estimate"] <= result["upper"]
    told = [json.loads(line) for line in (workdir / "run.jsonl").read_text().splitlines()[1:]]
    assert len([r for r in told if r["event"] == "tell"]) == result["items_drawn"]
    assert {r["score"] for r in told if r["event"] == "tell"} <= {0.0, 1.0}

    # compress → the --samples file → the harness evaluates exactly those docs (bayeval's
    # own commands in process from here: their subprocess path is the one above)
    _in_process(cli, workdir, "compress", "--reference", "lm-eval:logs", "--task", TASK,
                "--method", "random", "--size", "12", "--out", "sub.json",
                "--export-samples", "samples.json", "--include-path", ".", "--json")
    wanted = json.loads((workdir / "samples.json").read_text())
    assert list(wanted) == [TASK] and len(wanted[TASK]) == 12
    subprocess.run([sys.executable, "-m", "lm_eval", "run", "--model", "dummy",
                    "--model_args", "pretrained=org/new", "--include_path", ".", "--tasks",
                    TASK, "--samples", "samples.json", "--log_samples", "--output_path",
                    "subrun"], cwd=workdir, check=True, capture_output=True, timeout=300,
                   env={**os.environ, **OFFLINE})
    [log] = (workdir / "subrun").rglob(f"samples_{TASK}_*.jsonl")
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["doc_id"] for r in logged) == wanted[TASK]

    # estimate: the subset's mean with its Wilson–FPC interval
    estimate = json.loads(_in_process(cli, workdir, "estimate", "--subset", "sub.json",
                                      "--samples", "subrun", "--json"))
    assert estimate["estimate"] == pytest.approx(np.mean([r["acc"] for r in logged]))
    assert estimate["lower"] <= estimate["estimate"] <= estimate["upper"]
    assert estimate["interval"].startswith("design-based")

    # both estimates in the harness's own results layout, read as the harness reads its
    # results: the keys of its schema, the metric keys of its own results file of the
    # same task, and its own table
    (workdir / "subset-results").mkdir()
    _in_process(cli, workdir, "estimate", "--subset", "sub.json", "--samples", "subrun",
                "--harness-results", "subset-results", "--json")
    [subset_file] = (workdir / "subset-results").glob("results_*.json")
    [harness_file] = (workdir / "subrun").rglob("results_*.json")
    _check_harness_results(json.loads((workdir / "estimated.json").read_text()), result,
                           json.loads(harness_file.read_text()))
    _check_harness_results(json.loads(subset_file.read_text()), estimate,
                           json.loads(harness_file.read_text()))


def _check_harness_results(record: dict, result: dict, harness: dict) -> None:
    """``record`` (bayeval's --harness-results) against lm-evaluation-harness's schema
    (lm_eval.result_schema.EvalResults), its own results file ``harness`` of the same task
    and its make_table; ``result``: the command's JSON result."""
    from lm_eval.result_schema import EvalResults
    from lm_eval.utils import make_table

    assert set(record) - {"bayeval"} <= set(EvalResults.__annotations__)
    assert record["bayeval"]["estimate"] is True
    mine, theirs = record["results"][TASK], harness["results"][TASK]
    assert {k for k in theirs if "," in k} <= set(mine)  # "acc,none", "acc_stderr,none"
    assert mine["acc,none"] == pytest.approx(result["estimate"])
    assert (mine["acc_lower,none"], mine["acc_upper,none"]) == pytest.approx(
        (result["lower"], result["upper"]))
    half = (result["upper"] - result["lower"]) / 2
    assert mine["acc_stderr,none"] == pytest.approx(half / 1.959963984540054)
    used = result.get("items_used", result.get("items"))
    assert record["n-samples"][TASK] == {"original": 40, "effective": used}
    assert set(record["n-samples"][TASK]) == set(harness["n-samples"][TASK])
    table = make_table(record)
    assert f"{TASK} (bayeval estimate)" in table
    # the table's acc row holds the estimate (its writer may drop trailing zeros)
    acc = next(line for line in table.splitlines() if "|acc " in line or "|acc|" in line)
    assert float(acc.split("|")[7]) == pytest.approx(result["estimate"], abs=5e-5)


def test_select_reads_harness_logs(workdir, cli):
    """The same reference in bayeval select (oracle: the logged rows are the candidates)."""
    result = json.loads(_in_process(cli, workdir, "select", "--reference", "lm-eval:logs",
                                    "--task", TASK, "--budget", "50%", "--json", "-q"))
    assert result["models"] == 8 and result["items"] == 40 and len(result["ranking"]) == 8
    assert result["best"].startswith("org/model-")  # the results files' model_name


def _copy_logs(workdir: Path, into: Path, models: int = 3) -> Path:
    for k in range(models):
        shutil.copytree(workdir / "logs" / f"org__model-{k}", into / f"org__model-{k}")
    return into


def test_a_subset_run_never_replaces_the_full_run(workdir, tmp_path):
    logs = _copy_logs(workdir, tmp_path)
    full = read_lm_eval_samples(logs, TASK)
    folder = logs / "org__model-1"
    [samples] = folder.glob(f"samples_{TASK}_*.jsonl")
    # a newer run of 5 docs (lm_eval --samples) written into the same folder
    later = "2099-01-01T00-00-00.000000"
    lines = samples.read_text().splitlines()[:5]
    (folder / f"samples_{TASK}_{later}.jsonl").write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = read_lm_eval_samples(logs, TASK)
    np.testing.assert_array_equal(again.scores, full.scores)  # the full run was kept
    [w] = [w for w in caught if issubclass(w.category, SubsetRunWarning)]
    assert "not the newer run of 2099-01-01" in str(w.message) and "(5: a subset run)" in str(
        w.message)


def test_a_doc_hash_mismatch_names_the_first_document(workdir, tmp_path):
    logs = _copy_logs(workdir, tmp_path)
    [samples] = (logs / "org__model-2").glob(f"samples_{TASK}_*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    records[7]["doc_hash"] = "f" * 64  # another version of doc 7's text
    samples.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DataError, match=rf"doc {records[7]['doc_id']} of {TASK} has doc_hash "
                                        r"ffffffffffff… but model 'org/model-\d' logged "):
        read_lm_eval_samples(logs, TASK)


def test_a_group_is_one_matrix_and_exports_per_subtask(workdir, tmp_path, cli):
    logs = _copy_logs(workdir, tmp_path, models=8)
    # the group "toy_group" of two subtasks, as the harness records a group's run
    for k in range(8):
        folder = logs / f"org__model-{k}"
        [samples] = folder.glob(f"samples_{TASK}_*.jsonl")
        [results] = folder.glob("results_*.json")
        stamp = samples.name[len(f"samples_{TASK}_"):-len(".jsonl")]
        records = [json.loads(line) for line in samples.read_text().splitlines()]
        for name, part in (("toy_a", records[:25]), ("toy_b", records[25:])):
            rows = [{**r, "doc_id": i} for i, r in enumerate(part)]
            (folder / f"samples_{name}_{stamp}.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in rows))
        samples.unlink()
        data = json.loads(results.read_text())
        data["group_subtasks"] = {"toy_group": ["toy_a", "toy_b"]}
        data["n-samples"] = {"toy_a": {"original": 25, "effective": 25},
                             "toy_b": {"original": 15, "effective": 15}}
        results.write_text(json.dumps(data))
    group = read_lm_eval_samples(logs, "toy_group")
    assert group.n_items == 40 and group.items[0] == "toy_a/0" and group.items[-1] == "toy_b/14"
    assert group.metadata["subtasks"] == "toy_a:25,toy_b:15"
    picked = [group.items[3], group.items[30], group.items[26]]
    assert harness_samples(picked, "toy_group") == {"toy_a": [3], "toy_b": [1, 5]}
    with pytest.raises(DataError, match="doc 15 is beyond the 15 documents of toy_b"):
        harness_samples(["toy_b/15"], "toy_group", [("toy_a", 25), ("toy_b", 15)])

    # a uniform subset of the group, estimated from a model's run: each subtask's estimate
    # is the mean of its documents in the subset, the group's the harness's aggregate
    # (size-weighted: the mean over all documents; equal: the mean of the subtasks')
    # the group's own YAML says how the harness aggregates it: compress records it
    from bayeval.compression.subset import group_aggregation

    config = tmp_path / "yaml"
    config.mkdir()
    (config / "toy_group.yaml").write_text(
        "group: toy_group\ntask:\n  - toy_a\n  - toy_b\naggregate_metric_list:\n"
        "  - metric: acc\n    weight_by_size: false\n")
    (config / "toy_size.yaml").write_text(
        "group: toy_size\ntask:\n  - toy_a\naggregate_metric_list:\n  - metric: acc\n")
    (config / "toy_none.yaml").write_text("group: toy_none\ntask:\n  - toy_a\n")
    assert group_aggregation("toy_group", "acc", config) == "equal"
    assert group_aggregation("toy_size", "acc", config) == "size"  # the harness's default
    assert group_aggregation("toy_group", "acc_norm", config) is None  # not aggregated
    assert group_aggregation("toy_none", None, config) is None  # no group score at all
    _in_process(cli, tmp_path, "compress", "--reference", f"lm-eval:{logs}", "--task",
                "toy_group", "--method", "random", "--size", "16", "--out", "sub.json",
                "--include-path", str(config), "--json")
    frozen = json.loads((tmp_path / "sub.json").read_text())
    assert frozen["group_mean"] == "equal"
    chosen = frozen["items"]
    row = group.scores[list(group.models).index("org/model-1")]
    by_item = dict(zip(group.items, row, strict=True))
    parts = {g: [by_item[i] for i in chosen if i.startswith(f"{g}/")] for g in ("toy_a", "toy_b")}
    assert all(parts.values())  # 16 of 40 items, 25 and 15 per subtask: both drawn here
    args = ("estimate", "--subset", "sub.json", "--samples", str(logs), "--model",
            "org__model-1", "--json")
    size = json.loads(_in_process(cli, tmp_path, *args, "--group-mean", "size"))
    equal = json.loads(_in_process(cli, tmp_path, *args))  # as the group's YAML says
    assert equal["group_mean"] == "equal"
    assert equal["group_mean_from"] == "the group's aggregate_metric_list"
    assert [r["task"] for r in size["subtasks"]] == ["toy_a", "toy_b"]
    for r in size["subtasks"]:
        assert r["estimate"] == pytest.approx(np.mean(parts[r["task"]]))
        assert r["items"] == len(parts[r["task"]]) and r["lower"] <= r["estimate"] <= r["upper"]
    assert size["estimate"] == pytest.approx(np.mean([by_item[i] for i in chosen]))
    assert equal["subtasks"] == size["subtasks"]
    assert equal["estimate"] == pytest.approx(np.mean([np.mean(v) for v in parts.values()]))
    # the group and its subtasks in the harness's results layout, as the harness writes a
    # group's run: results per subtask, the group under groups, group_subtasks
    _in_process(cli, tmp_path, *args, "--group-mean", "equal", "--harness-results",
                "group.json")
    from lm_eval.result_schema import EvalResults
    from lm_eval.utils import make_table

    record = json.loads((tmp_path / "group.json").read_text())
    assert set(record) - {"bayeval"} <= set(EvalResults.__annotations__)
    assert set(record["results"]) == {"toy_a", "toy_b"}
    assert record["groups"]["toy_group"]["acc,none"] == pytest.approx(equal["estimate"])
    assert record["group_subtasks"]["toy_group"] == ["toy_a", "toy_b"]
    assert record["n-samples"]["toy_b"] == {"original": 15,
                                           "effective": len(parts["toy_b"])}
    assert "toy_a (bayeval estimate)" in make_table(record)

    # evaluate --subtasks: each subtask its own design-valid run and interval, the group's
    # score the equal mean its YAML asks for, written in the harness's layout as well
    group_run = ("evaluate", "--reference", f"lm-eval:{logs}", "--task", "toy_group",
                 "--subtasks", "--target", "org/model-1", "--method", "active-pai(n_min=5)",
                 "--epsilon", "0.3", "--group-mean", "equal", "--json", "-q")
    r = json.loads(_in_process(cli, tmp_path, *group_run, "--harness-results", "ev.json"))
    assert r["group"] == "toy_group" and r["group_mean"] == "equal"
    # cut by a budget, then resumed (each subtask's journal, the group's logs read once,
    # its evaluator shared): the same result
    _in_process(cli, tmp_path, *group_run, "--journal", "cut", "--max-items", "8")
    resumed = json.loads(_in_process(cli, tmp_path, "evaluate", "--resume", "--journal",
                                     "cut", "--max-items", "1000", "--json", "-q"))
    for key in ("estimate", "lower", "upper", "items_used"):
        assert resumed[key] == r[key]
    assert [t["task"] for t in r["tasks"]] == ["toy_a", "toy_b"]
    for t, (lo, hi) in zip(r["tasks"], ((0, 25), (25, 40)), strict=True):
        assert t["true_score"] == pytest.approx(row[lo:hi].mean())
        assert t["lower"] <= t["estimate"] <= t["upper"] and t["n_items"] == hi - lo
    assert r["estimate"] == pytest.approx(np.mean([t["estimate"] for t in r["tasks"]]))
    record = json.loads((tmp_path / "ev.json").read_text())
    assert set(record) - {"bayeval"} <= set(EvalResults.__annotations__)
    assert set(record["results"]) == {"toy_a", "toy_b"}
    assert record["groups"]["toy_group"]["acc,none"] == pytest.approx(r["estimate"])
    assert record["n-samples"]["toy_a"]["effective"] == r["tasks"][0]["items_used"]
    assert "toy_b (bayeval estimate)" in make_table(record)
    # the two subtasks named as tasks of one reference (--task twice): the same suite,
    # weighted equally
    both = json.loads(_in_process(
        cli, tmp_path, "evaluate", "--reference", f"lm-eval:{logs}", "--task", "toy_a",
        "--task", "toy_b", "--target", "org/model-1", "--method", "active-pai(n_min=5)",
        "--epsilon", "0.3", "--json", "-q"))
    assert [t["task"] for t in both["tasks"]] == ["toy_a", "toy_b"] and both["group"] is None
    assert [t["true_score"] for t in both["tasks"]] == pytest.approx(
        [t["true_score"] for t in r["tasks"]])
    assert both["true_score"] == pytest.approx(np.mean([row[:25].mean(), row[25:].mean()]))


def test_a_groups_subtasks_run_live_with_the_harness(tmp_path, cli):
    # a real harness group of two tasks (toy_a: toy_add's first 25 documents, toy_b its last
    # 15), its reference logs written by the harness; evaluate --subtasks runs the new model
    # with the harness in process, each subtask's batches on its own documents
    lines = (FIXTURE / "toy_add.jsonl").read_text().splitlines()
    config = (FIXTURE / "toy_add.yaml").read_text()
    for name, part in (("toy_a", lines[:25]), ("toy_b", lines[25:])):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(part) + "\n")
        (tmp_path / f"{name}.yaml").write_text(config.replace("toy_add", name))
    (tmp_path / "toy_group.yaml").write_text(
        "group: toy_group\ntask:\n  - toy_a\n  - toy_b\naggregate_metric_list:\n"
        "  - metric: acc\n    weight_by_size: true\n")
    os.environ.update(OFFLINE)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the harness reads the data files relative to where it runs
    try:
        _harness_logs(tmp_path, 7, "toy_group")  # the group test's reference shapes
    finally:
        os.chdir(cwd)
    done = cli("evaluate", "--reference", "lm-eval:logs", "--task", "toy_group", "--subtasks",
               "--evaluator", "lm-eval", "--lm-eval-args",
               "--model dummy --model_args pretrained=org/new --include_path .",
               "--target", "org/new", "--method", "active-pai(n_min=5)", "--epsilon", "0.4",
               "--batch", "5", "--journal", "run", "--output-path", "kept", "--json", "-q",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-800:]
    r = json.loads(done.stdout)
    assert [t["task"] for t in r["tasks"]] == ["toy_a", "toy_b"] and r["group"] == "toy_group"
    assert [t["weight"] for t in r["tasks"]] == pytest.approx([25 / 40, 15 / 40])
    for t in r["tasks"]:
        assert t["items_used"] >= 5 and t["lower"] <= t["estimate"] <= t["upper"]
    # the harness's own output of the new model holds each subtask's asked documents
    kept = read_lm_eval_samples(tmp_path / "kept", "toy_group")
    told = {}
    for path in sorted((tmp_path / "run").glob("*.jsonl")):
        for row in map(json.loads, path.read_text().splitlines()[1:]):
            if row.get("event") == "tell":
                told[row["item"]] = row["score"]
    assert sorted(told) == sorted(i for i, v in zip(kept.items, kept.row("org/new"),
                                                    strict=True) if not np.isnan(v))


def test_the_bundled_musr_exports_to_its_three_subtasks():
    from bayeval.data import load_dataset

    musr = load_dataset("musr")
    samples = harness_samples(["musr-00000", "musr-00249", "musr-00250", "musr-00755"],
                              "leaderboard_musr", [(n, int(c)) for n, c in (
                                  p.split(":") for p in musr.metadata["subtasks"].split(","))])
    assert samples == {"leaderboard_musr_murder_mysteries": [0, 249],
                       "leaderboard_musr_object_placements": [0],
                       "leaderboard_musr_team_allocation": [249]}


def test_an_export_key_the_harness_does_not_know_is_refused(workdir, tmp_path):
    # a CSV of the bundled rte: no harness task recorded, a made-up --task refused
    done = _bayeval(tmp_path, "compress", "--dataset", "rte", "--method", "random",
                    "--size", "10", "--out", "sub.json", "--export-samples", "s.json",
                    "--task", "rte_made_up")
    assert done.returncode == 2
    assert "'rte_made_up' is not a task lm-evaluation-harness knows" in done.stderr
    assert not (tmp_path / "sub.json").exists() and not (tmp_path / "s.json").exists()
    done = _bayeval(tmp_path, "compress", "--dataset", "rte", "--method", "random",
                    "--size", "10", "--out", "sub.json", "--export-samples", "s.json")
    assert done.returncode == 2 and "records no lm-evaluation-harness task" in done.stderr


FAKE_HARNESS = r'''
import json, sys, time
from pathlib import Path
args = sys.argv[1:]
mode = args[args.index("--model_args") + 1]
if mode == "fail":
    print("Traceback: model not found", file=sys.stderr)
    sys.exit(3)
if mode == "hang":
    time.sleep(60)
samples = json.loads(args[args.index("--samples") + 1])
out = Path(args[args.index("--output_path") + 1]) / "org__fake"
out.mkdir(parents=True)
for task, docs in samples.items():
    keep = docs[1:] if mode == "drop-first" else docs
    lines = [{"doc_id": d, "filter": "none", "metrics": ["acc"], "acc": float(d % 2)}
             for d in keep]
    (out / f"samples_{task}_2026-01-01T00-00-00.000000.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in lines))
'''


def _fake(tmp_path: Path, mode: str, timeout: float = 30.0):
    from bayeval.evaluators.harness import LmEvalCommand

    script = tmp_path / "fake_lm_eval.py"
    script.write_text(FAKE_HARNESS)
    return LmEvalCommand(f"--model fake --model_args {mode}", "toy", [("toy", 8)],
                         timeout=timeout, executable=[sys.executable, str(script)])


def test_one_launch_per_batch_and_each_doc_read_back(tmp_path):
    evaluator = _fake(tmp_path, "ok")
    items = ["toy-00003", "toy-00006", "toy-00001"]
    assert evaluator.samples_for(items)[0] == {"toy": [1, 3, 6]}
    assert evaluator.evaluate_batch(items) == [1.0, 0.0, 1.0]  # d % 2, in the asked order
    out_of_range = evaluator.evaluate_batch(["toy-00009"])
    assert "doc 9 is beyond the 8 documents of toy" in str(out_of_range[0])
    assert evaluator.launches == 1 and evaluator.metric == "acc"
    dropped = _fake(tmp_path, "drop-first").evaluate_batch(items)  # doc 3 not logged
    # the first asked doc of the sorted list (1) is not logged: that item alone fails
    assert dropped[:2] == [1.0, 0.0] and "logged no score for doc 1 of toy" in str(dropped[2])


def test_a_failing_or_hanging_harness_fails_the_batch_and_stops_the_run(tmp_path, small):
    from bayeval.errors import EvaluationError, EvaluatorFailedError
    from bayeval.loop.session import Session

    failed = _fake(tmp_path, "fail").evaluate_batch(["toy-00001", "toy-00002"])
    assert all(isinstance(r, EvaluationError) for r in failed)
    assert "lm_eval exited with status 3: Traceback: model not found" in str(failed[0])
    hung = _fake(tmp_path, "hang", timeout=1.0).evaluate_batch(["toy-00001"])
    assert "timed out after 1s (its process group was killed)" in str(hung[0])
    # in a session: three failures in a row stop it, each skip journaled, nothing scored
    ref = small.drop_models(["m0"])
    items = [f"toy-{j:05d}" for j in range(ref.n_items)]
    ref = type(ref)(ref.scores, ref.models, items)
    with Session(ref, "new", "random", journal=tmp_path / "run.jsonl") as session:
        with pytest.raises(EvaluatorFailedError, match="failed 3 times in a row"):
            session.run(_fake(tmp_path, "fail"), batch=5, max_failures=3)
        assert session.n_observed == 0 and len(session.skipped) == 3


def test_in_process_evaluator_keeps_the_model_and_matches_the_session(workdir, tmp_path):
    from bayeval.evaluators.harness import LmEvalInProcess
    from bayeval.loop.session import Session

    cwd = os.getcwd()
    os.chdir(workdir)  # the task's data file is relative to the folder the harness runs in
    try:
        from lm_eval.tasks import TaskManager

        evaluator = LmEvalInProcess("dummy", TASK, random_seed=3, task_manager=TaskManager(
            include_path=str(workdir), include_defaults=False))
        lm = evaluator.lm
        reference = read_lm_eval_samples(workdir / "logs", TASK)
        with Session(reference, "org/new", "random", max_items=20) as session:
            session.run(evaluator, batch=10)
        assert evaluator.launches == 2 and evaluator.lm is lm
        assert session.n_observed == 20
        assert {s for _, s in session.observations} <= {0.0, 1.0}
    finally:
        os.chdir(cwd)


def test_a_task_of_the_include_path_skips_the_harness_index_and_a_group_does_not(tmp_path):
    # a plain task found under --include_path is looked up in that folder's index alone
    # (reading the harness's own thousands of YAMLs takes seconds at every start); a group
    # there may name the harness's tasks, so it gets the whole index, as `lm_eval run` does,
    # and a member whose dataset cannot be read (offline) is a one-line error naming it
    from bayeval.evaluators.harness import LmEvalInProcess, check_harness_task

    os.environ.update(OFFLINE)
    for path in FIXTURE.iterdir():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "mixed.yaml").write_text("group: mixed\ntask:\n  - toy_add\n  - arc_easy\n")
    args = f"--model dummy --include_path {tmp_path}"
    _, local = check_harness_task(args, TASK)
    assert sorted(local.all_tasks) == ["mixed", TASK]
    _, whole = check_harness_task(args, "mixed")
    assert "arc_easy" in whole.all_tasks and TASK in whole.all_tasks
    with pytest.raises(EvaluationError, match="could not load task 'mixed'"):
        LmEvalInProcess("dummy", "mixed", task_manager=whole)


def test_a_task_whose_metric_needs_an_absent_package_says_how_to_install_it(tmp_path):
    # a task whose metric imports a package that is not installed fails at its loading, in
    # one line naming the task, the package and what installs it: the harness's own extra
    # where its metadata names one (langdetect: its ifeval extra), else the package
    from bayeval.evaluators.harness import LmEvalInProcess

    os.environ.update(OFFLINE)
    _toy_gen_task(tmp_path)
    (tmp_path / "utils.py").write_text("import bayeval_absent_package  # noqa\n"
                                       "def score(doc, results):\n    return {}\n")
    (tmp_path / "needs.yaml").write_text(
        (tmp_path / "toy_gen.yaml").read_text().replace("task: toy_gen", "task: needs")
        + "process_results: !function utils.score\n")
    with pytest.raises(EvaluationError) as raised:
        LmEvalInProcess.from_args(f"--model dummy --include_path {tmp_path}", "needs")
    assert str(raised.value) == ("the harness task 'needs' needs the package "
                                 "'bayeval_absent_package', not installed here: pip install "
                                 "bayeval_absent_package")
    from bayeval.evaluators.harness import install_hint

    assert install_hint("langdetect") == "pip install 'lm-eval[ifeval]'"
    assert install_hint("sympy") == "pip install 'lm-eval[math]'"


def _run_in_process(cli, folder: Path, *args: str) -> tuple[int, str, str]:
    """``bayeval ARGS`` in this process (the ``cli`` fixture), run in ``folder``: (exit
    status, stdout, stderr)."""
    done = cli(*args, cwd=folder)
    return done.returncode, done.stdout, done.stderr


def _in_process(cli, folder: Path, *args: str) -> str:
    """``bayeval ARGS`` in this process, which must succeed; its stdout."""
    code, out, err = _run_in_process(cli, folder, *args)
    assert code == 0, err
    return out


def _in_process_fails(cli, folder: Path, *args: str) -> tuple[int, str]:
    """``bayeval ARGS`` in this process expected to fail: (exit status, stderr)."""
    code, _, err = _run_in_process(cli, folder, *args)
    return code, err


HARNESS_RUN = ("evaluate", "--reference", "lm-eval:logs", "--task", TASK,
               "--evaluator", "lm-eval", "--target", "org/new")


def test_in_process_route_keeps_the_target_output_and_counts_every_launch(workdir, cli):
    # the default route: the model and the task loaded once, one harness call per batch;
    # the target's own harness output kept (--output-path) and read back as a reference
    # row whose scores are the journal's; a resume counts the launches before it too
    os.environ.update(OFFLINE)
    journal = workdir / "kept.jsonl"
    result = json.loads(_in_process(cli, workdir, *HARNESS_RUN, "--lm-eval-args",
        "--model dummy --model_args pretrained=org/new --include_path .", "--batch", "10",
        "--max-items", "20", "--output-path", "kept", "--journal", str(journal), "--json",
        "-q"))
    assert result["items_used"] == 20 and result["harness_launches"] == 2
    times = result["times"]
    assert times["items_timed"] == 20 and times["wall_seconds"] >= times["evaluator_seconds"]
    # the full run projected as the harness packs the whole task's requests (the in-process
    # evaluator knows them: bayeval.loop.timing), from the two calls
    assert times["full_run_basis"] == "packed" and times["calls"] == 2
    assert 0 < times["full_run_lower"] <= times["full_run_seconds"] <= times["full_run_upper"]
    assert times["saved_seconds"] == pytest.approx(times["full_run_seconds"]
                                                   - times["wall_seconds"])
    kept = read_lm_eval_samples(workdir / "kept", TASK)
    assert kept.models == ["org/new"]
    told = {r["item"]: r["score"] for r in map(json.loads, journal.read_text().splitlines()[1:])
            if r["event"] == "tell"}
    row = kept.row("org/new")
    assert {kept.items[j]: row[j] for j in np.flatnonzero(~np.isnan(row))} == told
    again = json.loads(_in_process(cli, workdir, "evaluate", "--journal", str(journal),
                                   "--resume", "--json", "-q"))
    assert again["harness_launches"] == 2 and again["items_used"] == 20


@pytest.mark.parametrize("mode", ["in-process", "subprocess"])
def test_the_harness_options_and_task_are_checked_before_any_journal(workdir, cli, mode):
    os.environ.update(OFFLINE)
    cases = [
        ("--model dummy --model_args pretrained=org/new",  # the task is local
         f"has no task '{TASK}'; add --include_path DIR to --lm-eval-args"),
        ("--model dummy --include_path . --limit 5", "drop --limit; bayeval sets it for "
                                                     "each batch (use bayeval's own --limit)"),
        ("--model dummy --include_path . --bogus 1", "the harness refused them: lm-eval: "
                                                     "error: unrecognized arguments: --bogus"),
    ]
    for args, said in cases:
        journal = workdir / f"never-{mode}.jsonl"
        code, stderr = _in_process_fails(cli, workdir, *HARNESS_RUN, "--lm-eval-args", args,
                                         "--lm-eval-mode", mode, "--journal", str(journal))
        assert code in (2, 3) and said in stderr, stderr
        assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
        assert not journal.exists()  # nothing frozen with the wrong options


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="torch is installed here: the case needs a harness model (hf) "
                           "whose package is missing")
def test_a_harness_model_whose_package_is_missing_is_one_line(workdir, cli):
    # the harness imports a model's backend when it is asked for (hf needs torch): in
    # process, a missing package is said in one line, before any journal
    os.environ.update(OFFLINE)
    journal = workdir / "no-torch.jsonl"
    code, stderr = _in_process_fails(cli, workdir, *HARNESS_RUN, "--lm-eval-args",
        "--model hf --model_args pretrained=org/new --include_path .", "--journal", str(journal))
    assert code in (2, 3) and "the harness's model 'hf' needs a package that is not " \
        "installed: No module named 'torch'" in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and not journal.exists()


def test_a_killed_bayeval_leaves_no_harness_process_nor_folder(workdir, tmp_path):
    # a launch whose bayeval dies by SIGKILL dies with it (the watchdog kills its group),
    # and its temporary folder is removed by the next launch of any bayeval
    import signal
    import tempfile
    import time

    marker = "61.37"
    script = (f"from bayeval.evaluators.harness import LmEvalCommand\n"
              f"LmEvalCommand('--model dummy', 'toy', executable=['sh', '-c', "
              f"'sleep {marker}', 'lm']).evaluate_batch(['toy-00001'])\n")
    (tmp_path / "launch.py").write_text(script)  # (not on the command line pgrep reads)
    child = subprocess.Popen([sys.executable, str(tmp_path / "launch.py")])
    try:
        for _ in range(200):
            if _running(f"sleep {marker}"):
                break
            time.sleep(0.1)
        assert _running(f"sleep {marker}")
        folders = list(Path(tempfile.gettempdir()).glob(f"bayeval-lm-eval-{child.pid}-*"))
        assert len(folders) == 1
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    for _ in range(50):
        if not _running(f"sleep {marker}"):
            break
        time.sleep(0.1)
    assert not _running(f"sleep {marker}")
    from bayeval.evaluators.harness import sweep_folders

    sweep_folders()
    assert not folders[0].exists()


def _running(pattern: str) -> bool:
    found = subprocess.run(["pgrep", "-f", "-x", pattern], capture_output=True, text=True)
    return bool(found.stdout.strip())


def test_resume_may_correct_the_harness_options_of_a_run_without_a_score(workdir, cli):
    # a run whose first launch failed (a model the harness cannot load) froze its options
    # with no score: --resume --lm-eval-args replaces them and asks the same documents;
    # once a score is in, the options can no longer change
    os.environ.update(OFFLINE)
    journal = workdir / "fix.jsonl"
    code, err = _in_process_fails(
        cli, workdir, *HARNESS_RUN, "--lm-eval-mode", "subprocess", "--lm-eval-args",
        "--model hf --model_args pretrained=/no/such/model --include_path .", "--batch", "5",
        "--max-items", "10", "--journal", str(journal), "-q")
    assert code == 3 and "lm_eval exited with status" in err, err
    asked = [r["item"] for r in map(json.loads, journal.read_text().splitlines()[1:])]
    good = "--model dummy --model_args pretrained=org/new --include_path ."
    code, err = _in_process_fails(cli, workdir, "evaluate", "--journal", str(journal),
                                  "--resume", "--lm-eval-args", "--model dummy --bogus 1")
    assert code == 2 and "unrecognized arguments: --bogus" in err
    result = json.loads(_in_process(cli, workdir, "evaluate", "--journal", str(journal),
                                    "--resume", "--lm-eval-args", good, "--json", "-q"))
    assert result["items"][:5] == asked[:5] and result["items_used"] == 10
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["extra"]["lm_eval_args"] == good
    # with scores in, the options may still be corrected (the caller vouches for the
    # model): the journal keeps each change and when
    _in_process(cli, workdir, "evaluate", "--journal", str(journal), "--resume",
                "--lm-eval-args", good, "-q")
    header = json.loads(journal.read_text().splitlines()[0])
    changes = header["extra"]["changes"]
    assert [sorted(c) for c in changes] == [["at", "lm_eval_args"]] * 2
    assert changes[1]["lm_eval_args"] == {"was": good, "now": good}


def test_progress_is_a_line_per_batch_on_a_log(workdir, cli):
    # not a terminal (a CI log, a file): plain lines, whose total honours --max-items
    os.environ.update(OFFLINE)
    code, _, err = _run_in_process(cli, workdir, *HARNESS_RUN, "--lm-eval-args",
        "--model dummy --model_args pretrained=org/new --include_path .", "--batch", "8",
        "--max-items", "16", "--journal", str(workdir / "log.jsonl"))
    lines = [x for x in err.splitlines() if x.startswith("evaluating:")]
    assert code == 0 and lines[0].startswith("evaluating: 8/16 items")
    assert lines[-1].startswith("evaluating: 16/16 items")


def _toy_gen_task(folder: Path) -> None:
    """A generative harness task of 30 yes/no questions in ``folder`` (--include_path)."""
    (folder / "toy_gen.jsonl").write_text("".join(
        json.dumps({"question": f"Is {k} even?", "answer": "yes" if k % 2 == 0 else "no"})
        + "\n" for k in range(30)))
    (folder / "toy_gen.yaml").write_text(
        "task: toy_gen\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {folder / 'toy_gen.jsonl'}\ntest_split: test\n"
        "output_type: generate_until\ndoc_to_text: \"{{question}}\"\n"
        "doc_to_target: \"{{answer}}\"\ngeneration_kwargs:\n  until: [\"\\n\"]\n"
        "  max_gen_toks: 4\n  do_sample: false\nmetric_list:\n  - metric: exact_match\n"
        "    aggregation: mean\n    higher_is_better: true\n")


@contextlib.contextmanager
def _completions_server(answer):
    """An OpenAI-compatible completions server on 127.0.0.1 (a thread), answering each
    request's prompts with ``answer(prompts)``, a JSON body; yields its URL."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Completions(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            data = json.dumps(answer(asked)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)
            # a client that went away (its requests abandoned) is no fault of the server

    server = Server(("127.0.0.1", 0), Completions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
    finally:
        server.shutdown()


def test_a_model_behind_a_local_server_is_asked_only_the_chosen_documents(tmp_path):
    # the harness's `local-completions` model against an OpenAI-compatible server started
    # here (127.0.0.1): the in-process evaluator sends exactly the asked documents' prompts,
    # and their scores are the server's answers graded by the task's own metric
    from bayeval.data import ScoreMatrix
    from bayeval.evaluators.harness import LmEvalInProcess
    from bayeval.loop.session import Session

    os.environ.update(OFFLINE)
    _toy_gen_task(tmp_path)
    prompts: list[str] = []

    def answer(asked):  # right on the multiples of 3, wrong elsewhere
        prompts.extend(asked)
        choices = []
        for i, prompt in enumerate(asked):
            k = int(prompt.split()[1])
            right = "yes" if k % 2 == 0 else "no"
            text = right if k % 3 == 0 else {"yes": "no", "no": "yes"}[right]
            choices.append({"index": i, "text": text})
        return {"choices": choices}

    with _completions_server(answer) as url:
        evaluator = LmEvalInProcess.from_args(
            f"--model local-completions --model_args model=toy,base_url={url},"
            f"tokenizer_backend=None,tokenized_requests=False,num_concurrent=1 "
            f"--include_path {tmp_path}", "toy_gen")
        rng = np.random.default_rng(0)
        reference = ScoreMatrix((rng.random((6, 30)) < 0.5).astype(float),
                                [f"m{i}" for i in range(6)],
                                [f"toy_gen-{k:05d}" for k in range(30)])
        with Session(reference, "served", "random", max_items=12) as session:
            session.run(evaluator, batch=6)
    asked = [int(item.split("-")[1]) for item, _ in session.observations]
    assert evaluator.launches == 2 and len(asked) == 12
    assert sorted(int(p.split()[1]) for p in prompts) == sorted(asked)  # nothing else sent
    assert [s for _, s in session.observations] == [float(k % 3 == 0) for k in asked]


SERVED = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_lm_eval_harness import _completions_server
from bayeval.evaluators.harness import LmEvalInProcess
mode = ["error"]
def answer(asked):
    choices = [{{"index": i, "text": "yes"}} for i in range(len(asked))]
    return {{"choices": choices[:-1]}} if mode[0] == "short" else {{"error": "overloaded"}}
items = [f"toy_gen-{{k:05d}}" for k in range(6)]
with _completions_server(answer) as url:
    evaluator = LmEvalInProcess.from_args(
        f"--model local-completions --model_args model=toy,base_url={{url}},"
        "tokenizer_backend=None,tokenized_requests=False,num_concurrent=4,max_retries=1 "
        f"--include_path {folder!r}", "toy_gen")
    missing = evaluator.evaluate_batch(items)
    mode[0] = "short"
    short = evaluator.evaluate_batch(items)
print(json.dumps({{"url": url, "short": [str(e) for e in short],
                  "missing": [str(e) for e in missing]}}))
"""


def test_a_server_whose_answers_do_not_match_the_prompts_is_named(tmp_path):
    # a server that answers one completion fewer than the prompts it was sent, or a body
    # without "choices" (an error in an OpenAI response's place): each document's error
    # names the server and what its answer lacked (the harness raised "zip() argument 2 is
    # shorter than argument 1" and "KeyError: 'choices'"); with requests in flight on the
    # harness's event loop, no traceback of its abandoned requests is printed, up to the
    # process's exit (a process of its own: asyncio prints them when they are collected)
    _toy_gen_task(tmp_path)
    script = tmp_path / "served.py"
    script.write_text(SERVED.format(tests=str(Path(__file__).parent), folder=str(tmp_path)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={**os.environ, **OFFLINE}, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    url = out["url"]
    assert out["short"] == [f"the server at {url} answered fewer completions than the "
                            "prompts it was sent (generate_until: ValueError: zip() "
                            "argument 2 is shorter than argument 1)"] * 6
    for got in out["missing"]:
        assert got.startswith(f"the server at {url} answered without the field 'choices' "
                              "that an OpenAI-style completions response holds")
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_a_suite_of_separate_harness_tasks_loads_the_model_once(tmp_path, cli, killed_when):
    # two separate tasks (not a group) through one loaded model: each task's requests built
    # once, only the chosen documents run, each task's output kept apart under its name; a
    # run SIGKILLed mid-way resumes (on a budget) with nothing lost and no document run
    # twice; the results file holds both tasks under the harness's names, readable by the
    # harness's make_table
    from lm_eval.utils import make_table

    os.environ.update(OFFLINE)
    for path in FIXTURE.iterdir():
        shutil.copy(path, tmp_path / path.name)
    yaml = (FIXTURE / f"{TASK}.yaml").read_text().replace(f"task: {TASK}", "task: toy_add_b")
    (tmp_path / "toy_add_b.yaml").write_text(yaml)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        for task in (TASK, "toy_add_b"):
            _harness_logs(tmp_path, 6, task)
    finally:
        os.chdir(here)
    (tmp_path / "two.toml").write_text(
        f"epsilon = 0.05\n[[tasks]]\nreference = 'lm-eval:logs'\ntask = '{TASK}'\n"
        "[[tasks]]\nreference = 'lm-eval:logs'\ntask = 'toy_add_b'\n")
    run = ("evaluate", "--suite", "two.toml", "--evaluator", "lm-eval", "--target",
           "org/new", "--lm-eval-args",
           "--model dummy --model_args pretrained=org/new --include_path .",
           "--output-path", "kept", "--journal", "j", "--json", "-q")
    os.chdir(tmp_path)  # the killed process runs here, as a user's would
    try:
        killed_when([*run, "--batch", "1"], lambda: sum(
            line.count('"tell"') for f in (tmp_path / "j").glob("*.jsonl")
            for line in f.read_text().splitlines()) >= 12, 300)
    finally:
        os.chdir(here)
    before = {f.name: [line for line in f.read_text().splitlines() if '"tell"' in line]
              for f in (tmp_path / "j").glob("*.jsonl")}
    done = json.loads(_in_process(cli, tmp_path, "evaluate", "--resume", "--journal", "j",
                                  "--max-items", "50", "--batch", "5", "--harness-results",
                                  "r.json", "--json", "-q"))
    assert done["harness_models_loaded"] == 1 and done["items_used"] == 50
    assert done["harness_launches"] <= 50 // 5 + 2  # a batch per call (and the owed ones)
    for f in (tmp_path / "j").glob("*.jsonl"):  # nothing journaled was lost
        told = [line for line in f.read_text().splitlines() if '"tell"' in line]
        assert told[:len(before[f.name])] == before[f.name]
    for row, task in zip(done["tasks"], (TASK, "toy_add_b"), strict=True):
        kept = read_lm_eval_samples(tmp_path / "kept" / row["task"], task)
        scored = np.flatnonzero(~np.isnan(kept.row("org/new")))
        assert len(scored) == row["items_used"]  # every document run once, none twice
        docs = [json.loads(line)["doc_id"] for f in (tmp_path / "kept" / row["task"]).rglob(
            f"samples_{task}_*.jsonl") for line in f.read_text().splitlines()]
        assert len(docs) == len(set(docs)) == row["items_used"]
    record = json.loads((tmp_path / "r.json").read_text())
    assert set(record["results"]) == {TASK, "toy_add_b"}
    assert f"{TASK} (bayeval estimate)" in make_table(record)


def _tiny_hf_model(folder: Path) -> Path:
    """A GPT-2 of one layer and width 16 (random weights, seed 0) with a word-level
    tokenizer over the toy task's words, saved for transformers (nothing from a hub)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = ["<unk>", "<eos>", "+", "=", *(str(k) for k in range(20))]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>",
                                   eos_token="<eos>", pad_token="<eos>")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(words), n_positions=32, n_embd=16,
                                       n_layer=1, n_head=2, bos_token_id=1, eos_token_id=1))
    model.save_pretrained(str(folder))
    fast.save_pretrained(str(folder))
    return folder


def test_a_suite_of_two_harness_tasks_runs_a_small_hf_model_loaded_once(tmp_path, cli,
                                                                        monkeypatch):
    # two separate tasks (not a group) on a real Hugging Face model: the model loaded
    # once for both (counted at transformers' own loader), only the chosen documents of
    # each task run, each journaled score the one a full harness run of the same model
    # gives that document, and the results file read by the harness's make_table with
    # both tasks under their names. (The SIGKILL and resume of such a suite: the test
    # above, on the harness's dummy model.) Needs torch and transformers (the bench extra)
    pytest.importorskip("torch", reason="torch (the bench extra) is not installed")
    transformers = pytest.importorskip("transformers", reason="transformers (the bench "
                                       "extra) is not installed")
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import make_table

    os.environ.update(OFFLINE)
    for path in FIXTURE.iterdir():
        shutil.copy(path, tmp_path / path.name)
    yaml = (FIXTURE / f"{TASK}.yaml").read_text().replace(f"task: {TASK}", "task: toy_add_b")
    (tmp_path / "toy_add_b.yaml").write_text(yaml)
    model = _tiny_hf_model(tmp_path / "tiny")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        for task in (TASK, "toy_add_b"):
            _harness_logs(tmp_path, 6, task)
        full = simple_evaluate(model="hf", model_args=f"pretrained={model}",
                               tasks=[TASK, "toy_add_b"], log_samples=True, device="cpu",
                               task_manager=TaskManager(include_path=str(tmp_path),
                                                        include_defaults=False))
    finally:
        os.chdir(here)
    truth = {t: {s["doc_id"]: float(s["acc"]) for s in full["samples"][t]}
             for t in (TASK, "toy_add_b")}
    (tmp_path / "two.toml").write_text(
        f"epsilon = 0.05\n[[tasks]]\nreference = 'lm-eval:logs'\ntask = '{TASK}'\n"
        "[[tasks]]\nreference = 'lm-eval:logs'\ntask = 'toy_add_b'\n")
    loads = []
    loader = transformers.AutoModelForCausalLM.from_pretrained

    def counted(cls, *args, **kwargs):
        loads.append(args[0] if args else kwargs.get("pretrained_model_name_or_path"))
        return loader(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        classmethod(counted))
    done = json.loads(_in_process(
        cli, tmp_path, "evaluate", "--suite", "two.toml", "--evaluator", "lm-eval",
        "--target", "tiny", "--lm-eval-args",
        f"--model hf --model_args pretrained={model} --include_path . --device cpu",
        "--batch", "5", "--max-items", "30", "--output-path", "kept", "--journal", "j",
        "--harness-results", "r.json", "--json", "-q"))
    assert len(loads) == 1 and done["harness_models_loaded"] == 1, loads
    assert done["items_used"] == 30
    for row, task in zip(done["tasks"], (TASK, "toy_add_b"), strict=True):
        told = {json.loads(x)["item"]: json.loads(x)["score"]
                for x in (tmp_path / row["journal"]).read_text().splitlines()[1:]
                if '"tell"' in x}  # the journal as the user named it: relative
        assert len(told) == row["items_used"] > 0
        for item, score in told.items():  # the full run's score of that document
            assert score == truth[task][int(item.rsplit("-", 1)[1])], item
        docs = [json.loads(line)["doc_id"] for f in (tmp_path / "kept" / row["task"]).rglob(
            f"samples_{task}_*.jsonl") for line in f.read_text().splitlines()]
        assert sorted(docs) == sorted(int(i.rsplit("-", 1)[1]) for i in told)
    record = json.loads((tmp_path / "r.json").read_text())
    assert set(record["results"]) == {TASK, "toy_add_b"}
    assert f"{TASK} (bayeval estimate)" in make_table(record)


def test_a_cpu_models_calls_of_mixed_lengths_pack_as_the_full_run_and_score_the_same(
        tmp_path):
    # a task whose prompts carry 0 to 5 solved examples (5 to 29 words), a tiny Hugging
    # Face model on the CPU at the harness's batch size 8: a call of 8 documents, the
    # shortest and longest among them, runs at a smaller batch size (one batch of 8 would
    # pad every prompt to the longest), the model's own batch size restored after it, the
    # call's padded size within PACK_SLACK of the full run's per document, and every
    # document scored as a full harness run at batch size 8 scores it. Needs torch and
    # transformers (the bench extra)
    pytest.importorskip("torch", reason="torch (the bench extra) is not installed")
    pytest.importorskip("transformers", reason="transformers (the bench extra) is not "
                        "installed")
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from bayeval.evaluators.harness import LmEvalInProcess
    from bayeval.evaluators.harness_requests import PACK_SLACK, padded_size, shared_context

    os.environ.update(OFFLINE)
    rng = np.random.default_rng(3)
    lines = []
    for _ in range(40):
        shots = " ".join(f"{a} + {b} = {a + b} <eos>" for a, b in
                         rng.integers(0, 10, (int(rng.integers(0, 6)), 2)))
        a, b = (int(x) for x in rng.integers(0, 10, 2))
        lines.append(json.dumps({"question": f"{shots} {a} + {b} =".strip(),
                                 "choices": [str(a + b), str(a + b + 1), str(abs(a + b - 1))],
                                 "answer": 0}))
    (tmp_path / "toy_mixed.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "toy_mixed.yaml").write_text(
        (FIXTURE / f"{TASK}.yaml").read_text().replace(f"task: {TASK}", "task: toy_mixed")
        .replace(f"{TASK}.jsonl", "toy_mixed.jsonl"))
    model = _tiny_hf_model(tmp_path / "tiny")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        full = simple_evaluate(model="hf", model_args=f"pretrained={model}",
                               tasks=["toy_mixed"], log_samples=True, device="cpu",
                               batch_size=8, task_manager=TaskManager(
                                   include_path=str(tmp_path), include_defaults=False))
        truth = {s["doc_id"]: float(s["acc"]) for s in full["samples"]["toy_mixed"]}
        evaluator = LmEvalInProcess.from_args(
            f"--model hf --model_args pretrained={model} --include_path . --device cpu "
            "--batch_size 8", "toy_mixed")
        words = [len(json.loads(x)["question"].split()) for x in lines]
        order = np.argsort(words)
        docs = [int(d) for d in (*order[:4], *order[-4:])]  # the 4 shortest, 4 longest
        items = [f"toy_mixed-{d:05d}" for d in docs]
        size = evaluator.packed_size(items)
        scores = evaluator.evaluate_batch(items)
    finally:
        os.chdir(here)
    assert evaluator.call_batch_sizes and evaluator.call_batch_sizes[0] < 8
    assert evaluator.lm.batch_size_per_gpu == 8  # restored
    shared = shared_context(evaluator.lm)
    assert shared is not None  # the HF model shares a context among one-token choices
    requests = evaluator._requests({"toy_mixed": sorted(docs)})
    assert size == padded_size(requests, evaluator.call_batch_sizes[0], shared)
    assert size <= (1 + PACK_SLACK) * evaluator.packed_size(None) / 40 * 8
    assert padded_size(requests, 8, shared) > size  # what the model's own batch pads
    assert scores == [truth[d] for d in docs]


def test_a_resumed_evaluator_continues_the_kept_output_counting_each_document_once(
        workdir, tmp_path):
    # the kept output of a run is continued by the evaluator of its resume: one samples
    # file, each document once, and a summary over every document, also when the resume
    # asks again a document the earlier run had kept but not journaled (a SIGKILL between
    # the two writes)
    from lm_eval.tasks import TaskManager

    from bayeval.evaluators.harness import LmEvalInProcess

    items = read_lm_eval_samples(workdir / "logs", TASK).items[:3]
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        for asked in (items[:2], items[1:]):
            with LmEvalInProcess("dummy", TASK, random_seed=3, output_path=tmp_path,
                                 name="org/new", task_manager=TaskManager(
                                     include_path=str(workdir), include_defaults=False)
                                 ) as evaluator:
                evaluator.evaluate_batch(list(asked))
    finally:
        os.chdir(cwd)
    [samples] = tmp_path.rglob(f"samples_{TASK}_*.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert sorted(r["doc_id"] for r in records) == [0, 1, 2]
    [results] = tmp_path.rglob("results_*.json")
    summary = json.loads(results.read_text())
    assert summary["n-samples"][TASK]["effective"] == 3
    assert summary["results"][TASK]["acc,none"] == pytest.approx(
        np.mean([r["acc"] for r in records]))
    kept = read_lm_eval_samples(tmp_path, TASK)
    assert kept.models == ["org/new"] and int((~np.isnan(kept.scores)).sum()) == 3


def test_the_harness_run_from_python_is_the_commands(workdir, cli, tmp_path):
    # README "With lm-evaluation-harness": `bayeval evaluate --reference lm-eval:logs
    # --task T --evaluator lm-eval --target NEW --lm-eval-args …` and bayeval.evaluate with
    # the same settings run the same documents to the same estimate and interval
    import bayeval
    from bayeval.evaluation import EvaluatorOptions, RunSettings, TaskSettings

    os.environ.update(OFFLINE)
    args = "--model dummy --model_args pretrained=org/new --include_path ."
    command = json.loads(_in_process(cli, workdir, *HARNESS_RUN, "--lm-eval-args", args,
                                     "--batch", "10", "--max-items", "30", "--journal",
                                     str(tmp_path / "a.jsonl"), "--json", "-q"))
    settings = RunSettings(
        tasks=TaskSettings(reference=f"lm-eval:{workdir / 'logs'}", task=TASK),
        evaluator=EvaluatorOptions("lm-eval", lm_eval_args=args, batch=10),
        model="org/new", limit=30, journal=tmp_path / "b.jsonl")
    cwd = os.getcwd()
    os.chdir(workdir)  # the harness reads the task's data relative to where it runs
    try:
        python = bayeval.evaluate(settings)
    finally:
        os.chdir(cwd)
    for key in ("estimate", "lower", "upper", "items_used", "items", "harness_launches"):
        assert python[key] == command[key], key


def test_kept_output_of_a_run_killed_before_its_summary_is_continued(workdir, tmp_path):
    # SIGKILL leaves the kept samples without a summary, possibly with a last line cut:
    # the resume's evaluator continues those samples (the cut line dropped, its document
    # run again) and the folder reads back as one run holding each document once
    from lm_eval.tasks import TaskManager

    from bayeval.evaluators.harness import LmEvalInProcess

    items = read_lm_eval_samples(workdir / "logs", TASK).items[:4]
    manager = TaskManager(include_path=str(workdir), include_defaults=False)
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        with LmEvalInProcess("dummy", TASK, random_seed=3, output_path=tmp_path,
                             name="org/new", task_manager=manager) as evaluator:
            evaluator.evaluate_batch(list(items[:3]))
        [results] = tmp_path.rglob("results_*.json")
        results.unlink()  # killed before the summary was written
        [samples] = tmp_path.rglob(f"samples_{TASK}_*.jsonl")
        text = samples.read_bytes()
        samples.write_bytes(text[:-20])  # ... and in the middle of its last line
        with LmEvalInProcess("dummy", TASK, random_seed=3, output_path=tmp_path,
                             name="org/new", task_manager=manager) as evaluator:
            evaluator.evaluate_batch(list(items[2:]))
    finally:
        os.chdir(cwd)
    assert [p.name for p in tmp_path.rglob(f"samples_{TASK}_*.jsonl")] == [samples.name]
    docs = sorted(json.loads(line)["doc_id"] for line in samples.read_text().splitlines())
    assert docs == [0, 1, 2, 3]
    kept = read_lm_eval_samples(tmp_path, TASK)
    assert int((~np.isnan(kept.scores)).sum()) == 4


def test_a_harness_lm_object_the_user_built_is_the_evaluator(workdir, tmp_path,
                                                             interrupt_after):
    # bayeval.evaluate(model=LM object): the harness's own habit (simple_evaluate takes an
    # LM object as its model); run in process on that object, interrupted after the first
    # batch and resumed with the object given again: nothing lost, the journal naming it
    from lm_eval.models.dummy import DummyLM

    import bayeval

    os.environ.update(OFFLINE)
    lm = DummyLM()
    journal = tmp_path / "lm.jsonl"
    cwd = os.getcwd()
    os.chdir(workdir)  # the harness reads the task's data relative to where it runs



    try:
        with pytest.raises(KeyboardInterrupt):
            bayeval.evaluate(reference=f"lm-eval:{workdir / 'logs'}", tasks=TASK, model=lm,
                             lm_eval_args="--include_path .", batch=10, limit=30,
                             journal=journal, watch=interrupt_after(10))
        told = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
        before = [(r["item"], r["score"]) for r in told if r.get("event") == "tell"]
        header = json.loads(journal.read_text().splitlines()[0])
        assert header["extra"]["python"] == "harness LM lm_eval.models.dummy.DummyLM"
        with pytest.raises(BayevalError, match="evaluator="):
            bayeval.resume(journal, progress=False)
        result = bayeval.resume(journal, model=lm, progress=False)
    finally:
        os.chdir(cwd)
    after = [(r["item"], r["score"]) for r in map(
        json.loads, journal.read_text().splitlines()[1:]) if r.get("event") == "tell"]
    assert len(before) == 10 and after[:10] == before
    assert len({i for i, _ in after}) == len(after) == result.items_used == 30
    assert result["evaluator"] == "lm-eval" and result["harness_launches"] == 3


def test_quiet_silences_the_harness_bars_and_a_log_gets_lines(workdir, cli, tmp_path):
    # -q prints nothing on stderr, the harness's own progress bars (its requests' build,
    # the model's calls) included; without -q a log gets bayeval's plain lines
    os.environ.update(OFFLINE)
    args = (*HARNESS_RUN, "--lm-eval-args",
            "--model dummy --model_args pretrained=org/new --include_path .", "--batch",
            "10", "--max-items", "20")
    code, _, err = _run_in_process(cli, workdir, *args, "--journal",
                                   str(tmp_path / "q.jsonl"), "-q")
    assert code == 0 and "it/s" not in err and "%|" not in err, err
    code, _, err = _run_in_process(cli, workdir, *args, "--journal",
                                   str(tmp_path / "v.jsonl"))
    assert code == 0 and "evaluating: 10/" in err and "evaluating: 20/" in err, err


def test_model_folders_that_are_symbolic_links_are_read(workdir, tmp_path):
    # a reference folder whose model folders are links to where the runs were written
    # reads every model (Path.rglob passed over them: 2 of 13 models, silently); a link
    # back up the tree is not walked twice
    logs = workdir / "logs"
    linked = tmp_path / "linked"
    linked.mkdir()
    for k, folder in enumerate(sorted(p for p in logs.iterdir() if p.is_dir())):
        (linked / f"run-{k}").symlink_to(folder, target_is_directory=True)
    (linked / "loop").symlink_to(linked, target_is_directory=True)
    whole, through = read_lm_eval_samples(logs, TASK), read_lm_eval_samples(linked, TASK)
    assert sorted(through.models) == sorted(whole.models) and len(whole.models) >= 3
    np.testing.assert_array_equal(through.row(whole.models[0]), whole.row(whole.models[0]))
