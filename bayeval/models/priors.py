"""Replace the prior of any latent site of any bayeval model, by site name, validated.

::

    from bayeval.models.priors import with_priors

    model = with_priors(bucket_gp_model, {"alpha": dist.Gamma(2.0, 2.0)},
                        phi, sizes, alpha=dist.LogNormal(0.0, 1.0))
    run_nuts(model, phi, sizes, obs_bucket, obs, alpha=dist.LogNormal(0.0, 1.0))

The returned model is the original wrapped in a NumPyro effect handler that swaps the
distribution of the named sample sites, so every backend (exact, MCMC) sees the new
prior. :func:`with_priors` first traces the model once with the example arguments and
refuses, with one line, a name that is not a latent sample site (listing those that are)
or a distribution whose shape differs from the site's. A hyperparameter given to a model
as a number is a deterministic site: give it a distribution through the model's own
argument (as above) to make it latent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.primitives import Messenger


class PriorError(ValueError):
    """A custom prior that does not fit the model."""


class _ReplacePriors(Messenger):
    def __init__(self, fn: Callable, priors: dict[str, dist.Distribution]) -> None:
        self.priors = priors
        super().__init__(fn)

    def process_message(self, msg: dict[str, Any]) -> None:
        if (msg["type"] == "sample" and msg["name"] in self.priors
                and not msg.get("is_observed", False)):
            msg["fn"] = self.priors[msg["name"]]


def latent_sites(model: Callable, *args: Any, **kwargs: Any) -> dict[str, tuple]:
    """{site name: value shape} of the model's latent (unobserved) sample sites."""
    trace = handlers.trace(handlers.seed(model, rng_seed=0)).get_trace(*args, **kwargs)
    return {name: tuple(jax.numpy.shape(site["value"])) for name, site in trace.items()
            if site["type"] == "sample" and not site.get("is_observed", False)}


def with_priors(model: Callable, priors: dict[str, dist.Distribution], *args: Any,
                **kwargs: Any) -> Callable:
    """``model`` with the priors of the named latent sites replaced; ``args``/``kwargs``
    are example arguments used to check names and shapes."""
    name = getattr(model, "__name__", "model")
    sites = latent_sites(model, *args, **kwargs)
    for site, prior in priors.items():
        if not isinstance(prior, dist.Distribution):
            raise PriorError(f"prior for {site!r}: expected a numpyro distribution, got "
                             f"{type(prior).__name__}")
        if site not in sites:
            raise PriorError(f"prior for {site!r}: {name} has no latent sample site of that "
                             f"name (latent sites: {', '.join(sites) or 'none'}); a "
                             "hyperparameter given as a number is fixed, pass a "
                             "distribution for it to the model instead")
        shape = tuple(prior.batch_shape) + tuple(prior.event_shape)
        if shape != sites[site]:
            raise PriorError(f"prior for {site!r}: shape {shape} but the site has shape "
                             f"{sites[site]} in {name}")
    priors = dict(priors)

    def replaced(*a: Any, **k: Any) -> Any:
        return _ReplacePriors(model, priors)(*a, **k)

    replaced.__name__ = f"{name}_with_priors"
    replaced.__doc__ = f"{name} with priors replaced at {', '.join(priors)}."
    return replaced


__all__ = ["PriorError", "latent_sites", "with_priors"]
