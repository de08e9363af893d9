"""Benchmark compression: BestRand's search, MINCE's sizing, the baselines, the subset file
and its lm-evaluation-harness export."""

from __future__ import annotations

import itertools
import json

import jax
import numpy as np
import pytest

from bayeval.compression.baselines import kmeans_subset, stratified_subset, uniform_subset
from bayeval.compression.bestrand import bestrand, random_subsets
from bayeval.compression.mince import choose_size, drift_percentiles, mince_sizing, worst_drift
from bayeval.compression.subset import Subset, export_lm_eval_samples
from bayeval.errors import DataError


def test_bestrand_keeps_the_candidate_of_least_imbalance():
    rng = np.random.default_rng(0)
    probes = (rng.random((4, 60)) < rng.random((1, 60))).astype(float)
    for seed in range(5):
        result = bestrand(probes, jax.random.key(seed), size=6, pool_size=30, n_candidates=50)
        pool = np.asarray(result.pool)
        assert len(set(pool)) == 30
        # brute force: rebuild every candidate from the same key and measure it
        _, search_key = jax.random.split(jax.random.key(seed))
        candidates = np.asarray(random_subsets(search_key, 30, 6, 50))
        H = probes[:, pool].mean(axis=1)
        d = [np.sum((probes[:, pool[c]].mean(axis=1) - H) ** 2) for c in candidates]
        np.testing.assert_allclose(np.asarray(result.imbalance), d, rtol=1e-12, atol=1e-15)
        assert int(result.chosen) == int(np.argmin(d))
        assert sorted(np.asarray(result.items)) == sorted(pool[candidates[np.argmin(d)]])


def test_bestrand_with_one_candidate_is_uniform_random():
    # L = 6 items, k = 2 from a pool of 4: every one of the 15 pairs must be equally likely.
    # 6000 draws, 400 expected per pair; chi-square with 14 degrees of freedom exceeds 41
    # with probability < 1e-4, so the test fails by chance about once in 10 000 runs.
    probes = np.random.default_rng(1).random((3, 6))
    draw = jax.jit(jax.vmap(lambda k: bestrand(probes, k, 2, 4, 1).items))
    items = np.sort(np.asarray(draw(jax.random.split(jax.random.key(0), 6000))), axis=1)
    pairs = list(itertools.combinations(range(6), 2))
    counts = np.array([np.sum((items[:, 0] == a) & (items[:, 1] == b)) for a, b in pairs])
    assert counts.sum() == 6000
    assert np.sum((counts - 400) ** 2 / 400) < 41


def test_mince_drift_and_size_rule():
    rng = np.random.default_rng(2)
    scores = (rng.random((5, 40)) < rng.random((5, 1))).astype(float)
    subsets = np.asarray(random_subsets(jax.random.key(0), 40, 7, 20))
    want = [np.max(np.abs(scores[:, s].mean(1) - scores.mean(1))) for s in subsets]
    np.testing.assert_allclose(np.asarray(worst_drift(scores, subsets)), want, rtol=1e-12)
    # the percentile at each size, against a brute-force draw of the same permutations
    sizes = np.array([5, 10, 20, 30])
    got = drift_percentiles(scores, jax.random.key(3), sizes, n_subsets=300, chunk=100)
    keys = jax.random.split(jax.random.key(3), 300)
    perms = np.stack([np.asarray(jax.random.permutation(k, 40)) for k in keys])
    for t, n in enumerate(sizes):
        drifts = [np.max(np.abs(scores[:, p[:n]].mean(1) - scores.mean(1))) for p in perms]
        assert got[t] == pytest.approx(np.percentile(drifts, 95), abs=1e-12)
    assert np.all(np.diff(got) <= 1e-12) or got[-1] < got[0]  # shrinks with size
    # n* is the first size whose gain falls below τ, and it is monotone in τ
    p95 = np.array([0.20, 0.12, 0.08, 0.07, 0.065, 0.03, 0.029])
    ns = np.arange(1, 8) * 10
    assert choose_size(ns, p95, 0.02) == 40 and choose_size(ns, p95, 0.05) == 30
    assert choose_size(ns, p95, 0.001) == 70  # gain never below τ: the largest size
    sizing = mince_sizing(scores, jax.random.key(4), step=4, n_subsets=400)
    chosen = [choose_size(sizing.sizes, sizing.p95, tau) for tau in
              (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 1.0)]
    assert all(a >= b for a, b in itertools.pairwise(chosen)), chosen
    assert sizing.size == choose_size(sizing.sizes, sizing.p95, 0.01)


