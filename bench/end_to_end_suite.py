"""End to end for a suite: wall-clock time to bayeval's answer on two separate harness
tasks, run as one suite on one loaded model, against the two full lm-evaluation-harness
runs of the same model, on the same machine, in one script.

The world is ``bench/end_to_end.py``'s (``bench/e2e_world.py``: local tasks, small models
of five training runs, an 85M-parameter target); the tasks are its multiple-choice
``e2e_mc`` and its generative ``e2e_gen`` with the ``among`` setting's models (the
target among 13 reference checkpoints), each logged by the harness as its own reference.
Per repeat, in an order reversed every other repeat:

* ``full e2e_mc``, ``full e2e_gen``: ``lm_eval run`` on every document of the task
  (``bench/e2e_full_run.py``), one process each; their sum is what the suite is
  compared with;
* ``suite``: ``bayeval evaluate --suite FILE --evaluator lm-eval`` to the suite's answer
  (the average's interval at most ε wide, each task's interval beside it), one fresh
  process (start-up, JAX and the model's one load counted; the compile cache warmed by
  one untimed run);
* ``single e2e_mc``, ``single e2e_gen`` (``--singles``): each task alone to ε, as
  ``bench/end_to_end.py`` runs it, for the price of loading the model twice.

With ``--coverage N`` the suite and each task alone (and with ``--coverage-concurrency
K`` the suite with K evaluations in flight) are also simulated over N seeds in
process (the target's harness log on every document as the oracle; a seed's simulated run
is its live run), for each interval's coverage of the full run's score; ``--repeats 0``
does only that, the timed runs read back from ``--out``'s ``.json``.

Reported: each route's wall time per repeat and its ratio to the two full runs' sum;
each task's interval against its full run's score (held or not), documents run and the
model's loads and launches; the machine's load before each run and the cores each used.

``--server K`` adds the routes through a local completions server
(``bench/completions_server.py``, the target loaded once in the server), reached through
the harness's ``local-completions`` model with K requests in flight: ``server full
e2e_mc``, ``server full e2e_gen`` and ``server suite``, the suite compared with the sum of
the two server full runs; ``--server-only`` runs only those and keeps the in-process runs
of the last call (read from ``--out``'s ``.json``). That is how K evaluations are in flight
for the harness: in process it runs a batch's documents together (``--batch``), and
``bayeval evaluate --concurrency`` is refused for it (the command and oracle evaluators
take it).

Needs ``pip install -e '.[bench]'`` (torch and transformers); writes
docs/results/end_to_end_suite.md::

    python bench/end_to_end_suite.py --work /tmp/e2e --repeats 3 --singles
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
import end_to_end as e2e

TASKS = ("e2e_mc", "e2e_gen")
SETTING = "among"


def suite_file(work: Path, epsilon: float) -> Path:
    """The two tasks as one suite, each with its harness logs as reference."""
    path = work / "two_tasks.toml"
    lines = ["name = \"two_tasks\"", f"epsilon = {epsilon}"]
    for task in TASKS:
        lines += ["", "[[tasks]]", f"reference = \"lm-eval:{work / f'logs-{SETTING}-{task}'}\"",
                  f"task = \"{task}\""]
    path.write_text("\n".join(lines) + "\n")
    return path


def suite_run(route: e2e.Route, work: Path, args: argparse.Namespace, seed: int) -> dict:
    journal = work / f"suite-{route.name}-{seed}"
    shutil.rmtree(journal, ignore_errors=True)
    harness = " ".join(route.harness_args(work / "tasks", args.harness_batch, args.device))
    run = e2e.measured([sys.executable, "-m", "bayeval.cli", "evaluate", "--suite",
                        str(suite_file(work, args.epsilon)), "--evaluator", "lm-eval",
                        "--lm-eval-args", harness, "--target", "new", "--batch",
                        str(args.batch), "--seed", str(seed), "--journal", str(journal),
                        "--json", "-q"], e2e.environment(args.threads), work)
    return {**run, "result": json.loads(run.pop("stdout"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="working folder (shared "
                        "with bench/end_to_end.py: its world is reused)")
    e2e.run_options(parser)  # --epsilon: the average's width
    parser.add_argument("--singles", action="store_true",
                        help="also each task alone (two bayeval runs, two model loads)")
    parser.add_argument("--coverage", type=int, default=0, help="also simulate this many "
                        "seeds of the suite and of each task alone (--repeats 0: only this, "
                        "the timed runs read from --out's .json)")
    parser.add_argument("--workers", type=int, default=2, help="processes of --coverage")
    parser.add_argument("--coverage-concurrency", type=int, default=0, help="with "
                        "--coverage: also the suite with this many evaluations in flight "
                        "(the oracle's; no batches)")
    parser.add_argument("--server", type=int, default=0, help="also the routes through a "
                        "local completions server with this many requests in flight")
    parser.add_argument("--server-only", action="store_true", help="with --server: only "
                        "its routes, the in-process runs read from --out's .json")
    parser.add_argument("--out", type=Path, default=Path("docs/results/end_to_end_suite.md"))
    args = parser.parse_args()
    os.environ["BAYEVAL_E2E_DEVICE"] = args.device
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    targets = e2e.build_world(work, {"e2e_mc": args.mc, "e2e_gen": args.gen})
    route = e2e.Route("in-process", "hf", f"pretrained={targets[SETTING]}", True, "full")
    full = e2e.Route("full", "hf", f"pretrained={targets[SETTING]}", False, "full")
    cells = [e2e.Cell(SETTING, task) for task in TASKS]
    for cell in cells:
        logs = work / f"logs-{SETTING}-{cell.task}"
        if not logs.exists():
            print(f"logging the references of {cell.name} …", flush=True)
            e2e.log_references(e2e.references(work, SETTING), work / "tasks", logs,
                               cell.task, args.harness_batch, args.device)
    saved = args.out.with_suffix(".json")
    if args.repeats == 0:  # the timed runs of the last call, read back
        last = json.loads(saved.read_text())
        write(last["runs"], args, work, simulated_coverage(targets[SETTING], work, args)
              if args.coverage else None, last["machine"])
        return
    if args.server_only and not args.server:
        parser.error("--server-only needs --server K")
    kept = json.loads(saved.read_text())["runs"] if args.server_only else {}
    names = [] if args.server_only else [f"full {t}" for t in TASKS] + ["suite"] + (
        [f"single {t}" for t in TASKS] if args.singles else [])
    names += [f"server full {t}" for t in TASKS] + ["server suite"] if args.server else []
    with contextlib.ExitStack() as stack:
        served = None
        if args.server:
            from completions_server import Server

            server = stack.enter_context(Server(targets[SETTING], e2e.environment(args.threads)))
            served = e2e.Route("server", "local-completions",
                               server.model_args(work / "tokenizer", args.server), True,
                               "server full")
        # warms the compile cache, untimed
        suite_run(served if args.server_only else route, work, args, 999)
        runs = {**kept, **{n: [] for n in names}}
        for rep in range(args.repeats):
            for name in names if rep % 2 == 0 else names[::-1]:
                via = served if name.startswith("server") else route
                task = name.split()[-1]
                if name.endswith("suite"):
                    run = suite_run(via, work, args, rep)
                elif "full" in name:
                    run = e2e.full_run(via._replace(bayeval=False) if name.startswith(
                        "server") else full, e2e.Cell(SETTING, task), work, args)
                else:
                    run = e2e.bayeval_run(route, e2e.Cell(SETTING, task), work, args, rep)
                runs[name].append(run)
                print(f"repeat {rep} {name}: {run['wall']:.1f} s (load {run['load']:.2f})",
                      flush=True)
            write(runs, args, work)  # after every repeat: nothing lost
    if args.coverage:
        write(runs, args, work, simulated_coverage(targets[SETTING], work, args))


def simulated_coverage(target: Path, work: Path, args: argparse.Namespace) -> dict:
    """The suite and each task alone over ``args.coverage`` seeds, simulated: the target's
    scores on every document (its harness log, made once) are the oracle, the references
    those of the live runs, every other setting the live runs' (a seed's simulated run
    picks the documents its live run picks). Coverage of each interval of the full run's
    score (the oracle's mean), ± its binomial SE, and the mean items."""
    import numpy as np

    from bayeval.data import read_lm_eval_samples
    from bayeval.data.io import write_npz
    from bayeval.evaluation import TaskSettings
    from bayeval.experiments.units import Executor, Unit, run_units

    tasks = []
    for task in TASKS:
        logs = work / f"oracle-{SETTING}-{task}"
        if not logs.exists():
            print(f"logging the target on every document of {task} …", flush=True)
            shutil.copytree(work / f"logs-{SETTING}-{task}", logs)
            e2e.log_references([target], work / "tasks", logs, task, args.harness_batch,
                               args.device)
        matrix = work / f"oracle-{SETTING}-{task}.npz"  # read once, not at every seed
        write_npz(read_lm_eval_samples(logs, task), matrix)
        tasks.append(TaskSettings(reference=str(matrix), name=task))
    # the benches' pool: one worker per core, pinned (two JAX processes unpinned on two
    # cores each ran a quarter slower here: 0.43 s per simulated suite run, 0.35 s pinned)
    step = -(-args.coverage // args.workers)
    units = [Unit("end_to_end_suite", "coverage", "seeds", first,
                  min(first + step, args.coverage)) for first in range(0, args.coverage, step)]
    data = {"tasks": tuple(tasks), "target": str(target), "epsilon": args.epsilon,
            "batch": args.batch, "concurrency": args.coverage_concurrency}
    rows = pd.concat(run_units(units, _simulated, data, None, Executor(workers=args.workers)))
    runs = {name: list(zip(g["held"], g["items"], g["error"], strict=True))
            for name, g in rows.groupby("interval", sort=False)}
    out = {}
    for name, done in runs.items():
        held, items, error = (np.array(x) for x in zip(*done, strict=True))
        # by the items the run gave this interval's task: does the count follow the
        # estimate's luck (an allocation or stop that reads the sample's variance)?
        by_items = {int(n): {"runs": int((items == n).sum()),
                             "coverage": float(held[items == n].mean()),
                             "mean_error": float(error[items == n].mean()),
                             "above": int(((error > 0) & ~held)[items == n].sum()),
                             "below": int(((error < 0) & ~held)[items == n].sum())}
                    for n in np.unique(items)}
        out[name] = {"runs": len(held), "coverage": float(held.mean()),
                     "se": float(held.std() / np.sqrt(len(held))),
                     "items": float(items.mean()), "by_items": by_items}
    return out


def _simulated(unit, data: dict) -> pd.DataFrame:
    """(interval, held, items, error) of the suite's and each task's run for every seed
    of ``unit`` (seeds ``unit.first`` up to ``unit.last``), a row each."""
    import bayeval
    from bayeval.evaluation import EvaluatorOptions, RunSettings

    bayeval.enable_float64()
    tasks, target = data["tasks"], data["target"]
    oracle = EvaluatorOptions(kind="oracle", batch=data["batch"])
    out = []

    def tally(name: str, row: dict) -> None:
        truth = row["true_score"]
        out.append((name, bool(row["lower"] <= truth <= row["upper"]), row["items_used"],
                    row["estimate"] - truth))

    for seed in range(unit.first, unit.last):
        suite = bayeval.evaluate(RunSettings(tasks=tasks, evaluator=oracle, model=target,
                                             epsilon=data["epsilon"], seed=seed),
                                 progress=False)
        tally("suite: average", suite)
        for row, task in zip(suite["tasks"], TASKS, strict=True):
            tally(f"suite: {task}", row)
        if data.get("concurrency", 0) > 1:  # the suite with K items in flight, no batches
            k = data["concurrency"]
            flying = bayeval.evaluate(RunSettings(
                tasks=tasks, evaluator=EvaluatorOptions(kind="oracle", concurrency=k),
                model=target, epsilon=data["epsilon"], seed=seed), progress=False)
            tally(f"suite, concurrency {k}: average", flying)
            for row, task in zip(flying["tasks"], TASKS, strict=True):
                tally(f"suite, concurrency {k}: {task}", row)
        for one, task in zip(tasks, TASKS, strict=True):
            tally(f"single: {task}", bayeval.evaluate(RunSettings(
                tasks=(one,), evaluator=oracle, model=target, epsilon=data["epsilon"],
                seed=seed), progress=False))
        if (seed - unit.first + 1) % 100 == 0:
            print(f"simulated {seed - unit.first + 1} of seeds {unit.first}–{unit.last - 1}",
                  flush=True)
    return pd.DataFrame(out, columns=["interval", "held", "items", "error"])


def write(runs: dict[str, list[dict]], args: argparse.Namespace, work: Path,
          coverage: dict | None = None, machine: dict | None = None) -> None:
    reps = len(runs["suite"])
    full_sum = [sum(runs[f"full {t}"][r]["wall"] for t in TASKS) for r in range(reps)]
    truth = {t: runs[f"full {t}"][0]["score"] for t in TASKS}
    machine = machine or {"cores": os.cpu_count(), "cpu": e2e._cpu_name(),
                          "python": platform.python_version(), "packages": e2e._versions()}
    lines = [
        "# End to end for a suite: two harness tasks on one loaded model against their two "
        "full runs", "",
        f"`python bench/end_to_end_suite.py --work DIR --repeats {args.repeats or reps} --threads "
        f"{args.threads} --device {args.device} --mc {args.mc} --gen {args.gen} --epsilon "
        f"{args.epsilon}{' --singles' if args.singles else ''}"
        f"{f' --server {args.server}' if args.server else ''}"
        f"{' --server-only' if args.server_only else ''}` — {machine['cores']} cores "
        f"({machine['cpu']}), {args.threads} model thread(s) per process; "
        + ", ".join(f"{k} {v}" for k, v in machine["packages"].items()) + ".", "",
        f"Tasks e2e_mc (multiple choice, {args.mc} documents) and e2e_gen (generative, "
        f"{args.gen}) of `bench/e2e_world.py`, the `{SETTING}` setting: the 85M-parameter "
        "target among 13 reference checkpoints, each task's references logged by the harness. "
        f"The suite: the two tasks' average to a 95% interval at most {args.epsilon} wide, "
        f"bayeval batches of {args.batch}, the harness's batch size {args.harness_batch} in "
        "every run. Each run is a fresh process; the routes alternate, the order reversed "
        "every other repeat, each bayeval run with its own seed (the repeat's)."
        + (" The in-process routes' runs are the previous call's (read from the .json); "
           "this call ran the server routes." if args.server_only else ""), "",
        "## Time to the answer", "",
        "| route | wall s, median [range] | × the two full runs' sum (per repeat) | load "
        "before | cores used |", "|---|---|---|---|---|"]
    served = "server suite" in runs
    server_sum = [sum(runs[f"server full {t}"][r]["wall"] for t in TASKS)
                  for r in range(len(runs["server suite"]))] if served else []
    for name, done in runs.items():
        walls = [r["wall"] for r in done]
        base = server_sum if name.startswith("server") else full_sum
        ratios = [w / s for w, s in zip(walls, base, strict=False)]
        lines.append(
            f"| {name} | {statistics.median(walls):.1f} [{min(walls):.1f}, {max(walls):.1f}] "
            f"| {statistics.median(ratios):.2f} ({e2e._fmt(ratios)}) | "
            f"{e2e._fmt([r['load'] for r in done])} | "
            f"{e2e._fmt([r['cores_used'] for r in done])} |")
    lines.append(f"| full runs' sum | {statistics.median(full_sum):.1f} [{min(full_sum):.1f}, "
                 f"{max(full_sum):.1f}] | 1.00 | – | – |")
    if served:
        lines.append(f"| server full runs' sum | {statistics.median(server_sum):.1f} "
                     f"[{min(server_sum):.1f}, {max(server_sum):.1f}] | 1.00 (the server "
                     "routes' base) | – | – |")
    if args.singles:
        singles = [sum(runs[f"single {t}"][r]["wall"] for t in TASKS) for r in range(reps)]
        ratios = [w / s for w, s in zip(singles, full_sum, strict=True)]
        lines.append(f"| singles' sum | {statistics.median(singles):.1f} [{min(singles):.1f}, "
                     f"{max(singles):.1f}] | {statistics.median(ratios):.2f} "
                     f"({e2e._fmt(ratios)}) | – | – |")
    lines += ["", "## Each task's interval against its full run", "",
              "| repeat | task | full run's score | suite: estimate [95% interval] | held | "
              "documents run / N | single: estimate [95% interval] | held | documents run |",
              "|---|---|---|---|---|---|---|---|---|"]
    held = {t: 0 for t in TASKS}
    for r, run in enumerate(runs["suite"]):
        result = run["result"]
        for row, task in zip(result["tasks"], TASKS, strict=True):
            ok = row["lower"] <= truth[task] <= row["upper"]
            held[task] += ok
            cells = [f"{row['estimate']:.3f} [{row['lower']:.3f}, {row['upper']:.3f}]",
                     "yes" if ok else "**no**",
                     f"{row.get('documents_run', row['items_used'])} / {row['n_items']}"]
            if args.singles:
                one = runs[f"single {task}"][r]["result"]
                fine = one["lower"] <= truth[task] <= one["upper"]
                cells += [f"{one['estimate']:.3f} [{one['lower']:.3f}, {one['upper']:.3f}]",
                          "yes" if fine else "**no**", str(one["documents_run"])]
            else:
                cells += ["–", "–", "–"]
            lines.append(f"| {r} | {task} | {truth[task]:.3f} | " + " | ".join(cells) + " |")
    avg = sum(truth.values()) / len(TASKS)
    lines += ["", "| repeat | average: estimate [95% interval] | full runs' average | held | "
              "models loaded | harness launches |", "|---|---|---|---|---|---|"]
    for r, run in enumerate(runs["suite"]):
        result = run["result"]
        ok = result["lower"] <= avg <= result["upper"]
        lines.append(f"| {r} | {result['estimate']:.3f} [{result['lower']:.3f}, "
                     f"{result['upper']:.3f}] | {avg:.3f} | {'yes' if ok else '**no**'} | "
                     f"{result.get('harness_models_loaded')} | "
                     f"{result.get('harness_launches')} |")
    lines += ["", "Tasks' intervals held: " + ", ".join(
        f"{t} {held[t]}/{reps}" for t in TASKS) + "."]
    if served:
        lines += ["", f"Through the server ({args.server} requests in flight): each task's "
                  "interval against its server full run's score", "",
                  "| repeat | task | server full run's score | suite: estimate [95% interval] "
                  "| held | documents run / N |", "|---|---|---|---|---|---|"]
        for r, run in enumerate(runs["server suite"]):
            for row, task in zip(run["result"]["tasks"], TASKS, strict=True):
                score = runs[f"server full {task}"][0]["score"]
                ok = row["lower"] <= score <= row["upper"]
                lines.append(f"| {r} | {task} | {score:.3f} | {row['estimate']:.3f} "
                             f"[{row['lower']:.3f}, {row['upper']:.3f}] | "
                             f"{'yes' if ok else '**no**'} | "
                             f"{row.get('documents_run', row['items_used'])} / "
                             f"{row['n_items']} |")
    saved = args.out.with_suffix(".json")
    if coverage is None and saved.exists():  # a rerun without --coverage keeps the last
        coverage = json.loads(saved.read_text()).get("coverage")
    if coverage:
        lines += ["", "## Coverage over many seeds", "",
                  f"`--coverage {next(iter(coverage.values()))['runs']}`: the same runs "
                  "simulated in process, seeds 0, 1, …, the target's harness log on every "
                  "document as the oracle (a seed's simulated run picks the documents its "
                  "live run picked, so the live runs above are its first seeds). Coverage "
                  "of the full run's score ± its binomial SE:", "",
                  "| interval | runs | coverage ± SE | mean items |", "|---|---|---|---|"]
        lines += [f"| {name} | {c['runs']} | {c['coverage']:.3f} ± {c['se']:.3f} | "
                  f"{c['items']:.1f} |" for name, c in coverage.items()]
        low = [f"{name} ({c['coverage']:.3f} ± {c['se']:.3f})"
               for name, c in coverage.items() if c["coverage"] < 0.94]
        lines += ["", "Below 0.94: " + (", ".join(low) if low else "none") + "."]
        for name, c in coverage.items():
            if not name.startswith("suite: e2e") or "by_items" not in c:
                continue
            lines += ["", f"{name}, by the items the suite gave the task (the count "
                      "follows the estimate's luck through the widths the allocation and "
                      "the stop read; other allocations and independent runs: "
                      "docs/results/suite_allocation.md):", "",
                      "| items | runs | coverage | mean error | misses above / below |",
                      "|---|---|---|---|---|"]
            lines += [f"| {n} | {b['runs']} | {b['coverage']:.3f} | {b['mean_error']:+.4f} | "
                      f"{b['above']} / {b['below']} |" for n, b in c["by_items"].items()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    saved.write_text(json.dumps(
        {"machine": machine, "runs": {k: [{**r, "item_scores": None} for r in v]
                                      for k, v in runs.items()},
         "coverage": coverage}, indent=1, default=str))
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
