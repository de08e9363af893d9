"""Every tutorial runs, in this process (its compiled programs shared with the other
tests of the worker; a subprocess would add only an interpreter's and JAX's start-up), on
the small settings given here; the full runs stay runnable by hand."""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run_tutorial(name: str, tmp_path: Path, *args: str, timeout: int = 300) -> str:
    """Run tutorials/NAME.py as ``__main__`` with --out in tmp_path; check it wrote a real
    PNG figure; return its stdout. (``timeout`` is kept for a by-hand subprocess run.)"""
    out = tmp_path / "plot.png"
    path = ROOT / "tutorials" / f"{name}.py"
    argv, sys.argv = sys.argv, [str(path), "--out", str(out), *args]
    stdout = io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout):
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = argv
    assert out.stat().st_size > 10_000  # a real PNG figure
    return stdout.getvalue()


def test_ask_tell_tutorial_runs(tmp_path):
    assert "resumed with 60 observations" in _run_tutorial("ask_tell", tmp_path)


def test_bayesame_tutorial_runs(tmp_path):
    stdout = _run_tutorial("bayesame", tmp_path, "--steps", "40", timeout=600)
    assert "bayesame-q25:" in stdout


def test_checkpoints_tutorial_runs(tmp_path):
    stdout = _run_tutorial("checkpoints", tmp_path, "--max-evaluations", "100", "--items",
                           "200", timeout=600)
    assert "joint: 100 evaluations" in stdout  # the design (4 × 20) and the first re-fit
    assert "fitted correlation" in stdout and "single: 100 evaluations" in stdout


def test_best_model_tutorial_runs(tmp_path):
    stdout = _run_tutorial("best_model", tmp_path, "--runs", "20")
    assert "chosen: " in stdout and "evaluations used: 2800 of 28128" in stdout
    # the live ask/tell run with item weights spends the same budget as SySRs' session
    assert "HW-SySRs (item weights from the 194 earlier models): chosen " in stdout
    assert "), 2800 evaluations (one run" in stdout
    assert "budget   SySRs   HW-SySRs" in stdout


def test_compress_tutorial_runs(tmp_path):
    stdout = _run_tutorial("compress", tmp_path, "--subsets", "500")
    assert "<- n*" in stdout and "--samples" in stdout


def test_custom_priors_tutorial_runs(tmp_path):
    stdout = _run_tutorial("custom_priors", tmp_path, "--draws", "300")
    assert "latent sites: {'ability': (1,)}" in stdout and "refused: prior for 'skill'" in stdout
    assert "informed N(1.5, 0.5): R̂ = " in stdout and "default N(0, 1): R̂ = " in stdout


def test_faq_custom_rule_tutorial_runs(tmp_path):
    stdout = _run_tutorial("faq_custom_rule", tmp_path, "--models", "10", "--seeds", "4")
    assert "new rule + floor τ=0.1" in stdout and "uniform (Poisson)" in stdout


def test_new_method_tutorial_runs(tmp_path):
    stdout = _run_tutorial("new_method", tmp_path, "--runs", "40")
    assert "simulator: the same run: True" in stdout
    assert "another epsilon and tau share the compiled programs: True" in stdout
    assert "uncertainty-martingale   coverage at the stop" in stdout


def test_active_pai_tutorial_runs(tmp_path):
    stdout = _run_tutorial("active_pai", tmp_path, "--runs", "40", "--steps", "120",
                           "--epsilon", "0.1")
    assert "random sampling needs" in stdout and "% saved" in stdout
    assert "anytime sequence: misses the true score at some n" in stdout
