"""The calibrated-difficulty backend (bayeval.inference.difficulty) against independent
references: its features by direct computation, its per-row fits against a generic
optimiser, its online posterior against the exact Gaussian algebra."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, special

from bayeval.inference.difficulty import CalibratedDifficulty, fit_rows, item_features


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """12 models × 30 items from a two-factor logistic model, a few scores fractional and
    a few entries missing."""
    rng = np.random.default_rng(5)
    logits = rng.normal(0, 1, (12, 2)) @ rng.normal(0, 1.2, (2, 30)) + rng.normal(0, 1, 30)
    scores = (rng.random((12, 30)) < special.expit(logits)).astype(float)
    scores[0, :5] = [0.25, 0.5, 0.75, 0.1, 0.9]
    scores[rng.random(scores.shape) < 0.05] = np.nan
    return scores


def test_features_are_the_shrunk_logit_and_the_leading_principal_axes(reference):
    x = item_features(reference, components=2)
    assert x.shape == (30, 4) and np.all(x[:, 0] == 1.0)
    for i in range(30):
        col = reference[:, i][~np.isnan(reference[:, i])]
        mean = (col.sum() + 0.5) / (col.size + 1)
        assert x[i, 1] == pytest.approx(np.log(mean / (1 - mean)), abs=1e-12)
    # the axes are the top eigenvectors of the items × items Gram matrix of the centred
    # scores (missing entries as 0), up to sign, scaled to unit variance over the items
    mean = special.expit(x[:, 1])
    centred = np.where(np.isnan(reference), 0.0, reference - mean)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    for k in range(2):
        top = vectors[:, -1 - k]
        top = top / top.std()
        assert min(np.abs(x[:, 2 + k] - top).max(), np.abs(x[:, 2 + k] + top).max()) < 1e-8


def test_each_row_fit_is_the_penalised_logistic_optimum(reference):
    x = item_features(reference, components=1)
    u = fit_rows(reference, x, ridge=0.7)
    penalty = np.array([1e-6, 0.7, 0.7])
    for j in (0, 3, 11):  # row 0 holds the fractional scores
        seen = ~np.isnan(reference[j])
        y, xs = reference[j, seen], x[seen]

        def loss(w, y=y, xs=xs):
            eta = xs @ w
            return np.sum(np.logaddexp(0, eta) - y * eta) + 0.5 * np.sum(penalty * w * w)

        best = optimize.minimize(loss, np.zeros(3), method="BFGS", options={"gtol": 1e-10})
        assert np.allclose(u[j], best.x, atol=1e-5)


def test_the_online_posterior_is_the_gaussian_laplace_update(reference):
    # the backend's first observation is one Newton step from the prior: for a Gaussian
    # prior N(m, S) and one logistic observation at the prior mode, the new covariance is
    # (S⁻¹ + w x xᵀ)⁻¹ and the mean m + S_new x (z − p): checked with dense inverses
    factory = CalibratedDifficulty(components=1)
    backend = factory.backend()
    state = backend.init(jnp.asarray(reference), 30)
    m = np.asarray(state.posterior.mean)
    s = np.asarray(state.posterior.cov)
    x = np.asarray(state.item_factors)
    p0 = np.asarray(backend.predict(state).item_mean)
    assert np.allclose(p0, special.expit(x @ m), atol=1e-12)
    new = backend.observe(state, jnp.asarray(7), jnp.asarray(1.0))
    p = special.expit(x[7] @ m)
    cov = np.linalg.inv(np.linalg.inv(s) + p * (1 - p) * np.outer(x[7], x[7]))
    assert np.allclose(np.asarray(new.posterior.cov), cov, atol=1e-10)
    assert np.allclose(np.asarray(new.posterior.mean), m + cov @ x[7] * (1 - p), atol=1e-10)
    # the prior is the spread of the reference rows' fits, inflated
    u = fit_rows(reference, x, factory.ridge)
    assert np.allclose(m, u.mean(0), atol=1e-10)
    assert np.allclose(s, factory.inflate * np.cov(u, rowvar=False) + 1e-6 * np.eye(3),
                       atol=1e-10)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="components must be"):
        CalibratedDifficulty(components=-1)
    with pytest.raises(ValueError, match="ridge and inflate"):
        CalibratedDifficulty(ridge=0.0)
