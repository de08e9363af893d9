"""FAQ (seed 001; docs/methods.md §3): factor model, online Laplace, hybrid policy, PAI."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval import acquisition as acq
from bayeval.data import ScoreMatrix, load_dataset
from bayeval.errors import SessionError
from bayeval.estimators.pai import (
    horvitz_thompson_uniform,
    pai_estimate,
    pai_from_rounds,
    pai_start,
    pai_update,
)
from bayeval.evaluators import MatrixOracle
from bayeval.inference.factor_laplace import (
    factor_prediction,
    factor_start,
    laplace_update,
    prefitted,
)
from bayeval.loop.session import Session
from bayeval.loop.simulate import simulate
from bayeval.methods.faq import HybridParams, faq_with, simulate_hybrid
from bayeval.models.factor import cross_validate, factor_prior, fit_factors, one_se_choice


def _random_state(rng, n_items=12, k=3):
    v = rng.normal(size=(n_items, k))
    a = rng.normal(size=(k, k))
    cov = a @ a.T / k + 0.2 * np.eye(k)
    return v, rng.normal(size=k) * 0.5, cov


def test_laplace_update_is_a_newton_step_on_the_log_posterior():
    rng = np.random.default_rng(0)
    for case in range(6):
        v, mean, cov = _random_state(rng, n_items=7, k=4)
        item, z = int(rng.integers(7)), float(case % 2)
        precision = np.linalg.inv(cov)

        def log_post(u, vi=v[item], z=z, mean=mean, precision=precision):
            logit = u @ vi
            return (-0.5 * (u - mean) @ precision @ (u - mean)
                    + z * jax.nn.log_sigmoid(logit) + (1 - z) * jax.nn.log_sigmoid(-logit))

        u0 = jnp.asarray(mean)
        hess = -np.asarray(jax.hessian(log_post)(u0))
        newton = mean + np.linalg.solve(hess, np.asarray(jax.grad(log_post)(u0)))
        state = laplace_update(factor_start(mean, cov, jnp.asarray(v)), jnp.asarray(v), item, z)
        np.testing.assert_allclose(state.mean, newton, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(state.cov, np.linalg.inv(hess), rtol=1e-10, atol=1e-12)
        dense = np.einsum("jk,kl,jl->j", v, np.linalg.inv(hess), v)
        np.testing.assert_allclose(state.latent_var, dense, rtol=1e-9, atol=1e-12)
        assert int(state.n) == 1


def test_pai_reduces_to_uniform_sampling_with_constant_predictions():
    rng = np.random.default_rng(1)
    n_items, rounds = 40, 25
    z_bank = (rng.random(n_items) < 0.6).astype(float)
    for constant in (0.0, 0.37):
        draws = rng.integers(n_items, size=rounds)
        z = z_bank[draws]
        state = pai_start()
        for zi in z:
            state = pai_update(state, zi, constant, 1.0 / n_items, constant * n_items)
        # the uniform with-replacement (Hansen–Hurwitz) estimator: the sample mean, and
        # its variance estimate S²/T, S² the sample variance (1/(T − 1); the authors'
        # form: 1/T)
        for centre, dof in (("estimate", rounds - 1), ("ht", rounds)):
            theta, var = pai_estimate(state, n_items, centre)
            assert float(theta) == pytest.approx(z.mean(), abs=1e-12)
            s2 = np.sum((z - z.mean()) ** 2) / dof
            assert float(var) == pytest.approx(s2 / rounds, abs=1e-12)
            batch = pai_from_rounds(z, np.full(rounds, constant), np.full(rounds, 1 / n_items),
                                    np.full(rounds, constant * n_items), n_items, centre)
            np.testing.assert_allclose(batch, (theta, var), atol=1e-12)


def test_pai_is_unbiased_under_an_adaptive_policy_by_enumeration():
    """Every draw sequence of T = 3 rounds over N = 4 items, with q and p̂ depending on the
    draws so far: E[θ̂] = θ exactly (seed 001 Thm. 3.1a)."""
    z_bank = np.array([1.0, 0.0, 1.0, 1.0])
    n = len(z_bank)

    def policy(history):
        w = 1.0 + np.arange(n) + 2.0 * np.bincount(history, minlength=n)
        return w / w.sum(), np.clip(0.3 + 0.1 * np.arange(n) + 0.05 * len(history), 0, 1)

    expectation = 0.0
    for seq in itertools.product(range(n), repeat=3):
        prob, z, p_item, q_item, totals = 1.0, [], [], [], []
        for s, item in enumerate(seq):
            q, p = policy(np.array(seq[:s], int))
            prob *= q[item]
            z.append(z_bank[item])
            p_item.append(p[item])
            q_item.append(q[item])
            totals.append(p.sum())
        theta, _ = pai_from_rounds(np.array(z), np.array(p_item), np.array(q_item),
                                   np.array(totals), n)
        expectation += prob * float(theta)
    assert expectation == pytest.approx(z_bank.mean(), abs=1e-12)


def test_horvitz_thompson_is_unbiased_with_unbiased_variance_by_enumeration():
    z = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    pi = 0.3
    mean = var_est = second = 0.0
    for kept in itertools.product((0, 1), repeat=len(z)):
        prob = np.prod([pi if k else 1 - pi for k in kept])
        theta, var = horvitz_thompson_uniform(z, np.array(kept), pi)
        mean += prob * float(theta)
        second += prob * float(theta) ** 2
        var_est += prob * float(var)
    assert mean == pytest.approx(z.mean(), abs=1e-12)
    assert var_est == pytest.approx(second - mean**2, abs=1e-12)


def _closed_form_q(p, v, cov, s, rounds, beta0, rho, gamma, tau):
    """docs/methods.md §3's hybrid q_s, written out with NumPy."""
    n = len(p)
    w = p * (1 - p)
    h_o = np.sqrt(w) / np.sqrt(w).sum()
    g = (w[:, None] * v).sum(0) / n
    d = w * (v @ cov @ g) ** 2 / (1 + w * np.einsum("jk,kl,jl->j", v, cov, v))
    h_a = np.exp(np.log(d) - np.log(d).max())
    h_a /= h_a.sum()
    alpha = max(0.0, 1 - (s + 1) / (rho * rounds)) if rho > 0 else 0.0
    beta = beta0 * min((s + 1) / (gamma * rounds), 1.0) if gamma > 0 else beta0
    h = ((1 - alpha) * h_o + alpha * h_a) ** beta
    return (1 - tau) * h / h.sum() + tau / n


