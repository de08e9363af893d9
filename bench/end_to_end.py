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
  ``lm_eval run`` per batch;
* ``server`` (with ``--server 1,4``): the new model behind a local OpenAI-compatible
  completions server started by the bench (``serve``), reached through the harness's
  ``local-completions`` model with that many concurrent requests: a full ``lm_eval run``
  through the server and bayeval's in-process route through it, both against the same
  running server (its start-up is in neither).

Each bayeval run is a fresh ``bayeval`` process (its start-up and JAX compilation
counted; the compile cache is warmed by one untimed run first, as a user's second run
would find it). Reported per route: wall time (median and range over repeats), items,
the interval and whether it holds the full run's score, bayeval's own seconds per item,
and the ratio to the full run's wall time.

Needs ``pip install -e '.[bench]'`` (torch and transformers)::

    python bench/end_to_end.py --work /tmp/e2e --repeats 3 --subprocess --server 1,4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

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


def serve(model_path: Path, port: int) -> None:
    """An OpenAI-compatible ``/v1/completions`` server of one model (what the harness's
    ``local-completions`` model talks to; greedy only): token-id or text prompts; with
    ``echo`` and ``logprobs`` it returns every prompt token's log-probability and the
    greedy token's (the harness's loglikelihood requests), else a greedy continuation of
    at most ``max_tokens`` tokens cut at the first ``stop`` string. Prints the port, then
    serves until killed."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(model_path))
    model = AutoModelForCausalLM.from_pretrained(str(model_path)).to(DEVICE).eval()
    lock = threading.Lock()  # one forward pass at a time on the model

    def ids_of(prompt) -> list[int]:
        return list(prompt) if isinstance(prompt, list) else tok(prompt)["input_ids"]

    def padded(rows: list[list[int]], left: bool) -> tuple:
        width = max(map(len, rows))
        pad = [[tok.pad_token_id] * (width - len(r)) for r in rows]
        ids = [p + r if left else r + p for r, p in zip(rows, pad, strict=True)]
        mask = [[0] * len(p) + [1] * len(r) if left else [1] * len(r) + [0] * len(p)
                for r, p in zip(rows, pad, strict=True)]
        return (torch.tensor(ids, device=DEVICE), torch.tensor(mask, device=DEVICE))

    def logprobs(rows: list[list[int]]) -> list[dict]:
        ids, mask = padded(rows, left=False)
        with lock, torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(),
                                     dim=-1)
        out = []
        for r, row in enumerate(rows):
            n = len(row)
            best = logp[r, :n].max(dim=-1)
            token_lp = [None] + [float(logp[r, i - 1, row[i]]) for i in range(1, n)]
            top = [None] + [{tok.convert_ids_to_tokens(int(best.indices[i - 1])):
                             float(best.values[i - 1])} for i in range(1, n)]
            token_lp.append(float(best.values[n - 1]))  # the one greedy token asked for
            top.append({tok.convert_ids_to_tokens(int(best.indices[n - 1])):
                        float(best.values[n - 1])})
            out.append({"token_logprobs": token_lp, "top_logprobs": top})
        return out

    def generate(rows: list[list[int]], max_tokens: int, stop: list[str]) -> list[str]:
        ids, mask = padded(rows, left=True)
        with lock, torch.no_grad():
            new = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                 max_new_tokens=max_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=None)[:, ids.shape[1]:]
        texts = []
        for row in new.tolist():  # as a server does: up to the end-of-text token
            end = row.index(tok.eos_token_id) if tok.eos_token_id in row else len(row)
            text = tok.decode(row[:end])
            cut = min((text.find(s) for s in stop if s and s in text), default=len(text))
            texts.append(text[:cut])
        return texts

    class Completions(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["prompt"]
            prompts = (prompt if isinstance(prompt, list) and prompt and not
                       isinstance(prompt[0], int) else [prompt])
            rows = [ids_of(p) for p in prompts]
            if body.get("echo") and body.get("logprobs"):
                choices = [{"index": i, "text": "", "logprobs": lp}
                           for i, lp in enumerate(logprobs(rows))]
            else:
                stop = body.get("stop") or []
                stop = [stop] if isinstance(stop, str) else list(stop)
                choices = [{"index": i, "text": t} for i, t in enumerate(
                    generate(rows, int(body.get("max_tokens", 16)), stop))]
            data = json.dumps({"choices": choices}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Completions)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Server:
    """``serve`` in a child process for the duration of a ``with`` block."""

    def __init__(self, model_path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(model_path)],
                                     stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, **OFFLINE})
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise SystemExit("the completions server did not start")
        self.url = f"http://127.0.0.1:{int(line)}/v1/completions"

    def model_args(self, tokenizer: Path, concurrent: int) -> str:
        """The harness's ``local-completions`` arguments for this server (its batch size is
        the harness's ``--batch_size``)."""
        return (f"model=served,base_url={self.url},tokenizer_backend=huggingface,"
                f"tokenizer={tokenizer},tokenized_requests=True,"
                f"num_concurrent={concurrent},max_retries=1")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


