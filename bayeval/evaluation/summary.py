"""A result as a person reads it: the fields and tables ``bayeval`` prints, as values.

Every command's result is a dict (what ``--json`` prints). :func:`summary` turns the
result of :func:`bayeval.evaluate` into a :class:`Summary` (a list of ``field: text``
rows, or a table with a title and lines under it); the command line renders it as a
Rich table, ``print(summary(result))`` shows it as plain text in a notebook or a log.
:func:`selection_summary`, :func:`subset_summary` and :func:`subset_estimate_summary` do
the same for ``select``, ``compress`` and ``estimate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bayeval.evaluation.options import EvaluatorKind

__all__ = ["Summary", "selection_summary", "subset_estimate_summary", "subset_summary",
           "summary", "time_rows"]


@dataclass(frozen=True)
class Summary:
    """What a result shows. ``headers`` None: ``rows`` are ``(field, text)`` pairs; else a
    table of ``rows`` under ``headers`` (its first column names: a model, a task; the
    ``wrap`` columns are free text). ``lines`` follow it. A field named ``warning`` is one
    the reader must not miss.

    Printed with Rich (``rich.print(summary)``, the command line), no cell is ever cut:
    the first column (names) is never broken, numbers never wrapped, ``wrap`` columns
    wrap at spaces; where the console is too narrow for the unbreakable cells the table
    is printed as records (the name, then ``header: value`` lines); a field's value
    longer than the line breaks across lines. Text is shown as it is (a bracket in a
    path is no markup)."""

    rows: list[tuple[str, ...]]
    headers: tuple[str, ...] | None = None
    title: str | None = None
    lines: list[str] = field(default_factory=list)
    wrap: tuple[str, ...] = ()

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        if self.headers is None:
            yield _fields(self.rows)
        elif _width_needed(self.headers, self.rows, self.wrap) <= options.max_width:
            yield _table(self.headers, self.rows, self.title, self.wrap)
        else:
            if self.title:
                yield Text(self.title, style="italic")
            for row in self.rows:
                yield Text(f"{self.headers[0]}: {row[0]}", style="bold")
                for header, cell in zip(self.headers[1:], row[1:], strict=True):
                    if cell:
                        yield Text(f"  {header}: {cell}")
        for line in self.lines:
            yield Text(line)

    def __str__(self) -> str:
        out = [self.title] if self.title else []
        if self.headers is None:
            wide = max((len(r[0]) for r in self.rows), default=0)
            out += [f"{name:<{wide}}  {text}" for name, text in self.rows]
        else:
            cells = [self.headers, *self.rows]
            widths = [max(len(row[k]) for row in cells) for k in range(len(self.headers))]
            out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                    for row in cells]
        return "\n".join([*out, *self.lines])


def _fields(rows: list[tuple[str, ...]]) -> Any:
    """Two columns: bold field names, then values (a path longer than the line breaks,
    never cut)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, text in rows:
        table.add_row(Text(name, style="yellow") if name == "warning" else Text(name),
                      Text(str(text)))
    return table


