"""The world of ``bench/end_to_end.py``: local harness tasks, a word-level tokenizer, small
GPT-2-style models trained on the tasks' distribution, and a target widened to GPT-2-small
size without changing what it computes. Nothing comes from a hub.

Tasks (``make_tasks``), each drawn from a generator, the models trained on fresh draws of
the same generators (not on the test documents):

* ``e2e_mc``: which of four numbers is ``a + b`` (a, b < 100; the three wrong ones within
  10 of the sum), ``acc``;
* ``e2e_gen``: continue an arithmetic sequence by three numbers (``max_gen_toks`` 24, cut
  at the end-of-text token), ``exact_match``; its steps go up to 9, the training
  sequences' only to 5 (the models must carry the rule beyond what they saw);
* ``e2e_mc_large``, ``e2e_mc_small``, ``e2e_gen_small``: the same with other numbers of
  documents (5,000; 500 and 300);
* ``e2e_mc_mixed`` (500 documents), ``e2e_gen_mixed`` (300): prompts of mixed length, as
  a real benchmark's spread: each document carries its own solved examples before its
  question (no few-shot examples of the task's), their number drawn log-uniformly, so
  that prompts run from 4 to 118 words (multiple choice) and 10 to 90 (generative).

Prompts hold few-shot examples (3 for multiple choice, 2 generative) from the task's own
documents, separated by the end-of-text word as in the training sequences.

Models (``train_runs``): five training runs (seeds 0–4, widths 128, 64, 96, 128, 64;
2 layers), a checkpoint after each of ``STEPS`` steps. The models of different runs share
which documents are hard (large numbers, close distractors, large steps) without being
copies of one another: per-item correlation of right and wrong between runs ≈ 0.2.

The target (``widen``): a run-0 checkpoint made 6× wider (width 768, its residual stream
replicated, every weight scaled so that each sum over the copies is the original sum, the
query scaled for the wider heads' 1/sqrt(head size)) and 12 layers deep (the 10 added
blocks write zero to the residual stream), 85M parameters: its log-probabilities are the
small model's to float rounding (checked when it is made), its cost per token that of a
GPT-2-small-sized model with a small vocabulary.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

VOCAB = 300  # numbers 0..299 are single words
WORDS = [str(k) for k in range(VOCAB)] + ["+", "=", "next", ":", ","]
EOS = "<eos>"
RUNS = [(0, 128), (1, 64), (2, 96), (3, 128), (4, 64)]  # (seed, width); run 0 is the target's
STEPS = [250, 500, 750, 1000, 1500, 2000, 2500, 3000]
# the settings: (the target's run-0 checkpoint, the reference checkpoints (seed, step)),
# chosen from the checkpoints' accuracies on 300 documents of e2e_mc / e2e_gen (chance 0.25
# / 0): run 0 after 2000 steps scores 0.79 / 0.61, after 3000 0.90 / 0.62
SETTINGS = {
    # the target among the references: every reference above chance, 0.40–0.93 / 0.05–0.66
    "among": (2000, [(1, 2500), (1, 3000), (2, 1500), (2, 2000), (2, 2500), (2, 3000),
                     (3, 1000), (3, 1500), (3, 2500), (3, 3000), (4, 2000), (4, 2500),
                     (4, 3000)]),
    # the target better than every reference (0.34–0.69 / 0.05–0.50): earlier checkpoints
    # of the other runs and of the target's own run
    "better": (3000, [(1, 2000), (1, 2500), (1, 3000), (2, 1500), (2, 2000), (3, 1000),
                      (4, 2000), (4, 2500), (4, 3000), (0, 1000), (0, 1500)]),
}
POSITIONS = 128  # the models' context; training sequences pack problems up to it
SHOTS = {"mc": 3, "gen": 2}  # few-shot examples per prompt, by kind of task


MIXED_EXAMPLES = {"mc": 19, "gen": 5}  # the most inline examples of a mixed-length prompt


def mixed(task: str) -> bool:
    """Whether ``task``'s prompts are of mixed length (``e2e_…_mixed``)."""
    return task.endswith("_mixed")


