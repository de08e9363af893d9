"""End to end, version two: wall-clock time to bayeval's answer against one full
lm-evaluation-harness run of the same model, on the same machine, in one script.

The world (``bench/e2e_world.py``, nothing from a hub): local harness tasks drawn from
generators, small GPT-2-style models from five training runs, and a target of 85M
parameters (a run-0 checkpoint widened to GPT-2-small size without changing its outputs),
so that documents, not start-up, dominate a full run. Three settings:

* ``among``: the target among the references (13 checkpoints of runs 1–4, early to late);
* ``better``: the target better than every reference (run 0 after 3000 steps; the 11
  references are earlier checkpoints of the other runs and of run 0, all above chance);
* ``large``: ``among``'s models on a 5,000-document multiple-choice task;
* ``small``: ``among``'s models on tasks of 500 and 300 documents, where a full run is
  short and bayeval needs most documents (where it is weak);
* ``mixed``: ``among``'s models on tasks of 500 (multiple choice) and 300 (generative)
  documents whose prompts spread over a tenfold range of lengths, as a real benchmark's
  do: the harness packs a whole task's documents by length, a batch of bayeval's draws
  holds long and short ones together (where it is weakest);

``among`` and ``better`` on a multiple-choice task (``e2e_mc``) and a generative one
(``e2e_gen``, ``max_gen_toks`` 24). Per cell the references are logged by the harness
(``--log_samples``); then full runs and bayeval runs alternate, ``--repeats`` times, the
order reversed every other repeat, each bayeval run with its own seed (the repeat's):

* ``full``: ``lm_eval run`` on every document (``bench/e2e_full_run.py``: the harness's
  own command line, which also records its start-up, its ``evaluate()`` and its model's
  calls);
* ``in-process``: ``bayeval evaluate --evaluator lm-eval`` to the ε answer, a fresh process
  (start-up and JAX counted; the compile cache warmed by one untimed run per cell);
* with ``--server K``: the target behind a local completions server
  (``bench/completions_server.py``), reached through the harness's ``local-completions``
  model with K concurrent requests, a full run and bayeval's run against the same server.

Every process gets the same thread count (``--threads``, OMP_NUM_THREADS) and the same
harness batch size. Reported per cell and route: wall time, median [range], and its ratio
to the full run's median; documents run and items used; the interval and whether it holds
the full run's score in each repeat; per document, the cost in the full run
(``evaluate()`` / documents, and its model calls alone) and in bayeval's loop (the
evaluator's time / documents run, and its model calls alone); bayeval's per-call overhead
(evaluator time outside the model's calls, per call); the machine's load (1-minute load
average before each run, and each run's CPU seconds per wall second). A figure puts each
run's time ratio against the share of documents it ran, with each cell's line
(start-ups and per-document costs as measured): when bayeval is worth it.

Needs ``pip install -e '.[bench]'`` (torch and transformers)::

    python bench/end_to_end.py --work /tmp/e2e --repeats 3          # docs/results/end_to_end.md
    python bench/end_to_end.py --work /tmp/e2e --device cuda        # where a GPU is lent
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import e2e_world as world

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "TRANSFORMERS_VERBOSITY": "error"}
FULL_RUN = Path(__file__).parent / "e2e_full_run.py"
METRIC = {"mc": "acc", "gen": "exact_match"}
CELLS = [("among", "e2e_mc"), ("among", "e2e_gen"), ("better", "e2e_mc"),
         ("better", "e2e_gen"), ("large", "e2e_mc_large"), ("small", "e2e_mc_small"),
         ("small", "e2e_gen_small"), ("mixed", "e2e_mc_mixed"), ("mixed", "e2e_gen_mixed")]


ALL_CELLS = ",".join(f"{setting}/{task}" for setting, task in CELLS)


class Route(NamedTuple):
    """How the target is run: the harness's model and arguments, and whether bayeval runs
    it (False: the full run); ``full``: the full run this route is compared with."""

    name: str
    model: str
    model_args: str
    bayeval: bool
    full: str

    def harness_args(self, tasks: Path, batch: int, device: str) -> list[str]:
        extra = ["--device", device] if self.model == "hf" else []
        return ["--model", self.model, "--model_args", self.model_args, "--include_path",
                str(tasks), "--batch_size", str(batch), *extra]


class Cell(NamedTuple):
    setting: str
    task: str

    @property
    def models(self) -> str:  # the settings whose models the cell uses
        return "better" if self.setting == "better" else "among"

    @property
    def name(self) -> str:
        return f"{self.setting}/{self.task}"


def environment(threads: int) -> dict[str, str]:
    return {**os.environ, **OFFLINE, "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads)}


def measured(argv: list[str], env: dict[str, str], cwd: Path) -> dict:
    """Run ``argv``: its wall seconds, the 1-minute load average before it, its CPU
    seconds per wall second, and its output."""
    load = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - began
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({done.returncode}): {done.stderr[-1500:]}")
    return {"wall": wall, "load": load, "cores_used": cpu / wall, "stdout": done.stdout}


def build_world(work: Path, sizes: dict[str, int]) -> dict[str, Path]:
    """Tasks, tokenizer, training runs and each setting's widened target (kept in
    ``work``): {setting: target path}."""
    tasks, tok, models = work / "tasks", work / "tokenizer", work / "models"
    if not all((tasks / f"{t}.yaml").exists() for t in sizes):
        world.make_tasks(tasks, sizes)
    if not tok.exists():
        world.make_tokenizer(tok)
    world.train_runs(tok, models)
    targets = {}
    for setting, (step, _) in world.SETTINGS.items():
        path = work / "targets" / setting
        if not path.exists():
            params = world.widen(world.checkpoint(models, 0, step), path)
            print(f"target of {setting}: run 0 after {step} steps, widened to {params:,} "
                  "parameters", flush=True)
        targets[setting] = path
    return targets


def references(work: Path, setting: str) -> list[Path]:
    return [world.checkpoint(work / "models", s, t) for s, t in world.SETTINGS[setting][1]]


def log_references(models: list[Path], tasks: Path, logs: Path, task: str, batch: int,
                   device: str) -> None:
    """The reference models' harness logs (in this process: one harness start)."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    for path in models:
        tracker = EvaluationTracker(output_path=str(logs))
        result = simple_evaluate(model="hf", model_args=f"pretrained={path}", tasks=[task],
                                 log_samples=True, task_manager=manager, batch_size=batch,
                                 device=device, evaluation_tracker=tracker)
        samples = result.pop("samples")
        tracker.save_results_aggregated(results=result, samples=samples)
        tracker.save_results_samples(task_name=task, samples=samples[task])


