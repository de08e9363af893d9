"""Custom priors by site name: the log density changes by exactly the prior swap, and bad
names and shapes are refused with one line."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import log_density

from bayeval.models.bucket_gp import bucket_gp_model
from bayeval.models.priors import PriorError, latent_sites, with_priors


def test_replaced_prior_changes_the_log_density_by_the_swap():
    rng = np.random.default_rng(0)
    phi = jnp.asarray(rng.random((4, 3)))
    sizes = jnp.asarray([3.0, 2.0, 4.0, 1.0])
    obs_bucket, obs = jnp.asarray([0, 2, 2]), jnp.asarray([1.0, 0.0, 1.0])
    kwargs = {"alpha": dist.LogNormal(0.0, 1.0)}
    args = (phi, sizes, obs_bucket, obs)
    assert latent_sites(bucket_gp_model, *args, **kwargs) == {"alpha": (), "theta": (4,)}
    new_alpha = dist.Gamma(2.0, 3.0)
    new_theta = dist.MultivariateNormal(jnp.zeros(4), 0.5 * jnp.eye(4))
    model = with_priors(bucket_gp_model, {"alpha": new_alpha, "theta": new_theta}, *args,
                        **kwargs)
    params = {"alpha": jnp.asarray(0.7), "theta": jnp.asarray([0.2, 0.5, 0.4, 0.9])}
    old, _ = log_density(bucket_gp_model, args, kwargs, params)
    new, _ = log_density(model, args, kwargs, params)
    # the theta prior of the original model: N(mean of φ rows, K(φ) + jitter), read off its
    # trace; the likelihood term is unchanged
    from numpyro import handlers

    trace = handlers.trace(handlers.substitute(bucket_gp_model, params)).get_trace(
        *args, **kwargs)
    swap = (new_alpha.log_prob(0.7) - dist.LogNormal(0.0, 1.0).log_prob(0.7)
            + new_theta.log_prob(params["theta"])
            - trace["theta"]["fn"].log_prob(params["theta"]))
    assert float(new) == pytest.approx(float(old + swap), rel=1e-10, abs=1e-10)


def test_bad_names_and_shapes_are_refused():
    phi, sizes = jnp.ones((3, 2)), jnp.ones(3)
    with pytest.raises(PriorError, match="no latent sample site.*latent sites: theta"):
        with_priors(bucket_gp_model, {"alpha": dist.Gamma(2.0, 2.0)}, phi, sizes)
    with pytest.raises(PriorError, match=r"shape \(2,\) but the site has shape \(3,\)"):
        with_priors(bucket_gp_model, {"theta": dist.Normal(jnp.zeros(2), 1.0)}, phi, sizes)
    with pytest.raises(PriorError, match="expected a numpyro distribution"):
        with_priors(bucket_gp_model, {"theta": 1.0}, phi, sizes)
