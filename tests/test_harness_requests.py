"""The in-process harness evaluator against the harness's own full run
(:mod:`bayeval.evaluators.harness_requests`): every document's requests built once, a batch only the
model's calls on the asked documents.

The model is a real ``lm_eval.api.model.LM`` whose answers are a function of the request
text (so two runs that build the same prompts get the same answers, whatever the order)
and which records every request it is handed. The reference is ``lm_eval.simple_evaluate``
on every document: each asked document's logged record (prompt, arguments, answers,
filtered answers, metrics, hashes) must be the full run's, with few-shot examples (whose
sampler draws from one stream, document after document) and a generative task with a
filter; the model must see exactly the asked documents' requests, one call per request
type per batch."""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="lm-evaluation-harness (the test extra's lm-eval) "
                                      "is not installed")

from lm_eval.api.model import LM

FIXTURE = Path(__file__).parent / "fixtures" / "lm_eval"
GEN_YAML = """task: toy_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: toy_add.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{question}}"
doc_to_target: "{{choices[answer]}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
filter_list:
  - name: first-number
    filter:
      - function: regex
        regex_pattern: "(\\\\d+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def _text_hash(*parts: str) -> int:
    return zlib.crc32("\x1f".join(parts).encode())


class TextLM(LM):
    """Answers that depend only on each request's text; ``calls`` holds, per call, the
    (request type, task, doc) of every request handed over."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[tuple[str, str, int]]] = []

    def _seen(self, kind: str, requests) -> None:
        self.calls.append([(kind, r.task_name, r.doc_id) for r in requests])

    def loglikelihood(self, requests):
        self._seen("loglikelihood", requests)
        return [(-(_text_hash(*r.args) % 997) / 100.0, _text_hash(*r.args) % 2 == 0)
                for r in requests]

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError

    def generate_until(self, requests):
        self._seen("generate_until", requests)
        # a number the regex filter picks out, right for about half the documents
        return [f" {_text_hash(r.args[0]) % 3 + int(r.args[0].split()[0])} + x"
                for r in requests]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("requests")
    for path in FIXTURE.iterdir():
        shutil.copy(path, folder / path.name)
    (folder / "toy_gen.yaml").write_text(GEN_YAML)
    return folder


def _manager(folder: Path):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(folder), include_defaults=False)


def _full_run(folder: Path, task: str, fewshot: int) -> dict[int, dict]:
    """The harness's own run of every document: its logged record by doc_id."""
    from lm_eval import simple_evaluate

    result = simple_evaluate(model=TextLM(), tasks=[task], num_fewshot=fewshot,
                             log_samples=True, task_manager=_manager(folder),
                             bootstrap_iters=0)
    return {r["doc_id"]: r for r in result["samples"][task]}


# the fields of a logged record that must be the full run's (all but the doc's own copy)
SAME = ("doc_id", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
        "doc_hash", "prompt_hash", "target_hash")


@pytest.mark.parametrize(("task", "fewshot", "metric"),
                         [("toy_add", 2, "acc"), ("toy_gen", 0, "exact_match")])
def test_a_batch_runs_only_its_documents_and_logs_what_a_full_run_logs(tasks, task, fewshot,
                                                                      metric, tmp_path):
    from bayeval.data.lm_eval import read_sample_log
    from bayeval.evaluators.harness import LmEvalInProcess

    cwd = os.getcwd()
    os.chdir(tasks)  # the data file is relative to the folder the harness runs in
    try:
        full = _full_run(tasks, task, fewshot)
        lm = TextLM()
        batches = [[17, 3, 29, 8], [0, 33, 12, 39, 21]]
        with LmEvalInProcess(lm, task, num_fewshot=fewshot, task_manager=_manager(tasks),
                             output_path=tmp_path / "kept", name="org/new") as evaluator:
            scores = [evaluator.evaluate_batch([f"{task}-{d}" for d in docs])
                      for docs in batches]
    finally:
        os.chdir(cwd)
    # per batch one model call per request type, holding the batch's documents only
    kind = "generate_until" if task == "toy_gen" else "loglikelihood"
    assert [sorted({doc for _, _, doc in call}) for call in lm.calls] == \
        [sorted(docs) for docs in batches]
    assert all(k == kind and name == task for call in lm.calls for k, name, _ in call)
    if task == "toy_add":  # three choices a document, each asked once
        assert [len(call) for call in lm.calls] == [3 * len(docs) for docs in batches]
    for docs, got in zip(batches, scores, strict=True):
        assert got == [float(full[d][metric]) for d in docs]
    assert len({full[d][metric] for d in full}) == 2  # both scores occur: the check bites
    # the kept output: each document's record is the full run's, read back as a log
    [samples] = (tmp_path / "kept" / "org__new").glob(f"samples_{task}_*.jsonl")
    kept = {r["doc_id"]: r for r in map(json.loads, samples.read_text().splitlines())}
    assert sorted(kept) == sorted(d for docs in batches for d in docs)
    for doc_id, record in kept.items():
        theirs = json.loads(json.dumps(_as_saved(full[doc_id])))
        assert {k: record[k] for k in SAME} == {k: theirs[k] for k in SAME}, doc_id
    log = read_sample_log(samples)
    assert log.metric == metric and len(log.scores) == 9
    # the summary, written on close: the harness's aggregation of the kept documents
    [results] = (tmp_path / "kept" / "org__new").glob("results_*.json")
    summary = json.loads(results.read_text())
    mean = sum(full[d][metric] for d in kept) / len(kept)
    key = f"{metric},{'first-number' if task == 'toy_gen' else 'none'}"
    assert summary["results"][task][key] == pytest.approx(mean)
    assert summary["n-samples"][task] == {"original": 40, "effective": 9}
    assert summary["model_name"] == "org/new"


def _as_saved(record: dict) -> dict:
    """A full run's in-memory record as the harness's tracker writes it to a samples file
    (its arguments keyed by position, answers as strings)."""
    from lm_eval.utils import sanitize_list

    out = dict(record)
    out["arguments"] = {f"gen_args_{i}": {f"arg_{j}": a for j, a in enumerate(arg)}
                        for i, arg in enumerate(record["arguments"])}
    out["resps"] = sanitize_list(record["resps"])
    out["filtered_resps"] = sanitize_list(record["filtered_resps"])
    out["target"] = str(record["target"])
    return out


def test_the_few_shot_prompts_are_the_full_runs_only_when_built_in_order(tasks):
    # the reason every document is built at the start: the few-shot sampler draws from one
    # stream, so a document built alone (as a harness call on the asked documents builds
    # it) gets other examples than the full run gives it
    from lm_eval import simple_evaluate

    cwd = os.getcwd()
    os.chdir(tasks)
    try:
        full = _full_run(tasks, "toy_add", 2)
        alone = simple_evaluate(model=TextLM(), tasks=["toy_add"], num_fewshot=2,
                                log_samples=True, task_manager=_manager(tasks),
                                bootstrap_iters=0, samples={"toy_add": [21, 33]})
    finally:
        os.chdir(cwd)
    got = {r["doc_id"]: r["prompt_hash"] for r in alone["samples"]["toy_add"]}
    assert got != {d: full[d]["prompt_hash"] for d in got}
