"""End to end: wall-clock time to bayeval's answer against one full lm-evaluation-harness
run, on the same machine, in one script.

The bench makes everything it needs (no hub): two local harness tasks — a 400-document
multiple-choice task (``e2e_mc``: which of four numbers is a + b) and a 200-document
generative task (``e2e_gen``: continue a counting sequence, exact match) — a word-level
tokenizer, and small GPT-2-style causal LMs trained for different numbers of steps (so
they differ in skill, and easy items are learned first by all of them). The harness logs
the reference models (``--log_samples``); then, per task and repeat, alternating the order:

* ``full``: ``lm_eval run`` on every document of the new model (the reference time);
* ``in-process``: ``bayeval evaluate --evaluator lm-eval`` (the default route: the model
  and the task loaded once, the chosen documents run in batches) to the ε answer;
* ``subprocess`` (with ``--subprocess``): the same with ``--lm-eval-mode subprocess``, one
  ``lm_eval run`` per batch.

Each bayeval run is a fresh ``bayeval`` process (its start-up and JAX compilation
counted; the compile cache is warmed by one untimed run first, as a user's second run
would find it). Reported per route: wall time (median and range over repeats), items,
the interval and whether it holds the full run's score, bayeval's own seconds per item,
and the ratio to the full run's wall time.

Needs ``pip install -e '.[bench]'`` (torch and transformers)::

    python bench/end_to_end.py --work /tmp/e2e --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "TRANSFORMERS_VERBOSITY": "error"}
DEVICE = os.environ.get("BAYEVAL_E2E_DEVICE", "cpu")  # "cuda" where one is lent
WORDS = [str(k) for k in range(200)] + ["+", "=", "next", ":", ","]


def make_tasks(folder: Path, n_mc: int, n_gen: int, seed: int = 0) -> None:
    """The two local tasks' data and YAMLs."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for _ in range(n_mc):
        a, b = (int(x) for x in rng.integers(0, 50, 2))
        wrong = set()
        while len(wrong) < 3:
            w = int(a + b + rng.choice([-3, -2, -1, 1, 2, 3]) * int(rng.integers(1, 4)))
            if w != a + b and 0 <= w < 200:
                wrong.add(w)
        choices = [str(a + b), *map(str, wrong)]
        order = rng.permutation(4)
        rows.append({"question": f"{a} + {b} =", "choices": [choices[i] for i in order],
                     "answer": int(np.flatnonzero(order == 0)[0])})
    (folder / "e2e_mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = []
    for _ in range(n_gen):
        start, step = int(rng.integers(0, 120)), int(rng.integers(1, 5))
        seq = [start + step * k for k in range(7)]
        rows.append({"prompt": "next : " + " , ".join(map(str, seq[:4])) + " ,",
                     "target": " , ".join(map(str, seq[4:]))})
    (folder / "e2e_gen.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "e2e_mc.yaml").write_text(
        "task: e2e_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {folder / 'e2e_mc.jsonl'}\ntest_split: test\n"
        "output_type: multiple_choice\ndoc_to_text: \"{{question}}\"\n"
        "doc_to_choice: \"{{choices}}\"\ndoc_to_target: \"{{answer}}\"\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n")
    (folder / "e2e_gen.yaml").write_text(
        "task: e2e_gen\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {folder / 'e2e_gen.jsonl'}\ntest_split: test\n"
        "output_type: generate_until\ndoc_to_text: \"{{prompt}}\"\n"
        "doc_to_target: \"{{target}}\"\ngeneration_kwargs:\n  until: [\"<eos>\"]\n"
        "  max_gen_toks: 12\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n"
        "    higher_is_better: true\n    ignore_case: true\n    ignore_punctuation: false\n")


def make_tokenizer(folder: Path) -> None:
    """A word-level tokenizer over the tasks' words, saved for transformers."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<eos>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>",
                                   eos_token="<eos>", pad_token="<eos>")
    fast.save_pretrained(str(folder))


def train_models(tasks: Path, tok_dir: Path, out: Path, noise: list[float], width: int,
                 layers: int, steps: int) -> list[Path]:
    """One GPT-2-style model trained on the tasks' own answers for ``steps`` steps, then
    one copy per ``noise`` scale with Gaussian noise of that scale (relative to each
    weight's spread) added to its weights: models that differ in skill and find the same
    items easy, as models of one family do."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir))
    texts = []
    for line in (tasks / "e2e_mc.jsonl").read_text().splitlines():
        r = json.loads(line)
        texts.append(f"{r['question']} {r['choices'][r['answer']]} <eos>")
    for line in (tasks / "e2e_gen.jsonl").read_text().splitlines():
        r = json.loads(line)
        texts.append(f"{r['prompt']} {r['target']} <eos>")
    enc = tok(texts, padding=True, return_tensors="pt")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=width, n_layer=layers,
                        n_head=4, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    base = GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(base.parameters(), lr=2e-3)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        idx = torch.as_tensor(rng.choice(len(texts), 64, replace=False))
        ids, mask = enc["input_ids"][idx], enc["attention_mask"][idx]
        loss = base(input_ids=ids, attention_mask=mask,
                    labels=ids.masked_fill(mask == 0, -100)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    paths = []
    for k, scale in enumerate(noise):
        model = GPT2LMHeadModel(config)
        model.load_state_dict(base.state_dict())
        gen = torch.Generator().manual_seed(1000 + k)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * scale * p.std())
        path = out / f"model-{k:02d}"
        model.save_pretrained(str(path))
        tok.save_pretrained(str(path))
        paths.append(path)
    return paths


def log_references(models: list[Path], tasks: Path, logs: Path, task: str) -> None:
    """The reference models' harness logs (in this process: one harness start)."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    for path in models:
        tracker = EvaluationTracker(output_path=str(logs))
        result = simple_evaluate(model="hf", model_args=f"pretrained={path}", tasks=[task],
                                 log_samples=True, task_manager=manager, batch_size=32,
                                 device=DEVICE, evaluation_tracker=tracker)
        samples = result.pop("samples")
        tracker.save_results_aggregated(results=result, samples=samples)
        tracker.save_results_samples(task_name=task, samples=samples[task])


def timed(argv: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **OFFLINE})
    return time.perf_counter() - began, done


def full_run(target: Path, tasks: Path, task: str, work: Path, batch: int) -> tuple[float, float]:
    """(wall seconds, score) of one full ``lm_eval run`` of the new model."""
    out = work / "full"
    shutil.rmtree(out, ignore_errors=True)
    seconds, done = timed([sys.executable, "-m", "lm_eval", "run", "--model", "hf",
                           "--model_args", f"pretrained={target}", "--tasks", task,
                           "--include_path", str(tasks), "--batch_size", str(batch),
                           "--device", DEVICE,
                           "--log_samples", "--output_path", str(out)], work)
    if done.returncode != 0:
        raise SystemExit(f"lm_eval failed: {done.stderr[-400:]}")
    [samples] = out.rglob(f"samples_{task}_*.jsonl")
    records = [json.loads(x) for x in samples.read_text().splitlines()]
    metric = "acc" if task == "e2e_mc" else "exact_match"
    return seconds, float(np.mean([r[metric] for r in records]))


def bayeval_run(target: Path, tasks: Path, task: str, logs: Path, work: Path, mode: str,
                epsilon: float, batch: int, seed: int, harness_batch: int) -> tuple[float, dict]:
    journal = work / f"run-{mode}-{seed}.jsonl"
    journal.unlink(missing_ok=True)
    seconds, done = timed([
        sys.executable, "-m", "bayeval.cli", "evaluate", "--reference", f"lm-eval:{logs}",
        "--task", task, "--evaluator", "lm-eval", "--lm-eval-mode", mode, "--lm-eval-args",
        f"--model hf --model_args pretrained={target} --include_path {tasks} "
        f"--batch_size {harness_batch} --device {DEVICE}", "--target", "new",
        "--epsilon", str(epsilon),
        "--batch", str(batch), "--seed", str(seed), "--journal", str(journal), "--json",
        "-q"], work)
    if done.returncode != 0:
        raise SystemExit(f"bayeval failed: {done.stderr[-600:]}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="working folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--references", type=int, default=13)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=32, help="bayeval's --batch")
    parser.add_argument("--harness-batch", type=int, default=32, help="the harness's "
                        "--batch_size (the same in every route)")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=150, help="training steps of the "
                        "base model")
    parser.add_argument("--subprocess", action="store_true",
                        help="also time --lm-eval-mode subprocess (one repeat)")
    parser.add_argument("--tasks", default="e2e_mc,e2e_gen")
    parser.add_argument("--out", type=Path, default=Path("docs/results/end_to_end.md"))
    args = parser.parse_args()
    work = args.work.resolve()
    tasks, tok, models_dir = work / "tasks", work / "tokenizer", work / "models"
    if not (models_dir / f"model-{args.references:02d}").exists():
        print("making the tasks, the tokenizer and the models …", flush=True)
        make_tasks(tasks, 400, 200)
        make_tokenizer(tok)
        noise = list(np.linspace(0.0, 0.6, args.references + 1))
        target_index = args.references // 2  # a new model of middling skill
        noise = noise[:target_index] + noise[target_index + 1:] + [noise[target_index]]
        train_models(tasks, tok, models_dir, noise, args.width, args.layers, args.steps)
    models = sorted(models_dir.glob("model-*"))
    references, target = models[:-1], models[-1]
    rows = []
    for task in args.tasks.split(","):
        logs = work / f"logs-{task}"
        if not logs.exists():
            print(f"logging {len(references)} reference models on {task} …", flush=True)
            log_references(references, tasks, logs, task)
        bayeval_run(target, tasks, task, logs, work, "in-process", args.epsilon, args.batch,
                    99, args.harness_batch)  # warms the compile cache, untimed
        runs: dict[str, list] = {"full": [], "in-process": [], "subprocess": []}
        truth = None
        for rep in range(args.repeats):
            order = ["full", "in-process"] if rep % 2 == 0 else ["in-process", "full"]
            if args.subprocess and rep == 0:
                order.append("subprocess")
            for route in order:
                if route == "full":
                    seconds, truth = full_run(target, tasks, task, work, args.harness_batch)
                    runs["full"].append((seconds, None))
                else:
                    seconds, result = bayeval_run(target, tasks, task, logs, work, route,
                                                  args.epsilon, args.batch, rep,
                                                  args.harness_batch)
                    runs[route].append((seconds, result))
                print(f"{task} repeat {rep} {route}: {seconds:.1f} s", flush=True)
        full_median = statistics.median(s for s, _ in runs["full"])
        for route, done in runs.items():
            if not done:
                continue
            seconds = [s for s, _ in done]
            row = {"task": task, "route": route, "repeats": len(done),
                   "wall_median": statistics.median(seconds), "wall_min": min(seconds),
                   "wall_max": max(seconds),
                   "ratio_to_full": statistics.median(seconds) / full_median,
                   "truth": truth}
            results = [r for _, r in done if r is not None]
            if results:
                row.update(
                    items=statistics.median(r["items_drawn"] for r in results),
                    n_items=results[0]["n_items"],
                    covered=sum(r["lower"] <= truth <= r["upper"] for r in results),
                    width=statistics.median(r["upper"] - r["lower"] for r in results),
                    estimate=statistics.median(r["estimate"] for r in results),
                    own_ms_per_item=1e3 * statistics.median(
                        r["times"]["own_seconds_per_item"] for r in results),
                    launches=statistics.median(r["harness_launches"] for r in results))
            rows.append(row)
    write(rows, args)


def write(rows: list[dict], args: argparse.Namespace) -> None:
    lines = ["# End to end: time to bayeval's answer against a full harness run", "",
             f"`python bench/end_to_end.py --work DIR --repeats {args.repeats}"
             f"{' --subprocess' if args.subprocess else ''}` on this machine "
             f"({os.cpu_count()} cores), lm-evaluation-harness with `--model hf`, "
             f"GPT-2-style models of width {args.width} and {args.layers} layers made by the "
             f"bench (one trained {args.steps} steps, copies with weight noise); "
             f"{args.references} reference models, ε = {args.epsilon}, bayeval "
             f"batches of {args.batch}, the harness's batch size {args.harness_batch} "
             "everywhere. Wall time of each route's whole process (start-up, model load "
             "and, for bayeval, JAX with a warm compile cache), median [min, max] over "
             "repeats; items drawn at the stop; the interval's coverage of the full run's "
             "score over the repeats.", "",
             "| task | route | wall s, median [range] | × full run | items | width | "
             "covered | bayeval ms/item | launches |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        items = f"{r['items']:.0f}/{r['n_items']}" if "items" in r else "all"
        lines.append(
            f"| {r['task']} | {r['route']} | {r['wall_median']:.1f} [{r['wall_min']:.1f}, "
            f"{r['wall_max']:.1f}] | {r['ratio_to_full']:.2f} | {items} | "
            f"{r.get('width', float('nan')):.3f} | "
            f"{r.get('covered', '–')}/{r['repeats'] if 'covered' in r else '–'} | "
            f"{r.get('own_ms_per_item', float('nan')):.0f} | {r.get('launches', '–')} |")
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    (args.out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    print(text)


if __name__ == "__main__":
    main()
