"""The reference-linear GP backend (bayeval.inference.reference_linear) against the dense
function-space posterior, and the ``bq`` method built on it."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.acquisition import variance_reduction
from bayeval.inference.reference_linear import ReferenceLinearGP, reference_features
from bayeval.loop.simulate import simulate
from bayeval.methods import make_method


def test_rank_one_updates_equal_the_dense_function_space_posterior(ifeval_slice):
    # Independent reference: the GP with kernel K = XᵀX + σ²I over items, conditioned on
    # the observed scores by one dense solve; the backend reaches it by rank-1 updates of
    # the weight-space posterior. Means, Var(R | C), Var(s_i | C) and Cov(R, s_i | C) must
    # agree to rounding (1e-10) after 1, 7 and 20 scores, missing reference cells included.
    reference, target = ifeval_slice(5, 12, 30, "small")
    ref = reference.scores.copy()
    ref[2, 3] = np.nan
    noise = 0.3
    backend = ReferenceLinearGP(noise).backend()
    state = backend.init(ref, 30)
    x, mean = reference_features(ref)
    kernel = x.T @ x
    order = np.random.default_rng(1).permutation(30)
    for k, item in enumerate(order[:20], start=1):
        state = backend.observe(state, jnp.asarray(item), jnp.asarray(target[item]))
        if k not in (1, 7, 20):
            continue
        seen = np.sort(order[:k])
        rest = np.setdiff1d(np.arange(30), seen)
        gram = kernel[np.ix_(seen, seen)] + noise * np.eye(k)
        cross = kernel[:, seen]
        post_mean = mean + cross @ np.linalg.solve(gram, target[seen] - mean[seen])
        post_cov = kernel - cross @ np.linalg.solve(gram, cross.T)
        pred = backend.predict(state)
        expect_items = np.where(np.isin(np.arange(30), seen), target, post_mean)
        np.testing.assert_allclose(pred.item_mean, expect_items, atol=1e-10)
        total = post_cov[np.ix_(rest, rest)].sum() + rest.size * noise
        assert float(pred.mean) == pytest.approx(expect_items.mean(), abs=1e-12)
        assert float(pred.var) == pytest.approx(total / 30**2, rel=1e-9)
        item_var = np.zeros(30)
        item_var[rest] = np.diag(post_cov)[rest] + noise
        np.testing.assert_allclose(pred.item_var, item_var, atol=1e-10)
        item_cov = np.zeros(30)
        item_cov[rest] = (post_cov[np.ix_(rest, rest)].sum(1) + noise) / 30
        np.testing.assert_allclose(pred.item_cov, item_cov, atol=1e-10)


def test_bq_picks_the_item_that_most_reduces_the_variance_of_r(ifeval_slice):
    # The greedy design: after every step, the next item is the argmax over unseen items
    # of the exact reduction Var(R | C) − Var(R | C, s_i), computed by observing each
    # candidate in turn (the reduction does not depend on the candidate's score), and the
    # rule's score Cov(R, s_i)² / Var(s_i) is that reduction.
    reference, target = ifeval_slice(6, 10, 24, "small")
    method = make_method("bq", epsilon=1e-6)
    run = simulate(method, reference.scores, target[None], [0], n_steps=6)
    backend = method.backend
    state = backend.init(reference.scores, 24)
    for item in run.items[0]:
        pred = backend.predict(state)
        unseen = np.flatnonzero(~np.asarray(state.observed))
        drops = [float(pred.var - backend.predict(backend.observe(state, jnp.asarray(j),
                                                                   jnp.asarray(0.0))).var)
                 for j in unseen]
        # items with equal reference columns tie: the pick must reach the largest drop
        assert drops[int(np.flatnonzero(unseen == item)[0])] == pytest.approx(max(drops),
                                                                             rel=1e-9)
        rule = np.asarray(variance_reduction()(pred, ~state.observed))
        assert np.exp(rule[unseen]) == pytest.approx(np.array(drops), rel=1e-9)
        state = backend.observe(state, jnp.asarray(item), jnp.asarray(target[item]))