def test_composed_policy_equals_the_closed_form_hybrid_q():
    rng = np.random.default_rng(2)
    rounds = 20
    compose = jax.jit(lambda pred, beta0, rho, gamma, tau: acq.probabilities(
        acq.faq_rule(rounds, beta0, rho, gamma, tau)(pred, jnp.ones(12, bool)),
        jnp.ones(12, bool)))
    for case in range(8):
        v, mean, cov = _random_state(rng)
        state = factor_start(mean, cov, jnp.asarray(v))._replace(n=jnp.int32(rng.integers(20)))
        pred = factor_prediction(state, jnp.asarray(v))
        beta0, rho, gamma, tau = (rng.uniform(0.2, 1.5), [0.0, 0.3, 1.0][case % 3],
                                  [0.0, 0.5, 1.0][(case + 1) % 3], rng.uniform(0.01, 0.5))
        p = 1 / (1 + np.exp(-(v @ mean)))
        want = _closed_form_q(p, v, cov, int(state.n), rounds, beta0, rho, gamma, tau)
        got = compose(pred, beta0, rho, gamma, tau)
        np.testing.assert_allclose(got, want, rtol=1e-9)
        assert float(got.sum()) == pytest.approx(1.0) and float(got.min()) >= tau / 12 - 1e-15
        active = pred.item_cov ** 2 / pred.item_var
        alpha = acq.exploration(rho, rounds)(pred)
        beta = acq.tempering(beta0, gamma, rounds)(pred)
        np.testing.assert_allclose(
            acq.hybrid_probabilities(pred.item_mean, active, alpha, beta, tau), want, rtol=1e-9)


def test_factor_fit_recovers_a_low_rank_matrix_with_missing_entries():
    rng = np.random.default_rng(3)
    u, v = rng.normal(size=(60, 2)) * 1.5, rng.normal(size=(50, 2)) * 1.5
    prob = 1 / (1 + np.exp(-(u @ v.T)))
    scores = (rng.random(prob.shape) < prob).astype(float)
    hidden = rng.random(prob.shape) < 0.3
    fit = fit_factors(np.where(hidden, np.nan, scores), k=2, weight_decay=0.1, epochs=600)
    fitted = 1 / (1 + np.exp(-(fit.U @ fit.V.T)))
    # predicting the hidden entries: close to the accuracy of the true probabilities
    bayes = ((prob > 0.5) == scores)[hidden].mean()
    assert ((fitted > 0.5) == scores)[hidden].mean() > bayes - 0.06
    assert np.corrcoef(fitted[hidden], prob[hidden])[0, 1] > 0.85
    mean0, cov0 = factor_prior(fit.U)
    np.testing.assert_allclose(mean0, fit.U.mean(0))
    np.testing.assert_allclose(cov0, np.cov(fit.U.T))
    cv = cross_validate(np.where(hidden, np.nan, scores), ks=(1, 2), weight_decays=(0.1,),
                        epochs=300)
    assert cv.accuracy.shape == (2, 1, 5) and (cv.k, cv.weight_decay) in ((1, 0.1), (2, 0.1))


def test_one_se_rule_takes_the_simplest_setting_within_one_standard_error():
    acc = np.zeros((3, 2, 5))
    acc[0] = 0.70  # k=2: clearly worse
    acc[1] = 0.80 + 0.02 * np.arange(5)  # k=4: mean 0.84, within one SE (0.014)
    acc[2] = 0.81 + 0.02 * np.arange(5)  # k=8: best, mean 0.85
    acc[1, 0] -= 0.05  # k=4, λ=0.01 worse
    assert one_se_choice((2, 4, 8), (0.01, 1.0), acc) == (4, 1.0)
    acc[1, 1] -= 0.05
    assert one_se_choice((2, 4, 8), (0.01, 1.0), acc) == (8, 1.0)


