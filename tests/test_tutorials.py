from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ask_tell_tutorial_runs(tmp_path):
    out = tmp_path / "plot.png"
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "ask_tell.py"),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "resumed with 60 observations" in done.stdout
    assert out.stat().st_size > 10_000  # a real PNG figure


def test_bayesame_tutorial_runs(tmp_path):
    out = tmp_path / "plot.png"
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "bayesame.py"),
                           "--out", str(out), "--steps", "40"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "bayesame-q25:" in done.stdout and out.stat().st_size > 10_000


def test_checkpoints_tutorial_runs(tmp_path):
    out = tmp_path / "plot.png"
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "checkpoints.py"),
                           "--out", str(out), "--max-evaluations", "240"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "joint: 240 evaluations" in done.stdout  # the design (4 × 55) and the first re-fit
    assert "fitted correlation" in done.stdout and "single: 240 evaluations" in done.stdout
    assert out.stat().st_size > 10_000


def test_best_model_tutorial_runs(tmp_path):
    out = tmp_path / "plot.png"
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "best_model.py"),
                           "--out", str(out), "--runs", "20"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "chosen: " in done.stdout and "evaluations used: 2800 of 28128" in done.stdout
    assert out.stat().st_size > 10_000


def test_compress_tutorial_runs(tmp_path):
    out = tmp_path / "plot.png"
    done = subprocess.run([sys.executable, str(ROOT / "tutorials" / "compress.py"),
                           "--out", str(out), "--subsets", "500"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "<- n*" in done.stdout and "--samples" in done.stdout
    assert out.stat().st_size > 10_000
