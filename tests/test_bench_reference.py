"""Every ``bayeval bench`` command on a user's matrix (``--reference FILE``), not only on
bundled names: a small complete binary CSV cut from the bundled IFEval, the smallest
settings each bench takes, through the command's own entry point (in this process: a
subprocess would add only an interpreter's start-up; the console command itself is
tested in tests/test_cli.py and tests/test_reliability.py). Each run must finish, write
its report, and label its rows by the file (stem and fingerprint), never by a bundled
name or by a path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bayeval.data import ScoreMatrix, load_dataset, read_matrix, write_matrix
from bayeval.data.sources import bench_dataset

SMALL = {
    "estimation": ["--methods", "random", "--targets", "2", "--seeds", "1", "--regimes",
                   "interpolation"],
    "inference": ["--methods", "random", "--targets", "2", "--seeds", "1", "--steps", "20",
                  "--every", "10"],
    # no joint re-fit (20 s of a 50 s run): re-fits are tested in tests/test_joint*.py
    "multitarget": ["--targets", "2", "--seeds", "1", "--regimes", "interpolation",
                    "--epsilon", "0.3", "--refit-every", "100000"],
    "selection": ["--runs", "8", "--algorithms", "SySRs", "--max-budget", "0.1"],
    "coverage": ["--seeds", "2", "--val-seeds", "1", "--budgets", "0.2", "--grid",
                 "default"],
    "compression": ["--seeds", "4", "--kmeans-seeds", "2", "--mince-seeds", "2",
                    "--no-ablation"],
    "validity": ["--variants", "standard", "--epsilons", "0.2", "--methods", "random",
                 "--seeds", "1", "--targets", "2", "--reps", "1", "--no-faq"],
}


@pytest.fixture(scope="module")
def user_matrix(tmp_path_factory) -> Path:
    """40 models × 150 items of IFEval with no missing cell, saved as a wide CSV (MINCE's
    size search needs at least two candidate sizes 50 items apart)."""
    ifeval = load_dataset("ifeval")
    rows = np.flatnonzero(~np.isnan(ifeval.scores).any(axis=1))[:40]
    matrix = ScoreMatrix(ifeval.scores[rows][:, :150], ifeval.models[rows],
                         [f"q{j}" for j in range(150)], name="my_scores")
    path = tmp_path_factory.mktemp("user") / "my_scores.csv"
    write_matrix(matrix, path)
    return path


@pytest.mark.parametrize("bench", list(SMALL))
def test_every_bench_runs_on_a_user_matrix(user_matrix, tmp_path, bench, monkeypatch):
    from typer.testing import CliRunner

    from bayeval.cli import app

    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["bench", bench, "--reference", str(user_matrix),
                                    "--out", str(out), *SMALL[bench]])
    assert done.exit_code == 0, (done.output[-3000:], done.exception)
    label, _ = bench_dataset(read_matrix(user_matrix))
    assert label.startswith("my_scores-") and len(label) == len("my_scores-") + 8
    report = (out / "report.md").read_text()
    named = (label in report or label in done.output
             or any(label in str(p.relative_to(out)) for p in out.rglob("*")))
    assert named, report[:500]  # its rows, runs or caches carry the file's label
    if bench == "compression":  # its saved errors are found again by their settings
        from bayeval.experiments.compression import compression_table, saved_errors

        errors = saved_errors(out, label, seeds=4, kmeans_seeds=2, mince_seeds=2)
        _, again = compression_table(read_matrix(user_matrix).scores, label, 4,
                                     kmeans_seeds=2)
        assert errors is not None and errors.keys() == again.keys()
        for key in again:  # 4 seeds × 20 targets (half of the 40 models each)
            assert errors[key].shape == (80,) or key.startswith("kmeans")
            np.testing.assert_array_equal(errors[key], again[key])
        assert saved_errors(out, label, seeds=5, kmeans_seeds=2, mince_seeds=2) is None


def test_a_bench_refuses_harness_options_without_harness_logs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bayeval.cli", "bench", "selection",
                           "--datasets", "rte", "--metric", "acc", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--task, --metric and --filter read lm-evaluation-harness logs" in done.stderr


def test_emit_report_prints_writes_and_makes_the_folder(tmp_path, capsys):
    """The benches' one way to show and save a report: printed, written under a folder that
    does not exist yet, and the same text returned; with no ``out`` nothing is written."""
    from bayeval.experiments.tables import emit_report

    out = tmp_path / "new" / "folder" / "report.md"
    text = emit_report(["# title", "", "| a | b |"], out)
    assert text == "# title\n\n| a | b |\n"
    assert out.read_text() == text
    assert capsys.readouterr().out == text + "\n"  # print adds its own newline
    assert emit_report(["x"], None) == "x\n"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["report.md"]


def test_bench_suite_runs_on_the_users_matrices(user_matrix, tmp_path, monkeypatch):
    # `bench suite --reference A --reference B`: a suite of two of the user's matrices
    # (their rows one model by id), labelled by the files; refused with fewer than two or
    # beside --suites
    from typer.testing import CliRunner

    from bayeval.cli import app

    whole = read_matrix(user_matrix)
    paths = []
    for k, cols in enumerate((slice(0, 75), slice(75, 150))):
        part = ScoreMatrix(whole.scores[:, cols], whole.models, whole.items[cols],
                           name=f"part{k}")
        paths.append(tmp_path / f"part{k}.csv")
        write_matrix(part, paths[-1])
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    args = ["bench", "suite", "--reference", str(paths[0]), "--reference", str(paths[1]),
            "--epsilons", "0.2", "--seeds", "1", "--targets", "2", "--reps", "1",
            "--out", str(out)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, (done.output[-3000:], done.exception)
    labels = [bench_dataset(read_matrix(p))[0] for p in paths]
    assert all(label.startswith(f"part{k}-") for k, label in enumerate(labels))
    report = (out / "report.md").read_text()
    assert "+".join(labels) in report or all(label in report for label in labels)
    one = CliRunner().invoke(app, ["bench", "suite", "--reference", str(paths[0])])
    assert one.exit_code == 2 and "two or more matrices" in one.output
    both = CliRunner().invoke(app, [*args[:6], "--suites", "leaderboard"])
    assert both.exit_code == 2 and "--suites or --reference, not both" in both.output
