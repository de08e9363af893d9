"""IRT baselines: abilities and scores recovered with calibrated 90% intervals on data
simulated from 2PL and β³-IRT, item calibration recovers the items, and the simulated
baseline ends exactly at the truth."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.estimators.irt import calibrate, estimate, fit_ability
from bayeval.methods.irt import fit_schedule, simulate_irt
from bayeval.models.irt import ItemParams, expected_score

Z90 = 1.6449


def _simulate(kind: str, n_models: int, n_items: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "2pl":
        items = ItemParams(jnp.asarray(rng.lognormal(0.0, 0.5, n_items)),
                           jnp.asarray(rng.normal(0.0, 2.0, n_items)))
        ability = rng.normal(0.0, 1.0, n_models)
        p, _ = expected_score(kind, jnp.asarray(ability), items)
        scores = (rng.random(p.shape) < np.asarray(p)).astype(float)
    else:
        # items are given to the ability fit, so any values serve; moderate ones (a in
        # [0.5, 1.5], δ in [0.2, 0.8]) keep the Beta parameters, and NUTS's step, sane
        items = ItemParams(jnp.asarray(rng.uniform(0.5, 1.5, n_items)),
                           jnp.asarray(rng.uniform(0.2, 0.8, n_items)))
        ability = rng.beta(1.0, 1.0, n_models)
        theta = ability[:, None]
        a, d = np.asarray(items.discrimination), np.asarray(items.difficulty)
        scores = rng.beta((theta / d) ** a, ((1 - theta) / (1 - d)) ** a)  # 0s/1s kept
    return items, ability, scores


@pytest.mark.parametrize("kind", ["2pl", "beta3"])
def test_ability_and_score_intervals_cover_on_simulated_data(kind):
    # 50 datasets (targets) simulated from the model, 20 items with known parameters, 10
    # observed each; all abilities in one NUTS run (independent given the items). The 90%
    # intervals of θ (central draw quantiles) and of R (R̂ ∓ 1.645 sqrt(Var_R)) must cover
    # within the issue's [0.8, 0.97]: binomial sd over 50 is 0.042, so −2.4σ/+1.7σ
    # (fixed seeds).
    n_sets, n_items = 50, 20
    items, ability, scores = _simulate(kind, n_sets, n_items, seed=3)
    rng = np.random.default_rng(4)
    mask = np.zeros(scores.shape, bool)
    for row in mask:
        row[rng.permutation(n_items)[:10]] = True
    result = fit_ability(kind, items, np.where(mask, scores, np.nan), mask,
                         num_warmup=150, num_samples=200, num_chains=4, seed=0, warn=False)
    # short chains for a unit test (60 R-hats; the largest fluctuates above 1.01)
    assert result.divergences == 0 and result.diagnostics.r_hat.max() < 1.03
    draws = result.samples["ability"].reshape(-1, n_sets)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    coverage = np.mean((lo <= ability) & (ability <= hi))
    assert 0.8 <= coverage <= 0.97, coverage
    r_hat, var = estimate(kind, draws, items, scores, mask)
    truth = scores.mean(axis=1)
    coverage_r = np.mean(np.abs(r_hat - truth) <= Z90 * np.sqrt(var))
    assert 0.8 <= coverage_r <= 0.97, coverage_r
    # the observed part is exact: R̂ − (1/N)Σ_C s is the mean predicted unseen score
    assert np.all(r_hat >= np.where(mask, scores, 0).sum(1) / n_items - 1e-12)


def test_2pl_calibration_recovers_items_with_missing_entries():
    items, _, scores = _simulate("2pl", 300, 30, seed=7)
    scores[np.random.default_rng(8).random(scores.shape) < 0.2] = np.nan  # 20% missing
    fitted = calibrate("2pl", scores)
    b_true, b_fit = np.asarray(items.difficulty), np.asarray(fitted.difficulty)
    a_true, a_fit = np.asarray(items.discrimination), np.asarray(fitted.discrimination)
    # difficulty is well determined by 240 responses per item; discrimination less so
    assert np.corrcoef(b_true, b_fit)[0, 1] > 0.95
    assert np.corrcoef(np.log(a_true), np.log(a_fit))[0, 1] > 0.7
    with pytest.raises(ValueError, match="calibration method"):
        calibrate("2pl", scores, method="em")
    with pytest.raises(ValueError, match="unknown IRT model"):
        calibrate("3pl", scores)


def test_simulated_baseline_ends_at_the_truth(ifeval):
    assert fit_schedule(120, 50, (10, 25)) == [1, 10, 25, 50, 100]
    ref, targets = ifeval.scores[:40, :20], ifeval.scores[200:202, :20]
    result, fits = simulate_irt([ref], targets, kind="2pl", refit_every=20, first_fits=(),
                                num_warmup=100, num_samples=100, num_chains=2)
    assert list(fits["n"]) == [1, 20] and (fits["runs"] == 2).all()
    assert result.estimate.shape == (2, 20) and np.isfinite(result.estimate).all()
    np.testing.assert_allclose(result.estimate[:, -1], targets.mean(1), atol=1e-12)
    np.testing.assert_allclose(result.var[:, -1], 0.0, atol=1e-15)
    assert (result.lower <= result.upper).all()
    assert sorted(result.items[0]) == list(range(20))
