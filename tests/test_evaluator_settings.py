"""The evaluator settings a journal keeps (bayeval.evaluation.evaluator_settings): the journal
header's JSON round trip, journals written before the type existed, and refusals."""

import json

import pytest

from bayeval.errors import JournalError
from bayeval.evaluation.evaluator_settings import EvaluatorSettings
from bayeval.evaluation.options import FAILURES_IN_A_ROW, SUBPROCESS


def test_settings_survive_the_journal_header():
    settings = EvaluatorSettings("lm-eval", None, 600.0, 0, 32, 1, lm_eval_args="--model hf",
                                 task="leaderboard_ifeval", metric="acc",
                                 subtasks=[["a", 10], ["b", 20]], lm_eval_mode="in-process",
                                 output_path="/tmp/out")
    header = json.loads(json.dumps(settings.to_json()))
    assert EvaluatorSettings.from_json(header, "journal j") == settings


def test_headers_written_before_the_type_read_as_they_ran():
    # the dicts `bayeval evaluate` and `bayeval select` wrote before: an oracle run, a
    # harness run from before the in-process route (no lm_eval_mode: a launch per
    # batch), a selection with its source, and a Python caller's own extra
    oracle = EvaluatorSettings.from_json({"evaluator": "oracle", "command": None,
                                          "timeout": 600.0, "retries": 1, "batch": 1,
                                          "concurrency": 1}, "j")
    assert (oracle.evaluator, oracle.retries, oracle.live, oracle.max_failures) == (
        "oracle", 1, False, None)
    harness = EvaluatorSettings.from_json({"evaluator": "lm-eval", "timeout": 60,
                                           "lm_eval_args": "--model hf", "task": "t",
                                           "subtasks": None, "batch": 32}, "j")
    assert harness.lm_eval_mode == SUBPROCESS and harness.subtasks == []
    assert harness.max_failures == FAILURES_IN_A_ROW
    select = EvaluatorSettings.from_json({"evaluator": "command", "command": "run {item}",
                                          "timeout": 5, "retries": 0,
                                          "source": {"dataset": "rte"}, "history": None},
                                         "j")
    assert select.source == {"dataset": "rte"} and select.command == "run {item}"
    assert EvaluatorSettings.from_json({"note": "mine"}, "j").evaluator == "oracle"


def test_an_unknown_evaluator_names_the_journal():
    with pytest.raises(JournalError, match=r"^journal run\.jsonl: evaluator 'shell' is not"):
        EvaluatorSettings.from_json({"evaluator": "shell"}, "journal run.jsonl")
