"""The validity experiment (bayeval.experiments.validity) and `bayeval bench validity`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayeval.cli import app
from bayeval.errors import DataError
from bayeval.experiments import validity


def test_sparse_variant_keeps_the_items_few_models_solve(ifeval):
    sparse = validity.variant_matrix(ifeval, "sparse")
    solved = np.nanmean(ifeval.scores, axis=0)
    assert sparse.n_items == int(np.sum(solved < validity.SPARSE_SHARE))
    assert np.all(np.nanmean(sparse.scores, axis=0) < validity.SPARSE_SHARE)
    assert sparse.n_models == ifeval.n_models
    with pytest.raises(DataError, match="variant"):
        validity.variant_matrix(ifeval, "nope")


def test_extremes_split_draws_targets_from_both_tails(ifeval):
    means = ifeval.model_means()
    low, high = np.quantile(means, [0.05, 0.95])
    for seed in range(3):
        split = validity.variant_split(ifeval, "extremes", 10, 0.5, seed)
        target_means = split.targets.model_means()
        assert np.sum(target_means <= low + 1e-9) == 5
        assert np.sum(target_means >= high - 1e-9) == 5
        assert not set(split.targets.models) & set(split.reference.models)
        pool = ifeval.n_models - 10
        assert split.reference.n_models == round(0.5 * pool)


def test_extrapolation_split_targets_the_strongest_from_the_weakest_half(ifeval):
    order = np.argsort(ifeval.model_means(), kind="stable")
    weak = set(ifeval.models[order[: ifeval.n_models // 2]])
    top = set(ifeval.models[order[-int(np.ceil(0.3 * ifeval.n_models)):]])
    firsts = set()
    for seed in range(3):
        split = validity.variant_split(ifeval, "extrapolation", 10, 0.5, seed)
        assert set(split.reference.models) == weak  # every model of the weakest half
        assert set(split.targets.models) <= top and split.targets.n_models == 10
        firsts.add(tuple(split.targets.models))
    assert len(firsts) == 3  # each seed its own targets


def test_domain_flags_are_summarised_by_hand():
    # flagged shares of all runs, of the misses and of the covered runs; runs without a
    # check (cached before it existed) are left out
    runs = pd.DataFrame({
        "dataset": "d", "variant": "extrapolation", "epsilon": 0.05, "method": "bq",
        "n": 10, "items": 10, "estimate": 0.5, "lower": 0.4, "upper": 0.6, "truth": 0.5,
        "covered": [True, True, True, False, False, True],
        "flagged": [True, False, False, True, False, np.nan]})
    row = validity.summarise(runs).set_index("stratum").loc["all"]
    assert row.flagged == pytest.approx(2 / 5)
    assert row.misses_flagged == pytest.approx(1 / 2)
    assert row.covered_flagged == pytest.approx(1 / 3)


def test_summary_by_hand():
    # two methods, four runs each; coverage, SE, items, strata and saving by hand
    runs = pd.DataFrame({
        "dataset": "d", "variant": "standard", "epsilon": 0.05,
        "method": ["active-pai"] * 4 + ["random"] * 4,
        "n": [10, 20, 30, 40, 40, 40, 60, 60],
        "items": [10, 20, 30, 40, 40, 40, 60, 60],
        "estimate": [0.02, 0.5, 0.5, 0.99, 0.03, 0.5, 0.5, 0.97],
        "lower": [0.0, 0.4, 0.45, 0.9, 0.0, 0.4, 0.45, 0.9],
        "upper": [0.05, 0.6, 0.55, 1.0, 0.06, 0.6, 0.55, 1.0],
        "truth": [0.03, 0.5, 0.6, 0.98, 0.03, 0.5, 0.6, 0.98],
        "covered": [True, True, False, True, True, True, False, True]})
    table = validity.summarise(runs).set_index(["method", "stratum"])
    row = table.loc[("active-pai", "all")]
    assert row.coverage == 0.75 and row.runs == 4
    assert row.coverage_se == pytest.approx(np.sqrt(0.75 * 0.25 / 4))
    assert row.mean_items == 25.0
    assert row.saving_vs_rs == pytest.approx(1 - 25 / 50)
    assert table.loc[("active-pai", "< 5%")].mean_items == 10
    assert table.loc[("active-pai", "> 95%")].saving_vs_rs == pytest.approx(1 - 40 / 60)
    assert table.loc[("active-pai", "5–95%")].coverage == 0.5
    # targets scoring exactly 0 or 1 have rows of their own (none here: no such row)
    assert ("active-pai", "= 0") not in table.index
    edge = runs.assign(truth=[0.0, 0.5, 0.6, 1.0] * 2, covered=[False, True, False, True] * 2)
    edges = validity.summarise(edge).set_index(["method", "stratum"])
    assert edges.loc[("active-pai", "= 0")].runs == 1
    assert edges.loc[("active-pai", "= 0")].coverage == 0.0
    assert edges.loc[("active-pai", "= 1")].coverage == 1.0
    assert edges.loc[("active-pai", "< 5%")].runs == 1  # the edge is also in its stratum
    assert np.isnan(row.variance_ratio)  # runs without RS-Mean's variance at their items
    # with it (N = 100 items): the median over runs of ((upper − lower) / 2z)² / rs_var
    n = runs["items"].to_numpy(float)
    truth = runs.truth.to_numpy()
    runs["rs_var"] = truth * (1 - truth) / n * (100 - n) / 99
    ratio = ((runs.upper - runs.lower) / (2 * 1.959963984540054)) ** 2 / runs.rs_var
    table = validity.summarise(runs).set_index(["method", "stratum"])
    assert table.loc[("active-pai", "all")].variance_ratio == pytest.approx(
        np.median(ratio[:4]))
    assert table.loc[("random", "> 95%")].variance_ratio == pytest.approx(ratio[7])


def _bench_validity(out, variants="standard", epsilon="0.2", method="random", seeds=1,
                    reps=2):
    """``bayeval bench validity`` on RTE, two targets, no FAQ, in this process."""
    return CliRunner().invoke(app, [
        "bench", "validity", "--datasets", "rte", "--variants", variants,
        "--epsilons", epsilon, "--methods", method, "--seeds", str(seeds), "--targets",
        "2", "--reps", str(reps), "--no-faq", "--out", str(out)])


def test_bench_validity_runs_from_the_cli(tmp_path):
    out = tmp_path / "v"
    result = _bench_validity(out, variants="standard,sparse")
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results.csv")
    assert set(table.method) == {"random"}
    assert table.loc[table.stratum == "all", "runs"].item() == 4
    assert (out / "validity.png").stat().st_size > 0
    # 4 runs a cell: every cell needs more runs, even one whose every run covers (SE 0)
    assert f"need more runs (≥ 475 each): {len(table)} of {len(table)}." in (
        out / "report.md").read_text()
    assert "skipped rte sparse" in result.output  # no item of rte is solved by < 10%
    # more seeds reuse the finished units: a unit's key holds the bucket count only for
    # a method padded to it (more seeds' splits may hold more buckets)
    more = _bench_validity(out, seeds=2)
    assert more.exit_code == 0 and "reusing 1 of 2 finished units" in more.output
    from bayeval.experiments.estimation import capacity_setting

    assert capacity_setting("bayesame", 40) == {"capacity": 40}
    assert capacity_setting("active-pai(predictor=exact)", 40) == {"capacity": 40}
    assert capacity_setting("active-pai", 40) == capacity_setting("random", 40) == {}
    bad = CliRunner().invoke(app, ["bench", "validity", "--epsilons", "0,1"])
    assert bad.exit_code == 2 and "ε must be in (0, 1)" in bad.output


def test_bench_validity_checks_the_model_based_runs(tmp_path):
    # bq on RTE's extrapolation split: its runs are checked, RS-Mean's are not; the
    # report has the check's table
    out = tmp_path / "v"
    result = _bench_validity(out, variants="extrapolation", epsilon="0.1", method="bq",
                             reps=1)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "results.csv").set_index(["method", "stratum"])
    assert 0.0 <= table.loc[("bq", "all"), "flagged"] <= 1.0
    assert np.isnan(table.loc[("random", "all"), "flagged"])
    assert "## Domain check of the model-based intervals" in (out / "report.md").read_text()
