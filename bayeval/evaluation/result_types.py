"""What :func:`bayeval.evaluate` and :func:`bayeval.resume` return: typed, frozen results
for one task (:class:`TaskResult`), a suite of tasks (:class:`SuiteResult`) and several
models evaluated jointly (:class:`TargetsResult`).

Each has the estimate and its interval as fields, and reads like the command line:
``.summary()`` is the text ``bayeval evaluate`` prints, ``.to_dict()`` exactly what
``bayeval evaluate --json`` prints, ``.to_pandas()`` a row per task or model,
``.plot()`` the estimate and its interval against the items run (a panel per task or
model) as a matplotlib ``Figure``, and in a notebook a table (``_repr_html_``). A run
whose backend samples by MCMC (``irt``) carries the last fit's posterior as ArviZ
``InferenceData`` in ``.posterior``. ``result["estimate"]`` reads the ``--json`` field of
that name, as earlier versions' dict did.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EstimateRow", "Result", "SuiteResult", "TargetsResult", "TaskResult",
           "make_result"]


@dataclass(frozen=True)
class EstimateRow:
    """One task's or one model's estimate in a suite's or a joint run's result."""

    name: str
    model: str | None
    estimate: float
    lower: float
    upper: float
    items_used: int
    true_score: float | None = None
    covered: bool | None = None


@dataclass(frozen=True, repr=False)
class Result(Mapping):
    """The fields every result has (module docstring). ``history``: per panel (task or
    model), the trajectory after each told score, rows ``(n, estimate, lower, upper)``
    (empty for a part that told nothing in this process and its journal)."""

    estimate: float
    lower: float
    upper: float
    level: float
    items_used: int
    method: str
    stopped: str | None
    journal: str | None
    data: dict[str, Any] = field(compare=False)
    history: tuple[tuple[str, np.ndarray], ...] = field(default=(), compare=False)
    posterior: Any = field(default=None, compare=False)

    # --- the --json record, read as the earlier dict was
    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``bayeval evaluate --json`` prints for this run (a copy)."""
        return copy.deepcopy(self.data)

    def summary(self) -> str:
        """The text ``bayeval evaluate`` prints."""
        from bayeval.evaluation.summary import summary

        return str(summary(self.data))

    def _repr_html_(self) -> str:
        from bayeval.evaluation.summary import summary

        shown = summary(self.data)
        cell = html.escape
        if shown.headers is None:
            body = "".join(f"<tr><th style='text-align:left'>{cell(a)}</th>"
                           f"<td style='text-align:left'>{cell(b)}</td></tr>"
                           for a, b in shown.rows)
            head = ""
        else:
            head = "<tr>" + "".join(f"<th>{cell(h)}</th>" for h in shown.headers) + "</tr>"
            body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>"
                           for row in shown.rows)
        title = f"<caption>{cell(shown.title)}</caption>" if shown.title else ""
        lines = "".join(f"<div>{cell(line)}</div>" for line in shown.lines)
        return f"<table>{title}{head}{body}</table>{lines}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else self.summary())

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self._label()}, estimate={self.estimate:.4f} "
                f"[{self.lower:.4f}, {self.upper:.4f}], items_used={self.items_used}, "
                f"method={self.method!r})")

    def _label(self) -> str:
        raise NotImplementedError

    def rows(self) -> list[dict[str, Any]]:
        """The rows of :meth:`to_pandas`."""
        raise NotImplementedError

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame``: a row per task (a suite) or model (several), one row
        for a run of one task."""
        import pandas as pd

        return pd.DataFrame(self.rows())

    def plot(self, truth: bool = True) -> Any:
        """The estimate and its interval against the items run, a panel per task or
        model (the run's full-benchmark score as a dashed line where the oracle knew it,
        ``truth``): a matplotlib ``Figure`` (no pyplot state is touched)."""
        from matplotlib.figure import Figure

        _show_figures_in_notebook()
        panels = self.history or (("", np.empty((0, 4))),)
        truths = self._truths()
        fig = Figure(figsize=(5.0 * min(len(panels), 3),
                              3.2 * ((len(panels) + 2) // 3)), layout="constrained")
        axes = fig.subplots((len(panels) + 2) // 3, min(len(panels), 3), squeeze=False)
        for k, (name, trace) in enumerate(panels):
            ax = axes.flat[k]
            trace = np.asarray(trace, np.float64).reshape(-1, 4)
            if len(trace):
                ax.fill_between(trace[:, 0], trace[:, 2], trace[:, 3], step="post",
                                alpha=0.25, label=f"{self.level:.0%} interval")
                ax.step(trace[:, 0], trace[:, 1], where="post", label="estimate")
            known = truths.get(name)
            if truth and known is not None:
                ax.axhline(known, color="black", linestyle="--", linewidth=1,
                           label="full-benchmark score")
            ax.set_title(name or self._label(), fontsize=10)
            ax.set_xlabel("items run")
            ax.set_ylabel("score")
            ax.legend(fontsize=8, loc="best")
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        return fig

    def _truths(self) -> dict[str, float | None]:
        return {}


@dataclass(frozen=True, repr=False)
class TaskResult(Result):
    """One task, one model: ``model``, ``task``, the estimate and interval, the items
    used of ``n_items``, the documents the model ran, the full-benchmark score where the
    oracle knew it (``true_score``, ``covered``)."""

    model: str = ""
    task: str | None = None
    n_items: int = 0
    documents_run: int = 0
    true_score: float | None = None
    covered: bool | None = None

    def _label(self) -> str:
        return f"model={self.model!r}, task={self.task!r}"

    def rows(self) -> list[dict[str, Any]]:
        return [{"task": self.task, "model": self.model, "estimate": self.estimate,
                 "lower": self.lower, "upper": self.upper, "level": self.level,
                 "items_used": self.items_used, "n_items": self.n_items,
                 "documents_run": self.documents_run, "method": self.method,
                 "true_score": self.true_score, "covered": self.covered}]

    def _truths(self) -> dict[str, float | None]:
        return {name: self.true_score for name, _ in self.history} or {"": self.true_score}


@dataclass(frozen=True, repr=False)
class SuiteResult(Result):
    """A suite (or a harness group's subtasks): the weighted average's estimate and
    interval, and a row per task (:class:`EstimateRow`, in ``tasks``)."""

    name: str = ""
    model: str | None = None
    tasks: tuple[EstimateRow, ...] = ()
    true_score: float | None = None
    covered: bool | None = None

    def _label(self) -> str:
        return f"suite={self.name!r}, tasks={len(self.tasks)}"

    def rows(self) -> list[dict[str, Any]]:
        weights = {t["task"]: t.get("weight") for t in self.data["tasks"]}
        return [{"task": t.name, "model": t.model, "weight": weights.get(t.name),
                 "estimate": t.estimate, "lower": t.lower, "upper": t.upper,
                 "items_used": t.items_used, "true_score": t.true_score,
                 "covered": t.covered} for t in self.tasks]

    def _truths(self) -> dict[str, float | None]:
        return {t.name: t.true_score for t in self.tasks}


@dataclass(frozen=True, repr=False)
class TargetsResult(Result):
    """Several models of one task evaluated jointly: a row per model
    (:class:`EstimateRow`, in ``targets``); the top-level estimate and interval are the
    first model's."""

    task: str | None = None
    targets: tuple[EstimateRow, ...] = ()

    def _label(self) -> str:
        return f"models={[t.name for t in self.targets]!r}"

    def __repr__(self) -> str:
        shown = ", ".join(f"{t.name}: {t.estimate:.4f} [{t.lower:.4f}, {t.upper:.4f}]"
                          for t in self.targets)
        return f"TargetsResult({shown}; method={self.method!r})"

    def rows(self) -> list[dict[str, Any]]:
        return [{"model": t.name, "estimate": t.estimate, "lower": t.lower,
                 "upper": t.upper, "items_used": t.items_used, "true_score": t.true_score,
                 "covered": t.covered} for t in self.targets]

    def _truths(self) -> dict[str, float | None]:
        return {t.name: t.true_score for t in self.targets}


def _show_figures_in_notebook() -> None:
    """In a Jupyter kernel, have a returned ``Figure`` drawn as PNG (what ``%matplotlib
    inline`` sets up; a figure made without pyplot is otherwise shown as text)."""
    from bayeval.evaluation.progress import in_notebook

    if not in_notebook():
        return
    from IPython import get_ipython
    from IPython.core.pylabtools import select_figure_formats

    select_figure_formats(get_ipython(), {"png"})


def _row(r: Mapping[str, Any], name_key: str) -> EstimateRow:
    return EstimateRow(str(r[name_key]), r.get("target"), float(r["estimate"]),
                       float(r["lower"]), float(r["upper"]), int(r["items_used"]),
                       r.get("true_score"), r.get("covered"))


def make_result(data: dict[str, Any], history: Sequence[tuple[str, Any]] = (),
                posterior: Any = None) -> Result:
    """The typed result of a run's ``--json`` record ``data``, with its trajectories
    ``history`` (a ``(name, rows (n, estimate, lower, upper))`` per task or model) and
    an MCMC backend's posterior."""
    traces = tuple((str(n), np.asarray(h, np.float64).reshape(-1, 4)) for n, h in history)
    common = {"level": float(data["level"]), "method": str(data["method"]),
              "stopped": data.get("stopped"), "journal": data.get("journal"),
              "data": data, "history": traces, "posterior": posterior}
    if "targets" in data:
        rows = tuple(_row(t, "target") for t in data["targets"])
        first = rows[0]
        return TargetsResult(estimate=first.estimate, lower=first.lower, upper=first.upper,
                             items_used=int(data.get("evaluations", 0)),
                             task=data.get("reference"), targets=rows, **common)
    if "tasks" in data:
        rows = tuple(_row(t, "task") for t in data["tasks"])
        models = {t.model for t in rows}
        return SuiteResult(estimate=float(data["estimate"]), lower=float(data["lower"]),
                           upper=float(data["upper"]), items_used=int(data["items_used"]),
                           name=str(data.get("suite")),
                           model=models.pop() if len(models) == 1 else None, tasks=rows,
                           true_score=data.get("true_score"), covered=data.get("covered"),
                           **common)
    return TaskResult(estimate=float(data["estimate"]), lower=float(data["lower"]),
                      upper=float(data["upper"]), items_used=int(data["items_used"]),
                      model=str(data["target"]), task=data.get("task"),
                      n_items=int(data["n_items"]),
                      documents_run=int(data.get("documents_run") or 0),
                      true_score=data.get("true_score"), covered=data.get("covered"),
                      **common)
