"""lm-evaluation-harness ``--log_samples`` files, written here in the harness's format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bayeval.data import find_sample_files, read_lm_eval_samples
from bayeval.errors import DataError


def _sample(doc_id: int, metrics: dict, filt: str = "none") -> dict:
    # The fields lm-evaluation-harness writes per document (EvaluationTracker
    # .save_results_samples): the metric values sit at top level beside the bookkeeping.
    return {
        "doc_id": doc_id,
        "doc": {"question": f"q{doc_id}", "choices": ["a", "b"], "answer": 0},
        "target": "a",
        "arguments": {"gen_args_0": {"arg_0": f"Question {doc_id}", "arg_1": " a"}},
        "resps": [[["-1.25", "False"]]],
        "filtered_resps": [["-1.25", "False"]],
        "filter": filt,
        "metrics": list(metrics),
        "doc_hash": f"{doc_id:064x}",
        "prompt_hash": f"{doc_id + 1:064x}",
        "target_hash": f"{doc_id + 2:064x}",
        **metrics,
    }


def _write_run(root: Path, model: str, task: str, stamp: str, rows: list[dict]) -> Path:
    folder = root / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{task}_{stamp}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the aggregate results file the harness writes beside the samples
    (folder / f"results_{stamp}.json").write_text(json.dumps({"results": {task: {}}}))
    return path


def test_reads_output_folder_into_matrix(tmp_path):
    truth = {"org/model-a": [1, 0, 1, 1], "org/model-b": [0, 0, 1, 0]}
    for model, scores in truth.items():
        rows = [_sample(d, {"acc": float(s), "acc_norm": 1.0 - s}) for d, s in enumerate(scores)]
        rows.reverse()  # doc order in the file does not matter
        _write_run(tmp_path, model, "arc_challenge", "2024-06-19T13-38-37.145364", rows)
    # another task whose name starts the same must not be picked up
    _write_run(tmp_path, "org/model-a", "arc_challenge_chat", "2024-06-19T13-38-37.145364",
               [_sample(0, {"acc": 0.0})])
    m = read_lm_eval_samples(tmp_path, task="arc_challenge", metric="acc")
    assert list(m.models) == ["org__model-a", "org__model-b"]
    assert list(m.items) == [f"arc_challenge-{d:05d}" for d in range(4)]
    np.testing.assert_array_equal(m.scores, np.array(list(truth.values()), float))
    assert m.kind == "binary" and m.metadata["metric"] == "acc"
    norm = read_lm_eval_samples(tmp_path, task="arc_challenge", metric="acc_norm")
    np.testing.assert_array_equal(norm.scores, 1.0 - m.scores)


def test_boolean_and_instance_level_metrics(tmp_path):
    rows = [_sample(0, {"prompt_level_strict_acc": True,
                        "inst_level_strict_acc": [True, False, True, True]}),
            _sample(1, {"prompt_level_strict_acc": False,
                        "inst_level_strict_acc": [False]})]
    _write_run(tmp_path, "m", "leaderboard_ifeval", "2024-07-01T10-00-00.000001", rows)
    p = read_lm_eval_samples(tmp_path, "leaderboard_ifeval", "prompt_level_strict_acc",
                             item_prefix="ifeval")
    assert list(p.items) == ["ifeval-00000", "ifeval-00001"]
    assert list(p.scores[0]) == [1.0, 0.0]
    inst = read_lm_eval_samples(tmp_path, "leaderboard_ifeval", "inst_level_strict_acc")
    assert list(inst.scores[0]) == [0.75, 0.0] and inst.kind == "continuous"


def test_filters_missing_docs_and_newest_run(tmp_path):
    rows = []
    for d in range(3):
        rows.append(_sample(d, {"exact_match": float(d % 2)}, filt="strict-match"))
        rows.append(_sample(d, {"exact_match": 1.0}, filt="flexible-extract"))
    _write_run(tmp_path, "a", "gsm8k", "2024-05-01T00-00-00.000000", rows)
    with pytest.raises(DataError, match="several filters .flexible-extract, strict-match."):
        read_lm_eval_samples(tmp_path, "gsm8k", "exact_match")
    m = read_lm_eval_samples(tmp_path, "gsm8k", "exact_match", filter_name="strict-match")
    assert list(m.scores[0]) == [0.0, 1.0, 0.0]
    # model b: an older and a newer run; only the newest counts; it lacks doc 2
    _write_run(tmp_path, "b", "gsm8k", "2024-04-01T00-00-00.000000",
               [_sample(0, {"exact_match": 0.0}, "strict-match")])
    _write_run(tmp_path, "b", "gsm8k", "2024-06-01T00-00-00.000000",
               [_sample(0, {"exact_match": 1.0}, "strict-match"),
                _sample(1, {"exact_match": 1.0}, "strict-match")])
    assert len(find_sample_files(tmp_path, "gsm8k")) == 2
    m = read_lm_eval_samples(tmp_path, "gsm8k", "exact_match", filter_name="strict-match")
    assert list(m.models) == ["a", "b"]
    assert list(m.scores[1, :2]) == [1.0, 1.0] and np.isnan(m.scores[1, 2])


def test_errors_name_file_and_line(tmp_path):
    path = _write_run(tmp_path, "m", "t", "2024-01-01T00-00-00.0",
                      [_sample(0, {"acc": 1.0}), _sample(1, {"acc": 1.0})])
    with pytest.raises(DataError,
                       match=r"samples_t_.*jsonl:1: no metric 'f1' \(this log has acc\)"):
        read_lm_eval_samples(tmp_path, "t", "f1")
    path.write_text(path.read_text() + '{"doc_id": 2, "acc": \n')
    with pytest.raises(DataError, match=r"jsonl:3: not valid JSON"):
        read_lm_eval_samples([path], "t", "acc")
    path.write_text(json.dumps(_sample(0, {"acc": 1.0})) + "\n"
                    + json.dumps(_sample(0, {"acc": 0.0})) + "\n")
    with pytest.raises(DataError, match=r"jsonl:2: duplicate doc_id 0"):
        read_lm_eval_samples([path], "t", "acc")
    path.write_text(json.dumps(_sample(0, {"acc": 3.0})) + "\n")
    with pytest.raises(DataError, match=r"score 3 outside"):
        read_lm_eval_samples([path], "t", "acc")
    with pytest.raises(DataError, match="no samples_nothing_<timestamp>.jsonl files"):
        read_lm_eval_samples(tmp_path, "nothing", "acc")
