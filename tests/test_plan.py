"""The plan before a run, the rule that runs the rest of a task whole, and the full run's
time projected as a full run packs its documents (bayeval.evaluation.plan,
bayeval.loop.plan, bayeval.loop.timing, bayeval.evaluators.harness_requests)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import bayeval
from bayeval.data.bundled import load_dataset
from bayeval.evaluation.plan import LITTLE_SAVING, Plan
from bayeval.evaluators.harness_requests import (
    PACK_SLACK,
    call_batch_size,
    padded_size,
)
from bayeval.loop.timing import RunTimes


def _request(kind: str, context: str, more: str | dict, repeats: int = 1):
    return SimpleNamespace(request_type=kind, args=(context, more), repeats=repeats)


def test_padded_size_is_the_harness_packing_enumerated():
    # independent reference: the requests' sizes sorted, longest first, in batches of B,
    # each batch paying B' × its longest (B' its own size), summed per request type
    rng = np.random.default_rng(0)
    requests = [_request("loglikelihood", "x" * int(rng.integers(1, 90)), " y")
                for _ in range(45)]
    requests += [_request("generate_until", "z" * 10, {"max_gen_toks": 5}, repeats=2)]
    sizes = sorted((len(r.args[0]) + 2 for r in requests[:45]), reverse=True)
    expected = sum(max(sizes[i:i + 8]) * len(sizes[i:i + 8]) for i in range(0, 45, 8))
    expected += 2 * (10 + 4 * 5)  # two repeats of one generation: one batch of two
    assert padded_size(requests, 8) == expected
    # one at a time nothing is padded: the sizes' sum
    assert padded_size(requests[:45], 1) == sum(sizes)


def test_choices_sharing_a_context_are_one_row_as_the_hf_model_runs_them():
    # independent reference: one row per (context, continuation less its last token),
    # as long as its longest request; a four-choice document of one-token choices is one
    # row, a document whose choices differ before their last token is four
    rng = np.random.default_rng(1)
    requests, rows = [], []
    for doc in range(20):
        context = "c" * int(rng.integers(1, 60)) + str(doc)
        choices = [" a", " bb", " c", " d"] if doc % 2 else [" x y", " z y", " w y", " v y"]
        requests += [_request("loglikelihood", context, c) for c in choices]
        rows += ([len(context) + 3] if doc % 2 else [len(context) + 4] * 4)

    def shared(instance):  # a word per token: the continuation less its last word
        return instance.args[0], tuple(instance.args[1].split()[:-1])

    rows.sort(reverse=True)
    expected = sum(max(rows[i:i + 8]) * len(rows[i:i + 8]) for i in range(0, len(rows), 8))
    assert padded_size(requests, 8, shared) == expected
    assert len(rows) == 10 + 40 and padded_size(requests, 8) > expected  # unshared: 80 rows


def test_a_calls_batch_size_pads_no_more_per_document_than_the_full_run():
    # documents of a tenfold spread of lengths, a call of 32 of them: the batch size is
    # the largest of 32, 16, 8, … whose padding per document is within PACK_SLACK of the
    # full run's, checked against every size enumerated; one length: 32 itself
    rng = np.random.default_rng(2)
    task = [_request("loglikelihood", "w" * int(np.exp(rng.uniform(np.log(5), np.log(120)))),
                     " y") for _ in range(500)]
    full = padded_size(task, 32) / len(task)
    call = list(rng.choice(task, 32, replace=False))
    size = call_batch_size(call, 32, 32, full)
    fits = [b for b in (32, 16, 8, 4, 2, 1)
            if padded_size(call, b) <= (1 + PACK_SLACK) * full * 32]
    assert size == (fits[0] if fits else 1) and size < 32
    assert padded_size(call, 32) / 32 > 1.5 * full  # what one batch of 32 would pad
    same = [_request("loglikelihood", "w" * 40, " y") for _ in range(500)]
    assert call_batch_size(same[:32], 32, 32, padded_size(same, 32) / 500) == 32


def test_a_full_run_is_projected_from_the_calls_padded_sizes():
    clock = RunTimes()
    # calls whose time is exactly 2 ms per padded character: the projection is exact,
    # its interval of width 0
    for size in (1000.0, 1500.0, 800.0):
        clock.calls.append((32, 0.002 * size, size))
        clock.item_seconds.extend([0.002 * size / 32] * 32)
    clock.full_size = 20000.0
    out = clock.summary(500)
    assert out["full_run_basis"] == "packed"
    assert out["full_run_seconds"] == pytest.approx(40.0)
    assert out["full_run_lower"] == pytest.approx(40.0)
    assert out["full_run_upper"] == pytest.approx(40.0)
    # without the task's size: N times the mean time per document (the earlier basis)
    clock.full_size = None
    plain = clock.summary(500)
    assert plain["full_run_basis"] == "per document"
    assert plain["full_run_seconds"] == pytest.approx(500 * np.mean(clock.item_seconds))
    # the saving is the projection less the run's wall time: negative when slower
    clock.wall, clock.full_size = 55.0, 20000.0
    assert clock.summary(500)["saved_seconds"] == pytest.approx(-15.0)


def test_the_plans_numbers():
    plan = Plan("t", 1000, "active-pai", 32, ("a", "b", "c", "d"), (0.2, 0.4, 0.6, 0.9),
                (600, 500, 400, 200), 450, 200, 600)
    assert plan.share == 0.45 and plan.time_ratio == 0.45 and not plan.little_saving
    timed = replace(plan, seconds_per_document=0.04, seconds_per_call=0.5)
    # (450·0.04 + 15 calls·0.5) / (1000·0.04)
    assert timed.time_ratio == pytest.approx((450 * 0.04 + 15 * 0.5) / 40)
    slow = replace(plan, seconds_per_document=0.04, seconds_per_call=2.0)
    assert slow.little_saving == (1 - slow.time_ratio < LITTLE_SAVING) is True
    assert "epsilon" in slow.advice() and "saving under 15%" in slow.line()
    # revised: the three stand-ins nearest the estimate (0.45: 0.4, 0.6, 0.2)
    rev = plan.revised(0.45, 64)
    assert (rev.predicted, rev.low, rev.high) == (500, 400, 600)
    assert rev.revised_at == 64 and "revised after 64" in rev.line()
    assert json.loads(json.dumps(plan.to_dict()))["share"] == 0.45


def test_the_plan_revised_by_the_targets_own_width():
    # stand-ins whose documents follow the finite-sample law exactly, 1.2 × 1/(ε²/k + 1/N)
    # with k = w²/(1/n − 1/N) read after a first call of 32 (the law the revision assumes,
    # built here from its statement): by width alone, a target as wide as one of them after
    # its own 32 needs what that one needed. The revision is the geometric mean of that and
    # the 3 stand-ins nearest its score (estimate 0.5: scores 0.4, 0.6, 0.2, whose median
    # is the 0.4 stand-in's documents); never above N, never below what it ran; without
    # the stand-ins' widths, the nearest scores alone
    big_n, eps, first = 1000, 0.1, 32
    widths = (0.1, 0.2, 0.3, 0.4)

    def law(w):
        k = w * w / (1 / first - 1 / big_n)
        return 1.2 / (eps * eps / k + 1 / big_n)

    docs = tuple(round(law(w)) for w in widths)
    plan = Plan("t", big_n, "active-pai", 32, ("a", "b", "c", "d"), (0.2, 0.4, 0.6, 0.9),
                docs, int(np.median(docs)), min(docs), max(docs), epsilon=eps,
                first_call=first, stand_in_widths=widths)
    by_score = docs[1]
    for w in (*widths, 0.8):
        rev = plan.revised(0.5, first, w)
        assert abs(rev.predicted - math.sqrt(law(w) * by_score)) <= 1  # (docs rounded)
        assert rev.low <= rev.predicted <= rev.high and rev.width == w
    # by width, more than the task: the task's N, then the mean with the nearest scores'
    assert plan.revised(0.5, first, 50.0).predicted == round(math.sqrt(big_n * by_score))
    assert plan.revised(0.5, 300, 0.0).predicted == 300  # nothing more to run
    assert "interval width 0.200" in plan.revised(0.5, first, 0.2).line()
    no_widths = replace(plan, stand_in_widths=())
    alone = no_widths.revised(0.5, first, 0.2)
    assert alone.width is None and alone.predicted == by_score


@pytest.fixture(scope="module")
def rte():
    matrix = load_dataset("rte")
    row = dict(zip(matrix.items, np.asarray(matrix.scores)[5], strict=True))
    calls: list[int] = []

    @bayeval.batched
    def score(items):
        calls.append(len(items))
        return [float(row[i]) for i in items]

    return SimpleNamespace(matrix=matrix, row=row, score=score, calls=calls)


def test_a_plan_from_the_reference_alone(rte):
    plan = bayeval.plan(dataset="rte", batch=32, epsilon=0.01)
    # stand-ins spread over the range: the weakest and the strongest complete models
    means = np.asarray(rte.matrix.scores).mean(axis=1)
    assert min(plan.stand_in_scores) == pytest.approx(means.min())
    assert max(plan.stand_in_scores) == pytest.approx(means.max())
    assert len(plan.stand_ins) == 8 and plan.documents == rte.matrix.n_items
    # at ε = 0.01 on 277 items a run needs (nearly) all of them: little to save
    assert plan.share >= 0.85 and plan.little_saving
    assert plan.low <= plan.predicted <= plan.high <= plan.documents


@pytest.mark.parametrize("rest_whole", ["auto", "never"])
def test_the_rest_runs_whole_where_the_plan_says_it_is_cheaper(rte, tmp_path, capfd,
                                                                rest_whole):
    rte.calls.clear()
    result = bayeval.evaluate(dataset="rte", model="m5", evaluator=rte.score, batch=32,
                              epsilon=0.01, plan=True, rest_whole=rest_whole,
                              journal=str(tmp_path / "j.jsonl"), progress=None).to_dict()
    said = capfd.readouterr().err
    assert said.splitlines()[0].startswith("plan: ")  # the plan's line first
    n = rte.matrix.n_items
    truth = float(np.mean(list(rte.row.values())))
    if rest_whole == "auto":  # the plan's share ≥ 85%: the whole task in one call
        assert rte.calls == [n] and result["rest_whole_at"] == 0
        assert result["estimate"] == pytest.approx(truth)
        assert result["lower"] == pytest.approx(truth)
        assert result["upper"] == pytest.approx(truth)
        assert "in one call" in said
    else:  # batch after batch, the plan revised after the first call all the same
        assert max(rte.calls) == 32 and result["rest_whole_at"] is None
        assert len(rte.calls) == math.ceil(result["documents_run"] / 32)
        assert result["plan_revised"]["revised_at"] == 32
        plans = [line for line in said.splitlines() if line.startswith("plan: ")]
        assert len(plans) == 2 and "revised after 32" in plans[1]
    assert result["plan"]["predicted"] >= 0.85 * n


def test_bayeval_plan_on_the_command_line(tmp_path):
    # (BAYEVAL_PLAN=off, the tests' setting, is for evaluate: the plan command plans)
    done = subprocess.run([sys.executable, "-m", "bayeval.cli", "plan", "--dataset", "rte",
                           "--batch", "32", "--epsilon", "0.01", "--json"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["documents"] == 277 and plan["line"].startswith("plan: ")
    assert plan["little_saving"] is True
    bad = subprocess.run([sys.executable, "-m", "bayeval.cli", "plan", "--dataset", "rte",
                          "--seconds-per-document", "-1"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert bad.returncode == 2 and "--seconds-per-document" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_stand_ins_are_held_out_a_sixth_at_a_time():
    from bayeval.loop.plan import _fold_size

    # a sixth of the models at once, between 1 and 8: the reference keeps ≥ 5/6
    for models in (2, 6, 13, 60, 300):
        size = _fold_size(models)
        assert 1 <= size <= 8 and models - size >= models * 5 / 6 - 1