def test_baselines():
    rng = np.random.default_rng(5)
    items, weights = uniform_subset(rng, 50, 10)
    assert len(set(items)) == 10 and np.allclose(weights, 0.1)
    categories = ["a"] * 30 + ["b"] * 15 + ["c"] * 5
    items, weights = stratified_subset(rng, categories, 10)
    labels = np.array(categories)[items]
    assert (labels == "a").sum() == 6 and (labels == "b").sum() == 3
    assert (labels == "c").sum() == 1 and weights.sum() == pytest.approx(1)
    # the weighted estimate is exact when scores are constant within categories
    score = np.array([0.9] * 30 + [0.5] * 15 + [0.1] * 5)
    assert weights @ score[items] == pytest.approx(score.mean())
    # k-means on three well-separated groups of items: one medoid each, weighted by size
    centers = np.array([[0.0] * 4, [1.0] * 4, [0.0, 1.0] * 2])
    groups = np.repeat([0, 1, 2], [20, 10, 10])
    reference = (centers[groups] + 0.01 * rng.standard_normal((40, 4))).T  # (models, items)
    items, weights = kmeans_subset(rng, reference, 3)
    assert sorted(groups[items]) == [0, 1, 2]
    assert sorted(np.round(weights, 6)) == [0.25, 0.25, 0.5]


def test_subset_file_and_lm_eval_export(tmp_path):
    items = [f"arc_challenge-{j:05d}" for j in (7, 1, 1100)]
    subset = Subset("arc_challenge", 1172, items, "mince", {"step": 50, "tau": 0.01}, 42,
                    ["m1", "m2"], {"held_out_max": 0.02}, task="arc_challenge")
    path = subset.save(tmp_path / "arc.subset.json")
    again = Subset.load(path)
    assert again == subset and json.loads(path.read_text())["size"] == 3
    samples = export_lm_eval_samples(again, tmp_path / "samples.json")
    # lm_eval --samples: {"task_name": [doc indices]}
    assert samples == {"arc_challenge": [1, 7, 1100]}
    assert json.loads((tmp_path / "samples.json").read_text()) == samples
    assert export_lm_eval_samples(again, task="arc_easy") == {"arc_easy": [1, 7, 1100]}
    # a key the installed harness does not know would be ignored by it (a full run): refused
    with pytest.raises(DataError, match="'leaderboard_arc_challenge' is not a task "
                                        "lm-evaluation-harness knows"):
        export_lm_eval_samples(again, task="leaderboard_arc_challenge")
    # a subset that names no harness task (a CSV's path as benchmark) is refused too
    with pytest.raises(DataError, match="no lm-evaluation-harness task name"):
        export_lm_eval_samples(Subset("/data/scores.csv", 1172, items, "random"))
    with pytest.raises(DataError, match="doc index"):
        Subset("b", 5, ["abc"], "random", task="b").harness_samples()
    with pytest.raises(DataError, match="sum to 1"):
        Subset("b", 5, ["b-1", "b-2"], "kmeans", weights=[0.5, 0.6])
    (tmp_path / "bad.json").write_text('{"format": "bayeval-subset", "version": 1}')
    with pytest.raises(DataError, match="missing field"):
        Subset.load(tmp_path / "bad.json")