def full_run(route: Route, cell: Cell, work: Path, args: argparse.Namespace) -> dict:
    out, times = work / "full", work / "full-times.json"
    shutil.rmtree(out, ignore_errors=True)
    run = measured([sys.executable, str(FULL_RUN), str(times), "run", "--tasks", cell.task,
                    *route.harness_args(work / "tasks", args.harness_batch, args.device),
                    "--log_samples", "--output_path", str(out)],
                   environment(args.threads), work)
    [samples] = out.rglob(f"samples_{cell.task}_*.jsonl")
    metric = METRIC[world.kind(cell.task)]
    scores = [float(json.loads(x)[metric]) for x in samples.read_text().splitlines()]
    return {**run, "score": float(np.mean(scores)), "item_scores": scores,
            "times": json.loads(times.read_text())}


def bayeval_run(route: Route, cell: Cell, work: Path, args: argparse.Namespace, seed: int
                ) -> dict:
    journal = work / f"run-{cell.setting}-{cell.task}-{seed}.jsonl"
    journal.unlink(missing_ok=True)
    harness = " ".join(route.harness_args(work / "tasks", args.harness_batch, args.device))
    run = measured([sys.executable, "-m", "bayeval.cli", "evaluate", "--reference",
                    f"lm-eval:{work / f'logs-{cell.models}-{cell.task}'}", "--task",
                    cell.task, "--evaluator", "lm-eval", "--lm-eval-args", harness,
                    "--target", "new", "--epsilon", str(args.epsilon), "--batch",
                    str(args.batch), "--seed", str(seed), "--journal", str(journal), "--json",
                    "-q"], environment(args.threads), work)
    return {**run, "result": json.loads(run.pop("stdout"))}


