"""bayeval: evaluate language models with fewer evaluations.

Per-item scores of earlier models (a reference :class:`ScoreMatrix`) feed a generative
model of scores; acquisition rules choose the next items for a new model, stopping rules
say when the estimate is good enough, and estimators report the score with an interval::

    import bayeval
    bayeval.enable_float64()  # bayeval computes in float64; import leaves JAX as it is
    reference = bayeval.load_dataset("ifeval")
    with bayeval.Session(reference, "my-model", "random") as session:
        ...
    result = bayeval.evaluate(dataset="ifeval", epsilon=0.05)  # what `bayeval evaluate` runs

The names below are imported on first use, so ``import bayeval`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Backend": "bayeval.inference.base",
    "BayevalError": "bayeval.errors",
    "Estimate": "bayeval.types",
    "Estimator": "bayeval.estimators.base",
    "EvaluatorOptions": "bayeval.evaluation",
    "LoopState": "bayeval.methods",
    "Method": "bayeval.methods",
    "Policy": "bayeval.acquisition.policies",
    "Prediction": "bayeval.types",
    "RunSettings": "bayeval.evaluation",
    "ScoreMatrix": "bayeval.data",
    "SelectionSession": "bayeval.selection.session",
    "Session": "bayeval.session",
    "SimulationResult": "bayeval.types",
    "TaskSettings": "bayeval.evaluation",
    "enable_float64": "bayeval.precision",
    "evaluate": "bayeval.evaluation",
    "load_dataset": "bayeval.data",
    "make_method": "bayeval.methods",
    "method_factory": "bayeval.methods",
    "method_names": "bayeval.methods",
    "read_lm_eval_samples": "bayeval.data",
    "read_matrix": "bayeval.data",
    "register_method": "bayeval.methods",
    "resume": "bayeval.evaluation",
    "simulate": "bayeval.simulate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayeval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
