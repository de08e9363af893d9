"""The IRT baseline (seed 000 item 7; docs/methods.md §4) as docs/methods.md §4 states it: random
selection, a NUTS fit of the target's ability after the 1st observation, at
``first_fits`` (our choice, so that the first estimates do not rest on the prior) and
every ``refit_every`` evaluations, R̂_n from the latest fit's draws and the n items seen,
and R̂ (split) and divergences for every fit. Its interval is by default the
model-assisted difference estimator over the uniform draw (``interval="assisted"``: the
posterior's R̂ corrected by the seen items' mean residual, with the design's variance;
:mod:`bayeval.inference.irt` step 4), which holds where the one-dimensional model does not;
``interval="posterior"`` is seed 000's posterior interval R̂ ∓ z sqrt(Var_R), model-based
and checked for its domain like BayesAME's. The backend is
:class:`~bayeval.inference.irt.IRTAbilityNUTS`; the Session and the simulator run the
method like any other (in a simulation each run's fits are its own NUTS runs,
warm-started from its previous fit).
"""

from __future__ import annotations

from bayeval import acquisition as acq
from bayeval.errors import BayevalError
from bayeval.estimators.base import posterior
from bayeval.inference.irt import IRTAbilityNUTS
from bayeval.methods.base import Method, method_factory
from bayeval.stopping import rules as stop


def parse_fits(text: str) -> tuple[int, ...]:
    """``"10 25"`` → (10, 25): the observation counts of the early fits ("" for none)."""
    try:
        fits = tuple(int(part) for part in str(text).replace(",", " ").split())
    except ValueError:
        raise BayevalError(f"first_fits must be whole numbers separated by spaces, got "
                           f"{text!r}") from None
    if any(n < 1 for n in fits):
        raise BayevalError(f"first_fits must be ≥ 1, got {text!r}")
    return fits


@method_factory("irt", hyper=("epsilon", "epsilon1"))
def irt(kind: str = "2pl", calibration: str = "map", refit_every: int = 50,
        first_fits: str = "10 25", num_warmup: int = 500, num_samples: int = 1000,
        num_chains: int = 4, epsilon: float = 0.02, epsilon1: float = 0.005,
        window: int = 30, level: float = 0.95, interval: str = "assisted") -> Method:
    """The IRT baseline (module docstring): ``kind`` 2pl or beta3, items calibrated by
    ``calibration`` (map or nuts) on the reference matrix, the two-condition stopping rule
    of BayesAME (ε2 = ``epsilon``) on its interval. ``interval``: ``assisted`` (the
    model-assisted difference estimator over the uniform draw, valid whatever the model
    gets wrong; :mod:`bayeval.inference.irt` step 4) or ``posterior`` (seed 000's
    model-based interval, step 3)."""
    try:
        backend = IRTAbilityNUTS(kind, calibration, refit_every, parse_fits(first_fits),
                                 num_warmup, num_samples, num_chains,
                                 interval=interval).backend()
    except ValueError as exc:
        raise BayevalError(f"method 'irt': {exc}") from None
    return Method("irt", backend, acq.uniform(), acq.sample,
                  stop.two_condition(epsilon, epsilon1, window), level=level,
                  estimator=posterior(model_based=interval == "posterior"))

__all__ = ["irt", "parse_fits"]
