"""Bad input to the command line, one class per case: each is refused with a one-line
error naming the problem, the documented exit status (2: a bad option, file or journal),
no traceback, and no file created, changed or half-written.

The commands run in-process through the console entry point (``bayeval.cli.main``), so
that the classes cost one JAX import between them, not one each; the subprocess path of
the same entry point is tested in test_reliability.py and test_cli.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bayeval.loop.session import Session
from bayeval.records.journal_check import sealed_journal
from bayeval.selection.session import METHOD_NAME as SELECTION_METHOD

USAGE = 2

# (class, argv, the message the one line must contain); {tmp} is the test's folder, in
# which _files() writes the inputs named here
CASES = [
    ("epsilon zero", ["evaluate", "--epsilon", "0"],
     "Invalid value for '--epsilon': 0 is not in (0, 1]"),
    ("epsilon negative", ["evaluate", "--epsilon", "-0.1"],
     "Invalid value for '--epsilon': -0.1 is not in (0, 1]"),
    ("epsilon nan", ["evaluate", "--epsilon", "nan"],
     "Invalid value for '--epsilon': nan is not a finite number"),
    ("epsilon above one", ["evaluate", "--epsilon", "5"],
     "Invalid value for '--epsilon': 5 is not in (0, 1]"),
    ("seed negative", ["evaluate", "--seed", "-1"],
     "Invalid value for '--seed': -1 is not in [0, 9223372036854775807]"),
    ("seed beyond 64 bits", ["evaluate", "--seed", str(2**63)],
     "Invalid value for '--seed': 9223372036854775808 is not in [0, 9223372036854775807]"),
    ("tau not a number", ["compress", "--tau", "nan"],
     "Invalid value for '--tau': nan is not a finite number"),
    ("tau negative", ["compress", "--tau", "-1"], "Invalid value for '--tau': -1 is not ≥ 0"),
    ("top negative", ["select", "--top", "-1"], "Invalid value for '--top': -1 is not ≥ 1"),
    ("pool zero", ["compress", "--pool", "0"], "Invalid value for '--pool': 0 is not > 0"),
    ("pool not a number", ["compress", "--pool", "nan"],
     "Invalid value for '--pool': nan is not a finite number"),
    ("candidates zero", ["compress", "--candidates", "0"],
     "Invalid value for '--candidates': 0 is not ≥ 1"),
    ("level one", ["estimate", "--subset", "{tmp}/afile", "--samples", "{tmp}/adir",
                   "--level", "1"], "Invalid value for '--level': 1 is not in (0, 1)"),
    ("timeout negative", ["evaluate", "--timeout", "-1"],
     "Invalid value for '--timeout': -1 is not > 0"),
    ("retries negative", ["evaluate", "--retries", "-1"],
     "Invalid value for '--retries': -1 is not in [0, 100]"),
    ("retries without end", ["select", "--retries", "1000000"],
     "Invalid value for '--retries': 1000000 is not in [0, 100]"),
    ("max-items zero", ["evaluate", "--max-items", "0"],
     "Invalid value for '--limit': 0 is not ≥ 1"),
    ("method parameter of the wrong type", ["evaluate", "--method", "bayesame(refit_every=abc)"],
     "parameter refit_every='abc' should be int like its default 50"),
    ("method parameter unknown", ["evaluate", "--method", "faq(budget=0.1, bogus=1)"],
     "method 'faq' has no parameter 'bogus'"),
    ("method unknown", ["evaluate", "--method", "nope"], "unknown method 'nope' (known: "),
    ("method spec malformed", ["evaluate", "--method", "bayesame(refit_every"],
     "bad method spec 'bayesame(refit_every'"),
    ("dataset unknown", ["evaluate", "--dataset", "nope"], "unknown dataset 'nope' (bundled: "),
    ("dataset and reference both", ["evaluate", "--dataset", "mrpc", "--reference",
                                    "{tmp}/good.csv"],
     "give either --dataset or --reference, not both"),
    ("reference missing", ["evaluate", "--reference", "{tmp}/missing.csv"],
     "{tmp}/missing.csv: no such file"),
    ("reference is a folder", ["evaluate", "--reference", "{tmp}/adir"],
     "is a folder, not a score matrix file"),
    ("reference is a FIFO with no writer", ["evaluate", "--reference", "{tmp}/fifo.csv"],
     "{tmp}/fifo.csv: not a regular file"),
    ("task name as a path", ["evaluate", "--reference", "lm-eval:{tmp}/adir", "--task",
                             "../escape", "--task", "b"],
     "the task name '../escape' cannot name its files"),
    ("suite is a FIFO", ["evaluate", "--suite", "{tmp}/fifo.csv"],
     "--suite {tmp}/fifo.csv: not a regular file"),
    ("reference .npz not a zip", ["evaluate", "--reference", "{tmp}/bad.npz"],
     "not a readable .npz file (no archive of arrays; bayeval never loads pickled data)"),
    ("reference cell not a number", ["evaluate", "--reference", "{tmp}/bad.csv"],
     "line 2, item 'i2': 'x' is not a number"),
    ("reference empty", ["evaluate", "--reference", "{tmp}/empty.csv"], "empty file"),
    ("reference of unknown format", ["evaluate", "--reference", "{tmp}/scores.txt"],
     "unknown format '.txt' (use .npz, .csv or .parquet"),
    ("reference of one model", ["evaluate", "--reference", "{tmp}/one.csv"],
     "holds one model, 'm1': held out as the target it leaves no reference model"),
    ("target unknown", ["evaluate", "--dataset", "mrpc", "--target", "nobody"],
     "unknown target id 'nobody': not a model of mrpc (87 models)"),
    ("journal is a folder (resume)", ["evaluate", "--journal", "{tmp}/adir", "--resume"],
     "is a folder, not a journal file"),
    ("journal is a folder (new run)", ["evaluate", "--journal", "{tmp}/adir", "--dataset",
                                       "mrpc"], "is a folder; give a file path"),
    ("journal in a missing folder", ["evaluate", "--journal", "{tmp}/missing/run.jsonl",
                                     "--dataset", "mrpc"],
     "{tmp}/missing does not exist"),
    ("journal under a file", ["evaluate", "--journal", "{tmp}/afile/run.jsonl", "--dataset",
                              "mrpc"], "{tmp}/afile is a file, not a folder"),
    ("journal to resume missing", ["evaluate", "--journal", "{tmp}/none.jsonl", "--resume"],
     "journal {tmp}/none.jsonl: no such file"),
    ("journal with a corrupt header", ["evaluate", "--journal", "{tmp}/corrupt.jsonl",
                                       "--resume"], "line 1: corrupt header"),
    ("journal header without its reference", ["evaluate", "--journal", "{tmp}/noref.jsonl",
                                              "--resume"],
     "{tmp}/noref.jsonl line 1: header lacks field 'reference'"),
    ("a selection's journal resumed as an evaluation", [
        "evaluate", "--journal", "{tmp}/sel.jsonl", "--resume"],
     "is a model selection's, not an evaluation's: continue it with bayeval select --resume"),
    ("an evaluation's journal resumed as a selection", [
        "select", "--journal", "{tmp}/good.jsonl", "--resume"],
     "continue it with bayeval evaluate --resume --journal {tmp}/good.jsonl"),
    ("resume given settings again", ["evaluate", "--journal", "{tmp}/good.jsonl", "--resume",
                                     "--method", "random"],
     "--resume reads the settings from {tmp}/good.jsonl; drop --method"),
    ("command evaluator without a command", ["evaluate", "--evaluator", "command", "--target",
                                             "new"], "--evaluator command needs --command"),
    ("quoted placeholder", ["evaluate", "--evaluator", "command", "--target", "new",
                            "--command", 'echo "{item}"'], "write {item} without quotes"),
    ("unknown option", ["evaluate", "--level", "0.9"],
     "No such option: --level"),
    ("value not among the choices", ["evaluate", "--evaluator", "nope"],
     "Invalid value for '--evaluator'"),
    ("no such command", ["evaluat"], "No such command 'evaluat'"),
    ("select budget negative", ["select", "--budget", "-1"],
     "--budget '-1': give a percentage of the model–item pairs"),
    ("select history of the candidates only", ["select", "--dataset", "rte", "--history",
                                               "rte"],
     "--history rte: 0 of its models are not candidates"),
    ("select items not UTF-8", ["select", "--models", "a,b", "--items", "{tmp}/latin1.txt",
                                "--budget", "4", "--evaluator", "command", "--command",
                                "echo 1; true {model} {item}", "--journal", "{tmp}/s.jsonl"],
     "--items {tmp}/latin1.txt: not UTF-8 text (byte 6 is 0xe9)"),
    ("select history file missing", ["select", "--dataset", "rte", "--history",
                                     "{tmp}/missing.csv"],
     "--history {tmp}/missing.csv: no such file"),
    ("select unknown history method", ["select", "--dataset", "rte", "--history", "rte",
                                       "--history-method", "nope"],
     "--history-method nope: use one of weights, factor, both"),
    ("select history method without a history", ["select", "--history-method", "factor"],
     "--history-method needs --history"),
    ("bench history algorithm without a share", ["bench", "selection", "--datasets", "rte",
                                                 "--algorithms", "HI-SySRs", "--out",
                                                 "{tmp}/sel"],
     "HI-SySRs needs --history-share"),
    ("compress retention zero", ["compress", "--dataset", "mrpc", "--retention", "0", "--out",
                                 "{tmp}/subset.json"],
     "Invalid value for '--retention': 0 is not in (0, 1]"),
    ("compress retention above one", ["compress", "--dataset", "mrpc", "--retention", "1.5",
                                      "--out", "{tmp}/subset.json"],
     "Invalid value for '--retention': 1.5 is not in (0, 1]"),
    ("compress retention and size both", ["compress", "--dataset", "mrpc", "--retention",
                                          "0.1", "--size", "20", "--out", "{tmp}/subset.json"],
     "give either --retention or --size, not both"),
    ("compress mince given a size", ["compress", "--dataset", "mrpc", "--method", "mince",
                                     "--size", "20", "--out", "{tmp}/subset.json"],
     "mince chooses the size itself"),
    ("compress out is a folder", ["compress", "--dataset", "mrpc", "--out", "{tmp}/adir"],
     "--out {tmp}/adir: is a folder; give a file path"),
    ("compress export in a missing folder", ["compress", "--dataset", "mrpc", "--out",
                                             "{tmp}/subset.json", "--export-samples",
                                             "{tmp}/missing/s.json"],
     "--export-samples {tmp}/missing/s.json: {tmp}/missing does not exist"),
    ("diagnose one chain", ["diagnose", "--chains", "1"],
     "Invalid value for '--chains': 1 is not ≥ 2 (R-hat compares chains)"),
    ("diagnose no draws", ["diagnose", "--draws", "0"],
     "Invalid value for '--draws': 0 is not ≥ 4 (per chain)"),
    ("diagnose coreset zero", ["diagnose", "--coreset", "0"],
     "Invalid value for '--coreset': 0 is not ≥ 1"),
    ("diagnose coreset beyond the items", ["diagnose", "--coreset", "600"],
     "--coreset must be in 1..541, got 600"),
    ("diagnose model unknown", ["diagnose", "--model", "nope"], "unknown model 'nope' (known: "),
    ("diagnose plot folder is a file", ["diagnose", "--plot", "{tmp}/afile", "--coreset", "5"],
     "--plot {tmp}/afile: is a file, not a folder"),
    ("bench widths not numbers", ["bench", "validity", "--epsilons", "abc"],
     "--epsilons: not a comma-separated list of numbers: 'abc'"),
    ("bench variant unknown", ["bench", "validity", "--variants", "nope"],
     "--variants: unknown nope (known: standard, extremes, sparse, extrapolation)"),
    ("compress categories missing an item", ["compress", "--method", "stratified",
                                             "--reference", "{tmp}/good.csv", "--size", "2",
                                             "--categories", "{tmp}/cats.csv", "--out",
                                             "{tmp}/s.json"],
     "--categories: no category for 1 item(s), e.g. 'i3'"),
    ("compress categories missing an item of an npz", [
        "compress", "--method", "stratified", "--reference", "{tmp}/good.npz", "--size", "2",
        "--categories", "{tmp}/cats.csv", "--out", "{tmp}/s.json"],
     "--categories: no category for 1 item(s), e.g. 'i3'"),  # not np.str_('i3')
    ("bench datasets and a reference", ["bench", "validity", "--datasets", "mrpc",
                                        "--reference", "{tmp}/good.csv"],
     "give either --datasets or --reference, not both"),
    ("bench inference dataset and a reference", ["bench", "inference", "--reference",
                                                 "{tmp}/good.csv", "--dataset", "mrpc"],
     "give either --dataset or --reference, not both"),
    ("bench inference on two datasets", ["bench", "inference", "--datasets", "mrpc,rte",
                                         "--out", "{tmp}/inf"],
     "--dataset mrpc,rte: bench inference compares backends on one dataset; give one name"),
    ("bench seeds zero", ["bench", "validity", "--seeds", "0"], "Invalid value for '--seeds'"),
    ("bench dataset unknown", ["bench", "estimation", "--datasets", "nope"],
     "unknown dataset 'nope'"),
    ("bench dataset unknown after a known one", ["bench", "selection", "--datasets",
                                                 "mrpc,zzz", "--out", "{tmp}/sel"],
     "Invalid value for '--datasets': unknown dataset 'zzz' (bundled: "),
    ("bench suite unknown", ["bench", "coverage", "--suite", "ifeval+zz", "--out",
                             "{tmp}/cov"], "Invalid value for '--suite': unknown dataset 'zz'"),
    ("select reference missing", ["select", "--reference", "{tmp}/missing.csv", "--budget",
                                  "10%"], "{tmp}/missing.csv: no such file"),
    ("select reference is a folder", ["select", "--reference", "{tmp}/adir", "--budget",
                                      "10%"], "is a folder, not a score matrix file"),
    ("harness reference folder missing", ["evaluate", "--reference", "lm-eval:{tmp}/nologs",
                                          "--task", "t"], "no such folder"),
    ("harness reference without a task", ["evaluate", "--reference", "lm-eval:{tmp}/adir"],
     "--reference lm-eval:DIR needs --task NAME"),
    ("harness reference without logs of the task", ["evaluate", "--reference",
                                                    "lm-eval:{tmp}/adir", "--task", "t"],
     "no samples_t_<timestamp>.jsonl files found"),
    ("metric without harness logs", ["evaluate", "--dataset", "mrpc", "--metric", "acc"],
     "--metric and --filter read lm-evaluation-harness logs"),
    ("lm-eval evaluator without its arguments", ["evaluate", "--evaluator", "lm-eval",
                                                 "--target", "new"],
     "--evaluator lm-eval needs --lm-eval-args"),
    ("lm-eval arguments that bayeval sets", ["evaluate", "--evaluator", "lm-eval",
                                             "--target", "new", "--lm-eval-args",
                                             "--model dummy --tasks x"],
     "--lm-eval-args: drop --tasks"),
    ("lm-eval arguments without a model", ["evaluate", "--evaluator", "lm-eval", "--target",
                                           "new", "--lm-eval-args", "--batch_size 4"],
     "--lm-eval-args needs --model"),
    ("lm-eval evaluator on a matrix with no harness task", [
        "evaluate", "--dataset", "mrpc", "--evaluator", "lm-eval", "--target", "new",
        "--lm-eval-args", "--model dummy"], "mrpc records no lm-evaluation-harness task"),
    ("lm-eval arguments without the lm-eval evaluator", ["evaluate", "--lm-eval-args",
                                                         "--model dummy"],
     "--lm-eval-args is only used with --evaluator lm-eval"),
    ("batch zero", ["evaluate", "--batch", "0"], "Invalid value for '--batch': 0 is not ≥ 1"),
    ("estimate subset file missing", ["estimate", "--subset", "{tmp}/none.json", "--samples",
                                      "{tmp}/adir"], "--subset {tmp}/none.json: no such file"),
    ("estimate samples folder missing", ["estimate", "--subset", "{tmp}/afile", "--samples",
                                         "{tmp}/nologs"], "no such folder"),
    ("estimate subset not a subset file", ["estimate", "--subset", "{tmp}/afile",
                                           "--samples", "{tmp}/adir"], "not JSON"),
    ("targets with a single-target method", ["evaluate", "--dataset", "mrpc", "--targets",
                                             "a,b", "--evaluator", "command", "--command",
                                             "echo 1", "--method", "bayesame"],
     "--targets needs a method that evaluates several targets jointly (active-pai-joint "
     "or bayesame-joint); 'bayesame' evaluates one"),
    ("version with a value", ["--version", "true"],
     "--version takes no value and no command (got 'true'"),
    ("inspect evaluator without a task", ["evaluate", "--dataset", "mrpc", "--evaluator",
                                          "inspect", "--target", "x"],
     "--evaluator inspect needs --inspect-task FILE.py@TASK"),
    ("inspect task without the inspect evaluator", ["evaluate", "--inspect-task", "t.py@x"],
     "--inspect-task is only used with --evaluator inspect"),
    ("inspect log without the inspect evaluator", ["evaluate", "--inspect-log", "{tmp}/x"],
     "--inspect-log writes the target's Inspect samples: it needs --evaluator inspect"),
    ("inspect evaluator of several targets", ["evaluate", "--dataset", "mrpc", "--evaluator",
                                              "inspect", "--inspect-task", "t.py@x",
                                              "--targets", "a,b"],
     "--evaluator inspect evaluates one model (--model), not --models"),
    ("repeated models on a bundled dataset", ["evaluate", "--repeated-models", "number"],
     "--repeated-models reads a matrix file or Inspect logs"),
    ("harness results of several targets", ["evaluate", "--targets", "a,b",
                                            "--harness-results", "{tmp}/r.json"],
     "--harness-results holds one model's estimate; --models evaluates several"),
]


def _files(tmp: Path) -> None:
    """The inputs the cases name: good and broken matrices, folders, journals."""
    (tmp / "good.csv").write_text("model,i1,i2,i3\nm1,1,0,1\nm2,0,1,1\nm3,1,1,0\n")
    (tmp / "bad.csv").write_text("model,i1,i2\nm1,1,x\nm2,0,1\n")
    (tmp / "empty.csv").write_text("")
    (tmp / "cats.csv").write_text("i1,a\ni2,b\n")
    np.savez(tmp / "good.npz", scores=np.array([[1.0, 0, 1], [0, 1, 1], [1, 1, 0]]),
             models=np.array(["m1", "m2", "m3"]), items=np.array(["i1", "i2", "i3"]))
    (tmp / "one.csv").write_text("model,i1,i2,i3\nm1,1,0,1\n")
    (tmp / "scores.txt").write_text("model,i1\nm1,1\n")
    (tmp / "bad.npz").write_text("not a zip archive")
    (tmp / "afile").write_text("x")
    (tmp / "latin1.txt").write_bytes(b"i1\ncaf\xe9\n")
    (tmp / "adir").mkdir()
    os.mkfifo(tmp / "fifo.csv")  # reading it would block until a writer came
    (tmp / "corrupt.jsonl").write_text('{"garbage\n')
    from bayeval.data import read_matrix

    with Session(read_matrix(tmp / "good.csv").drop_models(["m1"]), "m1", "random",
                 journal=tmp / "good.jsonl") as session:
        for item in session.ask(1):
            session.tell(item, 1.0)
    header = json.loads((tmp / "good.jsonl").read_text().splitlines()[0])
    (tmp / "noref.jsonl").write_text(sealed_journal([{k: v for k, v in header.items()
                                                      if k != "reference"}]))
    (tmp / "sel.jsonl").write_text(sealed_journal([{
        "format": header["format"], "version": header["version"],
        "method": {"name": SELECTION_METHOD, "budget": 4}, "models": ["a", "b"],
        "items": ["i0", "i1"], "seed": 0, "extra": {}}]))


def _snapshot(tmp: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(tmp)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(tmp.rglob("*"))}


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_a_one_line_error_that_touches_no_file(tmp_path, cli, monkeypatch,
                                                            argv, message):
    monkeypatch.chdir(tmp_path)  # a default journal or subset file would land here, and show
    _files(tmp_path)
    before = _snapshot(tmp_path)
    args = [a.format(tmp=tmp_path) if "{tmp}" in a else a for a in argv]
    done = cli(*args, *(["-q"] if args[0] == "evaluate" else []))
    assert done.returncode == USAGE, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    want = message.format(tmp=tmp_path) if "{tmp}" in message else message
    assert lines[0].startswith("error: ") and want in lines[0]
    assert _snapshot(tmp_path) == before  # nothing created, changed or half-written
    journal = [json.loads(line) for line in (tmp_path / "good.jsonl").read_text().splitlines()]
    assert journal[-1]["event"] == "tell"  # the journal still resumes where it was


def test_there_are_at_least_forty_classes():
    assert len({c[0] for c in CASES}) == len(CASES) >= 40


@pytest.mark.parametrize("args", [
    ["evaluate", "--reference", "MISSING"], ["select", "--reference", "MISSING"],
    ["compress", "--reference", "MISSING", "--out", "OUT"],
    ["diagnose", "--reference", "MISSING"],
    ["select", "--dataset", "rte", "--history", "MISSING"]])
def test_a_missing_file_is_said_before_pandas_or_jax_load(tmp_path, args):
    """The quick answer to a mistyped path (under a second here) comes from not loading
    pandas or JAX first: checked as the modules loaded when the error is raised, not as a
    time, so the test cannot depend on the machine's speed."""
    import subprocess
    import sys

    args = [a.replace("MISSING", str(tmp_path / "nope.csv")).replace("OUT", str(
        tmp_path / "x.json")) for a in args]
    code = ("import sys\nfrom bayeval.cli import main\nsys.argv = ['bayeval', *"
            f"{args!r}]\ntry:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print(code, 'jax' in sys.modules, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["2", "False", "False"], done.stdout + done.stderr
    assert "no such file" in done.stderr


@pytest.mark.parametrize("argv", [["--model", "nope"], ["--coreset", "600"],
                                  ["--target", "nope"]])
def test_diagnose_refuses_before_its_progress_line_can_start(cli, monkeypatch, argv):
    # the progress line of a long run starts after 1 s where stderr is a log; a fresh
    # process spends longer than that importing the samplers, so a refusal made inside the
    # progress block came out as two lines ("… started (1 s)", then the error): every
    # refusal of diagnose comes before the block is entered
    import bayeval.cli.diagnose as command

    entered = []

    def working(message):
        entered.append(message)
        raise AssertionError("the work started before the input was checked")

    monkeypatch.setattr(command, "working", working)
    done = cli("diagnose", *argv)
    assert done.returncode == 2 and not entered, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
