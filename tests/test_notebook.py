"""tutorials/quickstart.ipynb, the README's Python section as cells, executed top to bottom
in a real Jupyter kernel (nbclient, ipykernel) — a fresh interpreter: every cell runs, and
what a person sees is there (progress while the main job runs, the result's table as
HTML, the estimate, the plots as PNG, the suite's rows); the main job's ``to_dict()``, with
no set-up call before it, is what ``bayeval evaluate --json`` prints on the same seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

nbformat = pytest.importorskip("nbformat", reason="nbformat (the test extra's) is not "
                                                  "installed")
nbclient = pytest.importorskip("nbclient", reason="nbclient (the test extra's) is not "
                                                  "installed")

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"


def test_the_quickstart_notebook_runs_top_to_bottom():
    from bayeval.cli import app

    book = nbformat.read(TUTORIALS / "quickstart.ipynb", as_version=4)
    # what the test reads of the kernel (not a cell of the notebook): the main job as the
    # command's --json, its text, its table and its plot, and that JAX is in float64
    book.cells.append(nbformat.v4.new_code_cell(
        "import json, jax\nmain.summary(), main.to_pandas(), main.plot()\n"
        "assert jax.config.jax_enable_x64\nprint(json.dumps(main.to_dict()))\n"
        "print(main.summary())"))
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(TUTORIALS)}}).execute()
    code = [c for c in book.cells if c.cell_type == "code"]
    assert all(o.get("output_type") != "error" for c in code for o in c.outputs)

    def shown(cell, kind: str) -> list[str]:
        return [o["data"][kind] for o in cell.outputs
                if o.get("output_type") == "execute_result" and kind in o.get("data", {})]

    def printed(cell, name: str = "stdout") -> str:
        return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == name)

    main, _, own, line, figure, suite, rows, panels, read = code
    assert "evaluating: " in printed(main, "stderr")  # progress, shown by default
    assert "95% interval" in shown(main, "text/html")[0]
    [html] = shown(own, "text/html")
    assert "estimate" in html and "95% interval" in html and "my-model" in html
    assert " of 277 items" in printed(line)
    assert "my-model" in shown(line, "text/html")[0]  # to_pandas(): its row
    assert shown(figure, "image/png") and shown(panels, "image/png")
    [suite_html] = shown(suite, "text/html")
    assert "leaderboard_ifeval" in suite_html and "average" in suite_html
    assert "leaderboard_musr" in shown(rows, "text/html")[0]
    # the main job, a fresh interpreter's `bayeval.evaluate()`, is the command's run
    out = printed(read).splitlines()
    python = json.loads(out[0])
    done = CliRunner().invoke(app, ["evaluate", "--json", "-q"])
    assert done.exit_code == 0, done.output
    command = json.loads(done.stdout.strip().splitlines()[-1])
    assert python.pop("times").keys() == command.pop("times").keys()
    assert python == command
    text = "\n".join(out[1:])
    assert f"\nestimate         {python['estimate']:.4f}\n" in text
    assert f"[{python['lower']:.4f}, {python['upper']:.4f}]" in text
