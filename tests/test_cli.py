from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from bayeval.cli import app
from bayeval.data import load_dataset, write_matrix

runner = CliRunner()


def _invoke(*args: str):
    return runner.invoke(app, list(args))


def test_help_on_every_command():
    for args in ([], ["--help"], ["datasets", "--help"], ["evaluate", "--help"],
                 ["select", "--help"]):
        result = _invoke(*args)
        assert "Usage" in result.output, args
    assert "--resume" in _invoke("evaluate", "--help").output


def test_help_shows_no_type_for_a_flag():
    # every command and group: a flag (--resume, --json, --help, --version, --faq/--no-faq)
    # takes no value, so its row shows none (Typer writes "<bool>"); options keep theirs
    import click
    import typer.main

    group = typer.main.get_command(app)
    paths = [[]]
    for name, command in group.commands.items():
        paths.append([name])
        if isinstance(command, click.Group):
            paths += [[name, sub] for sub in command.commands]
    for path in paths:
        shown = _invoke(*path, "--help").output
        assert "Usage" in shown and "<bool>" not in shown, path
    assert "<int>" in _invoke("evaluate", "--help").output


def test_datasets_lists_shapes():
    result = _invoke("datasets")
    assert result.exit_code == 0
    for name, models, items in (("ifeval", 448, 541), ("musr", 448, 756), ("rte", 87, 277)):
        assert name in result.output and str(models) in result.output
        assert str(items) in result.output


def test_default_evaluate_is_active_pai_and_says_what_it_saved():
    result = _invoke("evaluate", "--json", "-q")
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["reference"] == "ifeval" and r["reference_models"] == 447
    # the default: design-valid active estimation, stopped by the interval's width ε =
    # 0.05 (whether one run's interval covers is a coverage question, measured over many
    # runs by `bayeval bench validity`)
    assert r["method"] == "active-pai" and "interval_width(0.05)" in r["stopped"]
    assert 30 <= r["items_used"] < 541 and r["upper"] - r["lower"] <= 0.05
    assert r["covered"] == (r["lower"] <= r["true_score"] <= r["upper"])
    assert len(set(r["items"])) == r["items_used"]
    assert r["random_items_for_width"] > r["items_used"]
    shown = _invoke("evaluate")
    assert shown.exit_code == 0
    line = next(x for x in shown.stdout.splitlines() if x.startswith("random sampling"))
    saved = 1 - r["items_used"] / r["random_items_for_width"]
    assert f"≈ {r['random_items_for_width']} items for this width: {saved:.0%} saved" in line


def test_human_readable_output():
    result = _invoke("evaluate", "--seed", "2", "--method", "random", "--epsilon", "0.2")
    assert result.exit_code == 0
    for word in ("estimate", "95% interval", "true score", "items used", "of 541"):
        assert word in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--target", "nobody"], "unknown target id 'nobody': not a model of ifeval"),
    (["--dataset", "nope"], "unknown dataset 'nope'"),
    (["--dataset", "rte", "--reference", "x.csv"], "either --dataset or --reference"),
    (["--resume"], "--resume needs --journal"),
    (["--evaluator", "command", "--target", "x"], "needs --command"),
    (["--command", "echo 1"], "only used with --evaluator command"),
    (["--method", "magic"], "unknown method 'magic'"),
    (["--reference", "missing.csv"], "missing.csv: no such file"),
])
def test_bad_arguments_give_one_line_errors(args, message):
    result = _invoke("evaluate", "-q", *args)
    assert result.exit_code == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines


def test_existing_journal_needs_resume(tmp_path):
    journal = tmp_path / "j.jsonl"
    assert _invoke("evaluate", "-q", "--method", "random", "--journal",
                   str(journal)).exit_code == 0
    result = _invoke("evaluate", "-q", "--journal", str(journal))
    assert result.exit_code == 2 and "already exists" in result.stderr
    again = _invoke("evaluate", "-q", "--journal", str(journal), "--resume", "--seed", "3")
    assert again.exit_code == 2 and "drop --seed" in again.stderr


