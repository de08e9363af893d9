"""Figure layout shared by the experiment reports."""

from __future__ import annotations

from typing import Any


def panel_grid(n_panels: int, max_cols: int, width: float, height: float
               ) -> tuple[Any, list[Any]]:
    """(figure, the first ``n_panels`` axes) of a grid at most ``max_cols`` wide, each
    panel ``width`` × ``height`` inches; unused cells are hidden."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = max(1, min(max_cols, n_panels))
    nrows = max(1, -(-n_panels // ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows),
                             squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n_panels])
