"""Multi-target selection rules on a hand-made joint prediction."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.acquisition import argmax, information_gain
from bayeval.acquisition.multi_target import (
    initial_design,
    mean_information_gain,
    next_target,
    round_robin,
    target_information_gain,
)
from bayeval.inference.base import Prediction
from bayeval.inference.joint import JointPrediction


@pytest.fixture(scope="module")
def pred():
    rng = np.random.default_rng(0)
    T, N = 3, 8
    item_var = rng.uniform(0.5, 1.0, (T, N))
    item_cov = rng.uniform(0.0, 0.05, (T, N))
    item_var[1, 2] = item_cov[1, 2] = 0.0  # observed pair
    return JointPrediction(mean=jnp.asarray(rng.random(T)), var=jnp.asarray([0.01, 0.02, 0.005]),
                           item_mean=jnp.zeros((T, N)), item_var=jnp.asarray(item_var),
                           item_cov=jnp.asarray(item_cov), n=jnp.asarray([1, 2, 0]))


def test_target_information_gain_is_the_single_target_formula(pred):
    ig = np.asarray(target_information_gain(pred))
    for t in range(3):
        single = Prediction(pred.mean[t], pred.var[t], pred.item_mean[t], pred.item_var[t],
                            pred.item_cov[t], pred.n[t], jnp.ones((), bool))
        np.testing.assert_allclose(ig[t], information_gain(single), rtol=1e-12)
    assert ig[1, 2] == 0.0


def test_round_robin_picks_the_best_item_of_the_current_target(pred):
    available = jnp.ones((3, 8), bool).at[1, 2].set(False)
    w = round_robin(pred, available, jnp.asarray(1))
    pick = int(argmax(jax.random.key(0), w.reshape(-1), available.reshape(-1))[0])
    assert pick // 8 == 1
    assert pick % 8 == int(np.argmax(np.asarray(target_information_gain(pred))[1]))


def test_mean_ig_picks_the_best_item_and_a_uniform_target(pred):
    available = jnp.ones((3, 8), bool).at[1, 2].set(False)
    w = mean_information_gain(pred, available)
    best = int(np.argmax(np.asarray(target_information_gain(pred)).mean(0)))
    picks = np.array([int(argmax(jax.random.key(k), w.reshape(-1), available.reshape(-1))[0])
                      for k in range(600)])
    assert np.all(picks % 8 == best)
    # 600 draws, each target with p = 1/3: counts within ±5 sd (sd ≈ 11.5) of 200
    counts = np.bincount(picks // 8, minlength=3)
    assert np.all(np.abs(counts - 200) < 58)


def test_initial_design_and_target_cycle():
    design = np.asarray(initial_design(jax.random.key(1), 95))
    assert design.sum() == 10  # ⌈9.5⌉
    done = jnp.asarray([False, True, False, True])
    assert int(next_target(done, jnp.asarray(0))) == 2
    assert int(next_target(done, jnp.asarray(2))) == 0
    assert int(next_target(jnp.asarray([True, True, False, True]), jnp.asarray(2))) == 2
    assert int(next_target(jnp.ones(4, bool), jnp.asarray(1))) == -1
