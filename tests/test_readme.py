"""The README's Python snippets and its own-model example run as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_python_snippets():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_snippet_runs(tmp_path, index):
    # from a folder holding the repository's examples (as the README's commands run from
    # the repository root), so that what a snippet writes stays in the temporary folder
    import shutil

    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    done = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_own_model_example_runs_as_written(tmp_path, monkeypatch):
    # the README's "Evaluating your own model" commands, from the repository root with
    # the example files, the journal in a temporary folder: the run, then its resume
    import shlex

    from typer.testing import CliRunner

    from bayeval.cli import app

    text = README.read_text(encoding="utf-8")
    block = text.split("## Evaluating your own model", 1)[1].split("```bash", 1)[1]
    block = block.split("```", 1)[0].replace("\\\n", " ")
    commands = [shlex.split(line) for line in block.splitlines()
                if line.strip().startswith("bayeval ")]
    assert len(commands) == 2 and all(c[:2] == ["bayeval", "evaluate"] for c in commands)
    monkeypatch.chdir(ROOT)
    journal = str(tmp_path / "my-model.jsonl")
    for argv in commands:
        argv = [journal if a == "my-model.jsonl" else a for a in argv[1:]]
        done = CliRunner().invoke(app, [*argv, "--json", "-q"])
        assert done.exit_code == 0, done.output
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["target"] == "my-model" and result["upper"] - result["lower"] <= 0.05
    answers = (ROOT / "examples/own_model/answers.csv").read_text().splitlines()[1:]
    truth = sum(float(x.split(",")[1]) for x in answers) / len(answers)
    assert re.search(r"examples/own_model/scores\.csv", " ".join(commands[0]))
    assert abs(result["estimate"] - truth) < 0.1  # one run: a loose sanity bound
