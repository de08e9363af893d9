"""Bayesian quadrature over the reference models (``bq``): the reference-linear GP
(:mod:`bayeval.inference.reference_linear`; ProEval's surrogate, Huang et al. 2026), the
item that most reduces Var(R | C) next (Cov(R, s_i)² / Var(s_i), greedy and deterministic:
the design reads no score, only the reference), and the Gaussian posterior interval of R.
Its interval is the model's: valid only as far as the linear model holds (``bayeval bench
validity`` and ``bench/proeval_side_by_side.py`` measure it)."""

from __future__ import annotations

from bayeval import acquisition as acq
from bayeval.inference.reference_linear import ReferenceLinearGP
from bayeval.methods.base import Method, method_factory
from bayeval.stopping import rules as stop


@method_factory("bq", hyper=("epsilon", "n_min"))
def bq(epsilon: float = 0.05, n_min: int = 30, noise: float = 0.3,
       level: float = 0.95) -> Method:
    """Bayesian quadrature (module docstring): stop once ``n_min`` items are scored and the
    ``level`` posterior interval is at most ``epsilon`` wide; ``noise`` is σ²."""
    return Method("bq", ReferenceLinearGP(noise).backend(), acq.variance_reduction(),
                  acq.argmax, stop.width_after(n_min, epsilon), level=level)
