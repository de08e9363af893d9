"""bayeval: evaluate language models with fewer evaluations.

Per-item scores of earlier models (a reference :class:`ScoreMatrix`) feed a generative
model of scores; acquisition rules choose the next items for a new model, stopping rules
say when the estimate is good enough, and estimators report the score with an interval::

    import bayeval
    result = bayeval.evaluate(dataset="ifeval", epsilon=0.05)  # what `bayeval evaluate` runs
    result.summary(); result.to_pandas(); result.plot()
    print(bayeval.plan(dataset="ifeval", batch=32))  # the documents it will need, first
    reference = bayeval.load_dataset("ifeval")
    with bayeval.Session(reference, "my-model", "random") as session:
        ...

``import bayeval`` leaves JAX's settings alone; ``evaluate``, ``resume`` and ``Session``
turn on its 64-bit mode, which bayeval computes in (:func:`enable_float64`).

The names below are imported on first use, so ``import bayeval`` is cheap.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
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
    "Plan": "bayeval.evaluation.plan",
    "Policy": "bayeval.acquisition.policies",
    "Prediction": "bayeval.types",
    "Result": "bayeval.evaluation",
    "SuiteResult": "bayeval.evaluation",
    "TargetsResult": "bayeval.evaluation",
    "TaskResult": "bayeval.evaluation",
    "RunSettings": "bayeval.evaluation",
    "ScoreMatrix": "bayeval.data",
    "SelectionSession": "bayeval.selection.session",
    "Session": "bayeval.loop.session",
    "SimulationResult": "bayeval.types",
    "TaskSettings": "bayeval.evaluation",
    "batched": "bayeval.evaluators.python",
    "enable_float64": "bayeval.precision",
    "evaluate": "bayeval.evaluation",
    "load_dataset": "bayeval.data",
    "make_method": "bayeval.methods",
    "method_factory": "bayeval.methods",
    "method_names": "bayeval.methods",
    "plan": "bayeval.evaluation.plan",
    "read_lm_eval_samples": "bayeval.data",
    "read_matrix": "bayeval.data",
    "register_method": "bayeval.methods",
    "resume": "bayeval.evaluation",
    "simulate": "bayeval.loop.simulate",
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


# Modules grouped into the package's parts keep their earlier import paths: ``import
# bayeval.session`` gives the module ``bayeval.loop.session`` itself (one module object,
# so a patch or a pickle sees one set of names).
MOVED = {
    "bayeval.cells": "bayeval.loop.cells",
    "bayeval.diagnose": "bayeval.experiments.diagnose",
    "bayeval.draw_order": "bayeval.loop.draw_order",
    "bayeval.files": "bayeval.records.files",
    "bayeval.harness": "bayeval.evaluators.harness",
    "bayeval.harness_requests": "bayeval.evaluators.harness_requests",
    "bayeval.harness_results": "bayeval.evaluators.harness_results",
    "bayeval.inspect_evaluator": "bayeval.evaluators.inspect_eval",
    "bayeval.journal": "bayeval.records.journal",
    "bayeval.journal_check": "bayeval.records.journal_check",
    "bayeval.runner": "bayeval.loop.runner",
    "bayeval.session": "bayeval.loop.session",
    "bayeval.session_journal": "bayeval.loop.session_journal",
    "bayeval.simulate": "bayeval.loop.simulate",
    "bayeval.suite": "bayeval.loop.suite",
    "bayeval.timing": "bayeval.loop.timing",
}


class _EarlierPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The finder and loader of :data:`MOVED`'s earlier paths."""

    def __init__(self) -> None:
        self.specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        return importlib.machinery.ModuleSpec(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self.specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system has just set the earlier path's spec on the module: its own back
        module.__spec__ = self.specs[module.__spec__.name]


class _Package(types.ModuleType):
    """``bayeval`` itself: a module imported by an earlier path named like a public name
    (``bayeval.simulate``) does not hide that name (the function ``bayeval.simulate``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (name in _EXPORTS and isinstance(value, types.ModuleType)):
            super().__setattr__(name, value)


if not any(isinstance(f, _EarlierPaths) for f in sys.meta_path):
    sys.meta_path.append(_EarlierPaths())
sys.modules[__name__].__class__ = _Package
