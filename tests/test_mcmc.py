"""NUTS backend: a conjugate posterior recovered, diagnostics and their warnings, warm
starts."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from bayeval.inference.mcmc import MCMCWarning, run_nuts


def _normal_model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def _conjugate(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


@pytest.mark.parametrize("compiled", [False, True])
def test_conjugate_posterior_diagnostics_and_warm_start(compiled):
    y = jnp.asarray(np.random.default_rng(0).normal(0.7, 1.0, 12))
    # closed form: mu | y ~ N(Σy / (n + 1), 1 / (n + 1))
    mean, sd = float(y.sum() / 13), float(np.sqrt(1 / 13))
    result = run_nuts(_conjugate, y, num_warmup=300, num_samples=500, num_chains=4, seed=1,
                      jit_model_args=compiled)
    draws = result.samples["mu"]
    assert draws.shape == (4, 500)
    ess = float(result.diagnostics.loc["mu", "ess_bulk"])
    # the posterior mean within 4 Monte Carlo standard errors (sd / sqrt(ESS))
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(ess)
    assert draws.std() == pytest.approx(sd, rel=0.1)  # ESS > 400: sd within ~5% (2 se)
    assert result.problems == [] and result.divergences == 0
    assert result.diagnostics.loc["mu", "r_hat"] <= 1.01 and result.bfmi.shape == (4,)
    # warm start: the next run starts every chain at the previous last state
    again = run_nuts(_conjugate, y + 0.0, num_warmup=50, num_samples=200, num_chains=4,
                     seed=2, init=result, warn=False, jit_model_args=compiled)  # short run
    assert abs(again.samples["mu"].mean() - mean) < 0.1
    assert set(again.last_state) == {"mu"} and again.last_state["mu"].shape == (4,)


def test_too_few_draws_are_reported():
    y = jnp.asarray(np.random.default_rng(1).normal(0.0, 2.0, 8))
    with pytest.warns(MCMCWarning, match="ess bulk"):
        result = run_nuts(_normal_model, y, num_warmup=20, num_samples=30, num_chains=2)
    assert any("ess bulk" in p for p in result.problems)
    with pytest.raises(ValueError, match="num_chains"):
        run_nuts(_normal_model, y, num_chains=0)