def inline_examples(rng: np.random.Generator, task: str) -> str:
    """A mixed-length document's own solved examples (none for the other tasks): 0 to
    ``MIXED_EXAMPLES`` of them, log-uniformly, each ended by the end-of-text word."""
    if not mixed(task):
        return ""
    most = MIXED_EXAMPLES[kind(task)]
    count = int(np.exp(rng.uniform(0.0, np.log(most + 2)))) - 1  # 0..most
    texts = []
    for _ in range(count):
        if kind(task) == "mc":
            a, b, _ = mc_item(rng)
            texts.append(f"{a} + {b} = {a + b} {EOS}")
        else:
            seq = gen_item(rng)
            texts.append(f"{gen_prompt(seq)} {gen_target(seq)} {EOS}")
    return "".join(t + " " for t in texts)


def kind(task: str) -> str:
    """``mc`` for the multiple-choice tasks (``e2e_mc…``), ``gen`` for the generative."""
    return "mc" if task.startswith("e2e_mc") else "gen"


def mc_item(rng: np.random.Generator) -> tuple[int, int, list[int]]:
    """(a, b, [the sum, three wrong numbers within 10 of it])."""
    a, b = (int(x) for x in rng.integers(0, 100, 2))
    wrong: set[int] = set()
    while len(wrong) < 3:
        w = a + b + int(rng.choice([-1, 1])) * int(rng.integers(1, 11))
        if w != a + b and 0 <= w < VOCAB:
            wrong.add(w)
    return a, b, [a + b, *sorted(wrong)]


TRAIN_STEPS_UP_TO = 5  # the training sequences' largest step
TASK_STEPS_UP_TO = 9  # the task's: steps 6–9 were never seen in training


def gen_item(rng: np.random.Generator, steps_up_to: int = TRAIN_STEPS_UP_TO) -> list[int]:
    """An arithmetic sequence of seven numbers (start < 100, step 1..``steps_up_to``)."""
    start, step = int(rng.integers(0, 100)), int(rng.integers(1, steps_up_to + 1))
    return [start + step * k for k in range(7)]


def gen_prompt(seq: list[int]) -> str:
    return "next : " + " , ".join(map(str, seq[:4])) + " ,"


def gen_target(seq: list[int]) -> str:
    return " , ".join(map(str, seq[4:]))


def training_text(rng: np.random.Generator) -> str:
    """One solved problem and the end-of-text word (what separates few-shot examples)."""
    if rng.random() < 0.4:
        a, b, _ = mc_item(rng)
        return f"{a} + {b} = {a + b} {EOS}"
    seq = gen_item(rng)
    return f"{gen_prompt(seq)} {gen_target(seq)} {EOS}"


def training_sequence(rng: np.random.Generator, words: int = POSITIONS - 8) -> str:
    """Solved problems packed into one sequence of at most ``words`` words (as a few-shot
    prompt holds them), so that every position of the context is trained."""
    texts, size = [], 0
    while True:
        text = training_text(rng)
        if texts and size + len(text.split()) > words:
            return " ".join(texts)
        texts.append(text)
        size += len(text.split())


def make_tasks(folder: Path, sizes: dict[str, int], seed: int = 12345) -> None:
    """The tasks' data files and YAMLs (``sizes``: documents per task name)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in sizes.items():
        rng = np.random.default_rng([seed, n, len(name)])
        if kind(name) == "mc":
            rows = []
            for _ in range(n):
                a, b, choices = mc_item(rng)
                order = rng.permutation(4)
                rows.append({"question": f"{inline_examples(rng, name)}{a} + {b} =",
                             "choices": [str(choices[i]) for i in order],
                             "answer": int(np.flatnonzero(order == 0)[0])})
            body = ("output_type: multiple_choice\ndoc_to_text: \"{{question}}\"\n"
                    "doc_to_choice: \"{{choices}}\"\ndoc_to_target: \"{{answer}}\"\n"
                    "metric_list:\n  - metric: acc\n    aggregation: mean\n"
                    "    higher_is_better: true\n")
        else:
            rows = []
            for _ in range(n):
                seq = gen_item(rng, TASK_STEPS_UP_TO)
                rows.append({"prompt": inline_examples(rng, name) + gen_prompt(seq),
                             "target": gen_target(seq)})
            body = ("output_type: generate_until\ndoc_to_text: \"{{prompt}}\"\n"
                    "doc_to_target: \"{{target}}\"\ngeneration_kwargs:\n"
                    f"  until: [\"{EOS}\"]\n  max_gen_toks: 24\n  do_sample: false\n"
                    "metric_list:\n  - metric: exact_match\n    aggregation: mean\n"
                    "    higher_is_better: true\n    ignore_case: true\n"
                    "    ignore_punctuation: false\n")
        data = folder / f"{name}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        # few-shot examples from the test split (the harness leaves the document itself
        # out), separated by the end-of-text word as the training sequences are
        (folder / f"{name}.yaml").write_text(
            f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
            f"    test: {data}\ntest_split: test\n"
            f"num_fewshot: {0 if mixed(name) else SHOTS[kind(name)]}\n"
            f"fewshot_delimiter: \" {EOS} \"\n{body}")


def make_tokenizer(folder: Path) -> None:
    """A word-level tokenizer over the tasks' words, saved for transformers."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", EOS, *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token=EOS,
                                   pad_token=EOS)
    fast.save_pretrained(str(folder))