def _table(headers: tuple[str, ...], rows: list[tuple[str, ...]], title: str | None,
           wrap: tuple[str, ...]) -> Any:
    """The table: columns of words (the first, and those whose cells start with a
    letter) left-aligned, numbers right-aligned."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for k, header in enumerate(headers):
        cells = [header, *(row[k] for row in rows)]
        words = k == 0 or header in wrap or all(c[:1].isalpha() for c in cells[1:] if c)
        table.add_column(header, justify="left" if words else "right",
                         no_wrap=header not in wrap,
                         overflow="fold" if header in wrap else "ellipsis",
                         min_width=min(max(map(len, cells)), 60) if k == 0 else None)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def _width_needed(headers: tuple[str, ...], rows: list[tuple[str, ...]],
                  wrap: tuple[str, ...]) -> int:
    """The columns a table needs with no cell cut: each column's longest cell (its
    header included), the longest word for a column that wraps, two spaces between."""
    widths = []
    for k, header in enumerate(headers):
        cells = [header, *(row[k] for row in rows)]
        pieces = [w for c in cells for w in c.split()] if header in wrap else cells
        widths.append(max(map(len, pieces), default=0))
    return sum(widths) + 2 * (len(headers) - 1)


def summary(result: dict[str, Any]) -> Summary:
    """The result of :func:`bayeval.evaluate` (one target, several, or a suite) as shown."""
    if "tasks" in result:
        return _suite(result)
    if "targets" in result:
        return _joint(result)
    return _single(result)


def _interval(r: dict[str, Any]) -> str:
    return f"[{r['lower']:.4f}, {r['upper']:.4f}]"


def _truth(r: dict[str, Any], outside: str = " (OUTSIDE)") -> str:
    return "" if r["true_score"] is None else (
        f"{r['true_score']:.4f}" + ("" if r["covered"] else outside))


def _single(r: dict[str, Any]) -> Summary:
    rows = [("target", r["target"]),
            ("reference", f"{r['reference']} ({r['reference_models']} models × "
                          f"{r['n_items']} items)"),
            ("method", f"{r['method']} {r['params']}"),
            ("estimate", f"{r['estimate']:.4f}"),
            (f"{r['level']:.0%} interval",
             f"{_interval(r)}  (width {r['upper'] - r['lower']:.4f})")]
    if r.get("reference_row_score") is not None:
        rows.append(("matrix row", f"{r['reference_row_score']:.4f}  (the matrix's row of "
                                   "this name: another run, not judged against)"))
    if r["true_score"] is not None:
        inside = "inside" if r["covered"] else "OUTSIDE"
        rows.append(("true score", f"{r['true_score']:.4f}  ({inside} the interval)"))
    rows.append(("items used", _items_used(r)))
    live = r.get("evaluator") != EvaluatorKind.oracle.value
    if live and "documents_run" in r:
        again = r.get("documents_rerun") or 0
        late = r["documents_run"] - again - r["items_used"] - r["items_skipped"]
        notes = [f"{again} run again after an interruption: their first runs' scores were "
                 "never journaled"] if again else []
        if late > 0:
            notes.append(f"{late} not in the estimate: in flight when the run ended")
        rows.append(("documents run", f"{r['documents_run']}" + (
            f" ({'; '.join(notes)})" if notes else " (every one in the estimate)")))
    rs = r.get("random_items_for_width")
    if rs is not None and r["method"] != "random":
        saved = 1.0 - r["items_evaluated"] / rs if rs else 0.0
        # RS-Mean's items for this width at this estimate (sample_mean.items_for_width)
        rows.append(("random sampling", f"≈ {rs} items for this width: {abs(saved):.0%} "
                                        f"{'saved' if saved >= 0 else 'more used'}"))
    rows += [("failed", f"{f['count']}× {f['reason']}") for f in r.get("failures", [])]
    if r.get("skipped_items"):
        rows.append(("skipped items", r["skipped_items"]))
    rows += _domain_rows(r)
    if r.get("harness_launches") is not None:
        runs = "Inspect runs" if r.get("evaluator") == "inspect" else "harness runs"
        rows.append((runs, f"{r['harness_launches']} (one per batch)"))
    if live:  # a simulation's times say nothing
        rows += time_rows(r.get("times"), r["n_items"])
    for key in ("plan", "plan_revised"):
        if r.get(key):
            rows.append((key.replace("_", " "), r[key]["line"].removeprefix("plan: ")))
    if r.get("rest_whole_at") is not None:
        rows.append(("rest run whole", f"after {r['rest_whole_at']} documents: the exact "
                                       "score"))
    rows.append(("stopped by", str(r["stopped"])))
    if r["journal"]:
        rows.append(("journal", r["journal"]))
    if r.get("inspect_log"):
        rows.append(("Inspect log", f"{r['inspect_log']} (inspect view opens it)"))
    return Summary(rows)


def _items_used(r: dict[str, Any]) -> str:
    used = f"{r['items_used']} of {r['n_items']} ({r['items_used'] / r['n_items']:.1%})"
    if r.get("items_evaluated", r["items_used"]) != r["items_used"]:
        used += f" draws, {r['items_evaluated']} distinct items evaluated"
    if r["items_skipped"]:
        used += f", {r['items_skipped']} left unevaluated after failures"
    return used


def _domain_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """A model-based interval: what it rests on, and its out-of-domain check."""
    rows = []
    check = r.get("domain_check")
    if check is not None:
        rows.append(("interval", "model-based: valid if the reference models explain the "
                                 "target; domain check " + (
                                     "FLAGGED (below)" if check.get("flagged") else
                                     f"passed (shift {check.get('shift', 0):+.3f} ± "
                                     f"{check.get('shift_se', 0):.3f})")))
    if r.get("domain_warning"):
        rows.append(("warning", r["domain_warning"]))
    return rows


def time_rows(times: dict[str, Any] | None, n_items: int) -> list[tuple[str, str]]:
    """The result's time lines: the run's wall time split into the evaluator's and
    bayeval's own, and what evaluating every item one after another would take at the
    per-item time measured."""
    if not times or not times.get("items_timed"):
        return []
    rows = [("time", f"{times['wall_seconds']:.1f} s wall: evaluator "
                     f"{times['evaluator_seconds']:.1f} s over {times['items_timed']} items, "
                     f"bayeval {times['own_seconds']:.1f} s "
                     f"({times['own_seconds_per_item'] * 1e3:.0f} ms per item)")]
    if times.get("full_run_seconds") is not None:
        basis = ("packed as a full run packs the task's requests"
                 if times.get("full_run_basis") == "packed" else
                 f"at this run's {times['item_seconds_mean']:.3f} s per document")
        rows.append(("full run", f"≈ {times['full_run_seconds']:.0f} s "
                                 f"[{times['full_run_lower']:.0f}, "
                                 f"{times['full_run_upper']:.0f}] for the documents of all "
                                 f"{n_items} items, {basis} (plus a full run's start-up)"))
        saved = times.get("saved_seconds")
        if saved is not None:
            rows.append(("time saved", f"{saved:.0f} s ({saved / times['full_run_seconds']:.0%}"
                                       " of the full run's documents)" if saved >= 0 else
                         f"none: {-saved:.0f} s slower than the full run would have been"))
    return rows


def _joint(r: dict[str, Any]) -> Summary:
    """A row per target; the true score and the stop only where some target has one (a
    live run has no true score)."""
    rows = r["targets"]
    columns = {"target": [t["target"] for t in rows],
               "estimate": [f"{t['estimate']:.4f}" for t in rows],
               f"{r['level']:.0%} interval": [_interval(t) for t in rows],
               "true score": [_truth(t, " (outside)") for t in rows],
               "items": [f"{t['items_used']}/{r['n_items']}" for t in rows],
               "stopped after": ["" if t["stopped_after"] is None else
                                 f"{t['stopped_after']} evals" for t in rows]}
    columns = {k: v for k, v in columns.items() if any(v)}
    total = len(rows) * r["n_items"]
    line = (f"reference {r['reference']} ({r['reference_models']} models); "
            f"{r['evaluations']} evaluations of {total} ({r['evaluations'] / total:.1%}); "
            f"stopped: {r['stopped']}" + (f"; journal {r['journal']}" if r["journal"] else ""))
    return Summary(list(zip(*columns.values(), strict=True)), tuple(columns), lines=[line])


def _suite(r: dict[str, Any]) -> Summary:
    """A row per task and the average's (or the harness group's)."""
    title = (f"{r['group']} by subtask ({r['group_mean']}-weighted, as the harness "
             "aggregates it)" if r.get("group") else f"suite {r['suite']}")
    rows = [(t["task"], f"{t['weight']:.3f}", f"{t['estimate']:.4f}", _interval(t),
             f"{t['items_used']} of {t['n_items']}", _truth(t)) for t in r["tasks"]]
    rows.append((r.get("group") or "average", "1", f"{r['estimate']:.4f}", _interval(r),
                 f"{r['items_used']} of {r['n_items']}", _truth(r)))
    targets = sorted({t["target"] for t in r["tasks"]})
    line = (f"target {', '.join(targets)} · method {r['method']} · stopped: {r['stopped']} · "
            f"cost {r['cost']:g}" + (f" · journal {r['journal']}" if r["journal"] else ""))
    headers = ("task", "weight", "estimate", f"{r['level']:.0%} interval", "items",
               "true score")
    if r["true_score"] is None and not any(t["true_score"] is not None for t in r["tasks"]):
        headers, rows = headers[:-1], [row[:-1] for row in rows]
    return Summary(rows, headers, title, [line])


def selection_summary(r: dict[str, Any], top: int = 10) -> Summary:
    """``bayeval select``'s result: the ranking's first ``top`` rows (with the true means
    and ranks in a simulation), the evaluations used, whether the true best was found."""
    truth = "true_mean" in (r["ranking"][0] if r["ranking"] else {})
    headers = ("model", "rank", "mean", "items")
    if truth:
        headers += ("true mean", "true rank")
        true_rank = {row["model"]: k for k, row in enumerate(
            sorted(r["ranking"], key=lambda row: -row["true_mean"]), start=1)}
    rows = []
    for k, row in enumerate(r["ranking"][:top], start=1):
        cells = (row["model"], str(k), f"{row['mean']:.4f}", str(row["evaluated"]))
        if truth:
            cells += (f"{row['true_mean']:.4f}", str(true_rank[row["model"]]))
        rows.append(cells)
    pairs = r["models"] * r["items"]
    line = (f"best: {r['best']}  ·  {r['evaluations']} evaluations of {r['budget']} allowed "
            f"({r['evaluations'] / pairs:.1%} of {r['models']} models × {r['items']} items)")
    if r["skipped"]:
        line += f", {r['skipped']} left unevaluated after failures"
    lines = [line]
    if "found_best" in r:
        lines.append("the true best" if r["found_best"] else
                     f"not the true best (that is {r['true_best']})")
    lines += [f"{key}: {r[key]}" for key in ("history", "journal") if r.get(key)]
    return Summary(rows, headers, f"ranking (best first, top {top})", lines)


def subset_summary(r: dict[str, Any]) -> Summary:
    """``bayeval compress``'s result: the subset, its drift on held-out models, files."""
    drift = r["drift"]
    over = (f"over {drift['held_out_models']} models" if drift["held_out_models"] else
            f"over the {drift['in_sample_models']} models that built it (none held out: "
            "in-sample, not a measure of drift)")
    return Summary([
        ("benchmark", f"{r['benchmark']} ({r['n_items']} items)"),
        ("method", f"{r['method']} {r['parameters']}"),
        ("subset", f"{r['size']} items ({r['size'] / r['n_items']:.1%})"),
        ("drift on held-out" if drift["held_out_models"] else "drift",
         f"max {100 * drift['held_out_max']:.2f} pp, mean "
         f"{100 * drift['held_out_mean']:.2f} pp {over}"),
        ("written", r["file"] + (f", {r['samples_file']}" if r.get("samples_file") else ""))])


def subset_estimate_summary(r: dict[str, Any]) -> Summary:
    """``bayeval estimate``'s result: the estimate from a subset run, and per subtask."""
    rows = [("benchmark", f"{r['benchmark']} ({r['n_items']} items)"),
            ("subset", f"{r['method']}: {r['items']} items "
                       f"({r['items'] / r['n_items']:.1%})"),
            ("estimate", "none" if r["estimate"] is None else f"{r['estimate']:.4f}")]
    if r["lower"] is not None:
        rows.append((f"{r['level']:.0%} interval",
                     f"{_interval(r)}  (width {r['upper'] - r['lower']:.4f})"))
    rows.append(("interval", r["interval"]))
    for row in r.get("subtasks", []):
        rows.append((f"  {row['task']}", "no item in the subset" if row["estimate"] is None
                     else f"{row['estimate']:.4f}  {_interval(row)}  "
                          f"({row['items']} of {row['n_items']} items)"))
    return Summary(rows)