def timed(argv: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **OFFLINE})
    return time.perf_counter() - began, done


class Route(NamedTuple):
    """How the new model is run: the harness's model and its arguments, and for bayeval
    the ``--lm-eval-mode`` (None: the full run)."""

    name: str
    model: str
    model_args: str
    mode: str | None
    full: str  # the name of the full run this route is compared with

    def harness_args(self, tasks: Path, batch: int) -> str:
        device = f" --device {DEVICE}" if self.model == "hf" else ""
        return (f"--model {self.model} --model_args {self.model_args} --include_path {tasks} "
                f"--batch_size {batch}{device}")


def full_run(route: Route, tasks: Path, task: str, work: Path, batch: int
             ) -> tuple[float, float]:
    """(wall seconds, score) of one full ``lm_eval run`` of the new model."""
    out = work / "full"
    shutil.rmtree(out, ignore_errors=True)
    seconds, done = timed([sys.executable, "-m", "lm_eval", "run", "--tasks", task,
                           *route.harness_args(tasks, batch).split(),
                           "--log_samples", "--output_path", str(out)], work)
    if done.returncode != 0:
        raise SystemExit(f"lm_eval failed: {done.stderr[-400:]}")
    [samples] = out.rglob(f"samples_{task}_*.jsonl")
    records = [json.loads(x) for x in samples.read_text().splitlines()]
    metric = "acc" if task == "e2e_mc" else "exact_match"
    return seconds, float(np.mean([r[metric] for r in records]))


