"""tutorials/quickstart.ipynb, the README's Python section as cells, executed top to bottom
in a real Jupyter kernel (nbclient, ipykernel): every cell runs, and what a person sees is
there (the result's table as HTML, the estimate, the plot as a PNG, the suite's rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"


def test_the_quickstart_notebook_runs_top_to_bottom():
    book = nbformat.read(TUTORIALS / "quickstart.ipynb", as_version=4)
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(TUTORIALS)}}).execute()
    code = [c for c in book.cells if c.cell_type == "code"]
    assert all(o.get("output_type") != "error" for c in code for o in c.outputs)

    def shown(cell, kind: str) -> list[str]:
        return [o["data"][kind] for o in cell.outputs
                if o.get("output_type") == "execute_result" and kind in o.get("data", {})]

    own, line, figure, suite, rows, panels = code[1:]
    [html] = shown(own, "text/html")
    assert "estimate" in html and "95% interval" in html and "my-model" in html
    printed = "".join(o.get("text", "") for o in line.outputs)
    assert " of 277 items" in printed
    assert "my-model" in shown(line, "text/html")[0]  # to_pandas(): its row
    assert shown(figure, "image/png") and shown(panels, "image/png")
    [suite_html] = shown(suite, "text/html")
    assert "leaderboard_ifeval" in suite_html and "average" in suite_html
    assert "leaderboard_musr" in shown(rows, "text/html")[0]