def test_command_evaluator_on_a_reference_file(tmp_path):
    rte = load_dataset("rte")
    target = str(rte.models[5])
    reference = tmp_path / "rte.csv"
    write_matrix(rte, reference)
    table = tmp_path / "scores.txt"
    table.write_text("".join(f"{i} {s:g}\n" for i, s in zip(rte.items, rte.row(target),
                                                          strict=True)))
    # the user's script: looks the score up, but crashes on items ending in 7
    script = tmp_path / "score.sh"
    script.write_text('case "$1" in *7) echo "model crashed" >&2; exit 1;; esac\n'
                      f'awk -v id="$1" \'$1 == id {{print $2}}\' {table}\n')
    journal = tmp_path / "cmd.jsonl"
    result = _invoke("evaluate", "--json", "-q", "--reference", str(reference),
                     "--target", target, "--evaluator", "command", "--method", "bayesame",
                     "--command", f"sh {script} {{item}}", "--retries", "0",
                     "--epsilon", "0.2", "--journal", str(journal))
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    # a live evaluator's run is never judged against the matrix's row of the same name
    assert r["reference_models"] == 86 and r["true_score"] is None and r["covered"] is None
    assert r["reference_row_score"] == pytest.approx(rte.row(target).mean())
    assert not any(item.endswith("7") for item in r["items"])
    records = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    skipped = [x for x in records if x["event"] == "skip"]
    assert len(skipped) == r["items_skipped"] and all(x["item"].endswith("7") for x in skipped)
    assert r["skipped_items"] == (f"the estimate is over all items: the {len(skipped)} "
                                  "skipped ones are predicted by the model, not scored")
    assert all("model crashed" in x["reason"] for x in skipped)
    told = {x["item"]: x["score"] for x in records if x["event"] == "tell"}
    assert all(rte.row(target)[rte.item_index(i)] == s for i, s in told.items())
    # the default, design-based method cannot skip a drawn item: the run stops (exit 3)
    stopped = _invoke("evaluate", "-q", "--reference", str(reference), "--target", target,
                      "--evaluator", "command", "--command", f"sh {script} {{item}}",
                      "--retries", "0", "--journal", str(tmp_path / "default.jsonl"))
    assert stopped.exit_code == 3 and "cannot leave a drawn item" in stopped.stderr


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "bayeval.cli", "evaluate", "-q", "--json", *args]


def test_sigkill_at_random_points_then_resume_equals_uninterrupted(tmp_path):
    """Kill `bayeval evaluate --journal J` with SIGKILL ≥ 12 times at random points
    (start-up, replay, mid-run, mid-write) and resume each time; the final result must be
    the uninterrupted run's. (Each kill costs a process start, ~2 s; a crash at every
    byte of a journal is tested in process by tests/test_session.py.)"""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # random items with ε = 0.15 (~100 items): short runs, many kills per minute; the
    # journal and replay are the same for every method (BayesAME's replay is tested in
    # tests/test_bayesame.py)
    settings = ("--seed", "7", "--method", "random", "--epsilon", "0.15")
    clean = subprocess.run(_cli(*settings, "--journal", str(tmp_path / "ref.jsonl")),
                           capture_output=True, text=True, env=env, check=True)
    expected = json.loads(clean.stdout)
    expected.pop("journal")
    expected.pop("times")
    total = 2 * expected["items_used"] + 1  # journal lines when done: an ask, a tell each

    rng = random.Random(12345)
    kills, mid_run, rounds = 0, 0, 0
    wanted = 12
    while kills < wanted:  # a round that finishes before them is checked, then another starts
        rounds += 1
        journal = tmp_path / f"j{rounds}.jsonl"
        result = None
        while result is None:
            resume = journal.exists() and journal.stat().st_size > 0
            args = ["--journal", str(journal), *(["--resume"] if resume else settings)]
            proc = subprocess.Popen(_cli(*args), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env)
            lines = journal.read_bytes().count(b"\n") if resume else 0
            deadline, goal = 0.0, None  # no kill: let it finish
            if kills < wanted and rng.random() < 0.25:  # somewhere in start-up or replay
                deadline = time.time() + rng.uniform(0.0, 2.0)
            elif kills < wanted and lines + 1 < total:  # after a few more observations
                deadline, goal = time.time() + 60, min(lines + rng.randint(1, 8), total - 1)
            while proc.poll() is None and time.time() < deadline:
                if goal is not None and journal.exists() and \
                        journal.read_bytes().count(b"\n") >= goal:
                    break
                time.sleep(0.001)
            if proc.poll() is None and deadline > 0:  # a kill was planned and is still due
                proc.send_signal(signal.SIGKILL)
                kills += 1
                proc.wait()
                after = journal.read_bytes().count(b"\n") if journal.exists() else 0
                mid_run += max(lines, 1) < after < total  # killed after it journaled more
            out, err = proc.communicate(timeout=120)
            if proc.returncode == 0:
                result = json.loads(out)
            else:
                assert proc.returncode == -signal.SIGKILL, err
        result.pop("journal")
        result.pop("times")  # the clocks of this process, not of the run's results
        # the documents sent again after a kill are the only difference: counted apart
        again = result.pop("documents_rerun")
        assert result.pop("documents_run") == expected["documents_run"] + again
        assert result == {k: v for k, v in expected.items()
                          if k not in ("documents_run", "documents_rerun")}
    print(f"{kills} kills, {mid_run} mid-run, {rounds} round(s)")
    assert mid_run >= 5  # most kills land while observations are being written
    records = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    reasked = sum(x["count"] for x in records if x["event"] == "reask")
    assert reasked == again  # each journaled, the last round's result counted them all
    tells = [x for x in records if x["event"] == "tell"]
    assert [x["n"] for x in tells] == list(range(1, expected["items_used"] + 1))
    assert [x["order"] for x in records if x["event"] == "ask"] == list(range(len(tells)))


