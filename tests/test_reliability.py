"""A failing evaluator, hostile item ids and two writers on one journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bayeval.errors import BayevalError, EvaluationError, EvaluatorFailedError, JournalError
from bayeval.evaluators import CommandEvaluator, MatrixOracle
from bayeval.loop.session import Session
from bayeval.records.journal_check import sealed_journal

HOSTILE = ["$(touch {mark})", "`touch {mark}`", "'; touch {mark}; '", '"; touch {mark}; "',
           "a b\tc", "x\ny", "{{item}}", "$HOME", "*", "a;touch {mark}", "-- not an option"]
ECHO = f"{sys.executable} -c \"import sys; open(sys.argv[1], 'w').write(sys.argv[2]); print(1)\""


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_ids_reach_the_command_as_one_argument_and_never_run(tmp_path, raw):
    mark = tmp_path / "PWNED"
    item = raw.format(mark=mark)
    out = tmp_path / "seen"
    evaluator = CommandEvaluator(f"{ECHO} {out} {{item}}")
    if item.startswith("-"):
        with pytest.raises(EvaluationError, match="starts with '-'"):
            evaluator(item)
        return
    assert evaluator(item) == 1.0
    assert out.read_text() == item  # exactly the id, one argument
    assert not mark.exists()
    # the target's id is substituted in the same single pass: "t{item}" stays literal
    both = CommandEvaluator(f"{ECHO} {out} {{target}}")
    assert both("x", target=f"t{{item}}{item}") == 1.0
    assert out.read_text() == f"t{{item}}{item}" and not mark.exists()


def test_quoted_placeholders_and_option_like_ids_are_refused(tmp_path):
    for command in ('echo "{item}"', "echo '{item}'", "echo x\"{target}\" {item}"):
        with pytest.raises(EvaluationError, match="without quotes"):
            CommandEvaluator(command)
    with pytest.raises(EvaluationError, match="put -- before"):
        CommandEvaluator("echo 1 {item}")("-rf")
    seen = tmp_path / "seen"
    guarded = CommandEvaluator(f"{sys.executable} -c \"import sys; "
                               f"open(sys.argv[2], 'w').write(sys.argv[3]); print(1)\" -- {seen}"
                               " {item}")
    assert guarded("-rf") == 1.0 and seen.read_text() == "-rf"
    with pytest.raises(EvaluationError, match="timeout must be > 0"):
        CommandEvaluator("echo 1", timeout=-1)


def test_a_timeout_kills_the_whole_process_group(tmp_path):
    pids = tmp_path / "pids"
    evaluator = CommandEvaluator(f"sleep 60 & echo $! > {pids}; sleep 60; echo 1",
                                 timeout=1.0, retries=0)
    with pytest.raises(EvaluationError, match="timed out"):
        evaluator("x")
    child = Path(f"/proc/{int(pids.read_text())}/stat")
    time.sleep(0.2)  # the group's SIGKILL is delivered asynchronously: let it land
    # the background child is gone too (or a zombie left for init to reap: killed)
    assert not child.exists() or child.read_text().split()[2] == "Z"


def test_a_failing_evaluator_stops_the_run_after_three_in_a_row(small, tmp_path):
    journal = tmp_path / "run.jsonl"
    session = Session(small.drop_models(["m0"]), "new", "random", journal=journal)
    calls = []

    def broken(item):
        calls.append(item)
        raise EvaluationError(f"item {item!r}: command exited with status 1")

    with pytest.raises(EvaluatorFailedError, match="failed 3 times in a row"):
        session.run(broken, max_failures=3)
    session.close()
    assert len(calls) == 3 and len(session.skipped) == 3 and session.n_observed == 0
    # every failure is journaled; the run resumes (and the same policy applies)
    resumed = Session.resume(journal, reference=small.drop_models(["m0"]))
    assert len(resumed.skipped) == 3
    resumed.close()


def _cli(*args, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "bayeval.cli", *args], capture_output=True,
                          text=True, timeout=timeout, **kw)


@pytest.mark.parametrize("answer", ["exit 1", "echo banana", "true", "echo nan", "echo 1e400"])
def test_cli_reports_a_failing_evaluator_with_its_own_exit_code(tmp_path, cli, answer):
    journal = tmp_path / "run.jsonl"
    done = cli("evaluate", "--dataset", "mrpc", "--target", "new", "--method", "random",
                "--evaluator", "command", "--command", answer, "--retries", "0",
                "--journal", str(journal), "-q")
    assert done.returncode == 3, done.stderr
    message = done.stderr.strip().splitlines()
    assert len(message) == 1 and "failed 3 times in a row" in message[0]
    assert "estimate" not in done.stdout  # no prior printed as a result
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r["event"] for r in records[1:]] == ["ask", "skip"] * 3


def test_two_writers_on_one_journal_are_refused(small, tmp_path):
    journal = tmp_path / "run.jsonl"
    ref = small.drop_models(["m0"])
    first = Session(ref, "new", "random", journal=journal)
    with pytest.raises(JournalError, match="in use by another session"):
        Session.resume(journal, reference=ref)
    for item in first.ask(2):
        first.tell(item, 1.0)
    first.close()
    again = Session.resume(journal, reference=ref)  # free once the first is closed
    assert again.n_observed == 2
    with pytest.raises(JournalError, match="in use"):
        Session.resume(journal, reference=ref)
    again.close()


def test_cli_second_resume_of_a_running_journal_is_refused(tmp_path, cli):
    # Deterministic: the first writer's evaluator waits for a gate file that the test
    # creates only after the second writer has been refused, so the first cannot finish
    # (and free the journal) before the second has tried, however loaded the machine.
    journal = tmp_path / "run.jsonl"
    gate = tmp_path / "gate"
    held = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo {{item}} > /dev/null; echo 1"
    gate.touch()  # open for the first two items
    # the first two items and the second writer in this process, the running writer a
    # process of its own (the lock is between processes)
    start = cli("evaluate", "--dataset", "mrpc", "--target", "new", "--method",
                  "random", "--evaluator", "command", "--command", held, "--max-items", "2",
                  "--journal", str(journal), "-q")
    assert start.returncode == 0, start.stderr
    gate.unlink()
    # continue it to 60 items in the background, then try a second writer
    records = [json.loads(x) for x in Path(journal).read_text().splitlines()]
    records[0]["max_items"] = 60
    Path(journal).write_text(sealed_journal(records))  # an edit that keeps the checks
    running = subprocess.Popen([sys.executable, "-m", "bayeval.cli", "evaluate", "--journal",
                                str(journal), "--resume", "-q"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        # the background writer holds the lock once it has journaled a draw of its own;
        # it then waits at the gate
        while (Path(journal).read_text().count('"event": "ask"') < 3
               and time.time() < deadline and running.poll() is None):
            time.sleep(0.05)
        second = cli("evaluate", "--journal", str(journal), "--resume", "-q")
        assert second.returncode == 2
        assert "in use by another session" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        gate.touch()
        _, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    records = [json.loads(line) for line in Path(journal).read_text().splitlines()[1:]]
    tells = [r for r in records if r["event"] == "tell"]
    assert len(tells) > 2  # the two before and at least the one it held at the gate
    assert [r["n"] for r in tells] == list(range(1, len(tells) + 1))  # none doubled


def test_cli_prints_its_version():
    from bayeval import __version__

    done = _cli("--version", timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"bayeval {__version__}"


def test_a_closed_interval_covers_the_truth_up_to_rounding():
    from bayeval.estimators.interval import covers

    truth = 0.1 + 0.2  # 0.30000000000000004
    assert covers(0.3, 0.3, truth)  # a zero-width interval at n = N, 5.6e-17 off
    assert not covers(0.3, 0.31, 0.3100001) and not covers(0.3, 0.31, 0.2999999)


def test_a_failed_resume_leaves_the_journal_free(small, tmp_path):
    journal = tmp_path / "run.jsonl"
    ref = small.drop_models(["m0"])
    with Session(ref, "new", "random", journal=journal) as session:
        for item in session.ask(2):
            session.tell(item, 1.0)
    good = journal.read_text()
    records = [json.loads(x) for x in good.splitlines()]
    records.insert(2, {"event": "tell", "n": 2, "item": "nope", "score": 1.0})
    journal.write_text(sealed_journal(records))  # checks kept: the item itself is refused
    with pytest.raises(JournalError, match="not in the benchmark") as failed:
        Session.resume(journal, reference=ref)
    assert failed.value is not None  # the failed session may still be referenced here
    journal.write_text(good)
    with Session.resume(journal, reference=ref) as again:  # not "in use"
        assert again.n_observed == 2


def test_excel_csv_with_a_byte_order_mark_reads(tmp_path):
    from bayeval.data.io import read_csv

    path = tmp_path / "excel.csv"
    path.write_text("\ufeffmodel,i1,i2\nm1,1,0\nm2,0,1\n", encoding="utf-8")
    matrix = read_csv(path)
    assert list(matrix.models) == ["m1", "m2"] and list(matrix.items) == ["i1", "i2"]
    path.write_text("\ufeffmodel,item,score\nm1,i1,1\nm1,i2,0\n", encoding="utf-8")
    assert read_csv(path).shape == (1, 2)


def test_a_one_model_matrix_is_said_to_leave_no_reference(tmp_path, cli):
    path = tmp_path / "one.csv"
    path.write_text("model,i1,i2,i3\nm1,1,0,1\n")
    done = cli("evaluate", "--reference", str(path), "-q")
    assert done.returncode == 2 and "leaves no reference model" in done.stderr
    out = tmp_path / "subset.json"
    done = cli("compress", "--reference", str(path), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    drift = json.loads(done.stdout)["drift"]
    assert drift["held_out_models"] == 0 and drift["in_sample_models"] == 1


def test_outputs_are_checked_before_any_work(tmp_path, cli):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "subset.json"
    cases = [
        (["compress", "--dataset", "mrpc", "--out", str(out), "--export-samples",
          str(tmp_path / "missing" / "s.json")], "missing does not exist", out),
        (["compress", "--dataset", "mrpc", "--out", str(tmp_path)], "is a folder", None),
        (["diagnose", "--plot", str(tmp_path / "afile"), "--coreset", "5"],
         "is a file, not a folder", None),
        (["diagnose", "--plot", str(tmp_path / "afile" / "sub"), "--coreset", "5"],
         "cannot create a folder", None),
    ]
    for args, message, absent in cases:
        done = cli(*args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr
        if absent is not None:
            assert not absent.exists()  # no half of the outputs


def test_a_results_file_that_cannot_be_one_is_refused_before_the_run(tmp_path, cli):
    # --harness-results on a device (/dev/full), a FIFO or an existing file, and
    # --save-run on a device: refused before the run, in one line naming the file, no
    # journal begun (a device never takes the file, a FIFO would block the writer for
    # ever, an existing file is not overwritten without a word); --group-mean without
    # --subtasks is refused, not ignored
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "old.json").write_text("{}")
    args = ("evaluate", "--dataset", "mrpc", "--target", "new", "--method", "random",
            "--evaluator", "command", "--command", "echo 1; true {item}", "--max-items",
            "3", "--json", "-q")
    for flag, path, says in (("--harness-results", "/dev/full", "is not a regular file"),
                             ("--harness-results", fifo, "is not a regular file"),
                             ("--harness-results", tmp_path / "old.json", "exists"),
                             ("--save-run", "/dev/full", "is not a regular file")):
        journal = tmp_path / "a.jsonl"
        done = cli(*args, "--journal", str(journal), flag, str(path))
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{flag} {path}: {says}" in lines[0], lines
        assert not journal.exists() and not done.stdout
    assert (tmp_path / "old.json").read_text() == "{}"
    done = cli(*args, "--journal", str(tmp_path / "b.jsonl"), "--group-mean", "equal")
    assert done.returncode == 2 and "--group-mean is for --subtasks" in done.stderr


def test_a_resume_may_raise_the_budget_of_a_run_and_keeps_it(tmp_path, cli):
    # a run cut by --max-items 3, resumed with --max-items 5: five items, and a resume
    # without the option keeps the budget of 5 (journaled), where it was refused
    journal = str(tmp_path / "j.jsonl")
    args = ("--json", "-q")
    done = cli("evaluate", "--dataset", "mrpc", "--target", "new", "--method", "random",
               "--evaluator", "command", "--command", "echo 1; true {item}", "--max-items",
               "3", "--journal", journal, *args)
    assert json.loads(done.stdout)["items_used"] == 3
    done = cli("evaluate", "--resume", "--journal", journal, "--max-items", "5", *args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items_used"] == 5
    again = json.loads(cli("evaluate", "--resume", "--journal", journal, *args).stdout)
    assert again["items_used"] == 5 and again["stopped"] == "budget of 5 items"


def test_a_live_target_is_never_judged_against_a_reference_row(tmp_path, cli):
    # a model of the matrix, evaluated live: its reference row is held out, not its truth
    done = cli("evaluate", "--dataset", "mrpc", "--target", "mrpc-model-000", "--method",
                "random", "--evaluator", "command", "--command", "echo 1; true {item}",
                "--max-items", "3", "--journal", str(tmp_path / "j.jsonl"), "--json", "-q")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["true_score"] is None and result["covered"] is None
    assert result["reference_row_score"] is not None


def test_repeated_model_ids_in_an_npz_are_an_error_or_numbered(tmp_path):
    import numpy as np

    from bayeval.data.io import read_npz

    path = tmp_path / "twice.npz"
    np.savez(path, scores=np.array([[1.0, 0.0], [1.0, 0.0]]), models=np.array(["a", "a"]),
             items=np.array(["i", "j"]))
    with pytest.raises(BayevalError, match="repeated_models='number'"):
        read_npz(path)
    assert list(read_npz(path, repeated_models="number").models) == ["a", "a#2"]


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".parquet"])
def test_repeated_model_ids_on_every_reader_path_of_the_cli(tmp_path, suffix):
    # a matrix file listing a model twice: every command that reads --reference refuses
    # it in one line naming --repeated-models, and with --repeated-models number reads the
    # repeats as ID#2; a resume reads the same rows (the option is in the journal's source)
    import numpy as np
    from typer.testing import CliRunner

    from bayeval.cli import app
    from bayeval.data import ScoreMatrix, write_matrix

    rng = np.random.default_rng(0)
    scores = (rng.random((12, 60)) < 0.6).astype(float)
    path = tmp_path / f"twice{suffix}"
    write_matrix(ScoreMatrix(scores, [f"m{i}" for i in range(12)],
                             [f"i{j}" for j in range(60)]), path)
    if suffix == ".npz":  # rewritten with a repeat (a ScoreMatrix cannot hold one)
        np.savez(path, scores=scores, models=np.array([f"m{i}" for i in range(11)] + ["m3"]),
                 items=np.array([f"i{j}" for j in range(60)]))
    else:
        text = path.read_text() if suffix == ".csv" else None
        if text is not None:
            path.write_text(text.replace("\nm11,", "\nm3,"))
        else:
            import pandas as pd

            frame = pd.read_parquet(path)
            frame.loc[frame.model == "m11", "model"] = "m3"
            frame.to_parquet(path)
    run = CliRunner().invoke
    journal = tmp_path / "j.jsonl"
    commands = {
        "evaluate": ["evaluate", "--reference", str(path), "--target", "m3#2", "--method",
                     "random", "--max-items", "5", "--journal", str(journal), "--json",
                     "-q"],
        "select": ["select", "--reference", str(path), "--budget", "20%", "--json", "-q"],
        "compress": ["compress", "--reference", str(path), "--method", "random", "--size",
                     "10", "--out", str(tmp_path / "sub.json")],
        "diagnose": ["diagnose", "--reference", str(path), "--model", "nope"],
        "bench": ["bench", "selection", "--reference", str(path), "--out",
                  str(tmp_path / "bench"), "--runs", "2", "--algorithms", "SySRs",
                  "--max-budget", "0.1"],
    }
    if suffix != ".npz":  # every command once (npz); the other formats through evaluate
        commands = {"evaluate": commands["evaluate"]}
    for name, argv in commands.items():
        refused = run(app, argv)
        assert refused.exit_code == 2 and "duplicate model id 'm3'" in refused.output, (
            name, refused.output)
        assert "--repeated-models number" in refused.output, name
    done = run(app, [*commands["evaluate"], "--repeated-models", "number"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["target"] == "m3#2"
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["reference"]["source"]["repeated_models"] == "number"
    resumed = run(app, ["evaluate", "--resume", "--journal", str(journal), "--json", "-q"])
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["target"] == "m3#2"
    if "compress" in commands:
        done = run(app, [*commands["compress"], "--repeated-models", "number"])
        assert done.exit_code == 0, done.output


def test_select_placeholder_model_is_safe_and_quoted_refusal_names_it(tmp_path):
    seen = tmp_path / "seen"
    evaluator = CommandEvaluator(f"{ECHO} {seen} {{model}}")
    hostile = f"$(touch {tmp_path / 'PWNED'})"
    assert evaluator("it1", target=hostile) == 1.0
    assert seen.read_text() == hostile and not (tmp_path / "PWNED").exists()
    with pytest.raises(EvaluationError, match=r"write \{model\} without quotes"):
        CommandEvaluator("echo '{model}' {item}")
    # an id that only reaches the command through the environment needs no guard
    assert CommandEvaluator("echo 1; true {item}")("x", target="-m") == 1.0


def test_the_result_sums_up_why_evaluations_failed(tmp_path, cli):
    done = cli("evaluate", "--dataset", "mrpc", "--method", "random", "--target", "new",
                "--evaluator", "command", "--retries", "0", "--max-items", "40",
                "--command", "case {item} in *7) exit 1;; esac; echo 1",
                "--journal", str(tmp_path / "j.jsonl"), "--json", "-q")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["items_skipped"] > 0
    assert result["skipped_items"] == (
        f"the estimate is the mean of the scored items: it assumes the "
        f"{result['items_skipped']} skipped ones score like them")
    assert result["failures"] == [{"reason": "command exited with status 1 (after 1 "
                                             "attempt(s))", "count": result["items_skipped"]}]


@pytest.mark.parametrize(("q", "ok"), [(1.0000000000000002, True), (0.25, True), (1.5, False),
                                       (0.0, False), ("x", False)])
def test_a_journaled_draw_probability_is_checked_on_resume(small, tmp_path, q, ok):
    journal = tmp_path / "run.jsonl"
    ref = small.drop_models(["m0"])
    with Session(ref, "new", "random", journal=journal) as session:
        for item in session.ask(2):
            session.tell(item, 1.0)
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert all("q" in r for r in lines[1:])  # every tell carries its draw probability
    lines[1]["q"] = q
    journal.write_text(sealed_journal(lines))  # checks kept: the value itself is judged
    if ok:
        with Session.resume(journal, reference=ref) as again:
            assert again.n_observed == 2
    else:
        with pytest.raises(JournalError, match="draw probability"):
            Session.resume(journal, reference=ref)


def test_rs_mean_at_the_whole_benchmark_is_the_point_not_nan():
    """At n = N the finite-population interval is the observed mean itself. Compiled,
    1 − n/N is 1 − n·(1/N) = −2⁻⁵² for 857 of the sizes 2..1999 (rte's 277 among them),
    which made the variance negative and the Wilson bounds NaN; the factor is now
    (N − n)/N clamped at 0."""
    import jax
    import jax.numpy as jnp

    from bayeval.estimators.interval import finite_population_factor, wilson_fpc_bounds
    from bayeval.estimators.sample_mean import _moments

    sizes = jnp.arange(2, 2000, dtype=jnp.float64)
    fpc = jax.jit(jax.vmap(lambda n: finite_population_factor(n, n)))(sizes)
    assert float(fpc.min()) == 0.0 == float(fpc.max())
    for n_items in (5, 277, 541):
        full = jnp.float64(n_items)
        lo, hi = jax.jit(lambda n, N=n_items: wilson_fpc_bounds(0.527, n, N, 1.96))(full)
        assert float(lo) == float(hi) == 0.527
        _, _, var = jax.jit(lambda n, N=n_items: _moments(n, 0.4 * n, 0.4 * n, N))(full)
        assert float(var) == 0.0


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_no_evaluator_process_outlives_bayeval(tmp_path, how):
    # Ctrl-C, SIGTERM or SIGKILL of bayeval while a command evaluates (and has started a
    # child of its own): no process of the evaluation is left, and the journal is whole
    import signal

    marker = {"SIGINT": "62.71", "SIGTERM": "62.72", "SIGKILL": "62.73"}[how]
    journal = tmp_path / "run.jsonl"
    command = f"sleep {marker} & sleep {marker}; echo 1"
    proc = subprocess.Popen([sys.executable, "-m", "bayeval.cli", "evaluate", "--dataset",
                             "mrpc", "--target", "new", "--method", "random", "--evaluator",
                             "command", "--command", command, "--timeout", "300",
                             "--journal", str(journal), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300  # start-up compiles from a cold cache on a fresh machine
        while _count(f"sleep {marker}") < 2 and time.time() < deadline:
            time.sleep(0.1)
        assert _count(f"sleep {marker}") == 2
        # the signals bayeval blocks, ignores and catches (said if it does not end)
        masks = [x for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                 if x.startswith(("SigBlk", "SigIgn", "SigCgt"))]
        proc.send_signal(getattr(signal, how))
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"bayeval did not end within 60 s of {how}: {masks}"
                                 ) from None
    finally:
        proc.kill()
    if how != "SIGKILL":
        assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[how], err
        assert "Traceback" not in err, err
        # the line says how to continue the run
        assert f"continue with: bayeval evaluate --resume --journal {journal}" in err, err
    deadline = time.time() + 10
    while _count(f"sleep {marker}") and time.time() < deadline:
        time.sleep(0.1)
    assert _count(f"sleep {marker}") == 0
    records = [json.loads(x) for x in journal.read_text().splitlines()]
    assert records[0]["format"] == "bayeval-journal" and records[1]["event"] == "ask"


def test_ctrl_c_delivered_to_another_thread_ends_an_evaluator_wait():
    # the kernel may deliver bayeval's SIGINT to any of its threads (JAX starts many); the
    # main thread, waiting on an evaluator's command, must still end within a moment:
    # here the signal goes to a helper thread on purpose (the deterministic worst case)
    code = ("import signal, threading, time\n"
            "from bayeval.evaluators import ChildProcesses\n"
            "def send():\n    time.sleep(1.0)\n"
            "    signal.pthread_kill(threading.get_ident(), signal.SIGINT)\n"
            "threading.Thread(target=send).start()\n"
            "t = time.monotonic()\n"
            "try:\n    ChildProcesses().run('sleep 62.74', 300, shell=True)\n"
            "except KeyboardInterrupt:\n    print(round(time.monotonic() - t, 1))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-400:]
    # 1 s until the signal, then at most one wait slice (0.25 s); 20 s leaves room for a
    # loaded machine while a missed signal would wait for the whole 62.74 s command
    assert float(done.stdout) < 20
    assert _count("sleep 62.74") == 0


def _count(pattern: str) -> int:
    found = subprocess.run(["pgrep", "-f", "-x", pattern], capture_output=True, text=True)
    return len(found.stdout.split())


def test_output_to_an_ascii_terminal_is_written_with_escapes():
    # an ASCII-only encoding shows '≥' as an escape, not a UnicodeEncodeError traceback
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run([sys.executable, "-m", "bayeval.cli", "evaluate", "--max-items",
                           "0"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "0 is not \\u2265 1" in done.stderr


@pytest.mark.skipif(not Path("/dev/full").is_char_device(),
                    reason="this system has no /dev/full device to make a write fail")
def test_output_to_a_full_device_is_a_one_line_error():
    # /dev/full fails every write with ENOSPC: exit status 1, not an OSError traceback
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "bayeval.cli", "datasets"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == ("error: the output could not be written (No space left "
                                   "on device)")


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(),
                    reason="no sysfs here, where no file can be created (even by root)")
def test_a_file_that_cannot_be_written_is_a_one_line_error(capsys):
    # any file bayeval writes (here compress --out into sysfs) failing at the OS: the
    # command ends with one line naming the file asked for (not its temporary twin)
    from bayeval.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["compress", "--dataset", "rte", "--method", "random", "--size", "10",
              "--out", "/sys/bayeval-subset.json"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "Traceback" not in err
    assert err.strip().startswith("error: /sys/bayeval-subset.json: "), err


@pytest.mark.skipif(not Path("/dev/full").is_char_device(),
                    reason="this system has no /dev/full device to make a write fail")
def test_a_journal_write_on_a_full_disk_is_a_one_line_error_and_loses_nothing(tmp_path):
    # the journal's file fails every write with ENOSPC (its handle swapped for /dev/full
    # mid-run): a JournalError naming the journal, and what it held before stays whole
    from bayeval.data import load_dataset
    from bayeval.errors import JournalError
    from bayeval.loop.session import Session

    rte = load_dataset("rte")
    path = tmp_path / "j.jsonl"
    session = Session(rte.drop_models([rte.models[0]]), rte.models[0], "random", seed=0,
                      journal=path)
    oracle = MatrixOracle(rte, rte.models[0])
    for _ in range(3):
        [item] = session.ask()
        session.tell(item, oracle(item))
    before = path.read_bytes()
    session._journal.close()
    session._journal = open("/dev/full", "ab")
    with pytest.raises(JournalError, match=r"journal .*j.jsonl: could not write to it "
                                           r"\(No space left on device\)"):
        session.ask()  # the draw is journaled before it is evaluated
    session.close()
    assert path.read_bytes() == before
    resumed = Session.resume(path, reference=rte.drop_models([rte.models[0]]))
    assert resumed.n_observed == 3
    resumed.close()


def test_a_bench_called_from_python_in_32_bit_mode_runs_in_float64(tmp_path):
    # a fresh interpreter (the suite's own runs in float64): run_validity on a tiny
    # matrix, as a user's script would call it, without enabling float64 first
    code = ("import numpy as np\nfrom bayeval.data import ScoreMatrix\n"
            "from bayeval.experiments.validity import run_validity\n"
            "rng = np.random.default_rng(0)\n"
            "m = ScoreMatrix((rng.random((12, 30)) < 0.5).astype(float), "
            "[f'm{i}' for i in range(12)], [f'i{j}' for j in range(30)], name='tiny')\n"
            "runs, _ = run_validity(m, variants=['standard'], epsilons=[0.2], "
            "methods=['random'], seeds=1, n_targets=2, reps=1, faq=False, "
            "log=lambda s: None)\nprint(len(runs))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-400:]


def test_a_signal_with_evaluations_in_flight_starts_and_retries_nothing(tmp_path):
    # --concurrency 3 with retries: SIGTERM kills the three commands in flight, and none
    # is retried or started after it (each start appends a line to a file); bayeval ends
    # at once with 143 and the resume command
    import signal

    journal, starts = tmp_path / "run.jsonl", tmp_path / "starts"
    command = f"echo x >> {starts}; sleep 61.74; echo 1"
    proc = subprocess.Popen([sys.executable, "-m", "bayeval.cli", "evaluate", "--dataset",
                             "mrpc", "--target", "new", "--method", "active-pai",
                             "--evaluator", "command", "--command", command, "--timeout",
                             "300", "--retries", "3", "--concurrency", "3", "--journal",
                             str(journal), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300  # start-up compiles from a cold cache on a fresh machine
        while _count("sleep 61.74") < 3 and time.time() < deadline:
            time.sleep(0.1)
        assert _count("sleep 61.74") == 3
        proc.send_signal(signal.SIGTERM)
        began = time.time()
        _, err = proc.communicate(timeout=60)
        took = time.time() - began
    finally:
        proc.kill()
    assert proc.returncode == 143 and "Traceback" not in err, err
    # 2 s is the bound users are promised; the slack covers a loaded test machine
    assert took < 10, took
    assert f"continue with: bayeval evaluate --resume --journal {journal}" in err, err
    time.sleep(1)
    assert starts.read_text().count("x") == 3  # no retry, no new item after the signal
    assert _count("sleep 61.74") == 0


def test_a_journal_deleted_or_replaced_while_the_run_goes_on_loses_nothing(tmp_path):
    # deleted mid-run: written back from the open file at the next record (a warning),
    # the run ends with every record at its path; replaced by another file: that file is
    # left as it is, the run's records go to PATH.orphan, and the run stops in one line
    import warnings as warns

    import bayeval
    from bayeval.errors import JournalError
    from bayeval.records.journal import JournalWarning

    matrix = bayeval.load_dataset("rte")
    truth = dict(zip(matrix.items, matrix.row("rte-model-000"), strict=True))
    journal = tmp_path / "run.jsonl"
    calls = [0]

    def deleting(item):
        calls[0] += 1
        if calls[0] == 10:
            journal.unlink()
        return float(truth[item])

    with warns.catch_warnings(record=True) as caught:
        warns.simplefilter("always")
        result = bayeval.evaluate(dataset="rte", model="rte-model-000", evaluator=deleting,
                                  journal=journal, limit=30, progress=False)
    assert any(issubclass(w.category, JournalWarning) and "deleted" in str(w.message)
               for w in caught)
    told = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    assert sum(r.get("event") == "tell" for r in told) == result.items_used == 30
    again = bayeval.resume(journal, evaluator=deleting, progress=False)
    assert again.items_used == 30 and again.estimate == result.estimate

    other = tmp_path / "other.jsonl"
    calls[0] = 0

    def replacing(item):
        calls[0] += 1
        if calls[0] == 10:
            (tmp_path / "stranger").write_text("not a journal\n")
            (tmp_path / "stranger").replace(other)
        return float(truth[item])

    with pytest.raises(JournalError, match="replaced by another file.*orphan"):
        bayeval.evaluate(dataset="rte", model="rte-model-000", evaluator=replacing,
                         journal=other, limit=30, progress=False)
    assert other.read_text() == "not a journal\n"
    kept = Path(f"{other}.orphan").read_text().splitlines()
    assert json.loads(kept[0])["target"] == "rte-model-000" and len(kept) >= 10
