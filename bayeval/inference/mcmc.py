"""NUTS for any bayeval (NumPyro) model, with ArviZ diagnostics and warm starts.

::

    result = run_nuts(model, *model_args, num_chains=4, seed=0)
    result.idata               # arviz.InferenceData (posterior, sample_stats)
    result.diagnostics         # per-variable R-hat, bulk/tail ESS (pandas)
    result.problems            # one line per threshold crossed (also warned)
    later = run_nuts(model, *new_args, init=result)   # warm start from the last draws

Chains run vectorised in one program (``chain_method="vectorized"``, the default), which
suits CPU and a single accelerator; ``"parallel"`` maps them over devices.

Thresholds (a crossed one is reported as an :class:`MCMCWarning` naming the variable):
R-hat > 1.01, bulk or tail ESS < 100 per chain, any divergent transition, and an energy
BFMI < 0.3 in any chain (Vehtari et al. 2021; Betancourt 2016).

With ``jit_model_args=True`` (every model argument an array) the whole run — warm-up and
sampling of all chains — is one compiled program, a function of the model's arguments and
the chains' initial points, kept per model, argument shapes and sampler settings for the
rest of the process: a refit on new data of the same shapes (the IRT baseline's fit every
50 evaluations) runs without tracing or compiling anything. It uses NumPyro's NUTS kernel
(``numpyro.infer.hmc.hmc``) with the same adaptation (step size, diagonal mass matrix);
cold-started chains start uniformly in (−2, 2) in the unconstrained space, as NumPyro's
default ``init_to_uniform``.

A warm start passes the last state of every chain, in NumPyro's unconstrained space, as the
initial parameters of the next run: a refit after a few more observations starts where the
previous posterior was, and adaptation still runs (``num_warmup``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
import pandas as pd

THRESHOLDS = {"r_hat": 1.01, "ess_per_chain": 100.0, "divergences": 0, "bfmi": 0.3}


_COMPILED: dict[tuple, tuple] = {}  # compiled NUTS programs kept for jit_model_args=True


def compiled_nuts(model: Callable, args: tuple, kwargs: dict, num_warmup: int,
                   num_samples: int, target_accept: float, max_tree_depth: int) -> tuple:
    """(run, postprocess, template) for ``model`` at these argument shapes and settings:
    ``run(keys, z0, args, kwargs)`` → ((z, diverging, energy) draws, last z) of every
    chain; ``postprocess(z, args, kwargs)`` → constrained sites (incl. deterministic)."""
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import initialize_model

    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    key = (model, treedef, tuple((x.shape, str(x.dtype)) for x in leaves), num_warmup,
           num_samples, target_accept, max_tree_depth)
    if key in _COMPILED:
        return _COMPILED[key]
    info, potential_gen, postprocess_gen, _ = initialize_model(
        jax.random.key(0), model, model_args=args, model_kwargs=kwargs, dynamic_args=True)
    init_kernel, sample_kernel = hmc(potential_fn_gen=potential_gen, algo="NUTS")

    def chain(rng, z0, args, kwargs):
        state = init_kernel(z0, num_warmup, target_accept_prob=target_accept,
                            max_tree_depth=max_tree_depth, model_args=args,
                            model_kwargs=kwargs, rng_key=rng)

        def step(state, _):
            state = sample_kernel(state, model_args=args, model_kwargs=kwargs)
            return state, (state.z, state.diverging, state.energy)

        state = jax.lax.scan(step, state, None, length=num_warmup)[0]
        state, draws = jax.lax.scan(step, state, None, length=num_samples)
        return draws, state.z

    def postprocess(z, args, kwargs):
        return jax.vmap(jax.vmap(postprocess_gen(*args, **kwargs)))(z)

    entry = (jax.jit(jax.vmap(chain, in_axes=(0, 0, None, None))), jax.jit(postprocess),
             info.z)
    _COMPILED[key] = entry
    return entry


def _run_compiled(model: Callable, args: tuple, kwargs: dict, num_warmup: int,
                  num_samples: int, num_chains: int, seed: int, init_params: dict | None,
                  target_accept: float, max_tree_depth: int):
    """(samples, idata, last z) from the compiled program of :func:`compiled_nuts`."""
    import arviz as az

    args = jax.tree_util.tree_map(jax.numpy.asarray, args)
    kwargs = jax.tree_util.tree_map(jax.numpy.asarray, kwargs)
    run, postprocess, template = compiled_nuts(model, args, kwargs, num_warmup, num_samples,
                                                target_accept, max_tree_depth)
    key_init, key_run = jax.random.split(jax.random.key(seed))
    if init_params is None:
        leaves, tree = jax.tree_util.tree_flatten(template)
        keys = jax.random.split(key_init, len(leaves))
        init_params = jax.tree_util.tree_unflatten(tree, [
            jax.random.uniform(k, (num_chains, *np.shape(leaf)), minval=-2.0, maxval=2.0)
            for k, leaf in zip(keys, leaves, strict=True)])
    (z, diverging, energy), last = run(jax.random.split(key_run, num_chains), init_params,
                                       args, kwargs)
    samples = {k: np.asarray(v) for k, v in postprocess(z, args, kwargs).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_dict(posterior=samples,
                             sample_stats={"diverging": np.asarray(diverging),
                                           "energy": np.asarray(energy)})
    return samples, idata, jax.tree_util.tree_map(np.asarray, last)


class MCMCWarning(UserWarning):
    """A convergence diagnostic crossed its threshold."""


@dataclass
class MCMCResult:
    idata: Any  # arviz.InferenceData
    samples: dict[str, np.ndarray]  # site -> (chains, draws, ...)
    last_state: dict[str, Any]  # unconstrained values of every chain's last state
    seconds: float
    diagnostics: pd.DataFrame
    divergences: int
    bfmi: np.ndarray  # (chains,)
    problems: list[str] = field(default_factory=list)


def diagnose(idata, num_chains: int, thresholds: dict[str, float] | None = None
             ) -> tuple[pd.DataFrame, int, np.ndarray, list[str]]:
    """(per-variable R-hat and ESS, divergent transitions, BFMI per chain, problems)."""
    import arviz as az

    limits = {**THRESHOLDS, **(thresholds or {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's own small-sample warnings
        table = az.summary(idata, kind="diagnostics", round_to="none")[
            ["ess_bulk", "ess_tail", "r_hat"]]
        bfmi = np.atleast_1d(np.asarray(az.bfmi(idata), dtype=float))
    divergences = int(np.asarray(idata.sample_stats["diverging"]).sum())
    problems = []
    worst = table.r_hat.idxmax()
    if table.r_hat.max() > limits["r_hat"]:
        problems.append(f"R-hat {table.r_hat.max():.3f} > {limits['r_hat']} for {worst}")
    for col in ("ess_bulk", "ess_tail"):
        low = table[col].idxmin()
        if table[col].min() < limits["ess_per_chain"] * num_chains:
            problems.append(f"{col.replace('_', ' ')} {table[col].min():.0f} < "
                            f"{limits['ess_per_chain'] * num_chains:.0f} "
                            f"({limits['ess_per_chain']:.0f} per chain) for {low}")
    if divergences > limits["divergences"]:
        problems.append(f"{divergences} divergent transition(s) after warm-up")
    if np.nanmin(bfmi) < limits["bfmi"]:
        problems.append(f"energy BFMI {np.nanmin(bfmi):.2f} < {limits['bfmi']} in chain "
                        f"{int(np.nanargmin(bfmi))}")
    return table, divergences, bfmi, problems


def run_nuts(model: Callable, *args: Any, num_warmup: int = 500, num_samples: int = 500,
             num_chains: int = 4, seed: int = 0, init: MCMCResult | dict | None = None,
             target_accept: float = 0.8, max_tree_depth: int = 10,
             chain_method: str = "vectorized", thresholds: dict[str, float] | None = None,
             warn: bool = True, jit_model_args: bool = False, **kwargs: Any) -> MCMCResult:
    """Sample ``model(*args, **kwargs)`` with NUTS and diagnose the draws.

    ``init``: a previous :class:`MCMCResult` (or its ``last_state``) to warm-start every
    chain from. Crossed thresholds are returned in ``problems`` and, with ``warn``,
    issued as :class:`MCMCWarning`."""
    import arviz as az
    from numpyro.infer import MCMC, NUTS

    if num_chains < 1 or num_samples < 1 or num_warmup < 0:
        raise ValueError(f"need num_chains ≥ 1, num_samples ≥ 1 and num_warmup ≥ 0, got "
                         f"{num_chains}, {num_samples}, {num_warmup}")
    init_params = init.last_state if isinstance(init, MCMCResult) else init
    start = time.perf_counter()
    if jit_model_args:
        samples, idata, last = _run_compiled(model, args, kwargs, num_warmup, num_samples,
                                             num_chains, seed, init_params, target_accept,
                                             max_tree_depth)
        seconds = time.perf_counter() - start
    else:
        kernel = NUTS(model, target_accept_prob=target_accept, max_tree_depth=max_tree_depth)
        mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples,
                    num_chains=num_chains, chain_method=chain_method, progress_bar=False)
        mcmc.run(jax.random.key(seed), *args, init_params=init_params,
                 extra_fields=("diverging", "energy"), **kwargs)
        samples = {k: np.asarray(v)
                   for k, v in mcmc.get_samples(group_by_chain=True).items()}
        seconds = time.perf_counter() - start
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = az.from_numpyro(mcmc, log_likelihood=False)
        last = jax.tree_util.tree_map(np.asarray, mcmc.last_state.z)
    table, divergences, bfmi, problems = diagnose(idata, num_chains, thresholds)
    if warn:
        for line in problems:
            warnings.warn(line, MCMCWarning, stacklevel=2)
    return MCMCResult(idata, samples, last, seconds, table, divergences, bfmi, problems)