def test_diagnose_prints_diagnostics_and_plots(tmp_path):
    # a short NUTS run of 2PL IRT on IFEval (the estimate and plots, not R-hat, are the
    # point here; docs/results/inference has the full-length diagnosis)
    result = _invoke("diagnose", "--model", "irt-2pl", "--coreset", "40", "--chains", "2",
                     "--warmup", "100", "--draws", "100", "--json", "--plot",
                     str(tmp_path))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["coreset"] == 40 and report["items"] == 541 and report["variables"] == 1
    # not a terminal: each phase of the long work is a line on stderr, with its time
    phases = result.stderr.splitlines()
    assert any("NUTS, 2 chains" in x for x in phases) and len(phases) >= 3
    assert phases[-1].startswith("irt-2pl on ifeval: done (")
    assert abs(report["estimate"] - report["truth"]) < 4 * report["sd"]
    assert report["nuts_seconds"] > 0 and len(report["bfmi"]) == 2
    for name in ("trace.png", "rank.png"):
        assert (tmp_path / name).stat().st_size > 10_000
    bad = _invoke("diagnose", "--model", "irt-3pl")
    assert bad.exit_code == 2 and "unknown model 'irt-3pl'" in bad.output


def test_bench_coverage_refuses_bad_budgets_in_one_line(tmp_path):
    result = _invoke("bench", "coverage", "--budgets", "0.1,2", "--out", str(tmp_path))
    assert result.exit_code == 2 and "every budget must be a share in (0, 1)" in result.output
    result = _invoke("bench", "coverage", "--budgets", "a", "--out", str(tmp_path))
    assert result.exit_code == 2 and "not a comma-separated list" in result.output
    result = _invoke("bench", "coverage", "--history", "partial", "--out", str(tmp_path))
    assert result.exit_code == 2 and "history must be 'full' or 'mcar'" in result.output


def test_evaluate_with_faq_draws_a_fixed_budget():
    # RTE (87 models): the factor fit of FAQ's backend on IFEval's 448 took 12 of 16 s
    result = _invoke("evaluate", "--dataset", "rte", "--method", "faq(budget=20, k=2)",
                     "--json", "-q")
    assert result.exit_code == 0, result.output
    r = json.loads(result.output)
    assert r["method"] == "faq" and r["items_used"] == 20 and r["items_evaluated"] <= 20
    assert 0.0 <= r["lower"] <= r["estimate"] <= r["upper"] <= 1.0


def test_result_tables_keep_names_whole_at_80_columns(monkeypatch, tmp_path):
    # the ranking of select (long model names) and a live joint run's table: at 80 columns
    # every name is printed whole, no line is longer, and a live run (no true score) shows
    # no empty "true score" column
    monkeypatch.setattr("bayeval.cli.common.out.width", 80)
    done = _invoke("select", "--dataset", "ifeval", "--budget", "5%", "-q", "--json")
    ranking = [row["model"] for row in json.loads(done.stdout)["ranking"][:10]]
    shown = _invoke("select", "--dataset", "ifeval", "--budget", "5%", "-q").stdout
    assert all(name in shown for name in ranking), shown
    assert max(map(len, shown.splitlines())) <= 80
    live = _invoke("evaluate", "--dataset", "rte", "--targets", "rte-model-001,rte-model-002",
                   "--evaluator", "command", "--command", "echo 1; true {target} {item}",
                   "--max-items", "60", "--journal", str(tmp_path / "j.jsonl"), "-q")
    assert live.exit_code == 0, live.output
    assert "rte-model-001" in live.stdout and "true score" not in live.stdout


def test_version_takes_no_value(capsys):
    # `--version true` (or any word after it) is refused, not silently ignored
    from bayeval.cli import main

    for argv, code in ((["--version"], 0), (["--version", "true"], 2),
                       (["--version", "evaluate"], 2)):
        with pytest.raises(SystemExit) as ended:
            main(argv)
        assert ended.value.code == code, argv
    captured = capsys.readouterr()
    assert "bayeval " in captured.out
    assert "--version takes no value and no command (got 'evaluate'" in captured.err