def time_cell(cell: Cell, routes: list[Route], work: Path, args: argparse.Namespace
              ) -> tuple[list[dict], dict]:
    """Every route on one cell, ``args.repeats`` times, alternating the order: the
    rows of the report, and the cell's facts (sizes, the references' scores)."""
    logs = work / f"logs-{cell.models}-{cell.task}"
    if not logs.exists():
        print(f"logging the references of {cell.name} …", flush=True)
        log_references(references(work, cell.models), work / "tasks", logs, cell.task,
                       args.harness_batch, args.device)
    bayeval_run(routes[1], cell, work, args, 999)  # warms the compile cache, untimed
    runs: dict[str, list[dict]] = {r.name: [] for r in routes}
    for rep in range(args.repeats):
        for route in routes if rep % 2 == 0 else routes[::-1]:
            run = (bayeval_run(route, cell, work, args, rep) if route.bayeval
                   else full_run(route, cell, work, args))
            runs[route.name].append(run)
            print(f"{cell.name} repeat {rep} {route.name}: {run['wall']:.1f} s", flush=True)
    return [row(cell, route, runs) for route in routes], facts(cell, work, runs)


def facts(cell: Cell, work: Path, runs: dict[str, list[dict]]) -> dict:
    """The cell's target score, the references' scores and how well their mean predicts
    the target's documents (the per-item signal the estimate can use)."""
    from bayeval.data import read_lm_eval_samples

    reference = read_lm_eval_samples(work / f"logs-{cell.models}-{cell.task}", cell.task)
    target = np.array(runs["full"][0]["item_scores"])
    doc_ids = [int(i.rsplit("-", 1)[1]) for i in reference.items]
    mean = np.nanmean(reference.scores, axis=0)
    return {"cell": cell.name, "documents": reference.n_items,
            "target_score": float(target.mean()),
            "reference_scores": [float(x) for x in np.nanmean(reference.scores, axis=1)],
            "signal": float(np.corrcoef(mean, target[doc_ids])[0, 1])}


def _median(values) -> float:
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else float("nan")


def row(cell: Cell, route: Route, runs: dict[str, list[dict]]) -> dict:
    done, full = runs[route.name], runs[route.full]
    walls = [r["wall"] for r in done]
    truth = full[0]["score"]
    out = {"cell": cell.name, "setting": cell.setting, "task": cell.task,
           "route": route.name, "repeats": len(done), "wall_median": _median(walls),
           "wall_min": min(walls), "wall_max": max(walls),
           "ratio": _median(walls) / _median(r["wall"] for r in full),
           "ratios": [w / f["wall"] for w, f in zip(walls, full, strict=True)],
           "load": [r["load"] for r in done], "cores_used": [r["cores_used"] for r in done],
           "truth": truth}
    if not route.bayeval:
        n = len(done[0]["item_scores"])
        out.update(documents=n, ms_per_doc=1e3 * _median(
            r["times"]["evaluate_seconds"] / n for r in done),
            model_ms_per_doc=1e3 * _median(r["times"].get("model_seconds", 0) / n
                                           for r in done),
            startup_s=_median(r["times"]["startup_seconds"] for r in done))
        return out
    results = [r["result"] for r in done]
    docs = [r["documents_run"] for r in results]
    n = results[0]["n_items"]
    full_per_doc = _median(r["times"]["evaluate_seconds"] / n for r in full)
    out.update(
        documents=results[0]["n_items"], docs_run=docs,
        items_used=[r["items_used"] for r in results],
        share=_median(d / results[0]["n_items"] for d in docs),
        width=_median(r["upper"] - r["lower"] for r in results),
        estimates=[r["estimate"] for r in results],
        intervals=[[r["lower"], r["upper"]] for r in results],
        covered=sum(r["lower"] <= truth <= r["upper"] for r in results),
        ms_per_doc=1e3 * _median(r["times"]["evaluator_seconds"] / d
                                 for r, d in zip(results, docs, strict=True)),
        model_ms_per_doc=1e3 * _median(r["harness_model_seconds"] / d
                                       for r, d in zip(results, docs, strict=True)),
        # a call's cost beyond its documents at the full run's price per document
        call_overhead_ms=1e3 * _median(
            (r["times"]["evaluator_seconds"] - d * full_per_doc) / r["harness_launches"]
            for r, d in zip(results, docs, strict=True)),
        # the evaluator's time outside the model's calls (its documents' scoring too)
        outside_model_ms_per_call=1e3 * _median(
            (r["times"]["evaluator_seconds"] - r["harness_model_seconds"])
            / r["harness_launches"] for r in results),
        calls=_median(r["harness_launches"] for r in results),
        build_s=_median(r["harness_build_seconds"] for r in results),
        own_ms_per_item=1e3 * _median(r["times"]["own_seconds_per_item"] for r in results),
        loop_s=_median(r["times"]["wall_seconds"] for r in results),
        startup_s=_median(w - r["times"]["wall_seconds"]
                          for w, r in zip(walls, results, strict=True)))
    return out