@pytest.fixture(scope="module")
def ifeval_factors():
    matrix = load_dataset("ifeval")
    order = np.random.default_rng(0).permutation(matrix.n_models)
    fit = fit_factors(matrix.scores[order[:200]], k=4, weight_decay=1.0, epochs=400)
    return matrix, order, fit


def test_fast_simulator_matches_the_composed_rule_and_covers(ifeval_factors):
    matrix, order, fit = ifeval_factors
    new = matrix.scores[order[200:]]
    mean0, cov0 = factor_prior(fit.U)
    targets = np.arange(6)
    # with an active part, and without (ρ = 0: the program that leaves out the latent
    # variances), against the generic simulator with the composed rule, same fit and keys
    for params in (HybridParams(0.8, 0.3, 0.3, 0.05), HybridParams(1.0, 0.0, 0.0, 0.05)):
        fast = simulate_hybrid(fit.V, mean0, cov0, new, targets, targets + 7, params, 40)
        method = faq_with(acq.faq_rule(40, *params), 40, prefitted(fit.V, mean0, cov0))
        slow = simulate(method, new, new[targets], targets + 7, n_steps=40)
        np.testing.assert_allclose(fast.theta, slow.estimate[:, -1], rtol=1e-9)
        np.testing.assert_allclose(fast.var, slow.var[:, -1], rtol=1e-9)
        distinct = [len(set(row)) for row in slow.items]
        np.testing.assert_array_equal(fast.distinct, distinct)
    # coverage of the 95% interval over 48 models × 25 seeds at 10% of the items; with
    # 1200 runs (clustered by model) the standard error is about 0.01, so [0.91, 0.985]
    # leaves ≥ 3 SE on either side of 0.95
    targets = np.tile(np.arange(48), 25)
    out = simulate_hybrid(fit.V, mean0, cov0, new, targets, np.arange(len(targets)),
                          HybridParams(), 54)
    half = 1.959964 * np.sqrt(out.var)
    truth = new.mean(1)[targets]
    coverage = np.mean((out.theta - half <= truth) & (truth <= out.theta + half))
    assert 0.91 <= coverage <= 0.985
    assert np.all(out.distinct <= 54)


def test_faq_session_draws_with_replacement_and_resumes(tmp_path):
    matrix = load_dataset("ifeval")
    small = ScoreMatrix(matrix.scores[:60, :40], matrix.models[:60], matrix.items[:40],
                        name="ifeval-small")
    target = str(small.models[0])
    ref = small.drop_models([target])
    oracle = MatrixOracle(small, target)
    params = {"budget": 30, "k": 2, "rho": 0.5, "gamma": 0.5}
    journal = tmp_path / "faq.jsonl"
    session = Session(ref, target, "faq", method_params=params, seed=3, journal=journal)
    with pytest.raises(SessionError, match="was not asked"):
        session.tell(str(small.items[0]), 1.0)
    for _ in range(12):
        (item,) = session.ask(4)  # one item per round, whatever k
        assert session.ask() == [item]  # asking again returns the pending item
        session.tell(item, oracle(item))
    with pytest.raises(SessionError, match="cannot leave item"):
        session.skip(session.ask()[0], "failed")
    session.close()
    resumed = Session.resume(journal, reference=ref)
    full = Session(ref, target, "faq", method_params=params, seed=3)
    for s in (resumed, full):
        s.run(oracle)
        assert s.n_observed == 30 and s.done
    assert resumed.estimate() == pytest.approx(full.estimate(), abs=1e-12)
    assert full.n_evaluated < 30  # 40 items, 30 draws from a skewed q: repeats happen
    low, high = full.estimate()[1:]
    assert 0.0 <= low <= high <= 1.0


def test_cv_table_round_trips_to_the_best_setting():
    from bayeval.experiments.coverage import best_setting
    from bayeval.models.factor import CrossValidation

    acc = np.random.default_rng(4).uniform(0.7, 0.8, size=(3, 2, 5))
    acc[2, 0] += 0.1
    cv = CrossValidation((2, 4, 8), (0.1, 1.0), acc, 2, 1.0)
    assert best_setting(cv.rows()) == (8, 0.1)


def test_power_zero_flattens_the_available_items_to_uniform():
    rng = np.random.default_rng(5)
    v, mean, cov = _random_state(rng)
    pred = factor_prediction(factor_start(mean, cov, jnp.asarray(v)), jnp.asarray(v))
    available = jnp.arange(12) % 3 != 0
    q = acq.probabilities(acq.power(acq.oracle_optimal(), 0.0)(pred, available), available)
    np.testing.assert_allclose(q, np.where(available, 1 / 8, 0.0), atol=1e-15)