def bayeval_run(route: Route, tasks: Path, task: str, logs: Path, work: Path,
                epsilon: float, batch: int, seed: int, harness_batch: int
                ) -> tuple[float, dict]:
    journal = work / f"run-{route.name}-{seed}.jsonl"
    journal.unlink(missing_ok=True)
    seconds, done = timed([
        sys.executable, "-m", "bayeval.cli", "evaluate", "--reference", f"lm-eval:{logs}",
        "--task", task, "--evaluator", "lm-eval", "--lm-eval-mode", route.mode,
        "--lm-eval-args", route.harness_args(tasks, harness_batch), "--target", "new",
        "--epsilon", str(epsilon), "--batch", str(batch), "--seed", str(seed),
        "--journal", str(journal), "--json", "-q"], work)
    if done.returncode != 0:
        raise SystemExit(f"bayeval failed: {done.stderr[-600:]}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="working folder (required)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--references", type=int, default=13)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=32, help="bayeval's --batch")
    parser.add_argument("--harness-batch", type=int, default=32, help="the harness's "
                        "--batch_size (the same in every route)")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=800, help="training steps of the "
                        "base model")
    parser.add_argument("--subprocess", action="store_true",
                        help="also time --lm-eval-mode subprocess (one repeat)")
    parser.add_argument("--server", default="",
                        help="also time the server route (the harness's local-completions "
                        "model against a local completions server of the new model) at "
                        "these numbers of concurrent requests, e.g. 1,4")
    parser.add_argument("--tasks", default="e2e_mc,e2e_gen")
    parser.add_argument("--out", type=Path, default=Path("docs/results/end_to_end.md"))
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rewrite", action="store_true", help="only rewrite --out from "
                        "the rows of its .json (no runs), with the options given")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, 0)
        return
    if args.rewrite:
        write(json.loads(args.out.with_suffix(".json").read_text()), args)
        return
    if args.work is None:
        parser.error("--work is required")
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
    hf = f"pretrained={target}"
    routes = [Route("full", "hf", hf, None, "full"),
              Route("in-process", "hf", hf, "in-process", "full")]
    if args.subprocess:
        routes.append(Route("subprocess", "hf", hf, "subprocess", "full"))
    concurrency = [int(c) for c in args.server.split(",") if c]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(Server(target)) if concurrency else None
        for c in concurrency:
            served = server.model_args(tok, c)
            routes += [Route(f"server full, {c} concurrent", "local-completions", served,
                             None, f"server full, {c} concurrent"),
                       Route(f"server, {c} concurrent", "local-completions", served,
                             "in-process", f"server full, {c} concurrent")]
        rows = []
        for task in args.tasks.split(","):
            rows += time_task(task, routes, target, references, tasks, work, args)
    write(rows, args)


def time_task(task: str, routes: list[Route], target: Path, references: list[Path],
              tasks: Path, work: Path, args: argparse.Namespace) -> list[dict]:
    """Every route on one task, ``args.repeats`` times (subprocess once), the order of the
    routes reversed every other repeat."""
    logs = work / f"logs-{task}"
    if not logs.exists():
        print(f"logging {len(references)} reference models on {task} …", flush=True)
        log_references(references, tasks, logs, task)
    bayeval_run(routes[1], tasks, task, logs, work, args.epsilon, args.batch, 99,
                args.harness_batch)  # warms the compile cache, untimed
    runs: dict[str, list] = {r.name: [] for r in routes}
    truth: dict[str, float] = {}
    for rep in range(args.repeats):
        order = [r for r in routes if r.mode != "subprocess" or rep == 0]
        for route in order if rep % 2 == 0 else order[::-1]:
            if route.mode is None:
                seconds, truth[route.name] = full_run(route, tasks, task, work,
                                                      args.harness_batch)
                runs[route.name].append((seconds, None))
            else:
                seconds, result = bayeval_run(route, tasks, task, logs, work, args.epsilon,
                                              args.batch, rep, args.harness_batch)
                runs[route.name].append((seconds, result))
            print(f"{task} repeat {rep} {route.name}: {seconds:.1f} s", flush=True)
    rows = []
    for route in routes:
        done = runs[route.name]
        seconds = [s for s, _ in done]
        full_median = statistics.median(s for s, _ in runs[route.full])
        row = {"task": task, "route": route.name, "repeats": len(done),
               "wall_median": statistics.median(seconds), "wall_min": min(seconds),
               "wall_max": max(seconds),
               "ratio_to_full": statistics.median(seconds) / full_median,
               "truth": truth[route.full]}
        results = [r for _, r in done if r is not None]
        if results:
            row.update(
                items=statistics.median(r["items_drawn"] for r in results),
                n_items=results[0]["n_items"],
                covered=sum(r["lower"] <= row["truth"] <= r["upper"] for r in results),
                width=statistics.median(r["upper"] - r["lower"] for r in results),
                estimate=statistics.median(r["estimate"] for r in results),
                own_ms_per_item=1e3 * statistics.median(
                    r["times"]["own_seconds_per_item"] for r in results),
                evaluator_s=statistics.median(r["times"]["evaluator_seconds"]
                                              for r in results),
                loop_s=statistics.median(r["times"]["wall_seconds"] for r in results),
                launches=statistics.median(r["harness_launches"] for r in results))
        rows.append(row)
    return rows