def test_long_work_says_it_started_unless_it_ends_at_once(capsys):
    # not a terminal: work of over a second says it started and when it ended; work that
    # fails at once (a refused option) leaves its error as the command's one line
    import time

    from bayeval.cli.common import working

    with working("searching"):
        time.sleep(2.5)  # the first line is due at 1 s: 1.5 s of slack for a loaded machine
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and re.fullmatch(r"searching: started \(\d+ s\)", lines[0])
    assert re.fullmatch(r"searching: done \(\d+ s\)", lines[1])
    with pytest.raises(ValueError), working("searching"):
        raise ValueError("refused")
    time.sleep(1.2)  # past the first line's delay: nothing comes late
    assert capsys.readouterr().err == ""


def test_every_help_names_only_options_that_exist():
    # an option a command's help names is one of its own, one of lm-evaluation-harness's
    # (`lm_eval run`'s own parser: --model, --include_path, …), or another command's named
    # with it ("evaluate --subtasks"); once `select` pointed to help it did not have
    import re

    import typer

    from bayeval.cli import app

    pytest.importorskip("lm_eval", reason="lm-evaluation-harness (the test extra's lm-eval) "
                                          "is not installed: its options are not known")
    from lm_eval._cli.harness import HarnessCLI

    harness = set()
    for action in HarnessCLI()._parser._subparsers._group_actions[0].choices["run"]._actions:
        harness.update(action.option_strings)
    root = typer.main.get_command(app)

    def options(command) -> set[str]:
        return {o for p in command.params for o in [*p.opts, *p.secondary_opts]}

    leaves = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        else:
            leaves[" ".join(path)] = command

    walk(root, [])
    wrong = {}
    for path, command in leaves.items():
        text = " ".join([command.help or "", *(p.help or "" for p in command.params)])
        for match in re.finditer(r"(?:(\w+) )?(?<![\w-])(--[a-z][a-z0-9_-]*)", text):
            before, option = match.groups()
            named = leaves.get(before or "", None)
            if option in options(command) or option in harness or (
                    named is not None and option in options(named)):
                continue
            wrong.setdefault(path, []).append(option)
    assert not wrong, wrong


def test_output_that_is_no_terminal_is_never_cut(cli):
    # a pipe or a log has no width: every column of the ranking is whole (once "ra…" and
    # "mean 0.7…" at Rich's default 80 columns), and no line ends in a table's padding
    if os.environ.get("COLUMNS"):
        pytest.skip("COLUMNS set: the output is given that width, as on a terminal")
    done = cli("select", "--dataset", "ifeval", "--budget", "5%", "-q")
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and "true rank" in done.stdout
    assert all(line == line.rstrip() for line in done.stdout.splitlines())


@pytest.mark.parametrize("width", [40, 60, 80])
def test_tables_are_never_cut_on_a_narrow_terminal(width):
    # a terminal of 80 columns or fewer: a ranking too wide for it is printed as records,
    # every cell whole (once "ra…", "mean 0.7…" or a column dropped), and a result's path
    # longer than the line breaks across lines with nothing lost
    import io

    from rich.console import Console

    from bayeval.evaluation.summary import Summary

    headers = ("model", "mean", "95% interval", "true rank", "note")
    rows = [(f"organisation/model-with-a-long-name-{k}", "0.71234", "[0.60123, 0.80111]",
             str(k + 1), "reached the budget before the interval was narrow")
            for k in range(3)]
    screen = io.StringIO()
    Console(file=screen, width=width).print(Summary(rows, headers, "ranking"))
    shown = screen.getvalue()
    assert "…" not in shown and max(map(len, shown.splitlines())) <= width
    for row in rows:
        for cell in row:
            assert cell in " ".join(shown.split()), (cell, shown)
    path = "/tmp/pytest-of-root/pytest-36/popen-gw1/test_evaluate_warns_when_the/weak.npz"
    screen = io.StringIO()
    Console(file=screen, width=width).print(Summary([("reference",
                                                      f"{path} (43 models × 277 items)")]))
    assert "…" not in screen.getvalue()
    assert path in "".join(line.strip() for line in screen.getvalue().splitlines())


def test_an_interrupted_command_says_so_and_exits_143(tmp_path):
    """SIGTERM to a command with no journal of its own (diagnose, at work) ends it with one
    line and 143: Typer would turn it into a silent 130."""
    proc = subprocess.Popen([sys.executable, "-m", "bayeval.cli", "diagnose"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:  # the command is at work once it has said this
        seen.append(line)
        if "calibrating" in line:
            break
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=120)
    text = "".join(seen) + rest
    assert proc.returncode == 143, text[-2000:]
    assert text.rstrip().splitlines()[-1] == "interrupted", text[-2000:]