def test_cli_compress_writes_subset_and_samples(tmp_path):
    from typer.testing import CliRunner

    from bayeval.cli import app
    from bayeval.data import load_dataset

    rte = load_dataset("rte")
    runner = CliRunner()
    for method, extra in (("bestrand", ["--retention", "0.1", "--candidates", "50"]),
                          ("mince", ["--step", "50"])):
        out, samples = tmp_path / f"{method}.json", tmp_path / f"{method}_samples.json"
        result = runner.invoke(app, ["compress", "--method", method, "--dataset", "rte",
                                     "--out", str(out), "--export-samples", str(samples),
                                     "--task", "rte", "--json", *extra])
        assert result.exit_code == 0, result.output
        r = json.loads(result.stdout)
        subset = Subset.load(out)
        assert subset.method == method and r["size"] == subset.size
        assert set(subset.items) <= set(rte.items) and subset.drift["held_out_models"] == 44
        indices = json.loads(samples.read_text())["rte"]
        assert indices == sorted(int(i.split("-")[-1]) for i in subset.items)
        if method == "bestrand":
            assert subset.size == 28 and len(subset.calibration_models) == 5
        else:  # step 50 on 277 items: a multiple of 50 below 277
            assert subset.size % 50 == 0 and len(subset.calibration_models) == 7
    bad = runner.invoke(app, ["compress", "--method", "mince", "--dataset", "rte",
                              "--size", "10", "--out", str(tmp_path / "x.json")])
    assert bad.exit_code == 2 and "mince chooses the size" in bad.output


@pytest.mark.parametrize(("items", "message"), [
    (["rte-00003", "rte-00300"], r"item 'rte-00300': doc 300 is beyond the 277 documents "
                                 "of rte"),
    (["rte-00003", "mrpc-00012"], r"item 'mrpc-00012' is not an item of rte: its items "
                                  "are 'rte-<doc_id>'"),
    (["rte-00012", "rte-12"], r"items 'rte-00012' and 'rte-12' are the same doc 12 of rte"),
])
def test_a_subset_item_that_is_not_a_document_of_the_benchmark_is_refused(
        tmp_path, items, message):
    # an edited subset file: an id past the benchmark, of another benchmark, or a second
    # spelling of one document is refused, not read as the document with that number
    from bayeval.compression.estimate import read_subset_run

    with pytest.raises(DataError, match=message):
        read_subset_run(tmp_path, Subset("rte", 277, items, "random", task="rte"))


def test_subtask_intervals_of_a_uniform_subset_cover_on_musr():
    """Each subtask's interval and the group's (size-weighted: the mean over all documents;
    equal: the mean of the subtasks') cover over 1200 uniform subsets of 60 of the bundled
    MuSR's 756 documents (its three subtasks 250/256/250), 8 models spread over the score
    range, the truths the models' full means. At a true 0.95 the SE of 1200 runs is
    0.0063: 0.93 is 3 SE below (2400 runs gave 0.945–0.956 for all five)."""
    from bayeval.compression.estimate import subset_estimate
    from bayeval.data import load_dataset

    musr = load_dataset("musr")
    subtasks = [[n, int(c)] for n, c in (p.split(":") for p in
                                         musr.metadata["subtasks"].split(","))]
    edges = np.cumsum([0] + [c for _, c in subtasks])
    order = np.argsort(np.nanmean(musr.scores, 1))
    rng = np.random.default_rng(0)
    hits: dict[str, list[bool]] = {}
    for k in order[np.linspace(0, len(order) - 1, 8).astype(int)]:
        row = musr.scores[k]
        truths = [row[edges[g]:edges[g + 1]].mean() for g in range(len(subtasks))]
        for _ in range(150):
            idx = np.sort(rng.choice(musr.n_items, 60, replace=False))
            subset = Subset("musr", musr.n_items, list(musr.items[idx]), "random",
                            task="leaderboard_musr", subtasks=subtasks)
            scores = dict(zip(subset.items, row[idx], strict=True))
            for mean, truth in (("size", row.mean()), ("equal", np.mean(truths))):
                result = subset_estimate(subset, scores, group_mean=mean)
                hits.setdefault(mean, []).append(result["lower"] <= truth <= result["upper"])
            for g, part in enumerate(result["subtasks"]):
                inside = np.sum((idx >= edges[g]) & (idx < edges[g + 1]))
                assert part["task"] == subtasks[g][0] and part["items"] == inside
                hits.setdefault(part["task"], []).append(
                    part["lower"] <= truths[g] <= part["upper"])
    assert len(hits) == 5 and all(len(v) == 1200 for v in hits.values())
    assert all(np.mean(v) >= 0.93 for v in hits.values()), {
        k: np.mean(v) for k, v in hits.items()}
