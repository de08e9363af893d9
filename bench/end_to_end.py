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


def oracle_matrix(cell: Cell, target: Path, work: Path, args: argparse.Namespace) -> Path:
    """The cell's references and the target on every document, as one matrix (the target
    logged by the harness once, as the references are): the oracle of simulated runs."""
    from bayeval.data import read_lm_eval_samples
    from bayeval.data.io import write_npz

    logs = work / f"oracle-{cell.models}-{cell.task}"
    if not logs.exists():
        print(f"logging the target on every document of {cell.task} …", flush=True)
        partial = logs.with_name(logs.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(work / f"logs-{cell.models}-{cell.task}", partial)
        log_references([target], work / "tasks", partial, cell.task, args.harness_batch,
                       args.device)
        partial.rename(logs)  # whole or not at all: a cut run logs it again
    matrix = work / f"oracle-{cell.models}-{cell.task}.npz"
    write_npz(read_lm_eval_samples(logs, cell.task), matrix)
    return matrix


def simulated_coverage(cell: Cell, target: Path, work: Path, args: argparse.Namespace
                       ) -> dict:
    """The cell's bayeval run simulated over ``args.coverage`` seeds (its settings: ε, the
    batch and its default call rule; the oracle's scores in place of the model's): the
    coverage of the full run's score ± its binomial SE and the mean documents. A run
    that would have gone whole (``rest_whole``) is simulated batch by batch to its stop,
    its interval read there: the coverage of the runs as they would have been without
    that rule (a whole run's exact score always covers)."""
    from bayeval.experiments.units import Executor, Unit, run_units

    matrix = oracle_matrix(cell, target, work, args)
    step = -(-args.coverage // args.workers)
    units = [Unit("end_to_end", cell.name, "coverage", first,
                  min(first + step, args.coverage))
             for first in range(0, args.coverage, step)]
    data = {"matrix": str(matrix), "task": cell.task, "target": str(target),
            "epsilon": args.epsilon, "batch": args.batch}
    parts = run_units(units, _simulated, data, None, Executor(workers=args.workers))
    held, items = (np.concatenate([p[k] for p in parts]) for k in range(2))
    return {"runs": int(held.size), "coverage": float(held.mean()),
            "se": float(held.std() / np.sqrt(held.size)), "items": float(items.mean())}


def _simulated(unit, data: dict) -> tuple[np.ndarray, np.ndarray]:
    """(held, documents) of the runs of seeds ``unit.first`` up to ``unit.last``."""
    import bayeval
    from bayeval.evaluation import EvaluatorOptions, RunSettings, TaskSettings

    bayeval.enable_float64()
    task = TaskSettings(reference=data["matrix"], name=data["task"])
    oracle = EvaluatorOptions(kind="oracle", batch=data["batch"])
    held, items = [], []
    for seed in range(unit.first, unit.last):
        r = bayeval.evaluate(RunSettings(tasks=(task,), evaluator=oracle, model=data["target"],
                                         epsilon=data["epsilon"], seed=seed), progress=False)
        held.append(r["lower"] <= r["true_score"] <= r["upper"])
        items.append(r["items_used"])
        if (seed - unit.first + 1) % 100 == 0:
            print(f"{data['task']}: simulated {seed - unit.first + 1} of seeds "
                  f"{unit.first}–{unit.last - 1}", flush=True)
    return np.array(held), np.array(items)


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
    out.update(account(results, full))
    out["batch_sizes"] = [r.get("harness_batch_sizes") or [] for r in results]
    return out


def account(results: list[dict], full: list[dict]) -> dict:
    """What the runs said before and after (issue's plan and honest account): the plan's
    predicted documents, range, time ratio and verdict (the first run's: every run plans
    from the same reference), each run's plan revised after its first call and where it
    ran the rest whole, and each run's projected full run [interval] beside the measured
    full runs' documents time (their ``evaluate()``, start-up left out as in the
    projection)."""
    plans = [r.get("plan") for r in results]
    out: dict = {"full_documents_s": _median(r["times"]["evaluate_seconds"] for r in full)}
    if plans[0]:
        p = plans[0]
        out.update(plan_predicted=p["predicted"], plan_low=p["low"], plan_high=p["high"],
                   plan_ratio=p["time_ratio"], plan_little=p["little_saving"],
                   plan_seconds=p["seconds"])
        out["revised"] = [None if not r.get("plan_revised") else
                          r["plan_revised"]["predicted"] for r in results]
        out["rest_whole_at"] = [r.get("rest_whole_at") for r in results]
    out["projection"] = [[r["times"].get("full_run_seconds"), r["times"].get("full_run_lower"),
                          r["times"].get("full_run_upper")] for r in results]
    out["projection_basis"] = results[0]["times"].get("full_run_basis")
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
    parser.add_argument("--coverage", type=int, default=0, help="also simulate this many "
                        "seeds of each cell's bayeval run with the target's harness log on "
                        "every document as the oracle (its interval's coverage of the full "
                        "run's score at the call sizes used)")
    parser.add_argument("--workers", type=int, default=2, help="processes of --coverage")
    parser.add_argument("--out", type=Path, default=Path("docs/results/end_to_end.md"))
    parser.add_argument("--rewrite", action="store_true", help="only rewrite --out from its "
                        ".json (no runs; with --coverage and --work: add the coverage of "
                        "--cells to it)")
    parser.add_argument("--merge", help="comma-separated .json files of runs on other cells "
                        "(e.g. two processes' halves): write --out from them, no runs")
    args = parser.parse_args()
    if args.rewrite or args.merge:
        files = ([Path(x) for x in args.merge.split(",")] if args.merge
                 else [args.out.with_suffix(".json")])
        parts = [json.loads(f.read_text()) for f in files]
        rows = [r for part in parts for r in part["rows"]]
        cell_facts = [f for part in parts for f in part["facts"]]
        if args.coverage:  # the coverage of cells already timed, added to their facts
            if args.work is None:
                parser.error("--coverage with --rewrite or --merge needs --work")
            work = args.work.resolve()
            wanted = set(args.cells.split(","))
            for fact in cell_facts:
                if fact["cell"] in wanted:
                    cell = Cell(*fact["cell"].split("/"))
                    fact["coverage"] = simulated_coverage(
                        cell, work / "targets" / cell.models, work, args)
                    write(rows, cell_facts, parts[0]["machine"], args)
        write(rows, cell_facts, parts[0]["machine"], args)
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
        if args.coverage:
            fact["coverage"] = simulated_coverage(cell, target, work, args)
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
    covered = next((f["coverage"]["runs"] for f in cell_facts if f.get("coverage")), 0)
    lines = [
        "# End to end: time to bayeval's answer against a full harness run (version two)", "",
        f"`python bench/end_to_end.py --work DIR --repeats {args.repeats} --threads "
        f"{args.threads} --device {args.device} --mc {args.mc} --gen {args.gen} --large "
        f"{args.large} --small {args.small} --mixed {args.mixed}"
        f"{f' --server {args.server}' if args.server else ''}"
        f"{f' --cells {args.cells}' if args.cells != ALL_CELLS else ''}"
        f"{f' --coverage {covered}' if covered else ''}` — "
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
        "process; full and bayeval runs alternate, each bayeval run with its own seed."
        + (f" Merged from {len(args.merge.split(','))} runs of the script on disjoint "
           "cells (`--cells`, then `--merge`), run side by side, one per core: each run's "
           "load before counts the other." if args.merge else ""), "",
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
              "model's calls per call (its documents' filters and metrics included); the "
              "model's batch size in each call where bayeval set it (a CPU model's calls "
              "packed no worse per document than the full run, README).", "",
              "| cell | route | full ms/doc (model) | loop ms/doc (model) | loop / full | "
              "per-call overhead ms | outside the model ms/call | calls | build s | "
              "start-up s full / bayeval | model's batch size per call (first run) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
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
            f"{full['startup_s']:.1f} / {r['startup_s']:.1f} | "
            f"{_batch_sizes(r)} |")
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
    lines += plan_lines(rows, cell_facts)
    covered = [f for f in cell_facts if f.get("coverage")]
    if covered:
        runs = covered[0]["coverage"]["runs"]
        lines += ["", "## Coverage over many runs", "",
                  f"`--coverage {runs}`: each cell's bayeval run simulated over {runs} "
                  "seeds (0, 1, …), its settings (ε, "
                  "the batch and its default call rule), the target's harness log on every "
                  "document the oracle; a run the rule would have sent whole is read at "
                  "its stop. Coverage of the full run's score ± binomial SE; **bold**: "
                  "below 0.94.", "",
                  "| cell | runs | coverage | documents, mean |", "|---|---|---|---|"]
        for f in covered:
            c = f["coverage"]
            cov = f"{c['coverage']:.3f} ± {c['se']:.3f}"
            cov = cov if c["coverage"] >= 0.94 else f"**{cov}**"
            lines.append(f"| {f['cell']} | {c['runs']} | {cov} | {c['items']:.1f} |")
    lines += ["", f"![time ratio against the share of documents run]"
              f"({args.out.with_suffix('.png').name})", ""]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(
        {"rows": rows, "facts": cell_facts, "machine": machine}, indent=1))
    figure(rows, args.out.with_suffix(".png"))
    print(text)


def _batch_sizes(row: dict) -> str:
    """The model's batch size in each call of the row's first run: "its own" where
    bayeval set none, "–" for rows recorded before the bench kept them."""
    if "batch_sizes" not in row:
        return "–"
    first = (row["batch_sizes"] or [[]])[0]
    return ", ".join(map(str, first)) or "its own"


def _inside(fact: dict) -> bool:
    """Whether the cell's target scores inside its references' range."""
    refs = fact["reference_scores"]
    return min(refs) <= fact["target_score"] <= max(refs)


def _off(predicted: float, measured: float) -> float:
    return predicted / measured - 1.0


def plan_lines(rows: list[dict], cell_facts: list[dict]) -> list[str]:
    """The plan against the runs and the projection against the full runs, per cell, with
    the issue's tolerances: the plan's documents within ±15% of the runs' median where the
    target lies inside the references' range (±30% beyond), its verdict (a saving under
    15% of the time or not) right, the run no slower than 1.05× the full run, the
    projection within ±25% of the full run's documents time."""
    lines = ["", "## The plan before the run, the account after it", "",
             "Plan: `evaluate`'s first line (the reference's stand-ins, before any document "
             "of the target), its documents median [range], its time ratio (the share, "
             "where no costs are stated) and verdict; revised: after the first call with "
             "the target's own scores, per run; whole at: the documents after which a run "
             "ran the rest of the task whole (– none); in the plan's range: the runs' median "
             "documents within the plan's [low, high]. Off: predicted / measured − 1 "
             "against the runs' median documents (tolerance ±15% inside the references' "
             "range, ±30% beyond). Verdict right: the plan said a saving under 15% exactly "
             "when the measured median ratio is above 0.85. Projection: each run's "
             "projected full run (its documents, start-up left out) [95% interval] against "
             "the full runs' measured `evaluate()` (median); tolerance ±25%. **bold**: "
             "outside its tolerance.", "",
             "| cell | target | plan: documents [range], ratio | revised (per run) | "
             "whole at | documents run, median | in the plan's range | plan off | "
             "revised off | verdict right | × full run ≤ 1.05 | projected full run s (per "
             "run) | full run's documents s | projection off |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    facts_of = {f["cell"]: f for f in cell_facts}
    for r in rows:
        if "docs_run" not in r or r["route"] != "in-process":
            continue
        fact = facts_of.get(r["cell"])
        inside = fact is None or _inside(fact)
        tol = 0.15 if inside else 0.30
        measured = statistics.median(r["docs_run"])

        def mark(x: float, limit: float) -> str:
            text = f"{x:+.0%}"
            return text if abs(x) <= limit else f"**{text}**"

        if "plan_predicted" in r:
            plan = (f"{r['plan_predicted']} [{r['plan_low']}, {r['plan_high']}], "
                    f"{r['plan_ratio']:.2f}{' (little saving)' if r['plan_little'] else ''}")
            off = mark(_off(r["plan_predicted"], measured), tol)
            revised = ", ".join("–" if x is None else str(x) for x in r["revised"])
            known = [x for x in r["revised"] if x is not None]
            rev_off = mark(_off(statistics.median(known), measured), tol) if known else "–"
            whole = ", ".join("–" if x is None else str(x) for x in r["rest_whole_at"])
            right = "yes" if r["plan_little"] == (r["ratio"] > 1 - 0.15) else "**no**"
            within = ("yes" if r["plan_low"] <= measured <= r["plan_high"] else "**no**")
        else:
            plan = off = revised = rev_off = whole = right = within = "–"
        slow = f"{r['ratio']:.2f}" if r["ratio"] <= 1.05 else f"**{r['ratio']:.2f}**"
        proj = [p for p in r.get("projection", []) if p[0] is not None]
        projected = ", ".join(f"{a:.1f} [{lo:.1f}, {hi:.1f}]" for a, lo, hi in proj) or "–"
        proj_off = (mark(_off(statistics.median(p[0] for p in proj), r["full_documents_s"]),
                         0.25) if proj else "–")
        target = "–" if fact is None else (f"{fact['target_score']:.3f} "
                                           f"({'inside' if inside else 'beyond'})")
        lines.append(f"| {r['cell']} | {target} | {plan} | {revised} | {whole} | "
                     f"{measured:.0f} | {within} | {off} | {rev_off} | {right} | {slow} | "
                     f"{projected} | "
                     f"{r['full_documents_s']:.1f} | {proj_off} |")
    return lines


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
