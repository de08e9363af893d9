"""Jittable L-BFGS (optax) shared by the hyperparameter re-fits of the exact and Laplace
bucket GPs and by the IRT item calibration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


class LBFGSResult(NamedTuple):
    """The last iterate, the iterations run and the gradient norm there."""

    params: Any
    iterations: jax.Array
    grad_norm: jax.Array


def lbfgs_run(fun: Callable[[Any], jax.Array], start: Any, max_steps: int,
              gtol: float = 0.0, bounds: tuple[float, float] | None = None) -> LBFGSResult:
    """Minimise ``fun`` from ``start`` (an array or pytree) with L-BFGS (zoom line search):
    at most ``max_steps`` iterations, stopping early once the gradient norm at the last
    iterate is ≤ ``gtol``; with ``bounds``, every iterate is clipped to [lo, hi]."""
    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(fun)

    def body(carry):
        params, state, _, i = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = solver.update(grad, state, params, value=value, grad=grad,
                                       value_fn=fun)
        params = optax.apply_updates(params, updates)
        if bounds is not None:
            params = jax.tree_util.tree_map(lambda x: jnp.clip(x, *bounds), params)
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grad)))
        return params, state, norm, i + 1

    def more(carry):
        return (carry[3] < max_steps) & (carry[2] > gtol)

    params, _, norm, steps = jax.lax.while_loop(
        more, body, (start, solver.init(start), jnp.asarray(jnp.inf), 0))
    return LBFGSResult(params, steps, norm)


def lbfgs_minimise(fun: Callable[[Any], jax.Array], start: Any, max_steps: int,
                   gtol: float = 0.0, bounds: tuple[float, float] | None = None) -> Any:
    """The minimiser of :func:`lbfgs_run`, alone."""
    return lbfgs_run(fun, start, max_steps, gtol, bounds).params


__all__ = ["LBFGSResult", "lbfgs_minimise", "lbfgs_run"]
