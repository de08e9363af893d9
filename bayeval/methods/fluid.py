"""Fluid Benchmarking (Hofmann et al., COLM 2025): a 2PL IRT model fitted on the
reference models, the next item the one of maximum Fisher information at the current
ability, the ability by MAP, the benchmark score as the observed scores plus the model's
expected scores on the rest, and its interval from the ability's posterior
(:mod:`bayeval.inference.fluid`). The interval rests on the model: it holds as far as
the 2PL explains the new model, and every run is checked for its domain (README, "When a
model-based interval cannot be trusted"); ``active-pai``'s does not.

The paper evaluates at fixed budgets; here the run stops as ``active-pai`` does, once
``n_min`` items are in and the interval is at most ``epsilon`` wide (``budget``: a fixed
number of items instead).
"""

from __future__ import annotations

from bayeval import acquisition as acq
from bayeval.errors import BayevalError
from bayeval.estimators.base import posterior
from bayeval.hparams import known
from bayeval.inference.fluid import FluidIRT
from bayeval.methods.base import Method, method_factory
from bayeval.stopping import rules as stop


@method_factory("fluid", hyper=("epsilon",))
def fluid(epsilon: float = 0.05, n_min: int = 30, budget: int | None = None,
          calibration: str = "map", level: float = 0.95) -> Method:
    """Fluid Benchmarking (module docstring): the 2PL items calibrated by ``calibration``
    (map or nuts) on the reference; a stop at an interval at most ``epsilon`` wide after
    ``n_min`` items, or after ``budget`` items when given."""
    if known(epsilon) and not epsilon > 0:
        raise BayevalError(f"method 'fluid': epsilon must be positive, got {epsilon}")
    if n_min < 1:
        raise BayevalError(f"method 'fluid': n_min must be ≥ 1, got {n_min}")
    try:
        backend = FluidIRT(calibration).backend()
    except ValueError as exc:
        raise BayevalError(f"method 'fluid': {exc}") from None
    rule = (stop.budget(budget) if budget is not None
            else stop.width_after(n_min, epsilon))
    return Method("fluid", backend, acq.fisher_information(), acq.argmax, rule,
                  level=level, estimator=posterior(model_based=True))


__all__ = ["fluid"]