def checkpoint(models: Path, seed: int, step: int) -> Path:
    width = dict(RUNS)[seed]
    return models / f"run{seed}-w{width}" / f"step{step:05d}"


def train_runs(tok_dir: Path, models: Path, singles: int = 48, packed: int = 8,
               lr: float = 2e-3, runs: list[tuple[int, int]] | None = None) -> None:
    """Every run of ``runs`` (default ``RUNS``), a checkpoint (model and tokenizer) after
    each of ``STEPS`` steps; a step is ``singles`` single solved problems and ``packed``
    packed sequences (:func:`training_sequence`), fresh draws of the tasks' generators.
    Each checkpoint also keeps the optimizer's and the generators' states, so that a run
    cut short (or asked for more steps) goes on exactly as an uninterrupted one."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir))
    for seed, width in runs or RUNS:
        if checkpoint(models, seed, STEPS[-1]).exists():
            continue
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        config = GPT2Config(vocab_size=len(tok), n_positions=POSITIONS, n_embd=width,
                            n_layer=2, n_head=4, bos_token_id=tok.eos_token_id,
                            eos_token_id=tok.eos_token_id)
        model = GPT2LMHeadModel(config)
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        first = 1
        done = [t for t in STEPS if (checkpoint(models, seed, t) / "training.pt").exists()]
        if done:  # go on from the last checkpoint saved
            path = checkpoint(models, seed, done[-1])
            model = GPT2LMHeadModel.from_pretrained(str(path))
            opt = torch.optim.AdamW(model.parameters(), lr=lr)
            state = torch.load(path / "training.pt", weights_only=False)
            opt.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch"])
            rng.bit_generator.state = state["numpy"]
            first = done[-1] + 1
        model.train()
        for step in range(first, STEPS[-1] + 1):
            loss = 0.0
            for texts in ([training_text(rng) for _ in range(singles)],
                          [training_sequence(rng) for _ in range(packed)]):
                enc = tok(texts, padding=True, return_tensors="pt")
                ids, mask = enc["input_ids"], enc["attention_mask"]
                loss = loss + model(input_ids=ids, attention_mask=mask,
                                    labels=ids.masked_fill(mask == 0, -100)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step in STEPS:
                path = checkpoint(models, seed, step)
                model.save_pretrained(str(path))
                tok.save_pretrained(str(path))
                torch.save({"optimizer": opt.state_dict(), "torch": torch.get_rng_state(),
                            "numpy": rng.bit_generator.state}, path / "training.pt")
        print(f"trained run {seed} (width {width})", flush=True)


def widen(source: Path, target: Path, factor: int = 6, layers: int = 12) -> int:
    """``source`` (a GPT-2 model) made ``factor``× wider and ``layers`` deep without
    changing its outputs (module docstring); saved with its tokenizer at ``target``.
    Returns the parameter count; raises if the log-probabilities differ by more than
    1e-3 on the tasks' prompts."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    small = GPT2LMHeadModel.from_pretrained(str(source)).eval()
    c = small.config
    d, heads, r = c.n_embd, c.n_head, factor
    h = d // heads
    D = r * d
    config = GPT2Config(vocab_size=c.vocab_size, n_positions=c.n_positions, n_embd=D,
                        n_layer=layers, n_head=heads, bos_token_id=c.bos_token_id,
                        eos_token_id=c.eos_token_id)
    torch.manual_seed(0)
    big = GPT2LMHeadModel(config).eval()
    s, b = small.transformer, big.transformer

    def rep(x: torch.Tensor, dim: int) -> torch.Tensor:  # blocks [x; x; …] along dim
        return torch.cat([x] * r, dim=dim)

    def per_head(x: torch.Tensor) -> torch.Tensor:  # (…, heads·h) → (…, heads·r·h)
        x = x.reshape(*x.shape[:-1], heads, h)
        return torch.cat([x] * r, dim=-1).reshape(*x.shape[:-2], heads * r * h)

    with torch.no_grad():
        b.wte.weight.copy_(rep(s.wte.weight, 1))
        b.wpe.weight.copy_(rep(s.wpe.weight, 1))
        for i, block in enumerate(b.h):
            if i >= len(s.h):  # an added block: it writes nothing to the residual stream
                for proj in (block.attn.c_proj, block.mlp.c_proj):
                    proj.weight.zero_()
                    proj.bias.zero_()
                continue
            old = s.h[i]
            for ln_new, ln_old in ((block.ln_1, old.ln_1), (block.ln_2, old.ln_2)):
                ln_new.weight.copy_(rep(ln_old.weight, 0))
                ln_new.bias.copy_(rep(ln_old.bias, 0))
            w, bias = old.attn.c_attn.weight, old.attn.c_attn.bias  # (d, 3d)
            parts = []
            for k, scale in enumerate((r ** -0.5, 1.0, 1.0)):  # q, k, v
                wk = per_head(w[:, k * d:(k + 1) * d]) * scale
                parts.append((rep(wk, 0) / r, per_head(bias[k * d:(k + 1) * d]) * scale))
            block.attn.c_attn.weight.copy_(torch.cat([p[0] for p in parts], 1))
            block.attn.c_attn.bias.copy_(torch.cat([p[1] for p in parts], 0))
            # the merged heads (heads·r·h, each head's h replicated r times) → residual
            wp = old.attn.c_proj.weight.reshape(heads, h, d)
            wp = torch.cat([wp] * r, dim=1).reshape(heads * r * h, d) / r
            block.attn.c_proj.weight.copy_(rep(wp, 1))
            block.attn.c_proj.bias.copy_(rep(old.attn.c_proj.bias, 0))
            block.mlp.c_fc.weight.copy_(rep(rep(old.mlp.c_fc.weight, 1), 0) / r)
            block.mlp.c_fc.bias.copy_(rep(old.mlp.c_fc.bias, 0))
            block.mlp.c_proj.weight.copy_(rep(rep(old.mlp.c_proj.weight, 1), 0) / r)
            block.mlp.c_proj.bias.copy_(rep(old.mlp.c_proj.bias, 0))
        # tied output embedding: the final norm's output summed over r copies
        b.ln_f.weight.copy_(rep(s.ln_f.weight, 0) / r)
        b.ln_f.bias.copy_(rep(s.ln_f.bias, 0) / r)
    tok = PreTrainedTokenizerFast.from_pretrained(str(source))
    rng = np.random.default_rng(0)
    prompts = [training_sequence(rng).rsplit(" ", 2)[0] for _ in range(16)]
    enc = tok(prompts, padding=True, return_tensors="pt")
    with torch.no_grad():
        a = torch.log_softmax(small(**enc).logits, -1)
        z = torch.log_softmax(big(**enc).logits, -1)
    mask = enc["attention_mask"].bool()
    gap = float((a - z).abs()[mask].max())
    if gap > 1e-3:
        raise SystemExit(f"widening changed the model's log-probabilities by {gap:.2e}")
    big.save_pretrained(str(target))
    tok.save_pretrained(str(target))
    return sum(p.numel() for p in big.parameters())


__all__ = ["SETTINGS", "checkpoint", "make_tasks", "make_tokenizer", "train_runs", "widen"]