def break_even(full: dict, ours: dict) -> dict:
    """The cell's time ratio as a function of the share s of documents bayeval runs,
    from the measured start-ups and per-document costs: r(s) = (S_b + s N c_loop + own) /
    (S_f + N c_full) with S the wall time outside the documents; and s* where r = 1."""
    n = ours["documents"]
    fixed_full = full["wall_median"] - n * full["ms_per_doc"] / 1e3
    per_doc = (ours["ms_per_doc"] + ours["own_ms_per_item"]) / 1e3
    fixed_ours = ours["wall_median"] - ours["share"] * n * per_doc
    return {"fixed_full": fixed_full, "fixed_ours": fixed_ours, "per_doc_full":
            full["ms_per_doc"] / 1e3, "per_doc_ours": per_doc,
            "share_break_even": (full["wall_median"] - fixed_ours) / (n * per_doc)}


def run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run that this bench and ``bench/end_to_end_suite.py`` share."""
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=32, help="bayeval's --batch")
    parser.add_argument("--harness-batch", type=int, default=32,
                        help="the harness's --batch_size (the same in every route)")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of each process's model (OMP_NUM_THREADS)")
    parser.add_argument("--device", default="cpu", help="the model's device (cuda on a GPU)")
    parser.add_argument("--mc", type=int, default=1000, help="documents of e2e_mc")
    parser.add_argument("--gen", type=int, default=1000, help="documents of e2e_gen")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="working folder (required)")
    run_options(parser)
    parser.add_argument("--large", type=int, default=5000, help="documents of e2e_mc_large")
    parser.add_argument("--small", default="500,300",
                        help="documents of e2e_mc_small and e2e_gen_small")
    parser.add_argument("--mixed", default="500,300",
                        help="documents of e2e_mc_mixed and e2e_gen_mixed (prompts of "
                        "mixed length)")
    parser.add_argument("--cells", default=ALL_CELLS,
                        help="setting/task cells to run")
    parser.add_argument("--server", type=int, default=0, help="also the server route with "
                        "this many concurrent requests (among and better cells)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/end_to_end.md"))
    parser.add_argument("--rewrite", action="store_true", help="only rewrite --out from its "
                        ".json (no runs)")
    args = parser.parse_args()
    if args.rewrite:
        saved = json.loads(args.out.with_suffix(".json").read_text())
        write(saved["rows"], saved["facts"], saved["machine"], args)
        return
    if args.work is None:
        parser.error("--work is required")
    os.environ["BAYEVAL_E2E_DEVICE"] = args.device
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    small_mc, small_gen = (int(x) for x in args.small.split(","))
    mixed_mc, mixed_gen = (int(x) for x in args.mixed.split(","))
    targets = build_world(work, {"e2e_mc": args.mc, "e2e_gen": args.gen,
                                 "e2e_mc_large": args.large, "e2e_mc_small": small_mc,
                                 "e2e_gen_small": small_gen, "e2e_mc_mixed": mixed_mc,
                                 "e2e_gen_mixed": mixed_gen})
    machine = {"cores": os.cpu_count(), "cpu": _cpu_name(), "python": platform.python_version(),
               "threads": args.threads, "device": args.device, "packages": _versions()}
    rows, cell_facts = [], []
    for name in args.cells.split(","):
        cell = Cell(*name.split("/"))
        target = targets[cell.models]
        routes = [Route("full", "hf", f"pretrained={target}", False, "full"),
                  Route("in-process", "hf", f"pretrained={target}", True, "full")]
        if args.server and cell.setting in ("among", "better"):
            from completions_server import Server

            with Server(target, environment(args.threads)) as server:
                served = server.model_args(work / "tokenizer", args.server)
                routes += [Route("server full", "local-completions", served, False,
                                 "server full"),
                           Route("server", "local-completions", served, True, "server full")]
                more, fact = time_cell(cell, routes, work, args)
        else:
            more, fact = time_cell(cell, routes, work, args)
        rows += more
        cell_facts.append(fact)
        write(rows, cell_facts, machine, args)  # after every cell: nothing lost


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("lm_eval", "torch", "transformers", "jax", "bayeval")}


def _fmt(values: list[float], digits: int = 2) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def write(rows: list[dict], cell_facts: list[dict], machine: dict,
          args: argparse.Namespace) -> None:
    """The report (markdown), its rows (json) and its figure (png)."""
    lines = [
        "# End to end: time to bayeval's answer against a full harness run (version two)", "",
        f"`python bench/end_to_end.py --work DIR --repeats {args.repeats} --threads "
        f"{args.threads} --device {args.device} --mc {args.mc} --gen {args.gen} --large "
        f"{args.large} --small {args.small}"
        f"{f' --server {args.server}' if args.server else ''}"
        f"{f' --cells {args.cells}' if args.cells != ALL_CELLS else ''}` — "
        f"{machine['cores']} cores ({machine['cpu']}), {machine['threads']} model thread(s) "
        f"per process, device {machine['device']}; "
        + ", ".join(f"{k} {v}" for k, v in machine["packages"].items()) + ".", "",
        "The target: 85M parameters (a trained 2-layer width-128 model widened to 12 layers "
        "of width 768, same outputs), run 0 after "
        f"{world.SETTINGS['among'][0]} steps (among) and {world.SETTINGS['better'][0]} "
        f"(better); {len(world.SETTINGS['among'][1])} and {len(world.SETTINGS['better'][1])} "
        "reference checkpoints of other runs (and, in better, of run 0's early steps) "
        f"(bench/e2e_world.py). ε = {args.epsilon}, bayeval batches of {args.batch}, the "
        f"harness's batch size {args.harness_batch} in every run. Each run is a fresh "
        "process; full and bayeval runs alternate, each bayeval run with its own seed.", "",
        "## The cells", "",
        "| cell | documents | target (full run) | references' scores | corr(reference mean, "
        "target) per document |", "|---|---|---|---|---|"]
    for f in cell_facts:
        refs = f["reference_scores"]
        lines.append(f"| {f['cell']} | {f['documents']} | {f['target_score']:.3f} | "
                     f"{min(refs):.3f}–{max(refs):.3f} | {f['signal']:.2f} |")
    lines += ["", "## Time to the answer", "",
              "| cell | route | wall s, median [range] | × full run (per repeat) | documents "
              "run (items used) / N | width | covered | load before | cores used |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "docs_run" in r:
            docs = ", ".join(f"{d} ({u})" for d, u in zip(r["docs_run"], r["items_used"],
                                                          strict=True))
            docs += f" / {r['documents']}"
            width, covered = f"{r['width']:.3f}", f"{r['covered']}/{r['repeats']}"
        else:
            docs, width, covered = f"all {r['documents']}", "–", "–"
        lines.append(
            f"| {r['cell']} | {r['route']} | {r['wall_median']:.1f} [{r['wall_min']:.1f}, "
            f"{r['wall_max']:.1f}] | {r['ratio']:.2f} ({_fmt(r['ratios'])}) | {docs} | "
            f"{width} | {covered} | {_fmt(r['load'])} | {_fmt(r['cores_used'])} |")
    lines += ["", "## A document's cost", "",
              "Full run: its `evaluate()` (building every request, the model's calls, "
              "filters, metrics) per document, and the model's calls alone. bayeval's "
              "loop: the evaluator's time per document run, and the model's calls alone "
              "(the requests of every document are built once at the start: build s). "
              "Per-call overhead: what a call costs beyond its documents at the full run's "
              "price per document; outside the model: the evaluator's time outside the "
              "model's calls per call (its documents' filters and metrics included).", "",
              "| cell | route | full ms/doc (model) | loop ms/doc (model) | loop / full | "
              "per-call overhead ms | outside the model ms/call | calls | build s | "
              "start-up s full / bayeval |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "docs_run" not in r:
            continue
        full = next(x for x in rows if x["cell"] == r["cell"] and x["route"] ==
                    ("full" if r["route"] == "in-process" else "server full"))
        lines.append(
            f"| {r['cell']} | {r['route']} | {full['ms_per_doc']:.1f} "
            f"({full['model_ms_per_doc']:.1f}) | {r['ms_per_doc']:.1f} "
            f"({r['model_ms_per_doc']:.1f}) | {r['ms_per_doc'] / full['ms_per_doc']:.2f} | "
            f"{r['call_overhead_ms']:.1f} | {r['outside_model_ms_per_call']:.1f} | "
            f"{r['calls']:.0f} | {r['build_s']:.2f} | "
            f"{full['startup_s']:.1f} / {r['startup_s']:.1f} |")
    lines += ["", "## When bayeval is worth it", "",
              "From the same runs: a run's time is its fixed part (start-up, the requests' "
              "building) plus its documents times their cost, so the ratio to the full run "
              "is r(s) = (F_b + s·N·c_b) / (F_f + N·c_f) for a share s of the N documents "
              "(c_b includes bayeval's own time per item). bayeval is faster when s is below "
              "the break-even share:", "",
              "| cell | route | N | F_f s | c_f ms | F_b s | c_b ms | share run | break-even "
              "share |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "docs_run" not in r:
            continue
        full = next(x for x in rows if x["cell"] == r["cell"] and x["route"] == (
            "full" if r["route"] == "in-process" else "server full"))
        b = break_even(full, r)
        lines.append(
            f"| {r['cell']} | {r['route']} | {r['documents']} | {b['fixed_full']:.1f} | "
            f"{1e3 * b['per_doc_full']:.1f} | {b['fixed_ours']:.1f} | "
            f"{1e3 * b['per_doc_ours']:.1f} | {r['share']:.2f} | "
            f"{b['share_break_even']:.2f} |")
    lines += ["", f"![time ratio against the share of documents run]"
              f"({args.out.with_suffix('.png').name})", ""]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(
        {"rows": rows, "facts": cell_facts, "machine": machine}, indent=1))
    figure(rows, args.out.with_suffix(".png"))
    print(text)


def figure(rows: list[dict], path: Path) -> None:
    """Each bayeval run's time ratio against its share of documents, and each cell's
    line r(s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    shares = np.linspace(0, 1, 101)
    for k, r in enumerate(x for x in rows if "docs_run" in x):
        full = next(x for x in rows if x["cell"] == r["cell"] and x["route"] == (
            "full" if r["route"] == "in-process" else "server full"))
        b = break_even(full, r)
        color = f"C{k}"
        line = (b["fixed_ours"] + shares * r["documents"] * b["per_doc_ours"]) / \
            full["wall_median"]
        ax.plot(shares, line, color=color, lw=1, alpha=0.7)
        ax.scatter([d / r["documents"] for d in r["docs_run"]], r["ratios"], color=color,
                   label=f"{r['cell']} ({r['route']})", zorder=3)
    ax.axhline(1, color="k", lw=0.8, ls="--")
    ax.set_xlabel("share of the task's documents bayeval ran")
    ax.set_ylabel("wall time / full run's")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.4)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Time to the answer against a full harness run")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
