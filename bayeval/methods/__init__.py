"""Named evaluation methods, one file per method family, each assembling backend + rule +
policy + estimator + stopping into a :class:`~bayeval.methods.base.Method`:

* :mod:`bayeval.methods.bayesame` — BayesAME, BayesAME-RS, BayesAME with Laplace
  inference (seed 000);
* :mod:`bayeval.methods.baselines` — RS-Mean and Bayes-AIPW (seed 000 §5.1);
* :mod:`bayeval.methods.faq` — FAQ: factor model, hybrid policy, Pro-Active Inference
  (seed 001);
* :mod:`bayeval.methods.irt` — the IRT baseline: random items, NUTS fits of the
  ability (seed 000 item 7);
* :mod:`bayeval.methods.multi_target` — multi-target BayesAME, several targets evaluated
  jointly (seed 000 §3.2);
* :mod:`bayeval.methods.active` — Active PAI: any backend as predictor, the design-valid
  martingale estimator and its automatic stop (docs/methods.md §9);
* :mod:`bayeval.methods.quadrature` — Bayesian quadrature over the reference models
  (``bq``, ProEval's surrogate and variance-reduction design);
* :mod:`bayeval.methods.fluid` — Fluid Benchmarking: 2PL IRT, maximum Fisher
  information, MAP ability (``fluid``).

Adding a method is one function: a factory that builds a Method from parts, decorated
with :func:`method_factory` (its parameters are the method's settings; those it names
``hyper`` are values of the compiled programs, not part of them), as
``tutorials/new_method.py`` shows; :func:`register_method` registers a factory as it is.
"""

from bayeval.methods import (
    active,
    baselines,
    bayesame,
    faq,
    fluid,
    irt,
    multi_target,
    quadrature,
)
from bayeval.methods.active import active_pai
from bayeval.methods.base import (
    LoopState,
    Method,
    accepts_parameter,
    make_method,
    method_factory,
    method_names,
    parse_method_spec,
    register_method,
    resolved_parameters,
    split_method_specs,
)
from bayeval.methods.baselines import bayes_aipw, random_sample_mean
from bayeval.methods.bayesame import bayesame_laplace, bayesame_rs
from bayeval.methods.faq import faq as faq_method

__all__ = [
    "LoopState",
    "Method",
    "accepts_parameter",
    "active",
    "active_pai",
    "baselines",
    "bayes_aipw",
    "bayesame",
    "bayesame_laplace",
    "bayesame_rs",
    "faq",
    "faq_method",
    "fluid",
    "irt",
    "make_method",
    "method_factory",
    "method_names",
    "multi_target",
    "parse_method_spec",
    "quadrature",
    "random_sample_mean",
    "register_method",
    "resolved_parameters",
    "split_method_specs",
]