def harness_index_seconds(repeats: int = 3) -> float:
    """Median seconds the harness takes to index its own task YAMLs (what ``lm_eval run``
    does at every start, and bayeval skips for a task under ``--include_path``)."""
    code = ("import time, lm_eval.tasks as t; s = time.perf_counter(); t.TaskManager(); "
            "print(time.perf_counter() - s)")
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, check=True).stdout) for _ in range(repeats)]
    return statistics.median(times)


def where_the_time_goes(rows: list[dict], index_s: float) -> list[str]:
    """A paragraph per task: how much of the default route's time is its loop, and how
    much of the full run's is the harness's task index."""
    text = []
    for task in dict.fromkeys(r["task"] for r in rows):
        full = next(r for r in rows if r["task"] == task and r["route"] == "full")
        ours = next(r for r in rows if r["task"] == task and r["route"] == "in-process")
        rest = full["wall_median"] - index_s
        text.append(
            f"{task}: bayeval's loop (first ask to answer, {ours['items']:.0f} documents) "
            f"took {ours['loop_s']:.1f} s of its {ours['wall_median']:.1f} s, the harness "
            f"{ours['evaluator_s']:.1f} s of it; the rest is start-up (Python, JAX, the "
            "harness's import and the model's load, as in the full run). The full run "
            f"spends {index_s:.1f} s of its {full['wall_median']:.1f} s indexing the "
            "harness's own task YAMLs, which bayeval skips for a task found under "
            f"`--include_path`; without that index the ratio would be "
            f"{ours['wall_median'] / rest:.2f}.")
        text.append("")
    return text


def write(rows: list[dict], args: argparse.Namespace) -> None:
    server = f" --server {args.server}" if args.server else ""
    lines = ["# End to end: time to bayeval's answer against a full harness run", "",
             f"`python bench/end_to_end.py --work DIR --repeats {args.repeats} --width "
             f"{args.width} --layers {args.layers} --steps {args.steps}"
             f"{' --subprocess' if args.subprocess else ''}{server}` on this machine "
             f"({os.cpu_count()} cores, device {DEVICE}), lm-evaluation-harness with `--model "
             f"hf` (and `local-completions` against a local completions server of the same "
             f"model for the server routes), GPT-2-style models of width {args.width} and "
             f"{args.layers} layers made by the bench (one trained {args.steps} steps, "
             f"copies with weight noise); {args.references} reference models, "
             f"ε = {args.epsilon}, bayeval batches of {args.batch}, the harness's batch size "
             f"{args.harness_batch} everywhere. Wall time of each route's whole process "
             "(start-up, model load and, for bayeval, JAX with a warm compile cache), "
             "median [min, max] over repeats, and its ratio to the full run of the same "
             "model route; items drawn at the stop; the interval's coverage of the full "
             "run's score over the repeats; of bayeval's run: the loop's wall time (first "
             "ask to answer, the rest is start-up), the harness's part of it, and bayeval's "
             "own milliseconds per item.", "",
             "| task | route | wall s, median [range] | × full run | items | width | "
             "covered | loop s | harness s | bayeval ms/item | launches |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        items = f"{r['items']:.0f}/{r['n_items']}" if "items" in r else "all"
        covered = f"{r['covered']}/{r['repeats']}" if "covered" in r else "–"
        nan = float("nan")
        lines.append(
            f"| {r['task']} | {r['route']} | {r['wall_median']:.1f} [{r['wall_min']:.1f}, "
            f"{r['wall_max']:.1f}] | {r['ratio_to_full']:.2f} | {items} | "
            f"{r.get('width', nan):.3f} | {covered} | {r.get('loop_s', nan):.1f} | "
            f"{r.get('evaluator_s', nan):.1f} | {r.get('own_ms_per_item', nan):.0f} | "
            f"{r.get('launches', '–')} |")
    lines += ["", *where_the_time_goes(rows, harness_index_seconds())]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    (args.out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    print(text)


if __name__ == "__main__":
    main()
